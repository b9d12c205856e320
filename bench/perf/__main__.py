"""``python -m bench.perf NAME [options]``: run benchmark module bench/perf/NAME.py."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench.perf as perf
from bench import run_command


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(perf.__path__) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in available():
        bad = f"unknown benchmark {argv[0]!r}; " if argv else ""
        print(f"error: {bad}valid: {', '.join(available())}", file=sys.stderr)
        return 2
    return run_command(lambda: importlib.import_module(f"bench.perf.{argv[0]}").main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
