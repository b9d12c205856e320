"""Convergence of the model that matters: time-to-accuracy (DAWNBench / MLPerf style, interpolated between evaluated
snapshots, censored at the training time when never reached), accuracy after a wall-clock budget, and the held-out
evaluation points behind ``dvc plots``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..layout import run_key
from ..results import Run
from .selection import KEYS, labels, ok_runs


def running_accuracy(evals: pd.DataFrame, window: int = 1, by: str = "t") -> tuple[np.ndarray, np.ndarray]:
    """(``by``, accuracy) of the evaluations in order of ``by``, the accuracy the running mean of the last ``window``
    evaluations (fewer at the start: the mean of those there are); ``window`` 1 is the evaluations themselves."""
    ev = evals.sort_values(by)
    acc = ev["accuracy"].astype(float)
    if window > 1:
        acc = acc.rolling(window, min_periods=1).mean()
    return ev[by].to_numpy(dtype=float), acc.to_numpy(dtype=float)


def time_to_accuracy(evals: pd.DataFrame, target: float, by: str = "t", window: int = 1) -> float:
    """``by`` (seconds ``t`` on the job's common clock, or ``epoch``) at which held-out accuracy reaches ``target``,
    interpolated linearly between the last evaluation below it and the first at or above it (the evaluations are
    stamped when the evaluated state existed); the first evaluation's ``by`` when that one already reaches it (no
    evaluation before it to interpolate from); NaN if never reached (see :func:`time_to_target`: censored).

    With ``window`` k > 1 the accuracy compared is the running mean of the last k evaluations
    (:func:`running_accuracy`), so that one evaluation above the target between ones below it does not decide: the
    time is when that mean first reaches it, interpolated the same way (a study's ``target_window``, registered)."""
    if evals.empty or not math.isfinite(target):
        return math.nan
    if int(window) < 1:
        raise ValueError(f"window must be a number of evaluations >= 1, got {window!r}")
    x, acc = running_accuracy(evals, int(window), by)
    hits = np.flatnonzero(acc >= target)
    if not hits.size:
        return math.nan
    i = int(hits[0])
    if i == 0:
        return float(x[0])
    return float(x[i - 1] + (target - acc[i - 1]) / (acc[i] - acc[i - 1]) * (x[i] - x[i - 1]))


def time_to_target(evals: pd.DataFrame, target: float, train_s: float | None, window: int = 1) -> tuple[float, bool]:
    """(seconds, censored): :func:`time_to_accuracy` in seconds (over ``window`` evaluations); a run that never
    reaches ``target`` is censored at its training time (its time to target is > ``train_s``, or > its last
    evaluation's ``t`` when that is later: a parameter server's final centre can postdate rank 0's end): (that time,
    True). Censored runs stay in every table."""
    t = time_to_accuracy(evals, target, "t", window)
    if math.isfinite(t):
        return t, False
    last = float(evals["t"].max()) if not evals.empty else math.nan
    bound = max((v for v in (train_s, last) if v is not None and math.isfinite(float(v))), default=math.nan)
    return float(bound), True


def accuracy_after_time(evals: pd.DataFrame, seconds: float) -> float:
    """Held-out accuracy of the last evaluation at or before ``seconds``; NaN if none."""
    if evals.empty:
        return math.nan
    ev = evals[evals["t"] <= seconds].sort_values("t")
    return float(ev["accuracy"].iloc[-1]) if not ev.empty else math.nan


def convergence_table(runs: list[Run], target: float, seconds: float, window: int = 1) -> pd.DataFrame:
    """Per ``ok`` run: repeat, final held-out accuracy and loss, time (censored at the training time when never
    reached: ``censored``) and epochs to ``target`` (the running mean over ``window`` evaluations reaching it:
    :func:`time_to_accuracy`), accuracy after ``seconds``."""
    rows = []
    for r in ok_runs(runs):
        seconds_to, censored = time_to_target(r.evals, target, r.summary.get("train_s"), window)
        rows.append({**labels(r), "final_accuracy": r.summary.get("final_accuracy"),
                     "final_loss": r.summary.get("final_loss"), "wall_s": r.summary.get("wall_s"),
                     "train_s": r.summary.get("train_s"), f"seconds_to_{target:g}": seconds_to, "censored": censored,
                     f"epochs_to_{target:g}": time_to_accuracy(r.evals, target, "epoch", window),
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
