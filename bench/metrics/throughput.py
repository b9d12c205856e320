"""Throughput and speedup: one definition, used by the worker's summary.json, the notebooks, the DVC
metrics and the CLI.

**Throughput** = samples processed by all workers ÷ wall time of the timed window. Every step
record carries ``t``, the wall-clock seconds from the job's common start to the end of that step.
The timed window opens when the last worker has finished its warm-up steps (or, without warm-up,
when the first step started) and closes when the first worker has taken its last step: the span in
which every worker is working, so a worker that finishes its fixed number of steps early (an
asynchronous method beside a straggler) does not dilute the figure with time it spent idle. The
samples counted are those of the steps that ended inside the window. The 95% interval is
mean ± 1.96·std of the same figure over equal sub-windows (5 to 10, each holding about 5 or more steps
of each worker; Horovod's synthetic benchmark reports mean ± 1.96·std over iterations); a window too short
for 5 sub-windows has no interval (NaN: never one from 2 sub-windows; a study's repeats give the interval
of record, :mod:`bench.metrics.stats`). Never a mean of per-step rates, which overstates
algorithms with uneven steps (local SGD's cheap local steps and one slow averaging step).

When that window is empty (a short run in which a fast worker took its last step before a straggler had
finished its warm-up: an asynchronous method beside a 3x straggler, 12 steps a worker), there is no
aggregate figure: ``throughput`` is NaN (a sum of rates measured over different spans is not a throughput)
and ``worker_rates`` gives each worker's own rate (samples of its steps after its own warm-up ÷ the time from
its warm-up's end to its last step); ``window`` says which definition applies (``all-active`` or
``per-worker``). ``slowest_worker_rate``, the smallest of those rates, is given for every run (a figure that
exists in both cases, for comparing runs across them).

**Speedup** S(n) = throughput(n) / throughput(1) of the same algorithm, tag and hardware; scaling
efficiency S(n)/n; and throughput against ``sync`` at the same n, tag and hardware.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..results import Run
from .selection import KEYS, labels, ok_runs

Z95 = 1.96
MIN_WINDOWS, MAX_WINDOWS, STEPS_PER_WINDOW = 5, 10, 5
NAN = {"throughput": math.nan, "ci_low": math.nan, "ci_high": math.nan, "window_s": math.nan,
       "window_samples": 0, "workers": 0, "window": "", "slowest_worker_rate": math.nan}


def timed_window(steps: pd.DataFrame) -> tuple[float, float]:
    """(start, end) seconds of the timed window of worker step records (columns rank, t, step_s, warmup)."""
    warm = steps["warmup"].fillna(False).astype(bool) if "warmup" in steps else pd.Series(False, index=steps.index)
    starts = steps.loc[warm].groupby("rank")["t"].max() if warm.any() else pd.Series(dtype=float)
    start = float(starts.max()) if len(starts) else float((steps["t"] - steps["step_s"]).min())
    end = float(steps.groupby("rank")["t"].max().min())
    return start, end


def window_throughput(steps: pd.DataFrame, windows: int | None = None) -> dict:
    """Throughput of worker step records (columns rank, t, step_s, samples, warmup) with its 95% interval."""
    if steps.empty:
        return dict(NAN)
    start, end = timed_window(steps)
    inside = steps[(steps["t"] > start) & (steps["t"] <= end)]
    span = end - start
    if span <= 0 or inside.empty:
        return per_worker_throughput(steps)
    workers = int(steps["rank"].nunique())
    if windows is None:
        windows = int(min(len(inside) // (workers * STEPS_PER_WINDOW), MAX_WINDOWS))
    value = float(inside["samples"].sum()) / span
    out = {"throughput": value, "ci_low": math.nan, "ci_high": math.nan, "window_s": span,
           "window_samples": int(inside["samples"].sum()), "workers": workers, "window": "all-active",
           **_rates(worker_rates(steps))}
    if windows < MIN_WINDOWS:
        return out  # too few steps for an interval from sub-windows
    edges = np.linspace(start, end, windows + 1)
    bins = np.clip(np.searchsorted(edges, inside["t"].to_numpy(), side="left") - 1, 0, windows - 1)  # (a, b]
    per = np.bincount(bins, weights=inside["samples"].to_numpy(dtype=float), minlength=windows)
    rates = per / (span / windows)
    half = Z95 * float(np.std(rates, ddof=1))
    return {**out, "ci_low": float(np.mean(rates)) - half, "ci_high": float(np.mean(rates)) + half}


def worker_rates(steps: pd.DataFrame) -> dict[int, float]:
    """Rank -> that worker's own rate: samples of its steps after its own warm-up ÷ the time from its warm-up's end
    to its last step (NaN when nothing is left after the warm-up)."""
    rates = {}
    for rank, g in steps.sort_values("t").groupby("rank"):
        warm = g["warmup"].fillna(False).astype(bool) if "warmup" in g else pd.Series(False, index=g.index)
        start = float(g.loc[warm, "t"].max()) if warm.any() else float((g["t"] - g["step_s"]).min())
        timed = g[g["t"] > start]
        span = float(g["t"].max()) - start
        rates[int(rank)] = float(timed["samples"].sum()) / span if not timed.empty and span > 0 else math.nan
    return rates


def per_worker_throughput(steps: pd.DataFrame) -> dict:
    """The fallback of :func:`window_throughput` when no span has every worker working: no aggregate throughput
    (NaN), each worker's own rate (``worker_rates``) and the slowest of them."""
    rates = worker_rates(steps)
    return {**NAN, "workers": len(rates), "window": "per-worker", **_rates(rates)}


