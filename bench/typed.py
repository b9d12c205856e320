"""Strict construction of dataclasses from plain values (YAML, JSON, ``--set``).

Used by the resolver (:mod:`bench.resolve`) for every section of a run's configuration and for
each algorithm's ``Params``. Unknown keys and values of the wrong type are
:class:`bench.BenchError` naming the bad value and the valid choices; nothing is parsed from
strings such as ``'True'`` (``--set`` values are read as YAML scalars before they get here).
Numbers are finite: NaN and ±inf (YAML's ``.nan``, ``.inf``) are refused wherever a number is expected,
so no later check has to think about them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Literal

from . import BenchError, short


EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""A number in exponent notation, which YAML 1.1 (PyYAML) reads as a string unless its mantissa has a dot."""


def choices_text(valid) -> str:
    return ", ".join(sorted(str(v) for v in valid))


def field_types(cls) -> dict[str, Any]:
    """Field name -> resolved type annotation of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _json_key(key: Any, tp: Any) -> Any:
    """A mapping's key as JSON wrote it: a JSON object's keys are strings, so an integer key comes back as its
    digits (``emulated_cpu`` in config.json)."""
    if tp is int and isinstance(key, str) and key.lstrip("-").isdigit():
        return int(key)
    return key


def check(value: Any, tp: Any, name: str) -> Any:
    """``value`` if it is of type ``tp`` (an int is accepted for a float); else a BenchError naming ``name``."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise BenchError(f"invalid {name} {short(value)}; valid choices: {choices_text(allowed)}")
        return value
    if origin in (typing.Union, types.UnionType):
        if isinstance(value, float) and not math.isfinite(value):
            raise BenchError(f"invalid {name} {short(value)}: expected a finite number")
        for arg in typing.get_args(tp):
            try:
                return check(value, arg, name)
            except BenchError:
                pass
        raise BenchError(f"invalid {name} {short(value)}: expected {tp}")
    if tp is type(None):
        if value is not None:
            raise BenchError(f"invalid {name} {short(value)}: expected null")
        return None
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise BenchError(f"invalid {name} {short(value)}: expected a list")
        return [check(v, item_tp, name) for v in value]
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise BenchError(f"invalid {name} {short(value)}: expected a mapping")
        return {check(_json_key(k, key_tp), key_tp, name): check(v, val_tp, name) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise BenchError(f"invalid {name} {short(value)}: expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BenchError(f"invalid {name} {short(value)}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, str) and EXPONENT.fullmatch(value.strip()):
            value = float(value)  # 5e-2: a number in YAML 1.2 and JSON, a string to YAML 1.1 (no dot in the mantissa)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BenchError(f"invalid {name} {short(value)}: expected a number")
        if not math.isfinite(value):
            raise BenchError(f"invalid {name} {short(value)}: expected a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise BenchError(f"invalid {name} {short(value)}: expected a string")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        return build(tp, value, what=name)
    if tp is Any:
        return value
    raise TypeError(f"unsupported config type {tp}")


def build(cls, values: dict | None, what: str = "key"):
    """Dataclass ``cls`` from ``values``; unknown keys and wrong types are errors naming ``what``."""
    if values is not None and not isinstance(values, dict):
        raise BenchError(f"{what}s must be a mapping, got {short(values)}")
    values = dict(values or {})
    types_ = field_types(cls)
    unknown = sorted(set(values) - set(types_))
    if unknown:
        valid = choices_text(types_) if types_ else "(none)"
        raise BenchError(f"unknown {what} {unknown[0]!r}; valid: {valid}")
    return cls(**{k: check(v, types_[k], f"{what} {k!r}") for k, v in values.items()})


def field_docs(cls) -> dict[str, str]:
    """Each field of dataclass ``cls`` (and of its dataclass bases) -> its docstring (the string literal written
    under it), read from the source; "" where a field has none."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError, IndexError, AttributeError):
            continue
        for node, nxt in zip(body, body[1:] + [None]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                doc = nxt.value.value if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                                          and isinstance(nxt.value.value, str)) else ""
                docs[node.target.id] = inspect.cleandoc(doc)
    return {f.name: docs.get(f.name, "") for f in dataclasses.fields(cls)}
