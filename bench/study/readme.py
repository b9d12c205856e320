"""The README of a published study (:func:`published_readme`), generated from the published files so that it never
disagrees with them: what ran and for how long, the claims' verdicts first, the links (aimed and measured
communication shares), the run-to-run noise of the repeated cells, the speedup over n, the temporal efficiency, what
each figure shows, and what an emulated study cannot show. Only ``publish`` runs it: no DVC stage depends on it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ..metrics.report import claims_lines, interval_text, md_table, read_table
from ..metrics.stats import CAPTION, INTERVAL
from .spec import Study

FIGURES = {
    "speedup/speedup_over_n.png": f"speedup S(n) over one worker against n with the {CAPTION} over the repeats, one "
                                  "panel per family and grid point, sync dashed, the ideal S(n) = n dotted; the legend "
                                  "gives S(n)/n at the largest n",
    "speedup/scaling.png": "throughput, S(n) and throughput over sync's at the same n, one row per grid point",
    "speedup/efficiency.png": "scaling efficiency S(n)/n per algorithm and n (median over the repeats)",
    "speedup/time_split.png": "milliseconds a step spends computing, communicating and waiting",
    "temporal_efficiency/te_grid.png": "E(a, b) over workers n and the swept hyperparameter (median over the seeds, "
                                       "95 % interval beneath; red: a learns sooner)",
    "temporal_efficiency/te_matrix.png": "E(row, column) for every pair of configurations (median over the seeds)",
    "regimes/target_heatmap.png": "time to the target accuracy, sync's over the algorithm's, per regime (median over "
                                  "the repeats; > 1: reaches the target sooner than sync)",
    "regimes/speedup_heatmap.png": "throughput over sync's in the same regime and repeat (median; * no span had every "
                                   "worker working: each worker's own rate)",
    "regimes/throughput_vs_link.png": "throughput against the link, one panel per family, sync dashed in each",
    "regimes/time_to_target.png": "seconds to the target per run, without and with the straggler, one panel per link "
                                  "(open triangle: never reached, drawn at its training time)",
}
"""What each published figure shows (the README's list; a figure not named here is listed without a caption)."""

NO_LATENCY = ("- **No latency** in this study's links (link_delay 0: a host-to-host round trip of about 0.01-0.07 "
              "ms): methods that send many small messages (gossip, parameter servers) would lose ground on a network "
              "with latency; the emulated cluster can delay its links (`--set link_delay=...`, docs/wan.md).")
"""The first limit of a study whose runs had no link delay."""
LATENCY = ("- **Latency is a user-space delay line** per host (NFQUEUE; `docs/results/link/`: round trips within 10 % "
           "+ 0.1 ms of 2 x link_delay, rates held): no loss, no reordering and no jitter beyond the machine's own.")
"""The first limit of a study whose runs had a link delay."""
LIMITS = [
    "- **Scaled-down hosts**: every emulated host (the parameter server's included) runs inside a fixed share of one "
    "core of a 2-core VM, its communication threads included; real hosts have whole machines, so the compute and the "
    "per-message costs here are not a cluster's, and the communication share of the fastest link has a floor set by "
    "those threads (`tables/links.csv`).",
    "- **One workload**: what wins here wins for this model, batch and dataset; another communication-to-compute ratio "
    "moves the regimes, which is why the links are calibrated by the share they give `sync`.",
    "- Cells with one run carry no interval and no verdict: the heatmaps show them as medians of one.",
]
"""What an emulated study cannot show (the README's last section)."""


def speedup_lines(dest: Path) -> list[str]:
    """The README's speedup-over-n section, from ``tables/speedup_summary.csv``: S(n) per grid point, algorithm and
    worker count as median [95 % interval] over the repeats, and the scaling efficiency S(n)/n at the largest n; none
    where no run at more than one worker had a one-worker throughput to divide by."""
    sm = read_table(dest / "tables" / "speedup_summary.csv")
    if sm.empty:
        return []
    sm["point"] = sm["point"].fillna("").astype(str)
    sp = sm[sm["metric"] == "speedup"].dropna(subset=["mean"])
    if not (sp["np"] > 1).any():
        return []
    ns = sorted(sp["np"].unique())
    eff = sm[sm["metric"] == "efficiency"].set_index(["point", "algorithm", "np"])
    rows = []
    for (pt, algo), g in sp.groupby(["point", "algorithm"], sort=True):
        by_n = g.set_index("np")
        row = {"grid point": pt or "(none)", "algorithm": algo, "repeats": int(g["n"].min())}
        for n in ns:
            row[f"S({n})"] = (interval_text(by_n.at[n, "mean"], by_n.at[n, "ci_low"], by_n.at[n, "ci_high"])
                              if n in by_n.index else "")
        top = int(g["np"].max())
        e = eff.loc[(pt, algo, top)] if (pt, algo, top) in eff.index else None
        row["S(n)/n at the largest n"] = (f"{interval_text(e['mean'], e['ci_low'], e['ci_high'])} (n = {top})"
                                          if e is not None else "")
        rows.append(row)
    table = pd.DataFrame(rows)
    return ["", "## Speedup over n (`tables/speedup_summary.csv`, `figures/speedup/speedup_over_n.png`)", "",
            "S(n) = throughput at n workers / throughput at one worker (the algorithm's own, else `sync`'s; paired on "
            "the repeat and the grid point), geometric mean [95 % t-interval] over the repeats; a "
            "method at one worker is plain SGD, so S(1) is `sync`'s. Throughput measures hardware efficiency only: "
            "what each sample is worth to the model is in the time-to-target figures.", ""] + \
        md_table(table, list(table.columns))


def te_lines(dest: Path) -> list[str]:
    """The README's temporal-efficiency section, from ``tables/te_grid.csv`` and ``metrics/temporal_efficiency.json``:
    E(a, b) per hardware, workers and hyperparameter value, geometric mean [95 % t-interval] over the seeds and the winner; none
    where no configuration ran both algorithms."""
    grid, metrics = read_table(dest / "tables" / "te_grid.csv"), dest / "metrics" / "temporal_efficiency.json"
    if grid.empty or not metrics.is_file() or grid["E"].isna().all():
        return []
    ab = json.loads(metrics.read_text()).get("grid") or {}
    a, b = ab.get("a", "a"), ab.get("b", "b")
    param = grid.columns[2]
    grid["E [95 % interval]"] = [interval_text(e, lo, hi) for e, lo, hi in zip(grid["E"], grid["ci_low"], grid["ci_high"])]
    return ["", f"## Temporal efficiency E({a}, {b}) (`tables/te_grid.csv`, `figures/temporal_efficiency/te_grid.png`)",
            "", f"E = the area under {a}'s training-accuracy curve over wall-clock time / {b}'s, up to the shorter run's "
                f"end (Hermans 2017; > 1: {a} learns sooner), per seed, then the geometric mean over the seeds with its 95 % "
                f"t-interval; the winner is named only where the interval excludes 1.", ""] + \
        md_table(grid, ["hardware", "np", param, "E [95 % interval]", "n", "winner"])


def _time_text(span_s: float, busy_s: float) -> str:
    if math.isfinite(busy_s) and busy_s < span_s - 60:
        return (f"**{busy_s / 60:.0f} min** (the time covered by at least one run, each run's own wall time from its "
                f"launch record, a job's start-up not counted; {span_s / 60:.0f} min from the first start to the last "
                f"end)")
    return f"**{span_s / 60:.0f} min** from the first start to the last end" if math.isfinite(span_s) else "an unknown time"


def provenance_lines(runs: pd.DataFrame) -> list[str]:
    """Registration and provenance, from runs.csv: under which registration the runs ran, how many a verdict may use
    and why the others may not, the interval every verdict uses."""
    if runs.empty or "judged" not in runs:
        return []
    regs = sorted({r for r in runs["registration"].fillna("").astype(str) if r})
    why = runs.loc[runs["judged"].fillna("") != "", "judged"].value_counts()
    dirty = int((runs["dirty"] == True).sum())  # noqa: E712 (a column of True / False / None)
    lines = ["", "## Registration and provenance (`runs.csv`)", "",
             (f"The runs ran under registration{'s' if len(regs) > 1 else ''} {', '.join(f'`{r}`' for r in regs)} "
              f"(`pipelines/registrations/`: the claims' rules, cells, seeds and metrics, committed before the first "
              f"judged run)" if regs else "The study has no registration: its verdicts are exploratory")
             + f"; {int((runs['judged'].fillna('') == '').sum())} of {len(runs)} runs may carry a verdict, "
             f"{dirty} ran from a dirty tree. Every run records its commit, whether the tree was dirty, the hash of "
             f"its configuration and its registration; intervals are {INTERVAL}."]
    return lines + ([""] + [f"- {n} run(s): {w}" for w, n in why.items()] if len(why) else [])


def _delayed(dest: Path) -> bool:
    """Whether any of the study's links had a delay (``tables/links.csv``'s ``link_delay``; absent: none)."""
    lk = read_table(dest / "tables" / "links.csv")
    return "link_delay" in lk and bool((lk["link_delay"].fillna("0ms").astype(str) != "0ms").any())


def _links_lines(dest: Path, calibrated: bool) -> list[str]:
    lk = read_table(dest / "tables" / "links.csv")
    if lk.empty:
        return []
    return ["", f"## The links (`tables/links.csv`{', `calibration.json`' if calibrated else ''})", "",
            "Each link's rate, "
            + ("the communication share of `sync`'s step it was calibrated for (from the calibration run's compute and "
               "bytes a step, bandwidth only) " if calibrated else
               "the share aimed for (none: the rates are fixed in the study's file) ")
            + "and the share measured in `sync`'s runs without a straggler ((communication + wait) / step over the "
              "timed steps).", ""] + md_table(lk, [c for c in ["link", "link_delay", "share_aimed", "np", "mean", "ci_low", "ci_high", "n"]
                           if c in lk])


def _noise_lines(dest: Path) -> list[str]:
    sm = read_table(dest / "tables" / "regimes_summary.csv")
    if sm.empty:
        return []
    tp = sm[(sm["metric"] == "throughput") & (sm["n"] >= 3)]
    width = ((tp["ci_high"] - tp["ci_low"]) / tp["mean"]).dropna()
    if not len(width):
        return []
    return ["", "## Run-to-run noise", "",
            f"Over the {len(width)} cells with 3 or more repeats, the {CAPTION} throughput spans "
            f"{100 * width.median():.0f} % of the geometric mean (median over the cells; largest {100 * width.max():.0f} %). A "
            f"difference between single runs smaller than that is noise; the verdicts above use the repeats."]


def regenerated(name: str) -> str:
    """The published README's sentence on what is not committed (the report and the figures, regenerable from the
    runs) and the commands that make it again."""
    return (f"`report.html` and `figures/` gather the tables and figures; they are not committed (regenerable, except "
            f"a figure another README shows): `dvc exp run -S study={name}` makes the runs and the analysis again, "
            f"then the command above copies them here.")


def published_readme(study: Study, to: Path, runs: pd.DataFrame, span_s: float, busy_s: float = float("nan"),
                     files: Path | None = None) -> str:
    """The README of a published study (module docstring) for the folder ``to``, from the files in ``files``
    (default ``to``: publish writes them elsewhere first) and ``runs`` (runs.csv's frame), the runs having taken
    ``span_s`` from the first start to the last end and ``busy_s`` covered by at least one run. Notes of one's own go
    in ``NOTES.md`` beside it, which publish leaves alone."""
    dest = Path(files or to)
    commits = sorted({c for c in runs.get("git_commit", pd.Series(dtype=str)).dropna()})
    ok = int((runs["status"] == "ok").sum()) if len(runs) else 0
    calibrated = (dest / "calibration.json").is_file()  # a study whose links are calibrated (share<s>)
    lines = [f"# Reference results: study `{study.name}`", "", study.spec.description, "",
             f"Generated by `python -m bench study publish --study {study.name} --to {to}` from the study's runs "
             f"(commit{'s' if len(commits) > 1 else ''} {', '.join(f'`{c[:7]}`' for c in commits) or 'unknown'}): "
             f"{len(runs)} runs, {ok} ok (`runs.csv`); the runs took {_time_text(span_s, busy_s)}"
             f". {regenerated(study.name)} `system.md` describes the machine and each link"
             + (", `calibration.json` the calibration run." if calibrated
                else "; the study has no calibration run (its links and target are fixed in the study's file).")]
    if (dest / "NOTES.md").is_file():
        lines += ["", "What surprised us, and why: [NOTES.md](NOTES.md)."]
    lines += provenance_lines(runs)
    claims = claims_lines(read_table(dest / "tables" / "claims.csv"))
    if claims:
        lines += ["", "## The seed papers' claims (`tables/claims.csv`)", "", *claims]
    lines += _links_lines(dest, calibrated) + _noise_lines(dest) + speedup_lines(dest) + te_lines(dest)
    figures = sorted(str(p.relative_to(dest / "figures")) for p in (dest / "figures").glob("*/*.png"))
    if figures:
        lines += ["", "## Figures", ""]
        lines += [f"- `figures/{f}`" + (f": {FIGURES[f]}" if f in FIGURES else "") for f in figures]
    delayed = _delayed(dest)
    lines += ["", "## What these results cannot show", "", LATENCY if delayed else NO_LATENCY, *LIMITS, ""]
    return "\n".join(lines)
