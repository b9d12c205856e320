"""The layer rule of docs/architecture.md holds: every module of bench/ is in one row of its Layers table, and
every import of a suite module (at module level or inside a function) goes to the importer's own layer or one
listed before it (one process, reads the source; nothing imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from support import REPO

BENCH = REPO / "bench"


def layer_rows() -> list[list[str]]:
    """Per table row (the bottom layer first), the ``bench/...`` paths it names (a path ending in / is a package)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and "`bench/" in cells[2]:
            rows.append(re.findall(r"`(bench/[^`]*)`", cells[2]))
    return rows


def module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def row_of(module: str, rows: list[list[str]]) -> int | None:
    """The row of a dotted module (None: bench/__init__.py, below every row)."""
    if module == "bench":
        return None
    path = module.replace(".", "/")
    for i, row in enumerate(rows):
        for p in row:
            if (p.endswith("/") and (path + "/").startswith(p)) or p == path + ".py":
                return i
    raise LookupError(module)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every suite module ``path`` imports, anywhere in the file."""
    me = module_of(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "bench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "bench":
                target = node.module
            else:
                continue
            for a in node.names:  # `from . import cluster` imports a module; `from . import BenchError` a name
                sub = target + "." + a.name
                is_module = (REPO / sub.replace(".", "/")).with_suffix(".py").exists() or \
                    (REPO / sub.replace(".", "/")).is_dir()
                out.append((node.lineno, sub if is_module else target))
    return out


MODULES = sorted(BENCH.rglob("*.py"))


def test_the_table_names_every_module_of_bench_once():
    rows = layer_rows()
    assert len(rows) >= 10, rows
    named = [p for row in rows for p in row]
    assert len(named) == len(set(named)), "a path in two rows"
    for path in MODULES:
        if path == BENCH / "__init__.py":
            continue  # below every row
        covering = [p for p in named if (p.endswith("/") and str(path.relative_to(REPO)).startswith(p))
                    or p == str(path.relative_to(REPO))]
        assert len(covering) == 1, f"{path.relative_to(REPO)} is in {covering or 'no row'} of docs/architecture.md"
    for p in named:
        assert (REPO / p).exists(), f"docs/architecture.md names {p}, which does not exist"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_go_to_the_same_row_or_a_row_above(path):
    rows = layer_rows()
    mine = row_of(module_of(path), rows)
    for line, target in imports(path):
        theirs = row_of(target, rows)
        if theirs is None or mine is None:
            assert mine is not None or theirs is None, f"bench/__init__.py imports {target} (line {line})"
            continue
        assert theirs <= mine, (f"{path.relative_to(REPO)}:{line} imports {target} ({' '.join(rows[theirs])}), "
                                f"a layer listed after its own ({' '.join(rows[mine])}) in docs/architecture.md")


def test_lazy_imports_are_read_and_an_import_against_the_direction_is_found(tmp_path):
    rows = layer_rows()
    lazy = [t for _, t in imports(BENCH / "resolve.py")]
    assert "bench.data" in lazy and "bench.cluster" in lazy  # bench.data is imported inside check_machine
    # the configuration row is the bottom one: a config.py importing the launcher would be refused
    assert row_of("bench.launch", rows) > row_of("bench.config", rows)
    # the resolver sits below the launcher (which checks the machine with it), above where processes go
    assert row_of("bench.placement", rows) < row_of("bench.resolve", rows) < row_of("bench.launch.job", rows)
    assert "bench.launch" not in {t.rsplit(".", 1)[0] if t.startswith("bench.launch.") else t for t in lazy}
    assert row_of("bench.algorithms.sync", rows) == row_of("bench.algorithms", rows)


def test_the_rank_side_sits_below_the_resolver_and_the_launcher():
    """The rows read run config, worker, resolver, launcher: a rank imports what reads its config.json and checks
    its run directory's ownership, never the params.yaml merge or the launcher."""
    rows = layer_rows()
    order = [row_of(m, rows) for m in ("bench.runconfig", "bench.worker", "bench.resolve", "bench.launch")]
    assert order == sorted(set(order)), f"rows of run config, worker, resolver, launcher: {order}"
    assert row_of("bench.ownership", rows) == row_of("bench.watchdog", rows) == order[0]
    worker = {t for _, t in imports(BENCH / "worker.py")}
    assert not {t for t in worker if t == "bench.resolve" or t.startswith("bench.launch")}, worker


def test_point_to_point_tags_are_named_once_in_bench_comm_tags():
    from bench.comm.tags import TAGS

    assert len(set(TAGS.values())) == len(TAGS), TAGS  # no two protocols share a number
    assert {"SGP_SHARE", "FAST_GRADIENT", "PS_HEADER", "PAIRWISE_HEADER"} <= set(TAGS)
    for path in MODULES:  # a tag passed as a bare number, or a number named outside tags.py, is refused
        text = path.read_text()
        where = str(path.relative_to(REPO))
        assert not re.search(r"\btag=\d", text), f"{where} passes a tag as a bare number: name it in bench/comm/tags.py"
        if path != BENCH / "comm" / "tags.py":
            assert not re.search(r"^\w*TAG\w* = \d", text, re.M), f"{where} numbers a tag: name it in bench/comm/tags.py"


def test_every_comm_mark_says_what_goes_where():
    for path in MODULES:
        for i, line in enumerate(path.read_text().splitlines(), start=1):
            if "# comm" in line:
                said = line.split("# comm", 1)[1]
                assert re.match(r": \S+ \S+ \S+", said), f"{path.relative_to(REPO)}:{i}: a bare `# comm` mark: say what goes where"


# -- import cycles ------------------------------------------------------------------------------------------------

def import_graph() -> dict[str, set[str]]:
    """Suite module -> the suite modules it imports, anywhere in the file (lazy imports included), as written: the
    parent packages Python imports on the way are not edges (importing ``bench.cluster.spec`` runs
    ``bench/cluster/__init__.py`` first, which is no cycle), a name taken from a package is (``from . import X``
    in a package's module runs into the package's ``__init__`` while it may be half done)."""
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        me = module_of(path)
        graph[me] = {t for _, t in imports(path) if t != me and t != "bench"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_cycles_of_any_length_and_nothing_else():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    assert sorted(map(sorted, cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}))) == [["a", "b"], ["c", "d"]]
    graph = import_graph()
    assert "bench.data" in graph["bench.resolve"]  # a lazy import is an edge (resolve.check_machine's)
    assert "bench.comm.p2p" in graph["bench.comm"] and "bench.comm" not in graph["bench.comm.p2p"]


def test_no_import_cycle_between_modules_of_bench():
    """No module of bench imports, directly or through others, a module that imports it (the same layer included,
    lazy imports included): such a pair works only in one import order, or only because one side waits to import
    inside a function."""
    found = cycles(import_graph())
    assert not found, f"import cycles: {[sorted(c) for c in found]}"
