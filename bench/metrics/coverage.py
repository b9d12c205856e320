"""How often a 95 % interval of a mean log-ratio covers the true one at the suite's repeat counts: the Student t
interval that :mod:`bench.metrics.stats` uses, against the percentile bootstrap it used before (docs/statistics.md).

    python -m bench.metrics.coverage [--reps 4000] [--seed 0]

Each replicate draws n paired log-ratios from a known distribution (its mean is the truth), forms both intervals, and
counts whether each contains the truth. Distributions: normal (what a log-normal run-to-run noise gives a
log-ratio), and a skewed one (the log of a shifted exponential: one slow repeat in a few, as a straggling host or a
late time to target gives). The percentile bootstrap is vectorised here with :data:`RESAMPLES` resamples (the
interval's coverage does not depend on more).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats as sps

LEVEL = 0.95
RESAMPLES = 2000
SIZES = (3, 5, 8, 10)


def draw(rng: np.random.Generator, dist: str, reps: int, n: int) -> tuple[np.ndarray, float]:
    """(reps x n log-ratios, their true mean) of ``dist``: ``normal`` (sd 0.05) or ``skewed`` (0.05 x a standard
    exponential, centred at 0.1: a long right tail)."""
    if dist == "normal":
        return rng.normal(0.1, 0.05, (reps, n)), 0.1
    if dist == "skewed":
        return 0.05 + 0.05 * rng.standard_exponential((reps, n)), 0.1
    raise ValueError(f"unknown distribution {dist!r}; valid: normal, skewed")


def t_cover(x: np.ndarray, truth: float) -> float:
    """Share of rows of ``x`` whose Student t interval of the mean contains ``truth``."""
    n = x.shape[1]
    half = sps.t.ppf(0.5 + LEVEL / 2, n - 1) * x.std(axis=1, ddof=1) / np.sqrt(n)
    m = x.mean(axis=1)
    return float(np.mean((m - half <= truth) & (truth <= m + half)))


def bootstrap_cover(x: np.ndarray, truth: float, rng: np.random.Generator) -> float:
    """Share of rows of ``x`` whose percentile bootstrap interval of the mean contains ``truth``."""
    reps, n = x.shape
    idx = rng.integers(0, n, (RESAMPLES, n))
    means = x[:, idx].mean(axis=2)  # reps x RESAMPLES
    low, high = np.quantile(means, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=1)
    return float(np.mean((low <= truth) & (truth <= high)))


def table(reps: int = 4000, seed: int = 0, sizes=SIZES) -> list[dict]:
    """One row per distribution and n: the coverage of each interval."""
    rng = np.random.default_rng(seed)
    rows = []
    for dist in ("normal", "skewed"):
        for n in sizes:
            x, truth = draw(rng, dist, reps, n)
            rows.append({"distribution": dist, "n": n, "t": t_cover(x, truth),
                         "percentile bootstrap": bootstrap_cover(x[: min(reps, 1000)], truth, rng)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.metrics.coverage", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000, help="replicates per distribution and n (default 4000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"coverage of 95 % intervals of a mean log-ratio ({args.reps} replicates; bootstrap: 1000, "
          f"{RESAMPLES} resamples)")
    print(f"{'distribution':<13} {'n':>3} {'t':>7} {'percentile bootstrap':>21}")
    for r in table(args.reps, args.seed):
        print(f"{r['distribution']:<13} {r['n']:>3} {r['t']:>7.3f} {r['percentile bootstrap']:>21.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
