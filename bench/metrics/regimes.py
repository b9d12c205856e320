"""Which algorithm wins where: every run placed in its regime (link × straggler), compared with ``sync`` in the
same cell, and the seed papers' claims checked against the measured cells.

A run's **regime** is its link (rate and one-way delay) and its straggler setting:

- link: ``local`` (one machine, unshaped loopback), else the emulated cluster's rate (``100mbit``, ``1gbit``,
  ``10gbit``, ``unshaped``), and ``link_delay``, the emulated one-way delay between hosts (``0ms``: none; the
  regime's label names it, e.g. ``136mbit +5ms``);
- straggler: ``none``, or ``<k>x<factor>`` (k workers whose compute takes factor times as long).

Per run (a **cell** is one algorithm in one regime at one grid point; a study's repeats of it are its runs): aggregate
throughput and the slowest worker's own rate, speedup over ``sync`` in the same cell and **the same repeat** (same
hardware profile, straggler, workers and repeat: a paired ratio), which throughput window gave the figure
(``all-active``, or ``per-worker`` when no span had every worker working: then no aggregate throughput, see
:mod:`bench.metrics.throughput`), communication share of the step ((comm + wait) / step over the timed steps), time
to the target held-out accuracy (interpolated, censored at the training time when never reached: ``censored``) and
``target_speedup_vs_sync`` (sync's time to it / the run's), held-out accuracy after a fixed wall-clock budget, final
held-out accuracy, mean staleness where the algorithm records it.

Over repeats: :func:`summary` (per cell: median, olympic mean, mean with its 95 % t-interval, n) and :func:`versus_sync`
(paired ratios against sync with an outcome), :mod:`bench.metrics.stats`; :func:`winners` ranks cells by their median.
The seeds' claims are rules declared in :mod:`bench.metrics.claims`.
"""

from __future__ import annotations

import math

import pandas as pd

from .. import BenchError
from ..config import normalize_delay, parse_delay, parse_rate
from ..layout import run_key
from ..registration import judged
from ..results import Run
from . import claims as claim_rules
from . import stats
from .accuracy import accuracy_after_time, time_to_target
from .selection import KEYS, labels, ok_runs, point_of, timed_steps
from .throughput import throughput

def link_gbps(link: str) -> float:
    """The link's rate in Gbit/s (inf: unshaped, or one machine)."""
    try:
        bps = parse_rate(link) if link not in ("unshaped", "local") else 0.0
    except BenchError:  # another hardware profile's name: a machine of its own
        bps = 0.0
    return bps / 1e9 if bps else math.inf


def parse_delay_s(delay: str) -> float:
    """Seconds of a table's ``link_delay`` (``0ms`` and empty: 0), for ordering."""
    return parse_delay(delay if isinstance(delay, str) and delay != "0ms" else "")


def link_order(links) -> list[str]:
    """The links in display order: slowest first, then ``unshaped``, then ``local`` and other machines."""
    return sorted(set(links), key=lambda lk: (link_gbps(lk), lk == "local", lk))


def link_of(run: Run) -> str:
    """The emulated link's rate (``unshaped`` when not shaped), else the hardware profile's name (``local``: one
    machine over loopback; another profile is a machine of its own)."""
    launch = run.config.get("launch", {})
    if not launch.get("emulated_hosts"):
        return launch.get("hardware") or "local"
    return launch.get("link") or "unshaped"


def delay_of(run: Run) -> str:
    """The emulated one-way link delay the run had (``0ms``: none, and every run that is not on an emulated cluster):
    what system.json recorded, else what its configuration asked for."""
    recorded = ((run.system or {}).get("network") or {}).get("link_delay")
    asked = run.config.get("launch", {}).get("link_delay") or ""
    return normalize_delay(recorded if recorded is not None else asked) or "0ms"


def straggler_of(run: Run) -> str:
    train = run.config.get("train", {})
    slow, factor = train.get("slow_ranks") or [], float(train.get("slow_factor", 1.0))
    return (f"{len(slow)}x{factor:g}" + ("-cpu" if run.config.get("launch", {}).get("slow_mode") == "cpu" else "")
            if slow and factor > 1 else "none")


