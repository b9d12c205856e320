"""Benchmarks: scripts that print figures and ratios against a reference measured in the same run.

``python -m bench.perf NAME [options]`` runs ``bench/perf/NAME.py``'s ``main(argv)``:

- ``overhead``  — ``sync`` at np=1 against a plain PyTorch loop; ``sync`` against ``ddp`` at np=2.
- ``harness`` — the worker's loop at np=1 taken apart, piece by piece, beside a plain loop.
- ``horovod_best`` — the plain Horovod loop at candidate settings beside plain DDP: Horovod's best for a workload.
- one module per algorithm family (see each module's docstring).

They are not tests: the machine is small and noisy, so they report medians of repeats and
ratios, never pass/fail on time.
"""

from __future__ import annotations

import argparse
import re
import statistics


def median(values) -> float:
    return statistics.median(values)


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def medians(repeats: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Variant -> figure -> the median of its values over the repeats."""
    return {variant: {k: median(values) for k, values in figures.items()} for variant, figures in repeats.items()}


def table(columns: list[tuple[str, str]], rows: list[list]) -> list[str]:
    """A fixed-width table's lines: the titles, then one line per row. ``columns``: (title, format spec of the
    column's cells, e.g. ``">10.1f"``); a title takes its spec's alignment and width."""
    titles = []
    for title, spec in columns:
        align, width = re.match(r"([<>^]?)(\d*)", spec).groups()
        titles.append(f"{title:{align}{width}}")
    return [" ".join(titles), *(" ".join(format(cell, spec) for cell, (_, spec) in zip(row, columns)) for row in rows)]


def workload_options(ap: argparse.ArgumentParser, repeats: int, each: str) -> argparse.ArgumentParser:
    """The options of a benchmark of one workload: ``--profile``, ``--hardware``, ``--set``, ``--repeats``, ``--json``,
    and ``--quiet-below`` / ``--quiet-max-wait`` (waited for before each ``each``: a loop, a variant)."""
    ap.add_argument("--profile", default="laptop", help="training profile of params.yaml (default laptop)")
    ap.add_argument("--hardware", default="local", help="hardware profile (its horovod: settings; default local)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="the workload's overrides")
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--json", metavar="FILE", help="write every measurement (per repeat) and the summary as JSON")
    ap.add_argument("--quiet-below", type=float, default=0.0, metavar="FRAC",
                    help=f"before each {each} wait until the machine's CPUs are less than FRAC busy (0: do not wait)")
    ap.add_argument("--quiet-max-wait", type=float, default=120.0, metavar="S", help="longest wait for quiet (s)")
    return ap
