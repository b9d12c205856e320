"""The report's view of a study: which runs are ok, failed or incomplete, what they ran on, the summary table, and
the text renderings the report notebook and the published README share (an interval, a Markdown table, the claims'
verdicts: :func:`claims_lines`, the one renderer of claims.csv)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..results import Run
from .selection import FAMILIES, family, frame_grid_points, frame_keys


IDENTIFIERS = ("run", "git_commit", "config_hash", "registration", "judged")
"""Columns of the suite's tables that are text, never numbers: a 12-digit hash such as ``727525265e09`` is also a
valid float, and read as one it would print as ``7.275253e+17``; ``judged`` (why a run carries no verdict) is empty
in most rows, and read as a number it would be a column of NaN floats."""


def read_table(path) -> pd.DataFrame:
    """A table the suite wrote (``tables/*.csv``, ``runs.csv``) read back with its :data:`IDENTIFIERS` as text;
    empty where the file does not exist (a study whose analysis did not write it)."""
    return pd.read_csv(path, dtype=dict.fromkeys(IDENTIFIERS, str)) if Path(path).is_file() else pd.DataFrame()


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
    link rate and one-way delay, marked emulated), torch / horovod versions (from system.json)."""
    rows = {}
    for r in runs:
        s = r.system
        hw = r.label["hardware"]
        if hw in rows:
            continue
        gpus = s.get("gpus") or []
        net = s.get("network") or {}
        delay = net.get("link_delay") or "0ms"
        interconnect = (f"emulated {net.get('link', '?')}, " + (f"one-way delay {delay}" if delay != "0ms" else "no delay")
                        if net.get("emulated") else s.get("interconnect") or "")
        rows[hw] = {"hardware": hw, "hosts": ",".join(sorted(set(s.get("hosts_by_rank") or [s.get("hostname", "")]))),
                    "cpu_model": s.get("cpu_model"), "cpu_cores": s.get("cpu_cores"),
                    "gpus": f"{len(gpus)} x {gpus[0].get('name', gpus[0]) if isinstance(gpus[0], dict) else gpus[0]}" if gpus else "",
                    "interconnect": interconnect, "emulated": bool(net.get("emulated")),
                    "torch": s.get("torch"), "horovod": s.get("horovod")}
    cols = ["hardware", "hosts", "cpu_model", "cpu_cores", "gpus", "interconnect", "emulated", "torch", "horovod"]
    return pd.DataFrame(list(rows.values()), columns=cols)


def interval_text(center: float, low: float, high: float, fmt: str = ".2f") -> str:
    """``center [low, high]`` (``center`` alone where the interval is undefined; empty where the center is)."""
    if not math.isfinite(center):
        return ""
    text = format(center, fmt)
    return f"{text} [{format(low, fmt)}, {format(high, fmt)}]" if math.isfinite(low) and math.isfinite(high) else text


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
    loo = "deciding bound, one seed left out"
    # tables analysed before 2026-11-29 have no such columns (bench.metrics.claims.LOO_COLUMNS)
    lows, highs = (pd.to_numeric(c.get(k, pd.Series(math.nan, index=c.index)), errors="coerce")
                   for k in ("loo_low", "loo_high"))
    has_loo = lows.notna().any()
    if has_loo:
        c[loo] = [f"[{lo:.2f}, {hi:.2f}]" if pd.notna(lo) and pd.notna(hi) else "n/a" if pd.notna(e) else ""
                  for e, lo, hi in zip(c["effect"], lows, highs)]
    # the strongest baseline, where a rule chose it per cell (bench.metrics.claims.Rule.baseline)
    has_best = "baseline" in c and c["baseline"].astype(str).str.contains("the best of").any()
    registered = sorted({r for r in claims.get("registration", pd.Series(dtype=str)).astype(str) if r not in ("", "none", "nan")})
    how = (f"registered before the runs (registration {', '.join(f'`{r}`' for r in registered)}: "
           "`pipelines/registrations/`)" if registered else
           "not registered before these runs, so every verdict is `exploratory`")
    columns = ["source", "claim", *(["workload"] if "workload" in c and c["workload"].nunique() > 1 else []), "verdict",
               effect, *([loo] if has_loo else []), "n", *(["baseline"] if has_best else []), "rule", *(["quote"] if "quote" in c else []), *(["evidence"] if evidence else [])]
    return [f"Each claim is a rule of `bench/metrics/claims.py`, {how}: a paired ratio over the repeats (> 1 favours "
            "the claim) with its 95 % t-interval, judged on the cells with 3 or more repeats, Holm-corrected across "
            "its tests; the quote is the sentence of the paper it tests (docs/statistics.md)"
            + ("; the deciding bound's range with one seed left out at a time shows a verdict that hangs on one seed"
               if has_loo else "") + ".", ""] + md_table(c, columns)


SUMMARY_COLUMNS = ["family", "algorithm", "np", "point", "hardware", "repeats", "samples/s", "speedup", "speedup over",
                   "seconds to target", "censored", "final accuracy"]


def _interval_texts(summary: pd.DataFrame, formats: dict[str, str]) -> dict[tuple, dict]:
    """(hardware, algorithm, np, point) -> metric -> ``median [interval]`` of a :func:`bench.metrics.stats.summarize`
    table (``censored``: the censored repeats of ``time_to_target_s``), for the metrics in ``formats``."""
    out: dict[tuple, dict] = {}
    if summary.empty:
        return out
    for r in summary[summary["metric"].isin(formats)].itertuples(index=False):
        cell = out.setdefault((r.hardware, r.algorithm, int(r.np), r.point if isinstance(r.point, str) else ""), {})
        cell[r.metric] = interval_text(r.mean, r.ci_low, r.ci_high, formats[r.metric])
        if r.metric == "time_to_target_s":
            cell["censored"] = int(r.censored)
    return out


def summary_table(speedup: pd.DataFrame, speedup_summary: pd.DataFrame, regimes_summary: pd.DataFrame) -> pd.DataFrame:
    """The report's first table: one row per configuration (hardware, algorithm, workers, grid point) of speedup.csv
    (``speedup``: its repeats and which one-worker run S(n) divides by) with what the analysis tables hold for it:
    the mean over its repeats (geometric) and its 95 % t-interval (none below 3 repeats) of throughput
    and speedup S(n) (speedup_summary.csv), of the time to the target (``censored``: the repeats that never reached
    it, whose time is their training time, a lower bound) and of the final held-out accuracy (regimes_summary.csv)."""
    if speedup.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    texts = _interval_texts(speedup_summary, {"throughput": ".0f", "speedup": ".2f"})
    for cell, more in _interval_texts(regimes_summary, {"time_to_target_s": ".2f", "final_accuracy": ".3f"}).items():
        texts.setdefault(cell, {}).update(more)
    runs = speedup.assign(point=frame_grid_points(speedup))
    rows = []
    for (hw, algo, n, pt), g in runs.groupby(["hardware", "algorithm", "np", "point"], sort=False):
        t = texts.get((hw, algo, int(n), pt), {})
        rows.append({"family": family(algo), "algorithm": algo, "np": n, "point": pt, "hardware": hw,
                     "repeats": len(g), "samples/s": t.get("throughput", ""), "speedup": t.get("speedup", ""),
                     "speedup over": ", ".join(sorted(set(g["speedup_over"].dropna()) - {""})) if "speedup_over" in g else "",
                     "seconds to target": t.get("time_to_target_s", ""), "censored": t.get("censored", 0),
                     "final accuracy": t.get("final_accuracy", "")})
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    order = {f: i for i, f in enumerate(FAMILIES)}
    return out.sort_values(["family", "algorithm", "np", "point"], key=lambda s: s.map(order).fillna(len(order))
                           if s.name == "family" else s, ignore_index=True)


STATUS_COLOURS = {"ok": "", "failed": "background-color: #f8d0d0", "incomplete": "background-color: #fbe3c0",
                  "not run": "background-color: #e6e6e6"}
"""The background of a run-status row in the report (failed: red)."""


def status_html(status: pd.DataFrame) -> str:
    """The run list of :func:`bench.metrics.selection.status_table` as HTML, the rows that are not ``ok``
    highlighted (:data:`STATUS_COLOURS`)."""
    cols = [c for c in ("algorithm", "np", "tag", "hardware", "status", "reason", "wall_s", "final_accuracy") if c in status]
    return table_html(status[cols], STATUS_COLOURS)


def table_html(df: pd.DataFrame, highlight: dict[str, str] | None = None) -> str:
    """A table for the report: no index, no column that is empty in every row (NaN or ""), floats to 3 decimals;
    ``highlight``: ``status`` value -> CSS of the rows with it."""
    empty = [c for c in df.columns if df[c].isna().all() or (df[c].astype(str).str.strip() == "").all()]
    df = df.drop(columns=empty)
    style = df.style
    if highlight and "status" in df:
        style = style.apply(lambda row: [highlight.get(row["status"], "")] * len(row), axis=1)
    return style.format(precision=3, na_rep="").hide(axis="index").to_html()
