"""Benchmarks: scripts that print figures and ratios against a reference measured in the same run.

``python -m bench.perf NAME [options]`` runs ``bench/perf/NAME.py``'s ``main(argv)``:

- ``overhead``  — ``sync`` at np=1 against a plain PyTorch loop; ``sync`` against ``ddp`` at np=2.
- ``horovod_best`` — the plain Horovod loop at candidate settings beside plain DDP: Horovod's best for a workload.
- one module per algorithm family (see each module's docstring).

They are not tests: the machine is small and noisy, so they report medians of repeats and
ratios, never pass/fail on time.
"""

from __future__ import annotations

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
