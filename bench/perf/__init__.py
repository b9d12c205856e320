"""Benchmarks: scripts that print figures and ratios against a reference measured in the same run.

``python -m bench.perf NAME [options]`` runs ``bench/perf/NAME.py``'s ``main(argv)``:

- ``overhead``  — ``sync`` at np=1 against a plain PyTorch loop; ``sync`` against ``ddp`` at np=2.
- one module per algorithm family (see each module's docstring).

They are not tests: the machine is small and noisy, so they report medians of repeats and
ratios, never pass/fail on time.
"""

from __future__ import annotations

import statistics


def median(values) -> float:
    return statistics.median(values)


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"
