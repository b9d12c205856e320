"""Registry of algorithms, keyed by the names in ALGORITHMS.md (part of the product surface).

Each algorithm is one module in this package; add yours to ``_MODULES`` (key -> module) and
define one :class:`bench.algorithms.base.Algorithm` subclass in it. Modules are imported on
first use so that ``python -m bench list`` stays quick.
"""

from __future__ import annotations

import importlib

from .. import BenchError

_MODULES: dict[str, str] = {
    # allreduce family (Horovod collectives)
    "sync": "sync",
    "ddp": "ddp",
    # -- allreduce family: delayed, layerwise, localsgd, lasgd, easgd
    "delayed": "delayed",
    "layerwise": "layerwise",
    "localsgd": "localsgd",
    "lasgd": "lasgd",
    "easgd": "easgd",
    # -- parameter-server family: downpour, asgd, aeasgd, eamsgd, dynsgd, agn, adag, sasgd, dcasgd
    "downpour": "downpour",
    "asgd": "asgd",
    "aeasgd": "aeasgd",
    "eamsgd": "eamsgd",
    "dynsgd": "dynsgd",
    "agn": "agn",
    "adag": "adag",
    "sasgd": "sasgd",
    "dcasgd": "dcasgd",
    # -- decentralised family: sgp, adpsgd, fast
    "sgp": "sgp",
    "adpsgd": "adpsgd",
    "fast": "fast",
}

_CACHE: dict[str, type] = {}


def names() -> list[str]:
    return list(_MODULES)


def get_algorithm(name: str):
    """The Algorithm class registered under ``name``; an unknown name lists the valid ones."""
    if name not in _MODULES:
        raise BenchError(f"unknown algorithm {name!r}; valid: {', '.join(sorted(_MODULES))}")
    if name not in _CACHE:
        module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
        classes = [c for c in vars(module).values() if isinstance(c, type) and getattr(c, "name", None) == name]
        if len(classes) != 1:
            raise RuntimeError(f"module {module.__name__} must define exactly one Algorithm named {name!r}")
        _CACHE[name] = classes[0]
    return _CACHE[name]