def regime_label(link: str, straggler: str, delay: str = "0ms") -> str:
    where = link if delay in ("", "0ms") else f"{link} +{delay}"
    return f"{where}, {'no straggler' if straggler == 'none' else 'straggler ' + straggler}"


def cell(run: Run, target: float, budget_s: float, registration: dict | None = None, window: int = 1) -> dict:
    """One run's row of :func:`cell_table`: its figures, its workload (training profile) and ``judged``: why a verdict
    may not use it under the study's ``registration`` (:func:`bench.registration.judged`; empty: it may). Its time
    to ``target`` is the running mean over ``window`` evaluations reaching it (the study's ``target_window``)."""
    steps = timed_steps(run.steps)
    step_total = float(steps["step_s"].sum()) if not steps.empty else math.nan
    comm = float((steps["comm_s"].fillna(0) + steps["wait_s"].fillna(0)).sum()) if not steps.empty else math.nan
    stale = run.steps["staleness"].dropna() if "staleness" in run.steps else pd.Series(dtype=float)
    link = link_of(run)
    tp = throughput(run)
    to_target, censored = time_to_target(run.evals, target, run.summary.get("train_s"), window)
    return {**labels(run), "workload": run.config.get("profile") or "", "point": point_of(run), "link": link,
            "link_delay": delay_of(run),
            "link_gbps": link_gbps(link), "link_share_aimed": run.config.get("launch", {}).get("link_share_aimed") or math.nan,
            "straggler": straggler_of(run),
            "throughput": tp["throughput"], "throughput_window": tp["window"],
            "slowest_worker_rate": tp["slowest_worker_rate"], "comm_share": comm / step_total if step_total else math.nan,
            "time_to_target_s": to_target, "censored": censored, "accuracy_at_budget": accuracy_after_time(run.evals, budget_s),
            "final_accuracy": run.summary.get("final_accuracy"), "mean_staleness": float(stale.mean()) if len(stale) else math.nan,
            "train_s": run.summary.get("train_s"), "judged": judged(run.system or {}, registration, run.label.get("algorithm")),
            "cpu_cores": (((run.system or {}).get("network") or {}).get("cpu") or {}).get("total_cores", math.nan)}


CELL_COLUMNS = [*KEYS, "repeat", "workload", "point", "link", "link_delay", "link_gbps", "link_share_aimed", "straggler", "throughput", "throughput_window",
                "slowest_worker_rate", "comm_share", "time_to_target_s", "censored", "accuracy_at_budget", "final_accuracy",
                "mean_staleness", "train_s", "judged", "cpu_cores"]


def cell_table(runs: list[Run], target: float, budget_s: float, reference: str = "sync",
               registration: dict | None = None, window: int = 1) -> pd.DataFrame:
    """One row per ``ok`` run with its regime, repeat and figures, and ``speedup_vs_<reference>`` against the
    reference in the same cell and repeat (paired). A censored time to target (never reached) is the run's training
    time with ``censored`` true: kept, never dropped."""
    rows = [cell(r, target, budget_s, registration, window) for r in ok_runs(runs)]
    df = pd.DataFrame(rows, columns=CELL_COLUMNS)
    if df.empty:
        df[f"speedup_vs_{reference}"] = []
        df[f"target_speedup_vs_{reference}"] = []
        df["regime"] = []
        return df
    same_cell = ["hardware", "workload", "link_delay", "straggler", "np", "point", "repeat"]
    ref = df[df["algorithm"] == reference].groupby(same_cell)[["throughput", "time_to_target_s"]].mean()
    keys = list(zip(*(df[c] for c in same_cell)))

    def of_reference(column: str) -> pd.Series:  # the reference's figure in each run's cell and repeat
        return pd.Series([ref[column].get(k, math.nan) for k in keys], index=df.index, dtype=float)

    df[f"speedup_vs_{reference}"] = df["throughput"] / of_reference("throughput")
    # time to the target, the reference's / the run's (> 1: reaches the target sooner than the reference)
    df[f"target_speedup_vs_{reference}"] = of_reference("time_to_target_s") / df["time_to_target_s"].where(df["time_to_target_s"] > 0)
    df["regime"] = [regime_label(lk, st, d) for lk, st, d in zip(df["link"], df["straggler"], df["link_delay"])]
    order = {lk: i for i, lk in enumerate(link_order(df["link"]))}
    return df.sort_values(["link", "link_delay", "straggler", "algorithm", "point", "repeat"],
                          key=lambda s: s.map(order) if s.name == "link" else s, ignore_index=True)


