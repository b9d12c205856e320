"""The report's view of a study: which runs are ok, failed or incomplete, and what they ran on."""

from __future__ import annotations

import pandas as pd

from ..results import Run
from .selection import frame_keys


def status_summary(status: pd.DataFrame) -> str:
    """One Markdown line of a :func:`bench.metrics.selection.status_table`: how many runs are ok, failed or
    incomplete, and which are not ok."""
    counts = status["status"].value_counts()
    parts = [f"**{counts.get(s, 0)} {s}**" for s in ("ok", "failed", "incomplete") if counts.get(s, 0)]
    bad = status.loc[status["status"] != "ok"]
    line = f"{len(status)} runs: " + ", ".join(parts) if parts else "no runs found"
    if not bad.empty:
        line += ". Not ok (left out of every figure and aggregate): " + ", ".join(
            f"{k} ({s})" for k, s in zip(frame_keys(bad), bad["status"]))
    return line


def hardware_table(runs: list[Run]) -> pd.DataFrame:
    """One row per hardware id: hosts (as the launcher named them), CPU, GPUs, interconnect (an emulated cluster's
    link rate, marked emulated: bandwidth only, no latency), torch / horovod versions (from system.json)."""
    rows = {}
    for r in runs:
        s = r.system
        hw = r.label["hardware"]
        if hw in rows:
            continue
        gpus = s.get("gpus") or []
        net = s.get("network") or {}
        interconnect = (f"emulated {net.get('link', '?')} (bandwidth only, latency not emulated)" if net.get("emulated")
                        else s.get("interconnect") or "")
        rows[hw] = {"hardware": hw, "hosts": ",".join(sorted(set(s.get("hosts_by_rank") or [s.get("hostname", "")]))),
                    "cpu_model": s.get("cpu_model"), "cpu_cores": s.get("cpu_cores"),
                    "gpus": f"{len(gpus)} x {gpus[0].get('name', gpus[0]) if isinstance(gpus[0], dict) else gpus[0]}" if gpus else "",
                    "interconnect": interconnect, "emulated": bool(net.get("emulated")),
                    "torch": s.get("torch"), "horovod": s.get("horovod")}
    cols = ["hardware", "hosts", "cpu_model", "cpu_cores", "gpus", "interconnect", "emulated", "torch", "horovod"]
    return pd.DataFrame(list(rows.values()), columns=cols)
