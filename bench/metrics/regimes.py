"""Which algorithm wins where: every run placed in its regime (link × straggler), compared with ``sync`` in the
same cell, and the seed papers' claims checked against the measured cells.

A run's **regime** is its link and its straggler setting:

- link: ``local`` (one machine, unshaped loopback), else the emulated cluster's rate (``100mbit``, ``1gbit``,
  ``10gbit``, ``unshaped``); only bandwidth is emulated, never latency;
- straggler: ``none``, or ``<k>x<factor>`` (k workers whose compute takes factor times as long).

Per run (a **cell** is one algorithm in one regime): aggregate throughput, speedup over ``sync`` in the
same cell (same hardware profile, straggler and workers; the mean of sync's runs there), which throughput window
gave the figure (``all-active``, or ``per-worker`` when no span had every worker working: see
:mod:`bench.metrics.throughput`), communication share of the step ((comm + wait) / step over the
timed steps), time to a fixed held-out accuracy and ``target_speedup_vs_sync`` (sync's time to it / the run's), held-out accuracy after a fixed wall-clock budget, final
held-out accuracy, mean staleness where the algorithm records it.
"""

from __future__ import annotations

import math

import pandas as pd

from ..results import Run
from .accuracy import accuracy_after_time, time_to_accuracy
from .selection import KEYS, labels, ok_runs, timed_steps
from .throughput import throughput

LINK_ORDER = ["100mbit", "1gbit", "10gbit", "unshaped", "local"]
LINK_GBPS = {"100mbit": 0.1, "1gbit": 1.0, "10gbit": 10.0}


def link_of(run: Run) -> str:
    """The emulated link's rate (``unshaped`` when not shaped), else the hardware profile's name (``local``: one
    machine over loopback; another profile is a machine of its own)."""
    launch = run.config.get("launch", {})
    if not launch.get("emulated_hosts"):
        return launch.get("hardware") or "local"
    return launch.get("link") or "unshaped"


def straggler_of(run: Run) -> str:
    train = run.config.get("train", {})
    slow, factor = train.get("slow_ranks") or [], float(train.get("slow_factor", 1.0))
    return f"{len(slow)}x{factor:g}" if slow and factor > 1 else "none"


def regime_label(link: str, straggler: str) -> str:
    return f"{link}, {'no straggler' if straggler == 'none' else 'straggler ' + straggler}"


def cell(run: Run, target: float, budget_s: float) -> dict:
    steps = timed_steps(run.steps)
    step_total = float(steps["step_s"].sum()) if not steps.empty else math.nan
    comm = float((steps["comm_s"].fillna(0) + steps["wait_s"].fillna(0)).sum()) if not steps.empty else math.nan
    stale = run.steps["staleness"].dropna() if "staleness" in run.steps else pd.Series(dtype=float)
    link = link_of(run)
    tp = throughput(run)
    return {**labels(run), "link": link, "link_gbps": LINK_GBPS.get(link, math.inf), "straggler": straggler_of(run),
            "throughput": tp["throughput"], "throughput_window": tp["window"], "comm_share": comm / step_total if step_total else math.nan,
            "time_to_target_s": time_to_accuracy(run.evals, target), "accuracy_at_budget": accuracy_after_time(run.evals, budget_s),
            "final_accuracy": run.summary.get("final_accuracy"), "mean_staleness": float(stale.mean()) if len(stale) else math.nan,
            "train_s": run.summary.get("train_s")}


def cell_table(runs: list[Run], target: float, budget_s: float, reference: str = "sync") -> pd.DataFrame:
    """One row per ``ok`` run with its regime and figures, and ``speedup_vs_<reference>`` in the same cell."""
    rows = [cell(r, target, budget_s) for r in ok_runs(runs)]
    cols = [*KEYS, "link", "link_gbps", "straggler", "throughput", "throughput_window", "comm_share", "time_to_target_s",
            "accuracy_at_budget", "final_accuracy", "mean_staleness", "train_s"]
    df = pd.DataFrame(rows, columns=cols)
    if df.empty:
        df[f"speedup_vs_{reference}"] = []
        return df
    same_cell = ["hardware", "straggler", "np"]
    ref = df[df["algorithm"] == reference].groupby(same_cell)[["throughput", "time_to_target_s"]].mean()
    keys = list(zip(*(df[c] for c in same_cell)))

    def of_reference(column: str) -> pd.Series:  # the reference's mean in each run's cell
        return pd.Series([ref[column].get(k, math.nan) for k in keys], index=df.index, dtype=float)

    df[f"speedup_vs_{reference}"] = df["throughput"] / of_reference("throughput")
    # time to the target, the reference's / the run's (> 1: reaches the target sooner than the reference)
    df[f"target_speedup_vs_{reference}"] = of_reference("time_to_target_s") / df["time_to_target_s"].where(df["time_to_target_s"] > 0)
    df["regime"] = [regime_label(lk, st) for lk, st in zip(df["link"], df["straggler"])]
    order = {lk: i for i, lk in enumerate(LINK_ORDER)}
    return df.sort_values(["link", "straggler", "algorithm"], key=lambda s: s.map(order) if s.name == "link" else s,
                          ignore_index=True)