SUMMARY_METRICS = ["throughput", "slowest_worker_rate", "speedup_vs_sync", "time_to_target_s", "target_speedup_vs_sync",
                   "comm_share", "accuracy_at_budget", "final_accuracy", "mean_staleness"]
COMPARED_METRICS = ["throughput", "slowest_worker_rate", "time_to_target_s"]


def rewindow(cells: pd.DataFrame, evals: pd.DataFrame, target: float, window: int) -> pd.DataFrame:
    """``cells`` (a :func:`cell_table`, e.g. a published ``regimes.csv``) with ``time_to_target_s`` and ``censored``
    recomputed from the runs' held-out evaluations (``evals``: the ``eval.csv`` of
    :func:`bench.metrics.accuracy.eval_points`) as the running mean over ``window`` evaluations reaching ``target``
    (:func:`bench.metrics.accuracy.time_to_accuracy`); the paired ``target_speedup_vs_*`` columns, which depended on
    the old times, are left out. A run without evaluations there is an error naming it."""
    by_run = {run: g for run, g in evals.groupby("run")}
    out = cells.drop(columns=[c for c in cells if c.startswith("target_speedup_vs_")]).copy()
    times, censored = [], []
    for r in out.itertuples():
        run = run_key(r.algorithm, int(r.np), r.tag if isinstance(r.tag, str) else "", r.hardware)
        if run not in by_run:
            raise BenchError(f"run {run} has no held-out evaluations in the evaluation table: its time to target "
                             f"cannot be recomputed")
        t, c = time_to_target(by_run[run], target, r.train_s, window)
        times.append(t)
        censored.append(c)
    return out.assign(time_to_target_s=times, censored=censored)


def summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell (algorithm, hardware, link, link delay, straggler, np, point) and metric: n, median, olympic mean, and the
    mean over the repeats with its 95 % t-interval (NaN with fewer than 3), censored repeats of the time to target."""
    return stats.summarize(cells, ["algorithm", *claim_rules.CELL], SUMMARY_METRICS)


def versus_sync(cells: pd.DataFrame, reference: str = "sync") -> pd.DataFrame:
    """Every algorithm against ``reference`` in the same cell, paired on the repeat: effect (> 1 favours the
    algorithm: throughput ratio, or the reference's time to target over the algorithm's), interval, n, outcome."""
    return stats.compare(cells, claim_rules.CELL, COMPARED_METRICS, reference)


def medians(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: the median over its repeats of every numeric column, ``repeats`` and ``censored`` (repeats
    whose time to target is censored); what the heatmaps and :func:`winners` show (never a mix of repeats that
    does not say so)."""
    if cells.empty:
        return cells
    group = ["regime", "algorithm", *claim_rules.CELL]
    num = [c for c in cells.columns if c not in group and c not in KEYS and c != "repeat"
           and pd.api.types.is_numeric_dtype(cells[c]) and c != "censored"]
    g = cells.groupby(group, sort=False, dropna=False)
    out = g[num].median().join(g.size().rename("repeats")).join(g["censored"].sum().rename("censored"))
    out = out.join(g["throughput_window"].agg(lambda s: "per-worker" if (s == "per-worker").any() else s.iloc[0]))
    return out.reset_index()


def regimes_in(cells: pd.DataFrame) -> list[str]:
    """Regime labels in display order (slowest link first, no straggler before straggler)."""
    order = {lk: i for i, lk in enumerate(link_order(cells["link"]))}
    delays = cells["link_delay"] if "link_delay" in cells else ["0ms"] * len(cells)
    triples = sorted({(lk, st, d) for lk, st, d in zip(cells["link"], cells["straggler"], delays)},
                     key=lambda p: (order.get(p[0], 99), parse_delay_s(p[2]), p[1] != "none", p[1]))
    return [regime_label(lk, st, d) for lk, st, d in triples]


