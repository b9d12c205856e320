"""YAML read strictly: every YAML the suite reads (params.yaml, hardware profiles, study files, the performance
model's hardware, ``--set`` values) goes through :func:`load_text` or :func:`read_mapping`.

PyYAML's ``safe_load`` takes the last of two equal keys without a word, recurses once per nesting level (a file
nested 100,000 deep ends in a ``RecursionError``), and expands aliases by reference, so that nine lines of
anchors (an "alias bomb") make a value of a billion elements whose error message then prints gigabytes. Here:

- a key given twice in one mapping is refused, naming both lines;
- a file is at most :data:`MAX_BYTES`, nested at most :data:`MAX_DEPTH` deep, and holds at most :data:`MAX_NODES`
  values once its aliases are expanded (an alias that refers to itself is refused);
- every refusal is one :class:`bench.BenchError` line naming the file (or ``--set`` value) and the line;
- integers are read as YAML 1.2 (and JSON, and a person) read them: ``010`` is ten, not YAML 1.1's octal eight
  (``seed: 0777`` was 511), octal only as ``0o17``; YAML 1.1's binary ``0b1``, sexagesimal ``1:20`` (80) and
  underscores are not integers (they stay text, which a numeric setting refuses).

The limits are far above what the suite's own files use (the largest, params.yaml, is about 6 kB, 6 deep, some 500
values), far below what would exhaust the interpreter or the terminal.
"""

from __future__ import annotations

import copy
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

import yaml

from . import BenchError, short

MAX_BYTES = 1 << 20
"""Largest YAML text read (1 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists."""
MAX_NODES = 100_000
"""Most values (scalars, lists, mappings) once aliases are expanded."""


class _Limit(yaml.YAMLError):
    """A limit of this module exceeded at ``mark`` (a YAMLError, so that callers report it like a syntax error)."""

    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


INT_TAG = "tag:yaml.org,2002:int"
INTEGER = re.compile(r"^[-+]?(0|[1-9][0-9]*|0[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
"""An integer as YAML 1.2's core schema writes it (a leading zero is decimal here, where YAML 1.2 calls it text)."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with a depth limit while composing, duplicate keys refused while constructing, and integers read
    as YAML 1.2 reads them (module docstring)."""

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag != INT_TAG]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Limit(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class refuses it
                    continue
                if first is not None:
                    raise _Limit(f"duplicate key {short(key)} (first given on line {first + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        digits = text.lstrip("+-")
        if not INTEGER.fullmatch(text):  # an explicit !!int of something else
            raise _Limit(f"{text!r} is not an integer", node.start_mark)
        value = int(digits[2:], 16 if digits[1] in "xX" else 8) if digits[:2] in ("0x", "0X", "0o") else int(digits, 10)
        return -value if text.startswith("-") else value


_Loader.add_implicit_resolver(INT_TAG, INTEGER, list("-+0123456789"))
_Loader.add_constructor(INT_TAG, _Loader.construct_yaml_int)


def _expanded_size(root) -> int:
    """Values in the node graph under ``root`` with every alias expanded (memoised: an alias bomb costs its lines);
    raises _Limit on an alias that refers to a node containing it, or past :data:`MAX_NODES`."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Limit("an alias refers to the value that contains it", node.start_mark)
        active.add(key)
        children = [] if isinstance(node, yaml.ScalarNode) else (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value)
        total = 1 + sum(size(c) for c in children)
        active.discard(key)
        if total > MAX_NODES:
            raise _Limit(f"more than {MAX_NODES:,} values once its aliases are expanded", node.start_mark)
        sizes[key] = total
        return total

    return size(root)


def load_text(text: str, where: str) -> Any:
    """The value of YAML ``text`` (None for an empty one), read strictly (module docstring); BenchError naming
    ``where`` (a file, or ``--set KEY``) and the line otherwise."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise BenchError(f"{where}: larger than {MAX_BYTES // 1024} KiB of YAML; this is not a configuration file")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        what = " ".join(str(getattr(e, "problem", None) or e).split())
        kind = "" if isinstance(e, _Limit) else "YAML syntax error: "
        raise BenchError(f"{where}{at}: {kind}{what}") from None
    finally:
        loader.dispose()


def read_mapping(path: Path) -> dict:
    """A YAML file's top-level mapping ({} for an empty file), read strictly; a file that cannot be read or parsed,
    or holds something else, is a one-line BenchError naming it."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise BenchError(f"{path}: larger than {MAX_BYTES // 1024} KiB of YAML; this is not a configuration file")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise BenchError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise BenchError(f"{path}: cannot read ({e.strerror})") from None
    return copy.deepcopy(_parsed_mapping(text, str(path)))


_PARSED: OrderedDict[tuple[str, str], dict] = OrderedDict()
"""Parsed mappings kept, newest last: the performance model resolves some 800 configurations, each reading
params.yaml and a hardware file, and parsing them each time was most of ``bench predict``'s time outside its
simulations."""
_PARSED_MAX = 64
"""Most files kept."""
_KEPT_CHARS = 64 * 1024
"""Longest text kept (the suite's own files are under 10 kB; a larger one is parsed every time)."""


def _parsed_mapping(text: str, where: str) -> dict:
    """The mapping of ``text`` as :func:`read_mapping` returns it, kept by (``where``, the text itself): a file that
    changes is parsed again; a refusal is never kept. Callers get a copy (the kept value is never handed out)."""
    key = (where, text)
    if key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    data = load_text(text, where)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise BenchError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    if len(text) > _KEPT_CHARS:
        return data
    _PARSED[key] = data
    if len(_PARSED) > _PARSED_MAX:
        _PARSED.popitem(last=False)
    return data
