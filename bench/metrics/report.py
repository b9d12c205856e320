"""The report's view of a study: which runs are ok, failed or incomplete, and what they ran on."""

from __future__ import annotations

import math

import pandas as pd

from ..results import Run
from . import stats
from .selection import FAMILIES, family, frame_keys, point


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


def _interval(values, fmt: str) -> str:
    d = stats.describe(values)
    if not d["n"]:
        return ""
    text = format(d["median"], fmt)
    if math.isfinite(d["ci_low"]) and math.isfinite(d["ci_high"]):
        text += f" [{format(d['ci_low'], fmt)}, {format(d['ci_high'], fmt)}]"
    return text


def summary_table(speedup: pd.DataFrame, convergence: pd.DataFrame) -> pd.DataFrame:
    """The report's first table: one row per configuration (hardware, algorithm, workers, grid point) with the
    median over its repeats and the 95 % bootstrap interval of the median (none below 3 repeats) of throughput,
    speedup S(n) (over ``speedup_over``), time to the target (``seconds_to_<target>`` of the convergence table;
    ``censored`` counts the repeats that never reached it, whose time is their training time, a lower bound) and
    final held-out accuracy. From the analysis notebooks' speedup.csv and convergence.csv."""
    cols = ["family", "algorithm", "np", "point", "hardware", "repeats", "samples/s", "speedup", "speedup over",
            "seconds to target", "censored", "final accuracy"]
    if speedup.empty:
        return pd.DataFrame(columns=cols)
    target = next((c for c in convergence.columns if c.startswith("seconds_to_")), None)
    on = ["hardware", "algorithm", "np", "tag"]
    conv = convergence[[*on, *([target] if target else []), "censored", "final_accuracy"]] if len(convergence) else None
    df = speedup.merge(conv, on=on, how="left") if conv is not None else speedup.assign(censored=False)
    df["point"] = [point(t if isinstance(t, str) else "", int(k)) for t, k in zip(df["tag"], df["repeat"])]
    rows = []
    for (hw, algo, n, pt), g in df.groupby(["hardware", "algorithm", "np", "point"], sort=False):
        rows.append({"family": family(algo), "algorithm": algo, "np": n, "point": pt, "hardware": hw,
                     "repeats": len(g), "samples/s": _interval(g["throughput"], ".0f"),
                     "speedup": _interval(g["speedup"], ".2f"),
                     "speedup over": ", ".join(sorted(set(g["speedup_over"].dropna()) - {""})) if "speedup_over" in g else "",
                     "seconds to target": _interval(g[target], ".2f") if target else "",
                     "censored": int(g["censored"].fillna(False).astype(bool).sum()),
                     "final accuracy": _interval(g["final_accuracy"], ".3f") if "final_accuracy" in g else ""})
    out = pd.DataFrame(rows, columns=cols)
    order = {f: i for i, f in enumerate(FAMILIES)}
    return out.sort_values(["family", "algorithm", "np", "point"], key=lambda s: s.map(order).fillna(len(order))
                           if s.name == "family" else s, ignore_index=True)
