"""The report's view of a study: which runs are ok, failed or incomplete, what they ran on, the summary table, and
the text renderings the report notebook and the published README share (an interval, a Markdown table, the claims'
verdicts: :func:`claims_lines`, the one renderer of claims.csv)."""

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


def interval_text(median: float, low: float, high: float, fmt: str = ".2f") -> str:
    """``median [low, high]`` (``median`` alone where the interval is undefined; empty where the median is)."""
    if not math.isfinite(median):
        return ""
    text = format(median, fmt)
    return f"{text} [{format(low, fmt)}, {format(high, fmt)}]" if math.isfinite(low) and math.isfinite(high) else text


def _interval(values, fmt: str) -> str:
    d = stats.describe(values)
    return interval_text(d["median"], d["ci_low"], d["ci_high"], fmt)


def md_table(df: pd.DataFrame, columns: list[str]) -> list[str]:
    """The lines of a Markdown table of ``df[columns]`` (floats to 3 significant digits, NaN empty)."""
    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.3g}"
        return str(v).replace("|", "/").replace("\n", " ")

    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in df[columns].itertuples(index=False)]


def claims_lines(claims: pd.DataFrame, evidence: bool = False) -> list[str]:
    """claims.csv (:func:`bench.metrics.claims.claims`) in Markdown: one sentence where the study tests no claim,
    else how a verdict is reached and the table (source, claim, verdict, effect with its interval, n, rule, and with
    ``evidence`` every test). None without claims."""
    if claims.empty:
        return []
    if (claims["verdict"] == "not testable here").all():
        return ["This study has none of the cells the claims' rules test with 3 or more repeats, so every claim is "
                f"`not testable here` ({' / '.join(dict.fromkeys(claims['source']))}). The regimes study tests them "
                "(`docs/results/regimes/`)."]
    effect = "effect [95 % interval]"
    c = claims.assign(**{effect: [("x" + text) if (text := interval_text(e, lo, hi)) else ""
                                  for e, lo, hi in zip(claims["effect"], claims["ci_low"], claims["ci_high"])]})
    return ["Each claim is a rule declared before the runs (`bench/metrics/claims.py`): a paired ratio over the "
            "repeats (> 1 favours the claim), judged on the cells with 3 or more repeats, Holm-corrected across its "
            "tests. The evidence column of the table gives every test.", ""] + \
        md_table(c, ["source", "claim", "verdict", effect, "n", "rule", *(["evidence"] if evidence else [])])


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
