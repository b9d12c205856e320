"""The metric files DVC declares (``results/<study>/metrics/*.json``): ``dvc metrics show`` reads them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..results import Run, write_json_atomic
from .selection import KEYS, frame_keys, key, ok_runs
from .temporal import win_share
from .throughput import throughput


def study_metrics(runs: list[Run]) -> dict:
    """Metrics file content for DVC: per run (keyed ``<algo>-np<N>[-tag]@<hardware>``) status, throughput and
    final held-out accuracy / loss; failed runs are present with their status and no figures."""
    tp = {key(r): throughput(r)["throughput"] for r in ok_runs(runs)}
    out = {}
    for r in runs:
        k = key(r)
        entry = {"status": r.status}
        if r.status == "ok":
            entry.update(throughput=_finite(tp[k]), final_accuracy=_finite(r.summary.get("final_accuracy")),
                         final_loss=_finite(r.summary.get("final_loss")), wall_s=_finite(r.summary.get("wall_s")))
        out[k] = entry
    return {"runs": dict(sorted(out.items())), "ok": sum(r.status == "ok" for r in runs),
            "failed": sum(r.status != "ok" for r in runs)}


def convergence_metrics(conv: pd.DataFrame) -> dict:
    """DVC metrics of a :func:`convergence_table`: per run, every numeric column."""
    out = {}
    for k, (_, row) in zip(frame_keys(conv), conv.iterrows()):
        out[k] = {c: _finite(row[c]) for c in conv.columns if c not in KEYS and _is_num(row[c])}
    return {"runs": out}


def te_metrics(matrix: pd.DataFrame, grid: pd.DataFrame, a: str, b: str, target: float | None = None) -> dict:
    """DVC metrics of the temporal-efficiency notebook: E per ordered pair, the grid's win share, and the horizon E
    integrates to (the slower run's time to ``target``, or the runs' whole span)."""
    pairs = {f"{i}__vs__{j}": _finite(matrix.loc[i, j]) for i in matrix.index for j in matrix.columns if i != j}
    horizon = (f"up to the slower run's time to {target:g} held-out accuracy" if target is not None and math.isfinite(target)
               else "the shorter run's whole span")
    return {"pairs": pairs, "horizon": horizon, "grid": {"a": a, "b": b, "configurations": int(grid["E"].notna().sum()),
                                     "a_win_share": _finite(win_share(grid, a)) if len(grid) else None}}


def write_metrics(obj: dict, path: str | Path) -> Path:
    """Write a metrics dict as sorted JSON (the files DVC declares as ``metrics``)."""
    write_json_atomic(path, obj)
    return Path(path)


def _finite(v):
    return None if v is None or not math.isfinite(float(v)) else round(float(v), 6)


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