def regimes_in(cells: pd.DataFrame) -> list[str]:
    """Regime labels in display order (slowest link first, no straggler before straggler)."""
    order = {lk: i for i, lk in enumerate(LINK_ORDER)}
    pairs = sorted({(lk, st) for lk, st in zip(cells["link"], cells["straggler"])},
                   key=lambda p: (order.get(p[0], 99), p[1] != "none", p[1]))
    return [regime_label(lk, st) for lk, st in pairs]


def winners(cells: pd.DataFrame) -> pd.DataFrame:
    """Per regime: the algorithm with the highest throughput, and the one reaching the target accuracy first."""
    rows = []
    for regime, g in cells.groupby("regime", sort=False):
        fast = g.loc[g["throughput"].idxmax()] if g["throughput"].notna().any() else None
        reached = g.dropna(subset=["time_to_target_s"])
        first = reached.loc[reached["time_to_target_s"].idxmin()] if not reached.empty else None
        rows.append({"regime": regime, "link": g["link"].iloc[0], "straggler": g["straggler"].iloc[0],
                     "highest_throughput": fast["algorithm"] if fast is not None else None,
                     "throughput": fast["throughput"] if fast is not None else math.nan,
                     "first_to_target": first["algorithm"] if first is not None else None,
                     "time_to_target_s": first["time_to_target_s"] if first is not None else math.nan,
                     "sync_time_to_target_s": _value(g, "sync", "time_to_target_s")})
    out = pd.DataFrame(rows, columns=["regime", "link", "straggler", "highest_throughput", "throughput",
                                      "first_to_target", "time_to_target_s", "sync_time_to_target_s"])
    if out.empty:
        return out
    order = {r: i for i, r in enumerate(regimes_in(cells))}
    return out.sort_values("regime", key=lambda s: s.map(order), ignore_index=True)


def _value(g: pd.DataFrame, algorithm: str, column: str) -> float:
    v = g.loc[g["algorithm"] == algorithm, column]
    return float(v.iloc[0]) if len(v) and pd.notna(v.iloc[0]) else math.nan


# ----------------------------------------------------------------------------- the seeds' claims


def _verdict(hits: int, total: int, what: str) -> str:
    if total == 0:
        return "not testable here"
    if hits == total or hits >= 0.75 * total:
        return "reproduced"
    if hits == 0 or hits <= 0.25 * total:
        return "not reproduced"
    return f"partly ({hits} of {total} {what})"


