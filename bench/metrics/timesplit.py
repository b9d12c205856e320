"""Where a step's time goes: compute, communication, waiting (mean seconds per timed step, and shares)."""

from __future__ import annotations

import math

import pandas as pd

from ..results import Run
from .selection import KEYS, labels, ok_runs, timed_steps

PARTS = ("compute_s", "comm_s", "wait_s")


def time_split(runs: list[Run]) -> pd.DataFrame:
    """Mean compute / communication / wait seconds per timed step of each ``ok`` run, and their shares."""
    rows = []
    for r in ok_runs(runs):
        steps = timed_steps(r.steps)
        if steps.empty:
            continue
        means = {c: float(steps[c].fillna(0).mean()) for c in PARTS}
        total = sum(means.values())
        rows.append({**labels(r), **means, "step_s": total,
                     **{c.replace("_s", "_share"): (v / total if total > 0 else math.nan) for c, v in means.items()}})
    cols = [*KEYS, "repeat", *PARTS, "step_s", "compute_share", "comm_share", "wait_share"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)
