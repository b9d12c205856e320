"""Which runs enter an aggregate, and how they are labelled.

Only runs whose status is ``ok`` are aggregated or plotted (:func:`ok_runs`); :func:`status_table`
lists every run with its status, so a failed run is reported, never dropped silently.
"""

from __future__ import annotations

import pandas as pd

from .. import BenchError
from ..algorithms import get_algorithm
from ..layout import run_key
from ..results import Run

KEYS = ["hardware", "study", "algorithm", "np", "tag"]


def ok_runs(runs: list[Run]) -> list[Run]:
    """The runs that finished with status ``ok`` (the only ones aggregated or plotted)."""
    return [r for r in runs if r.status == "ok"]


def labels(run: Run) -> dict:
    """The run's identifying columns (:data:`KEYS`) and its ``repeat``."""
    return {**{k: run.label[k] for k in KEYS}, "repeat": run.label["repeat"]}


def key(run: Run) -> str:
    """The run's key inside its study: ``<algo>-np<N>[-<tag>]@<hardware>``."""
    lab = run.label
    return run_key(lab["algorithm"], lab["np"], lab["tag"], lab["hardware"])


def frame_keys(df: pd.DataFrame) -> pd.Series:
    """:func:`key` of every row of a frame with the :data:`KEYS` columns."""
    return pd.Series([run_key(a, n, t if isinstance(t, str) else "", h)
                      for a, n, t, h in zip(df["algorithm"], df["np"], df["tag"], df["hardware"])], index=df.index,
                     dtype=object)


def point_of(run: Run) -> str:
    """The run's grid point: its tag without the repeat's ``r<k>`` (:func:`point`)."""
    return point(run.label["tag"], run.label["repeat"])


def point_key(run: Run) -> str:
    """The key of the run's configuration: :func:`key` without the repeat (what a study's repeats of one grid point
    share, e.g. ``sync-np2@local`` for ``sync-np2-r1@local``)."""
    lab = run.label
    return run_key(lab["algorithm"], lab["np"], point_of(run), lab["hardware"])


def frame_grid_points(df: pd.DataFrame) -> pd.Series:
    """:func:`point` of every row of a frame with a ``tag`` column (and ``repeat``, if it has one; a missing tag is
    the empty one): the one place a frame's grid points are built."""
    tags = df["tag"] if "tag" in df else pd.Series("", index=df.index)
    reps = df["repeat"].fillna(0) if "repeat" in df else pd.Series(0, index=df.index)
    return pd.Series([point(t, int(k)) for t, k in zip(tags, reps)], index=df.index, dtype=object)


def frame_points(df: pd.DataFrame) -> pd.Series:
    """:func:`point_key` of every row of a frame with the :data:`KEYS` columns (and ``repeat``, if it has one)."""
    return pd.Series([run_key(a, n, pt, h) for a, n, pt, h
                      in zip(df["algorithm"], df["np"], frame_grid_points(df), df["hardware"])], index=df.index, dtype=object)


FAMILIES = ("allreduce", "parameter-server", "decentralised")
"""The registry's families in the order the figures show them (an algorithm class's ``family``)."""


def family(algorithm: str) -> str:
    """The family of a registered algorithm (its class's ``family``), ``other`` for a name the registry lacks."""
    try:
        return get_algorithm(algorithm).family
    except BenchError:
        return "other"


def point(tag: str, repeat: int) -> str:
    """A run's grid point: its tag without the repeat's ``r<k>`` (bench.study.plan.repeat_tag): what its repeats share."""
    tag = tag if isinstance(tag, str) else ""
    if tag == f"r{repeat}":
        return ""
    return tag[: -len(f"-r{repeat}")] if tag.endswith(f"-r{repeat}") else tag


def timed_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Step records without the warm-up steps."""
    if steps.empty or "warmup" not in steps:
        return steps
    return steps[~steps["warmup"].fillna(False).astype(bool)]


def status_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: its labels, status and, for a failed run, the reason."""
    rows = []
    for r in runs:
        rows.append({**labels(r), "status": r.status, "reason": r.summary.get("reason", ""), "wall_s": r.summary.get("wall_s"),
                     "final_accuracy": r.summary.get("final_accuracy"), "run": str(r.path)})
    cols = [*KEYS, "status", "reason", "wall_s", "final_accuracy", "run"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)
