"""Staleness τ of the asynchronous algorithms: one row per commit, and its distribution per run."""

from __future__ import annotations

import pandas as pd

from ..results import Run
from .selection import KEYS, labels, ok_runs


def staleness_frame(runs: list[Run]) -> pd.DataFrame:
    """Every recorded tau (one row per commit) of the ``ok`` runs that record staleness."""
    frames = []
    for r in ok_runs(runs):
        s = r.steps
        if s.empty or "staleness" not in s or s["staleness"].isna().all():
            continue
        df = s.loc[s["staleness"].notna(), ["rank", "step", "staleness"]].copy()
        for k, v in reversed(labels(r).items()):
            df.insert(0, k, v)
        frames.append(df)
    cols = [*KEYS, "repeat", "rank", "step", "staleness"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def staleness_table(stale: pd.DataFrame) -> pd.DataFrame:
    """Mean, median, 95th percentile and max of tau per run (from :func:`staleness_frame`)."""
    if stale.empty:
        return pd.DataFrame(columns=[*KEYS, "commits", "mean", "median", "p95", "max"])
    g = stale.groupby(KEYS)["staleness"]
    return pd.DataFrame({"commits": g.size(), "mean": g.mean(), "median": g.median(),
                         "p95": g.quantile(0.95), "max": g.max()}).reset_index()