def winners(cells: pd.DataFrame) -> pd.DataFrame:
    """Per regime and worker count: the algorithm with the highest median throughput over its repeats, and the one
    reaching the target first (median time; cells with a censored repeat do not compete: their time is only a lower
    bound). Runs at different worker counts never compete (sync at np 1 against the others at np 2)."""
    rows = []
    med = medians(cells)
    for (regime, n), g in (med.groupby(["regime", "np"], sort=False) if not med.empty else []):
        fast = g.loc[g["throughput"].idxmax()] if g["throughput"].notna().any() else None
        reached = g[(g["censored"] == 0)].dropna(subset=["time_to_target_s"])
        first = reached.loc[reached["time_to_target_s"].idxmin()] if not reached.empty else None
        rows.append({"regime": regime, "np": n, "link": g["link"].iloc[0], "link_delay": g["link_delay"].iloc[0],
                     "straggler": g["straggler"].iloc[0],
                     "highest_throughput": fast["algorithm"] if fast is not None else None,
                     "throughput": fast["throughput"] if fast is not None else math.nan,
                     "first_to_target": first["algorithm"] if first is not None else None,
                     "time_to_target_s": first["time_to_target_s"] if first is not None else math.nan,
                     "sync_time_to_target_s": _value(g, "sync", "time_to_target_s"),
                     "repeats": int(g["repeats"].min())})
    out = pd.DataFrame(rows, columns=["regime", "np", "link", "link_delay", "straggler", "highest_throughput", "throughput",
                                      "first_to_target", "time_to_target_s", "sync_time_to_target_s", "repeats"])
    if out.empty:
        return out
    order = {r: i for i, r in enumerate(regimes_in(cells))}
    return out.sort_values(["regime", "np"], key=lambda s: s.map(order) if s.name == "regime" else s, ignore_index=True)


def _value(g: pd.DataFrame, algorithm: str, column: str) -> float:
    v = g.loc[g["algorithm"] == algorithm, column]
    return float(v.iloc[0]) if len(v) and pd.notna(v.iloc[0]) else math.nan


def links(cells: pd.DataFrame, reference: str = "sync") -> pd.DataFrame:
    """Per link (slowest first): its rate, the communication share of ``reference``'s step it was calibrated for
    (``share_aimed``; NaN for a link not calibrated) and the share measured in the reference's runs without a
    straggler (median, 95 % interval over the repeats, n): how far the link regimes span."""
    cols = ["link", "link_delay", "link_gbps", "share_aimed", "np", "mean", "ci_low", "ci_high", "n"]
    ref = cells[(cells["algorithm"] == reference) & (cells["straggler"] == "none")] if not cells.empty else cells
    rows = []
    for (link, delay, n), g in (ref.groupby(["link", "link_delay", "np"], sort=False) if not ref.empty else []):
        d = stats.describe(g["comm_share"])
        rows.append({"link": link, "link_delay": delay, "link_gbps": g["link_gbps"].iloc[0], "share_aimed": g["link_share_aimed"].median(),
                     "np": n, "mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "n": d["n"]})
    out = pd.DataFrame(rows, columns=cols)
    order = {lk: i for i, lk in enumerate(link_order(out["link"]))}
    return out.sort_values(["link", "link_delay", "np"], ignore_index=True,
                           key=lambda c: c.map(order) if c.name == "link" else c.map(parse_delay_s) if c.name == "link_delay" else c)


def claims(cells: pd.DataFrame, names="all", registration: dict | None = None, metrics: dict | None = None) -> pd.DataFrame:
    """The verdict of every seed claim the study names (``names``: its ``claims``) from its pre-registered rule, per
    workload, under its ``registration`` (:mod:`bench.metrics.claims`), the cells computed with ``metrics`` (target
    accuracy and window): claims.csv."""
    return claim_rules.claims(cells, claim_rules.select(names), registration, metrics)


def noise(first: pd.DataFrame, second: pd.DataFrame, column: str = "throughput") -> pd.DataFrame:
    """Run-to-run noise between two repeats of the same cells: relative difference of ``column`` per cell."""
    keys = ["algorithm", "link", "link_delay", "straggler", "np"]
    both = first[keys + [column]].merge(second[keys + [column]], on=keys, suffixes=("_a", "_b"))
    both["relative_difference"] = (both[f"{column}_b"] - both[f"{column}_a"]).abs() / both[[f"{column}_a", f"{column}_b"]].mean(axis=1)
    return both

