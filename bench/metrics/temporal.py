"""Temporal efficiency (Hermans 2017): E(a, b) = ∫₀ᵐ f_a(t) dt / ∫₀ᵐ f_b(t) dt, f the workers'
mini-batch training accuracy over wall-clock time, smoothed over windows (docs/algorithms.md, metrics).

The horizon m is the shorter run's span, or, given a target accuracy, the time the slower of the two runs took to
reach it (held-out, :func:`bench.metrics.accuracy.time_to_target`; its whole run where it never does): past that both
runs sit on their plateau, and integrating it would pull every E towards 1 (the default study's matrix was 0.97-1.03
everywhere before).

The window is a fixed fraction of the runs' length unless given in seconds: T/20 with stride T/100, T the shorter
run's span of records (:data:`WINDOW_FRACTION`, :data:`STRIDE_FRACTION`), so E is defined for every pair of runs
with records over a positive span, however short (a fixed 5 s window is longer than a 1 s run)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import BenchError
from ..results import ResultsError, Run, load_run
from .accuracy import time_to_target
from .selection import ok_runs, point_key
from .stats import describe, side

WINDOW_FRACTION, STRIDE_FRACTION = 1 / 20, 1 / 100
"""Default window and stride: these fractions of the shorter run's span T."""


def window_curve(t, acc, window: float = 5.0, stride: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Hermans' smoothed training-accuracy curve: for each start s = 0, stride, 2 stride, ... (time measured
    from the earliest record), y(s) = mean accuracy of the records with t in [s, s + window); starts with
    no record are skipped. Returns (starts, y)."""
    if window <= 0 or stride <= 0:
        raise BenchError(f"window and stride must be > 0 seconds, got window={window!r}, stride={stride!r}")
    t = np.asarray(t, dtype=float)
    acc = np.asarray(acc, dtype=float)
    if t.size == 0:
        raise BenchError("temporal efficiency needs at least one accuracy record")
    t = t - t.min()
    starts = np.arange(0.0, t.max() + stride * 0.5, stride)
    starts = starts[starts <= t.max()]
    order = np.argsort(t)
    ts, accs = t[order], acc[order]
    csum = np.concatenate([[0.0], np.cumsum(accs)])
    lo = np.searchsorted(ts, starts, side="left")
    hi = np.searchsorted(ts, starts + window, side="left")
    count = hi - lo
    keep = count > 0
    return starts[keep], (csum[hi] - csum[lo])[keep] / count[keep]


def integrate_to(x: np.ndarray, y: np.ndarray, m: float) -> float:
    """Integral from x[0] to ``m`` of the piecewise-linear interpolation of (x, y) (m <= x[-1])."""
    inside = x < m
    xs = np.concatenate([x[inside], [m]])
    ys = np.concatenate([y[inside], [np.interp(m, x, y)]])
    return float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2.0))


def window_for(t_a, t_b, window: float | None = None, stride: float | None = None) -> tuple[float, float]:
    """(window, stride) in seconds: the given ones, else :data:`WINDOW_FRACTION` and :data:`STRIDE_FRACTION` of T,
    the shorter of the two runs' spans of records."""
    if window is None or stride is None:
        spans = [float(np.max(t) - np.min(t)) if np.size(t) else 0.0 for t in (np.asarray(t_a, float), np.asarray(t_b, float))]
        span = min(spans)
        if span <= 0:
            raise BenchError("temporal efficiency needs records over a positive span of time in both runs")
        window = span * WINDOW_FRACTION if window is None else window
        stride = span * STRIDE_FRACTION if stride is None else stride
    return window, stride


def temporal_efficiency(t_a, acc_a, t_b, acc_b, window: float | None = None, stride: float | None = None,
                        horizon: float | None = None) -> float:
    """E(a, b) = int_0^m f_a dt / int_0^m f_b dt, f the :func:`window_curve` interpolated piecewise-linearly,
    m the smaller of the two curves' last window start (no extrapolation) and of ``horizon`` (seconds from each
    run's first record). E > 1: a is better. ``window`` and ``stride`` in seconds; None: fractions of the shorter
    run's span (:func:`window_for`)."""
    window, stride = window_for(t_a, t_b, window, stride)
    xa, ya = window_curve(t_a, acc_a, window, stride)
    xb, yb = window_curve(t_b, acc_b, window, stride)
    m = min(xa[-1], xb[-1], math.inf if horizon is None else horizon)
    if m <= 0:
        raise BenchError(f"runs too short for window={window:g} s, stride={stride:g} s (shorter run's last window "
                         f"starts at 0); pass smaller --window/--stride")
    fb = integrate_to(xb, yb, m)
    if fb <= 0:
        raise BenchError("temporal efficiency undefined: run b's accuracy integral is 0")
    return integrate_to(xa, ya, m) / fb


def _as_run(run) -> Run:
    if not isinstance(run, Run):
        try:
            run = load_run(Path(run))
        except ResultsError as e:
            raise BenchError(str(e)) from None
    if run.status != "ok":
        raise BenchError(f"run {str(run.path)!r} has status {run.status!r} "
                         f"({run.summary.get('reason', 'no reason recorded')}); temporal efficiency needs ok runs")
    if run.steps.empty:
        raise BenchError(f"run {str(run.path)!r} has no worker step records")
    return run


