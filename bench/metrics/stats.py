"""Statistics over a study's repeats: per cell, the median and the mean with a 95 % t-interval; against a reference
(``sync``) in the same cell, a paired ratio with a 95 % t-interval and an outcome; Holm's correction across the
tests of one claim (:mod:`bench.metrics.claims`). Definitions and the coverage simulation that chose these
intervals: docs/statistics.md.

- A **cell** is one algorithm at one point of the study (hardware, link, straggler, workers, grid point); its
  **repeats** (:class:`bench.study.StudySpec` ``repeats``) differ in model initialisation and shard order only.
- **Per cell** (:func:`describe`): n, median and olympic mean (descriptive), and ``mean`` with its interval
  ``[ci_low, ci_high]``: for positive figures (throughput, times, accuracies) the geometric mean and the Student t
  interval of the mean of the logs, mapped back (the figures are ratios at heart, and their spread grows with their
  size); for figures that may be 0 or negative, the arithmetic mean and its t-interval. With fewer than
  :data:`MIN_N` values there is no interval (NaN).
- **Paired ratio** (:func:`paired_ratio`): per repeat k, the algorithm's figure over the reference's (for a time, the
  reference's over the algorithm's), so > 1 always favours the algorithm; the effect is the geometric mean of the
  ratios, its interval the t-interval of the mean log-ratio (``scipy.stats.ttest_1samp``), and the one-sided
  t-test p-values of "effect > threshold" being false (``p_above``) and of "effect < threshold" being false
  (``p_below``). **Outcome**: ``faster`` when the interval lies above the threshold, ``slower`` below,
  ``inconclusive`` when it contains it or is undefined. ``sign_p`` (the exact sign test) goes with it as a check
  that needs no normality (it cannot go below 2/2^n: 0.0625 at n = 5).
- Why t and not the percentile bootstrap: at n = 3-10 the percentile bootstrap of a mean is too narrow (it ignores
  the t distribution's tails and the (n-1)/n shrinkage: about 0.63 of the t-interval's width at n = 5): its 95 %
  intervals covered 76-89 % in the simulation, the t-interval 94-95 % for normal log-ratios and 88-91 % for strongly
  skewed ones (docs/statistics.md, ``python -m bench.metrics.coverage``).
- **Holm**: ``statsmodels.stats.multitest.multipletests(method="holm")`` over one family of one-sided p-values.
- **Repeats from noise** (:func:`repeats_for`): the n a registered cell needs, from a pilot's spread of the log
  ratios (``statsmodels.stats.power.TTestPower``, one-sided, at the Holm level of the claim's strictest test).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

CONFIDENCE = 0.95
MIN_N = 3
INTERVAL = "Student t, 95 %, on the logs (geometric mean)"
"""What every interval of a summary or a paired ratio is (the ``interval_method`` of a table)."""
CAPTION = "95 % Student t interval of the geometric mean"
"""How a caption names that interval (README, figures, notebooks: tests/single/test_published.py checks them)."""
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


def t_interval(values) -> tuple[float, float, float]:
    """(mean, low, high): the mean of the finite ``values`` and its :data:`CONFIDENCE` Student t interval; NaN bounds
    with fewer than :data:`MIN_N` values (a point where every value is the same)."""
    x = _finite(values)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(np.mean(x))
    if x.size < MIN_N:
        return m, math.nan, math.nan
    if np.ptp(x) == 0:
        return m, m, m
    ci = sps.ttest_1samp(x, m).confidence_interval(CONFIDENCE)
    return m, float(ci.low), float(ci.high)


def describe(values) -> dict:
    """n, median, olympic mean, and ``mean`` with its t-interval (``ci_low``, ``ci_high``) of the finite ``values``:
    the geometric mean and the interval of the mean log where every value is positive, else the arithmetic mean."""
    x = _finite(values)
    if x.size and (x > 0).all():
        m, low, high = (math.exp(v) if math.isfinite(v) else math.nan for v in t_interval(np.log(x)))
    else:
        m, low, high = t_interval(x)
    return {"n": int(x.size), "median": float(np.median(x)) if x.size else math.nan,
            "olympic_mean": float(olympic_mean(x)) if x.size else math.nan, "mean": m, "ci_low": low, "ci_high": high}


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
    m = summary["mean"]
    return "faster" if m > threshold else "slower" if m < threshold else ("tie" if m == threshold else "undefined")


def paired_ratio(algorithm, reference, higher_is_better: bool = True, threshold: float = 1.0) -> dict:
    """The paired ratio of two aligned arrays (same repeats, element by element): effect (geometric mean of the
    ratios, > 1 favours ``algorithm``), its t-interval, n (pairs with both figures finite and > 0), the outcome
    against ``threshold``, the one-sided t-test p-values ``p_above`` (of "effect > threshold" being false) and
    ``p_below`` (of "effect < threshold" being false), for :func:`holm`, and ``sign_p``, the exact two-sided sign test
    of the ratios against ``threshold`` (``scipy.stats.binomtest``)."""
    a, b = np.asarray(algorithm, dtype=float), np.asarray(reference, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    logs = np.log(a[ok] / b[ok]) if higher_is_better else np.log(b[ok] / a[ok])
    n = int(logs.size)
    mean, low, high = t_interval(logs)
    effect, low, high = (math.exp(v) if math.isfinite(v) else math.nan for v in (mean, low, high))
    cut = math.log(threshold)
    sides = int(np.sum(logs > cut)), int(np.sum(logs < cut))  # ties leave the sign test
    sign_p = float(sps.binomtest(sides[0], sum(sides), 0.5).pvalue) if sum(sides) else math.nan
    p_above = p_below = math.nan
    if n >= MIN_N:
        if np.ptp(logs) == 0:  # no spread: the effect is known exactly
            p_above, p_below = float(mean <= cut), float(mean >= cut)
        else:
            p_above = float(sps.ttest_1samp(logs, cut, alternative="greater").pvalue)
            p_below = float(sps.ttest_1samp(logs, cut, alternative="less").pvalue)
    return {"effect": effect, "ci_low": low, "ci_high": high, "n": n, "outcome": outcome(low, high, threshold),
            "sign_p": sign_p, "p_above": p_above, "p_below": p_below}


def repeats_for(sd_log: float, effect: float, bar: float = 1.0, alpha: float = 0.025, tests: int = 1,
                power: float = 0.8) -> int:
    """The repeats (pairs) a paired-ratio test needs to support "effect > bar" with probability ``power`` where the
    true effect is ``effect`` and the log ratios spread by ``sd_log`` (a pilot's sample standard deviation): the
    one-sided one-sample t-test's n (``TTestPower.solve_power``) at level ``alpha / tests`` (Holm's first, strictest
    step over ``tests`` tests), rounded up, at least :data:`MIN_N`. ValueError where ``effect`` does not exceed
    ``bar`` (no n can) or ``sd_log`` is not a positive number."""
    if not (math.isfinite(sd_log) and sd_log > 0):
        raise ValueError(f"sd_log {sd_log!r}: the pilot's spread of the log ratios must be a positive number")
    if not effect > bar:
        raise ValueError(f"effect {effect!r} does not exceed the bar {bar!r}: no number of repeats can support it")
    d = (math.log(effect) - math.log(bar)) / sd_log
    solver = TTestPower()
    if solver.power(effect_size=d, nobs=MIN_N, alpha=alpha / tests, alternative="larger") >= power:
        return MIN_N  # the fewest an interval needs are enough (the solver finds no n below 2)
    n = solver.solve_power(effect_size=d, alpha=alpha / tests, power=power, alternative="larger")
    return max(MIN_N, math.ceil(float(np.atleast_1d(n)[0])))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (``statsmodels``' ``multipletests``); NaN stays NaN and does not count in
    the family."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    keep = np.isfinite(p)
    if keep.any():
        out[keep] = multipletests(p[keep], method="holm")[1]
    return out


def summarize(df: pd.DataFrame, cell: list[str], metrics: list[str]) -> pd.DataFrame:
    """One row per cell and metric: :func:`describe` over the cell's repeats (rows), and ``censored`` (repeats whose
    time to target is censored, when ``df`` has that column and the metric is ``time_to_target_s``)."""
    rows = []
    if df.empty:
        return pd.DataFrame(columns=[*cell, "metric", "n", "median", "olympic_mean", "mean", "ci_low", "ci_high", "censored"])
    for keys, g in df.groupby(cell, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for m in metrics:
            if m not in g:
                continue
            censored = int(g["censored"].fillna(False).astype(bool).sum()) if m == "time_to_target_s" and "censored" in g else 0
            rows.append({**dict(zip(cell, keys)), "metric": m, **describe(g[m]), "censored": censored})
    return pd.DataFrame(rows, columns=[*cell, "metric", "n", "median", "olympic_mean", "mean", "ci_low", "ci_high", "censored"])


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
    # the pairs where only the algorithm's run, only the reference's, or both were censored (the last left out)
    r["censored"], r["censored_ref"], r["censored_both"] = (int((a_c & ~r_c).sum()), int((r_c & ~a_c).sum()),
                                                            int((a_c & r_c).sum()))
    return r
