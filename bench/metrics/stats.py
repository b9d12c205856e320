"""Statistics over a study's repeats: per cell, the median and olympic mean with a 95 % bootstrap interval; against a
reference (``sync``) in the same cell, a paired ratio with a 95 % bootstrap interval and an outcome; Holm's
correction across the cells of one claim (:mod:`bench.metrics.claims`). Definitions: docs/algorithms.md, metrics.

- A **cell** is one algorithm at one point of the study (hardware, straggler, workers, grid point); its **repeats**
  (:class:`bench.study.StudySpec` ``repeats``) differ in model initialisation and shard order only.
- **Interval**: the percentile bootstrap of ``scipy.stats.bootstrap`` (:data:`N_RESAMPLES` resamples, a fixed seed so
  that a table is reproducible), at :data:`CONFIDENCE`. With fewer than :data:`MIN_N` values there is no interval
  (NaN): a bootstrap of 1 or 2 values is not an interval. With few repeats a percentile interval is too narrow
  (it cannot reach beyond the values seen): read it as the least uncertainty there is.
- **Paired ratio**: per repeat k, the algorithm's figure over the reference's (for a time, the reference's over the
  algorithm's), so > 1 always favours the algorithm; the effect is the geometric mean of the ratios (the exp of the
  mean log-ratio, whose bootstrap gives the interval). **Outcome**: ``faster`` when the interval lies above 1,
  ``slower`` when below, ``inconclusive`` when it contains 1 or is undefined. ``sign_p`` (exact sign test) goes
  with it: with 3 to 5 repeats the percentile interval excludes 1 whenever every ratio lies on one side, which
  chance alone gives often (1 in 4 at n = 3, both sides); an outcome whose ``sign_p`` is not small rests on too
  few repeats.
- **Holm**: step-down adjustment of the one-sided bootstrap p-values of one family (``holm``); scipy has no Holm
  (``scipy.stats.false_discovery_control`` is Benjamini-Hochberg / -Yekutieli) and statsmodels is not a dependency,
  so it is the few lines below.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats as sps

CONFIDENCE = 0.95
N_RESAMPLES = 9999
MIN_N = 3
SEED = 0
OUTCOMES = ("faster", "slower", "inconclusive")

HIGHER_IS_BETTER = {"throughput": True, "slowest_worker_rate": True, "time_to_target_s": False,
                    "accuracy_at_budget": True, "final_accuracy": True, "speedup": True, "straggler_pace": True}
"""Metrics compared as paired ratios, and their direction (False: smaller is better, the ratio is inverted)."""


def olympic_mean(values, axis: int = -1) -> np.ndarray | float:
    """Mean without the single smallest and the single largest value (with 3 or more values; else the mean)."""
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    if n >= 3:
        x = np.take(x, range(1, n - 1), axis=axis)
    return np.mean(x, axis=axis)


def _finite(values) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    return x[np.isfinite(x)]


def bootstrap(values, statistic: Callable = np.median) -> tuple[float, float, np.ndarray]:
    """(low, high, bootstrap distribution) of ``statistic`` (vectorised over ``axis``) of the finite ``values``:
    the :data:`CONFIDENCE` percentile interval of ``scipy.stats.bootstrap``; NaN and an empty distribution with
    fewer than :data:`MIN_N` values."""
    x = _finite(values)
    if x.size < MIN_N:
        return math.nan, math.nan, np.array([])
    if np.ptp(x) == 0:  # every value the same: every resample gives it
        v = float(statistic(x[None, :], axis=-1)[0])
        return v, v, np.full(N_RESAMPLES, v)
    res = sps.bootstrap((x,), statistic, confidence_level=CONFIDENCE, n_resamples=N_RESAMPLES, method="percentile",
                        vectorized=True, rng=np.random.default_rng(SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high), res.bootstrap_distribution


def describe(values) -> dict:
    """n, median, olympic mean and the bootstrap interval of the median of the finite ``values``."""
    x = _finite(values)
    low, high, _ = bootstrap(x, np.median)
    return {"n": int(x.size), "median": float(np.median(x)) if x.size else math.nan,
            "olympic_mean": float(olympic_mean(x)) if x.size else math.nan, "ci_low": low, "ci_high": high}


def outcome(low: float, high: float, threshold: float = 1.0) -> str:
    """``faster`` if the interval lies above ``threshold``, ``slower`` if below, else (or undefined) ``inconclusive``."""
    if math.isfinite(low) and low > threshold:
        return "faster"
    if math.isfinite(high) and high < threshold:
        return "slower"
    return "inconclusive"


def side(summary: dict, threshold: float = 1.0) -> str:
    """Where a :func:`describe` summary lies against ``threshold``: with :data:`MIN_N` values or more, the
    :func:`outcome` of its interval (``faster``, ``slower``, ``inconclusive``); with fewer (no interval), the side of
    the median alone (``faster``, ``slower``, ``tie`` on the threshold, ``undefined`` where it is NaN)."""
    if summary["n"] >= MIN_N:
        return outcome(summary["ci_low"], summary["ci_high"], threshold)
    m = summary["median"]
    return "faster" if m > threshold else "slower" if m < threshold else ("tie" if m == threshold else "undefined")


def paired_ratio(algorithm, reference, higher_is_better: bool = True, threshold: float = 1.0) -> dict:
    """The paired ratio of two aligned arrays (same repeats, element by element): effect (geometric mean of the
    ratios, > 1 favours ``algorithm``), its interval, n (pairs with both figures finite and > 0), the outcome
    against ``threshold``, and the one-sided bootstrap p-values of ``effect > threshold`` being false (``p_above``)
    and of ``effect < threshold`` being false (``p_below``), for :func:`holm`, and ``sign_p``, the exact two-sided
    sign test of the ratios against ``threshold`` (``scipy.stats.binomtest``): a check on the bootstrap with few
    repeats (with n = 3 ratios all on one side, which happens 1 time in 4 without any effect, the percentile
    interval excludes the threshold; the sign test cannot go below 0.25 there)."""
    a, b = np.asarray(algorithm, dtype=float), np.asarray(reference, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    logs = np.log(a[ok] / b[ok]) if higher_is_better else np.log(b[ok] / a[ok])
    n = int(logs.size)
    effect = float(np.exp(np.mean(logs))) if n else math.nan
    low, high, dist = bootstrap(logs, np.mean)
    low, high = math.exp(low) if math.isfinite(low) else math.nan, math.exp(high) if math.isfinite(high) else math.nan
    cut = math.log(threshold)
    sides = int(np.sum(logs > cut)), int(np.sum(logs < cut))  # ties leave the sign test
    sign_p = float(sps.binomtest(sides[0], sum(sides), 0.5).pvalue) if sum(sides) else math.nan
    p_above = float((1 + np.sum(dist <= cut)) / (1 + dist.size)) if dist.size else math.nan
    p_below = float((1 + np.sum(dist >= cut)) / (1 + dist.size)) if dist.size else math.nan
    return {"effect": effect, "ci_low": low, "ci_high": high, "n": n, "outcome": outcome(low, high, threshold),
            "sign_p": sign_p, "p_above": p_above, "p_below": p_below}


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count in the family)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = idx.size
    if not m:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def summarize(df: pd.DataFrame, cell: list[str], metrics: list[str]) -> pd.DataFrame:
    """One row per cell and metric: :func:`describe` over the cell's repeats (rows), and ``censored`` (repeats whose
    time to target is censored, when ``df`` has that column and the metric is ``time_to_target_s``)."""
    rows = []
    if df.empty:
        return pd.DataFrame(columns=[*cell, "metric", "n", "median", "olympic_mean", "ci_low", "ci_high", "censored"])
    for keys, g in df.groupby(cell, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for m in metrics:
            if m not in g:
                continue
            censored = int(g["censored"].fillna(False).astype(bool).sum()) if m == "time_to_target_s" and "censored" in g else 0
            rows.append({**dict(zip(cell, keys)), "metric": m, **describe(g[m]), "censored": censored})
    return pd.DataFrame(rows, columns=[*cell, "metric", "n", "median", "olympic_mean", "ci_low", "ci_high", "censored"])


def compare(df: pd.DataFrame, cell: list[str], metrics: list[str], reference: str = "sync",
            pair: str = "repeat") -> pd.DataFrame:
    """Every algorithm against ``reference`` in the same cell (``cell`` without ``algorithm``), paired on ``pair``:
    one row per cell, algorithm and metric with :func:`paired_ratio` (> 1 favours the algorithm; for a time,
    the reference's over the algorithm's) and the outcome faster / slower / inconclusive."""
    cols = [*cell, "algorithm", "metric", "effect", "ci_low", "ci_high", "n", "outcome", "sign_p"]
    if df.empty or reference not in set(df["algorithm"]):
        return pd.DataFrame(columns=cols)
    rows = []
    for keys, g in df.groupby(cell, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        ref = g[g["algorithm"] == reference]
        if ref.empty:
            continue
        for algo, a in g[g["algorithm"] != reference].groupby("algorithm", sort=True):
            both = a.merge(ref, on=pair, suffixes=("", "_ref"))
            for m in metrics:
                if m not in both:
                    continue
                r = censored_ratio(both, m) if m == "time_to_target_s" else \
                    paired_ratio(both[m], both[f"{m}_ref"], HIGHER_IS_BETTER.get(m, True))
                rows.append({**dict(zip(cell, keys)), "algorithm": algo, "metric": m,
                             **{k: r[k] for k in ("effect", "ci_low", "ci_high", "n", "outcome", "sign_p")}})
    return pd.DataFrame(rows, columns=cols)


def censored_ratio(both: pd.DataFrame, metric: str = "time_to_target_s", threshold: float = 1.0) -> dict:
    """:func:`paired_ratio` of a time to target where runs may be censored (never reached the target: the time is
    a lower bound, the run's length). ``both``: the algorithm's rows merged with the reference's on the repeat
    (columns ``metric``, ``metric_ref``, ``censored``, ``censored_ref``). A pair whose two runs are both censored says
    nothing and is left out. Where the algorithm's run is censored, its ratio (reference's time / algorithm's) is an
    upper bound of the true one, so the comparison may still show ``slower`` but never ``faster`` (and ``p_above``,
    the evidence for "faster", is NaN); where the reference's run is censored, the ratio is a lower bound, so never
    ``slower`` (``p_below`` NaN). An outcome the bounds cannot carry becomes ``inconclusive``."""
    a_c = both["censored"].fillna(False).astype(bool).to_numpy() if "censored" in both else np.zeros(len(both), bool)
    r_c = both["censored_ref"].fillna(False).astype(bool).to_numpy() if "censored_ref" in both else np.zeros_like(a_c)
    keep = ~(a_c & r_c)
    r = paired_ratio(both[metric].to_numpy()[keep], both[f"{metric}_ref"].to_numpy()[keep], False, threshold)
    if a_c[keep].any():
        r["p_above"] = math.nan
        if r["outcome"] == "faster":
            r["outcome"] = "inconclusive"
    if r_c[keep].any():
        r["p_below"] = math.nan
        if r["outcome"] == "slower":
            r["outcome"] = "inconclusive"
    r["censored_pairs"] = int((a_c | r_c).sum())
    return r
