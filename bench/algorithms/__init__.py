"""Registry of algorithms, keyed by the names of docs/algorithms.md (part of the product surface).

Each algorithm is one module of this package named as its key (``bench/algorithms/<key>.py``),
defining one :class:`bench.algorithms.base.Algorithm` subclass whose ``name`` is the key; add the
key to ``registry.yaml``. The other modules here (``base``, ``averaging``, ``ps_base``) are shared by several
algorithms. Modules are imported on first use so that ``python -m bench list`` stays quick.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from .. import BenchError

REGISTRY = Path(__file__).with_name("registry.yaml")
KEYS: tuple[str, ...] = tuple(yaml.safe_load(REGISTRY.read_text())["registry_keys"])
"""Every algorithm's key, in the order of ``registry.yaml`` (the one list: dvc.yaml's ``run@<key>`` stages read it)."""

_CACHE: dict[str, type] = {}


def names() -> list[str]:
    return list(KEYS)


def check_name(name: str) -> None:
    """BenchError listing the valid keys unless ``name`` is registered (without importing its module)."""
    if name not in KEYS:
        raise BenchError(f"unknown algorithm {name!r}; valid: {', '.join(sorted(KEYS))}")


def get_algorithm(name: str):
    """The Algorithm class registered under ``name``; an unknown name lists the valid ones."""
    check_name(name)
    if name not in _CACHE:
        module = importlib.import_module(f"{__name__}.{name}")
        classes = [c for c in vars(module).values() if isinstance(c, type) and getattr(c, "name", None) == name]
        if len(classes) != 1:
            raise RuntimeError(f"module {module.__name__} must define exactly one Algorithm named {name!r}")
        _CACHE[name] = classes[0]
    return _CACHE[name]
