"""Convergence of the model that matters: time-to-accuracy (DAWNBench / MLPerf style), accuracy after a
wall-clock budget, and the held-out evaluation points behind ``dvc plots``."""

from __future__ import annotations

import math

import pandas as pd

from ..layout import run_key
from ..results import Run
from .selection import KEYS, labels, ok_runs


def time_to_accuracy(evals: pd.DataFrame, target: float, by: str = "t") -> float:
    """First ``by`` (seconds ``t`` or ``epoch``) at which held-out accuracy reaches ``target``; NaN if never."""
    if evals.empty:
        return math.nan
    ev = evals.sort_values(by)
    hit = ev[ev["accuracy"] >= target]
    return float(hit[by].iloc[0]) if not hit.empty else math.nan


def accuracy_after_time(evals: pd.DataFrame, seconds: float) -> float:
    """Held-out accuracy of the last evaluation at or before ``seconds``; NaN if none."""
    if evals.empty:
        return math.nan
    ev = evals[evals["t"] <= seconds].sort_values("t")
    return float(ev["accuracy"].iloc[-1]) if not ev.empty else math.nan


def convergence_table(runs: list[Run], target: float, seconds: float) -> pd.DataFrame:
    """Per ``ok`` run: final held-out accuracy and loss, time and epochs to ``target``, accuracy after ``seconds``."""
    rows = []
    for r in ok_runs(runs):
        rows.append({**labels(r), "final_accuracy": r.summary.get("final_accuracy"),
                     "final_loss": r.summary.get("final_loss"), "wall_s": r.summary.get("wall_s"),
                     f"seconds_to_{target:g}": time_to_accuracy(r.evals, target, "t"),
                     f"epochs_to_{target:g}": time_to_accuracy(r.evals, target, "epoch"),
                     f"accuracy_after_{seconds:g}s": accuracy_after_time(r.evals, seconds)})
    return pd.DataFrame(rows).sort_values(KEYS, ignore_index=True) if rows else pd.DataFrame(columns=KEYS)


def eval_points(evals: pd.DataFrame) -> pd.DataFrame:
    """Held-out evaluations as (run, t, epoch, accuracy, loss) rows: the data of ``dvc plots``."""
    if evals.empty:
        return pd.DataFrame(columns=["run", "t", "epoch", "accuracy", "loss"])
    run = [run_key(a, n, t if isinstance(t, str) else "", h)
           for a, n, t, h in zip(evals["algorithm"], evals["np"], evals["tag"], evals["hardware"])]
    return pd.DataFrame({"run": run, "t": evals["t"], "epoch": evals["epoch"], "accuracy": evals["accuracy"],
                         "loss": evals["loss"]}).sort_values(["run", "t"], ignore_index=True)