def horizon_to(a: Run, b: Run, target: float | None) -> float | None:
    """Seconds (from each run's first record) until the slower of ``a`` and ``b`` reached ``target`` held-out
    accuracy; None without a target, or where neither reached it (then the runs' whole span)."""
    if target is None or not math.isfinite(target):
        return None
    times = [(*time_to_target(r.evals, target, r.summary.get("train_s")), float(r.steps["t"].min())) for r in (a, b)]
    if all(censored for _, censored, _ in times):
        return None
    return max(t - t0 for t, _, t0 in times)


def temporal_efficiency_runs(run_a, run_b, window: float | None = None, stride: float | None = None,
                             target: float | None = None) -> float:
    """E(a, b) of two run directories (or loaded runs) from every worker's mini-batch accuracy records, up to the
    slower one's time to ``target`` (:func:`horizon_to`; None: their shorter span)."""
    a, b = _as_run(run_a), _as_run(run_b)
    return temporal_efficiency(a.steps["t"], a.steps["accuracy"], b.steps["t"], b.steps["accuracy"], window, stride,
                               horizon_to(a, b, target))


def te_pairs(runs: list[Run], window: float | None = None, stride: float | None = None,
             target: float | None = None) -> pd.DataFrame:
    """E(a, b) for every ordered pair of configurations (:func:`bench.metrics.selection.point_key`: a run key
    without its repeat), repeat by repeat: a's repeat k against b's repeat k, the runs that share a seed. Columns
    a, b, repeat, E (NaN where undefined); a configuration against itself gives 1."""
    good = {(point_key(r), r.label["repeat"]): r for r in ok_runs(runs) if not r.steps.empty}
    configs = sorted({c for c, _ in good})
    rows = []
    for a, b in itertools.product(configs, repeat=2):
        for k in sorted({k for c, k in good if c == a} & {k for c, k in good if c == b}):
            try:
                e = temporal_efficiency_runs(good[a, k], good[b, k], window, stride, target)
            except BenchError:
                e = math.nan
            rows.append({"a": a, "b": b, "repeat": k, "E": e})
    return pd.DataFrame(rows, columns=["a", "b", "repeat", "E"])


def te_matrix(runs: list[Run], window: float | None = None, stride: float | None = None,
              pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """E(row, column) for every ordered pair of configurations: the median over their paired repeats
    (:func:`te_pairs`, which ``pairs`` may pass in); NaN where no repeat pair has a defined E."""
    pairs = te_pairs(runs, window, stride) if pairs is None else pairs
    configs = sorted(set(pairs["a"])) if len(pairs) else []
    out = pd.DataFrame(np.nan, index=configs, columns=configs)
    for (a, b), g in pairs.groupby(["a", "b"]):
        if g["E"].notna().any():
            out.loc[a, b] = float(g["E"].median())
    out.index.name, out.columns.name = "a", "b"
    return out


def te_grid(runs: list[Run], a: str, b: str, param: str, window: float | None = None,
            stride: float | None = None, target: float | None = None) -> pd.DataFrame:
    """E(a, b) for each (hardware, np, ``param``) configuration both algorithms ran, e.g. ``param`` =
    ``communication_window`` (Hermans' λ): runs matched on hardware, np, the value of ``param`` and the repeat (the
    same seed), E per repeat pair, then the geometric mean over the pairs with its 95 % t-interval (NaN
    with fewer than 3 pairs; :func:`bench.metrics.stats.describe`). Columns: hardware, np, ``param``, E, ci_low,
    ci_high, n (defined pairs), winner: ``a`` or ``b`` where the interval excludes 1, ``inconclusive`` where it does
    not; with fewer than 3 pairs, the side of E (``tie`` at 1; ``undefined`` where no pair is defined)."""
    def index(name):
        return {(r.label["hardware"], r.label["np"], r.config.get("params", {}).get(param), r.label.get("repeat", 0)): r
                for r in ok_runs(runs) if r.label["algorithm"] == name and not r.steps.empty}

    ia, ib = index(a), index(b)
    by_config: dict[tuple, list[float]] = {}
    def order(k):  # hardware, np, the value (numbers in numeric order), repeat
        number = isinstance(k[2], (int, float)) and not isinstance(k[2], bool)
        return k[0], k[1], (0, k[2], "") if number else (1, 0, str(k[2])), k[3]

    for key in sorted(set(ia) & set(ib), key=order):
        try:
            e = temporal_efficiency_runs(ia[key], ib[key], window, stride, target)
        except BenchError:
            e = math.nan
        by_config.setdefault(key[:3], []).append(e)
    rows = []
    for (hw, n, value), es in by_config.items():
        d = describe(es)
        e = d["mean"]
        where = side(d)
        winner = {"faster": a, "slower": b}.get(where, where)
        rows.append({"hardware": hw, "np": n, param: value, "E": e, "ci_low": d["ci_low"], "ci_high": d["ci_high"],
                     "n": d["n"], "winner": winner})
    return pd.DataFrame(rows, columns=["hardware", "np", param, "E", "ci_low", "ci_high", "n", "winner"])


def win_share(grid: pd.DataFrame, a: str) -> float:
    """Share of the defined configurations of a :func:`te_grid` where ``a``'s median E is above 1; NaN if none."""
    e = grid["E"].dropna()
    return float((e > 1).mean()) if len(e) else math.nan