def _fmt(v: float, spec: str = ".2f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _faster(g: pd.DataFrame, a: str, b: str) -> bool | None:
    """Did ``a`` beat ``b`` in this regime: earlier to the target, else higher accuracy at the budget; None if neither
    says (one of them missing)."""
    ta, tb = _value(g, a, "time_to_target_s"), _value(g, b, "time_to_target_s")
    if math.isfinite(ta) or math.isfinite(tb):
        return ta < tb if math.isfinite(ta) and math.isfinite(tb) else math.isfinite(ta)
    aa, ab = _value(g, a, "accuracy_at_budget"), _value(g, b, "accuracy_at_budget")
    if math.isfinite(aa) and math.isfinite(ab):
        return aa > ab
    return None


def claim_vishnu(cells: pd.DataFrame) -> dict:
    """Vishnu et al. 2017: delayed and layer-wise allreduce beat sync when communication is comparable to compute."""
    base = cells[(cells["straggler"] == "none") & (cells["algorithm"] == "sync")]
    comparable = base[(base["comm_share"] >= 0.25) & (base["comm_share"] <= 0.75)]
    hits, total, lines = 0, 0, []
    for _, row in comparable.iterrows():
        g = cells[(cells["link"] == row["link"]) & (cells["straggler"] == "none") & (cells["np"] == row["np"])]
        measured = [v for v in (_value(g, "delayed", "speedup_vs_sync"), _value(g, "layerwise", "speedup_vs_sync"))
                    if math.isfinite(v)]
        if not measured:
            continue
        total += 1
        hits += bool(max(measured) > 1.05)
        lines.append(f"{row['link']}: sync comm share {row['comm_share']:.0%}, delayed ×{_fmt(_value(g, 'delayed', 'speedup_vs_sync'))}, "
                     f"layerwise ×{_fmt(_value(g, 'layerwise', 'speedup_vs_sync'))}")
    shares = ", ".join(f"{lk} {s:.0%}" for lk, s in zip(base["link"], base["comm_share"]))
    seen = "; ".join(
        f"{lk}: delayed ×{_fmt(_value(g, 'delayed', 'speedup_vs_sync'))}, layerwise ×{_fmt(_value(g, 'layerwise', 'speedup_vs_sync'))}"
        for lk, g in cells[cells["straggler"] == "none"].groupby("link", sort=False))
    evidence = ("; ".join(lines) if lines else
                f"no regime where communication is comparable to compute and delayed or layerwise ran (sync's comm share: "
                f"{shares}; where communication dominates, overlap can hide at most the compute share; measured: {seen})")
    return {"claim": "delayed and layer-wise asynchronous allreduce beat sync when communication is comparable to compute "
                     "(up to 1.7x on their hardware)", "source": "Vishnu et al. 2017",
            "verdict": _verdict(hits, total, "regimes"), "evidence": evidence}


def claim_lasgd(cells: pd.DataFrame) -> dict:
    """LASGD (2022): LASGD trains faster than sync and than gossip (SGP, AD-PSGD)."""
    hits, total, lines = 0, 0, []
    for regime, g in cells.groupby("regime", sort=False):
        beats = [_faster(g, "lasgd", other) for other in ("sync", "sgp", "adpsgd")]
        if any(b is None for b in beats):
            continue
        total += 1
        hits += all(beats)
        lines.append(f"{regime}: lasgd {_fmt(_value(g, 'lasgd', 'time_to_target_s'), '.1f')} s to target vs sync "
                     f"{_fmt(_value(g, 'sync', 'time_to_target_s'), '.1f')}, sgp {_fmt(_value(g, 'sgp', 'time_to_target_s'), '.1f')}, "
                     f"adpsgd {_fmt(_value(g, 'adpsgd', 'time_to_target_s'), '.1f')}")
    return {"claim": "LASGD trains faster than synchronous SGD and than gossip (SGP, AD-PSGD)", "source": "LASGD, 2022",
            "verdict": _verdict(hits, total, "regimes"), "evidence": "; ".join(lines) or "lasgd, sync, sgp or adpsgd did not run"}


def claim_sgp(cells: pd.DataFrame) -> dict:
    """Assran et al. 2019: SGP beats allreduce SGD on a slow (10 GbE-class) network."""
    slow = cells[(cells["straggler"] == "none") & cells["link"].isin(["10gbit", "1gbit", "100mbit"])]
    hits, total, lines = 0, 0, []
    for link, g in slow.groupby("link", sort=False):
        beat = _faster(g, "sgp", "sync")
        if beat is None:
            continue
        total += 1
        hits += beat
        lines.append(f"{link}: sgp ×{_fmt(_value(g, 'sgp', 'speedup_vs_sync'))} sync's throughput, to target "
                     f"{_fmt(_value(g, 'sgp', 'time_to_target_s'), '.1f')} s vs {_fmt(_value(g, 'sync', 'time_to_target_s'), '.1f')} s")
    return {"claim": "SGP beats allreduce SGD on a slow (10 GbE-class) network", "source": "Assran et al. 2019",
            "verdict": _verdict(hits, total, "links"), "evidence": "; ".join(lines) or "no emulated link run for sgp and sync"}


def claim_ps_straggler(cells: pd.DataFrame, ps: tuple[str, ...] = ("downpour", "agn", "adag", "dynsgd")) -> dict:
    """Hermans 2017 / Paine 2013: asynchronous parameter-server methods keep their pace beside a straggler where
    synchronous methods slow to it (throughput with the straggler / without, per link)."""
    hits, total, lines = 0, 0, []
    for link, g in cells.groupby("link", sort=False):
        stragglers = sorted(set(g["straggler"]) - {"none"})
        if not stragglers:
            continue

        def kept(a: str) -> float:
            return _value(g[g["straggler"] == stragglers[0]], a, "throughput") / _value(g[g["straggler"] == "none"], a, "throughput")

        sync_kept = kept("sync")
        ps_kept = {a: kept(a) for a in ps if math.isfinite(kept(a))}
        if not ps_kept or not math.isfinite(sync_kept):
            continue
        line = f"{link}: pace kept beside the straggler: sync {sync_kept:.2f}, " + ", ".join(f"{a} {v:.2f}" for a, v in ps_kept.items())
        if sync_kept >= 0.9:  # the straggler did not bind sync here: nothing for the asynchronous methods to win
            lines.append(line + " (the straggler does not slow sync here)")
            continue
        total += 1
        hits += all(v >= 0.8 and v > sync_kept + 0.1 for v in ps_kept.values())
        lines.append(line)
    return {"claim": "asynchronous parameter-server methods keep their pace beside a straggler where synchronous methods slow to it",
            "source": "Hermans 2017; Paine et al. 2013", "verdict": _verdict(hits, total, "links"),
            "evidence": "; ".join(lines) or "no regime with and without a straggler for sync and the parameter-server methods"}


def claim_agn_staleness(cells: pd.DataFrame) -> dict:
    """Hermans 2017: AGN/ADAG hold accuracy as staleness grows where DOWNPOUR degrades."""
    d = cells[cells["algorithm"] == "downpour"].dropna(subset=["mean_staleness"])
    if len(d) < 2 or d["mean_staleness"].max() - d["mean_staleness"].min() < 1.0:
        span = f"{d['mean_staleness'].min():.2f} to {d['mean_staleness'].max():.2f}" if len(d) else "none recorded"
        return {"claim": "AGN and ADAG hold accuracy as staleness grows where DOWNPOUR degrades", "source": "Hermans 2017",
                "verdict": "not testable here",
                "evidence": f"DOWNPOUR's mean staleness only spans {span} across the regimes at 4 workers "
                            f"(Hermans saw DOWNPOUR diverge at n = 20); a study over n is needed"}
    worst = d.loc[d["mean_staleness"].idxmax()]
    g = cells[cells["regime"] == worst["regime"]]
    held = [a for a in ("agn", "adag") if _value(g, a, "final_accuracy") >= float(worst["final_accuracy"])]
    degrade = float(d.sort_values("mean_staleness")["final_accuracy"].iloc[0]) - float(worst["final_accuracy"])
    verdict = "reproduced" if held and degrade > 0.02 else "not reproduced"
    return {"claim": "AGN and ADAG hold accuracy as staleness grows where DOWNPOUR degrades", "source": "Hermans 2017",
            "verdict": verdict,
            "evidence": f"most stale regime {worst['regime']} (DOWNPOUR τ {worst['mean_staleness']:.2f}): DOWNPOUR "
                        f"{worst['final_accuracy']:.3f} ({degrade:+.3f} against its least stale regime), AGN "
                        f"{_fmt(_value(g, 'agn', 'final_accuracy'), '.3f')}, ADAG {_fmt(_value(g, 'adag', 'final_accuracy'), '.3f')}"}


def claim_fast(cells: pd.DataFrame) -> dict:
    """Viviani et al. 2019: FAST keeps accuracy while avoiding global synchronisation."""
    hits, total, lines = 0, 0, []
    for regime, g in cells.groupby("regime", sort=False):
        f, s = _value(g, "fast", "final_accuracy"), _value(g, "sync", "final_accuracy")
        if not (math.isfinite(f) and math.isfinite(s)):
            continue
        total += 1
        hits += f >= s - 0.05
        lines.append(f"{regime}: fast {f:.3f} vs sync {s:.3f}")
    return {"claim": "FAST (neighbour gradient exchange, best-worker restarts) keeps accuracy while avoiding global "
                     "synchronisation", "source": "Viviani et al. 2019", "verdict": _verdict(hits, total, "regimes"),
            "evidence": "; ".join(lines) or "fast or sync did not run"}


def claims(cells: pd.DataFrame) -> pd.DataFrame:
    """Every claim with its verdict (reproduced / not reproduced / partly / not testable here) and the evidence."""
    checks = (claim_vishnu, claim_lasgd, claim_sgp, claim_ps_straggler, claim_agn_staleness, claim_fast)
    return pd.DataFrame([check(cells) for check in checks], columns=["source", "claim", "verdict", "evidence"])


def noise(first: pd.DataFrame, second: pd.DataFrame, column: str = "throughput") -> pd.DataFrame:
    """Run-to-run noise between two repeats of the same cells: relative difference of ``column`` per cell."""
    keys = ["algorithm", "link", "straggler", "np"]
    both = first[keys + [column]].merge(second[keys + [column]], on=keys, suffixes=("_a", "_b"))
    both["relative_difference"] = (both[f"{column}_b"] - both[f"{column}_a"]).abs() / both[[f"{column}_a", f"{column}_b"]].mean(axis=1)
    return both