def _rates(rates: dict[int, float]) -> dict:
    finite = [v for v in rates.values() if math.isfinite(v)]
    return {"worker_rates": rates, "slowest_worker_rate": min(finite) if finite else math.nan}


def throughput(run: Run) -> dict:
    """:func:`window_throughput` of one run's worker step records."""
    return window_throughput(run.steps)


def throughput_table(runs: list[Run]) -> pd.DataFrame:
    """Throughput of every ``ok`` run, one row per run (labels + :func:`throughput`)."""
    rows = [{**labels(r), **throughput(r)} for r in ok_runs(runs)]
    for row in rows:  # each worker's own rate, as "rank:rate" items
        row["worker_rates"] = " ".join(f"{k}:{v:.4g}" for k, v in sorted((row.get("worker_rates") or {}).items()))
    cols = [*KEYS, "repeat", *NAN, "worker_rates"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)


def speedup_table(tp: pd.DataFrame, reference: str = "sync") -> pd.DataFrame:
    """Add ``speedup`` S(n) = tp(n)/tp(1), ``speedup_over`` (which np=1 run: the algorithm's own, else the
    ``reference``'s, as most algorithms at one worker are plain SGD; NaN where neither ran), ``efficiency`` S(n)/n
    and ``vs_<reference>`` = tp / tp of ``reference`` at the same n, hardware, study and tag (a study's grid point,
    e.g. a straggler setting, and repeat), else at the untagged point; NaN where it did not run."""
    df = tp.copy()
    group = ["hardware", "study", "algorithm", "tag"]
    base = df[df["np"] == 1].set_index(group)["throughput"]
    speedup, over = [], []
    for _, row in df.iterrows():
        own = base.get(tuple(row[g] for g in group), math.nan)
        ref1 = base.get((row.hardware, row.study, reference, row.tag), math.nan)
        one, name = (own, row.algorithm) if not math.isnan(own) else (ref1, reference)
        speedup.append(row.throughput / one)
        over.append(f"{name} np 1" if not math.isnan(one) else "")
    df["speedup"], df["speedup_over"] = speedup, over
    df["efficiency"] = df["speedup"] / df["np"]
    ref = df[df["algorithm"] == reference].set_index(["hardware", "study", "np", "tag"])["throughput"]
    df[f"vs_{reference}"] = [row.throughput / ref.get((row.hardware, row.study, row.np, row.tag),
                                                       ref.get((row.hardware, row.study, row.np, ""), math.nan))
                             for _, row in df.iterrows()]
    return df
