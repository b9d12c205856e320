"""Seaborn figures of benchmark results: a DataFrame in (from :mod:`bench.metrics` / :mod:`bench.results`),
a matplotlib Figure out. Nothing here reads paths or computes metrics; :func:`save` writes a PNG.

Every function accepts an empty frame and then draws a figure that says there is no data, so an
analysis notebook runs on partial results.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .metrics.regimes import link_order
from .metrics.selection import FAMILIES, family, frame_grid_points, frame_points
from .metrics.stats import CAPTION

sns.set_theme(style="whitegrid", context="notebook")


def empty(title: str, what: str = "no data") -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.text(0.5, 0.5, what, ha="center", va="center", fontsize=14, color="0.4", transform=ax.transAxes)
    ax.set_axis_off()
    ax.set_title(title)
    return fig


def save(fig: plt.Figure, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG (folders created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def _families(values) -> list[str]:
    """The families among ``values``, in the registry's order (others after, sorted)."""
    present = set(values)
    return [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES))


def _by_family(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str], dict]:
    """``df`` with a ``config`` column (the run key without its repeat) and a ``family`` column; the families present,
    in the registry's order; one colour per configuration, the same in every facet."""
    df = df.assign(config=frame_points(df), family=[family(a) for a in df["algorithm"]])
    if "repeat" not in df:
        df["repeat"] = 0
    fams = _families(df["family"])
    configs = sorted(df["config"].unique())
    return df, fams, dict(zip(configs, sns.color_palette("tab10" if len(configs) <= 10 else "husl", len(configs))))


def curves(evals: pd.DataFrame, x: str = "t", title: str = "held-out evaluation",
           target: float | None = None) -> plt.Figure:
    """Held-out accuracy (top) and loss (bottom) against ``x`` (``t`` seconds or ``epoch``): one column per
    algorithm family, one colour per configuration (algorithm, workers, grid point), one thin line per repeat.
    ``target``: the study's target accuracy, drawn as a dashed line."""
    if evals.empty:
        return empty(title)
    df, fams, palette = _by_family(evals.sort_values(x))
    fig, axes = plt.subplots(2, len(fams), figsize=(4.6 * len(fams) + 1.5, 7.5), squeeze=False, sharex=True,
                             sharey="row")
    for col, fam in enumerate(fams):
        sub = df[df["family"] == fam]
        for row, y in enumerate(("accuracy", "loss")):
            ax = axes[row, col]
            sns.lineplot(data=sub, x=x, y=y, hue="config", units="repeat", estimator=None, palette=palette,
                         marker="o", markersize=3, lw=1.2, alpha=0.85, ax=ax, legend=row == 0)
            ax.set_xlabel("wall-clock seconds" if x == "t" else x)
            ax.set_ylabel(f"held-out {y}")
            if row == 0:
                ax.set_title(fam)
                if target is not None:
                    ax.axhline(target, color="k", ls="--", lw=1, label=f"target {target:.3f}")
                ax.legend(loc="lower right", fontsize=8, title=None)
    fig.suptitle(title + (" (one line per repeat)" if df["repeat"].nunique() > 1 else ""))
    fig.tight_layout()
    return fig


def training_curves(steps: pd.DataFrame, title: str = "workers' mini-batch accuracy") -> plt.Figure:
    """Workers' own mini-batch accuracy and loss against wall-clock seconds, one line per rank."""
    if steps.empty:
        return empty(title)
    df = steps.assign(rank=steps["rank"].astype(str))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, y in zip(axes, ("accuracy", "loss")):
        sns.lineplot(data=df, x="t", y=y, hue="rank", ax=ax, alpha=0.8, legend=ax is axes[1])
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylabel(f"mini-batch {y}")
    fig.suptitle(title)
    return fig


def _cells(summary: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """One row per cell (hardware, algorithm, workers, grid point) of a :func:`bench.metrics.stats.summarize` table
    (speedup_summary.csv) with, per metric, its geometric mean over the repeats (``<metric>``) and the 95 % t-interval
    of it (``<metric>_low``, ``<metric>_high``; NaN with fewer than 3), ``repeats`` (the first metric's n), and
    ``label``: the grid point, after the hardware profile where the table spans several (machines are never pooled)."""
    df = summary[summary["metric"].isin(metrics)].assign(point=lambda d: d["point"].fillna("").astype(str))
    wide = df.set_index(["hardware", "point", "algorithm", "np", "metric"])[["mean", "ci_low", "ci_high", "n"]]
    wide = wide.unstack("metric")
    out = pd.DataFrame(index=wide.index)
    for m in metrics:
        for column, stat in ((m, "mean"), (f"{m}_low", "ci_low"), (f"{m}_high", "ci_high")):
            out[column] = wide[(stat, m)] if (stat, m) in wide else float("nan")
    out["repeats"] = wide[("n", metrics[0])] if ("n", metrics[0]) in wide else 0
    out = out.reset_index()
    several = out["hardware"].nunique() > 1
    return out.assign(label=[f"{hw} {pt}".strip() if several else pt for hw, pt in zip(out["hardware"], out["point"])])


def _own_intervals(cells: pd.DataFrame, runs: pd.DataFrame | None) -> pd.DataFrame:
    """``cells`` where a configuration has one run: its throughput interval is that run's own (the sub-window one of
    :func:`bench.metrics.throughput.window_throughput`, speedup.csv's ``ci_low``, ``ci_high``), as its repeats give
    none."""
    if runs is None or runs.empty or not {"ci_low", "ci_high"} <= set(runs):
        return cells
    keys = ["hardware", "point", "algorithm", "np"]
    alone = runs.assign(point=frame_grid_points(runs)).drop_duplicates(keys, keep=False).set_index(keys)
    out = cells.copy()
    for i, cell in out[out["repeats"] == 1].iterrows():
        key = tuple(cell[k] for k in keys)
        if key in alone.index:
            out.loc[i, ["throughput_low", "throughput_high"]] = alone.loc[key, ["ci_low", "ci_high"]].to_numpy(float)
    return out


def _yerr(g: pd.DataFrame, y: str, low: str, high: str):
    """Error bar lengths below and above ``y`` (0 where the interval is undefined)."""
    return [(g[y] - g[low]).clip(lower=0).fillna(0), (g[high] - g[y]).clip(lower=0).fillna(0)]


def scaling(summary: pd.DataFrame, runs: pd.DataFrame | None = None,
            title: str = "throughput and speedup") -> plt.Figure:
    """Throughput, speedup S(n) against the ideal, and throughput against sync at the same n, vs workers, from
    speedup_summary.csv (``summary``): one row of three panels per grid point (e.g. per link, never mixed). Each point
    is the geometric mean over the repeats with its 95 % t-interval (none with fewer than 3 repeats); a
    run alone draws its own throughput interval, from speedup.csv (``runs``: :func:`_own_intervals`)."""
    if summary.empty:
        return empty(title)
    vs = sorted(m for m in set(summary["metric"]) if m.startswith("vs_"))
    per = _own_intervals(_cells(summary, ["throughput", "speedup", *vs]), runs)
    if (per["repeats"] > 1).any():
        title += f" ({CAPTION} over the repeats)"
    points = sorted(per["label"].unique())
    fig, axes = plt.subplots(len(points), 3, figsize=(16, 4.5 * len(points)), squeeze=False)
    ns = sorted(per["np"].unique())
    algos = sorted(per["algorithm"].unique())
    colours = dict(zip(algos, sns.color_palette("tab10" if len(algos) <= 10 else "husl", len(algos))))
    for row, pt in zip(axes, points):
        for algo, g in per[per["label"] == pt].sort_values("np").groupby("algorithm"):
            c = colours[algo]
            row[0].errorbar(g["np"], g["throughput"], yerr=_yerr(g, "throughput", "throughput_low", "throughput_high"), marker="o",
                            capsize=3, color=c, label=algo)
            row[1].errorbar(g["np"], g["speedup"], yerr=_yerr(g, "speedup", "speedup_low", "speedup_high"), marker="o",
                            capsize=3, color=c, label=algo)
            if vs:
                row[2].plot(g["np"], g[vs[0]], marker="o", color=c, label=algo)
        row[1].plot(ns, ns, "k--", lw=1, label="ideal")
        row[0].set_ylabel("samples / s (95% interval)")
        row[1].set_ylabel("speedup S(n) = T(n) / T(1)")
        row[2].set_ylabel("throughput / sync at the same n")
        for ax in row:
            ax.set_xlabel("workers n")
            ax.set_xticks(ns)
            if pt:
                ax.set_title(pt, fontsize=10)
        if vs:
            row[2].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def speedup_over_n(summary: pd.DataFrame, title: str = "speedup over n: S(n) = throughput(n) / one worker's") -> plt.Figure:
    """S(n) against the workers n with the 95 % t-interval of the mean over the repeats, from
    speedup_summary.csv (``summary``): one row per grid point (e.g. per link), one column per algorithm family,
    ``sync`` (black, dashed) in every panel as the reference and the ideal S(n) = n dotted; the label gives the
    scaling efficiency S(n)/n at the largest n. S(n) divides by the algorithm's own one-worker throughput, else by
    ``sync``'s (``speedup_over`` in speedup.csv)."""
    per = _cells(summary, ["speedup"]).dropna(subset=["speedup"]) if not summary.empty else summary
    if per.empty:
        return empty(title, "no algorithm has an np=1 run to divide by")
    per["family"] = [family(a) for a in per["algorithm"]]
    points, fams, ns = sorted(per["label"].unique()), _families(per["family"]), sorted(per["np"].unique())
    fig, axes = plt.subplots(len(points), len(fams), figsize=(4.2 * len(fams) + 1, 3.8 * len(points)), squeeze=False,
                             sharex=True, sharey=True)
    others = sorted(set(per["algorithm"]) - {"sync"})
    colours = dict(zip(others, sns.color_palette("tab10" if len(others) <= 10 else "husl", len(others))))

    def line(ax, g, **kw):
        g = g.sort_values("np")
        top = g.iloc[-1]
        ax.errorbar(g["np"], g["speedup"], yerr=_yerr(g, "speedup", "speedup_low", "speedup_high"), marker="o",
                    capsize=3, **kw, label=f"{g['algorithm'].iloc[0]} (S/n {top['speedup'] / top['np']:.2f} at "
                                            f"{top['np']:g})")

    for row, pt in zip(axes, points):
        here = per[per["label"] == pt]
        ref = here[here["algorithm"] == "sync"]
        for ax, fam in zip(row, fams):
            ax.plot(ns, ns, color="0.5", ls=":", lw=1, label="ideal S(n) = n")
            if not ref.empty:
                line(ax, ref, color="black", ls="--")
            for algo, g in here[(here["family"] == fam) & (here["algorithm"] != "sync")].groupby("algorithm"):
                line(ax, g, color=colours[algo])
            ax.set_xticks(ns)
            ax.set_title(f"{fam}" + (f", {pt}" if pt else ""), fontsize=10)
            ax.set_xlabel("workers n")
            ax.set_ylabel("S(n) (mean, 95 % t-interval)")
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def efficiency(summary: pd.DataFrame, title: str = "scaling efficiency S(n)/n") -> plt.Figure:
    """Bars of S(n)/n per algorithm and workers, the mean over a study's repeats (speedup_summary.csv,
    ``summary``), one panel per grid point."""
    per = _cells(summary, ["efficiency"]).dropna(subset=["efficiency"]) if not summary.empty else summary
    if per.empty:
        return empty(title, "no algorithm has an np=1 run")
    points = sorted(per["label"].unique())
    fig, axes = plt.subplots(len(points), 1, figsize=(max(6, 0.6 * per["algorithm"].nunique() + 3), 4 * len(points)),
                             squeeze=False)
    for ax, pt in zip(axes[:, 0], points):
        sns.barplot(data=per[per["label"] == pt], x="algorithm", y="efficiency", hue="np", ax=ax, errorbar=None)
        ax.axhline(1.0, color="k", ls="--", lw=1)
        ax.set_title(f"{title} (mean over repeats)" + (f", {pt}" if pt else ""))
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    return fig


def time_split(split: pd.DataFrame, title: str = "time per step: compute / communication / wait") -> plt.Figure:
    """Stacked bars of mean seconds per step, one bar per configuration (the median over its repeats)."""
    if split.empty:
        return empty(title)
    parts = ["compute_s", "comm_s", "wait_s"]
    df = split.assign(run=frame_points(split)).groupby("run", sort=False)[parts].median() * 1e3
    if "repeat" in split and split["repeat"].nunique() > 1:
        title += " (median over repeats)"
    df.columns = ["compute", "communication", "wait"]
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(df) + 3), 4.5))
    df.plot.bar(stacked=True, ax=ax, color=sns.color_palette("deep", 3), width=0.8)
    ax.set_ylabel("ms per step (timed steps, mean)")
    ax.set_xlabel("")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=60)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig


def staleness(stale: pd.DataFrame, title: str = "staleness per commit") -> plt.Figure:
    """Histogram of tau per configuration, its repeats pooled (asynchronous algorithms)."""
    if stale.empty:
        return empty(title, "no run records staleness (no asynchronous algorithm ran)")
    df = stale.assign(run=frame_points(stale))
    runs = sorted(df["run"].unique())
    cols = min(4, len(runs))
    rows = -(-len(runs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, run in zip(axes.flat, runs):
        tau = df.loc[df["run"] == run, "staleness"].astype(int)
        sns.histplot(tau, discrete=True, stat="probability", ax=ax)
        ax.axvline(tau.mean(), color="k", ls="--", lw=1)
        ax.set_title(f"{run} (mean {tau.mean():.2f})", fontsize=10)
        ax.set_xlabel("tau")
    for ax in list(axes.flat)[len(runs):]:
        ax.set_axis_off()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def te_heatmap(matrix: pd.DataFrame, title: str = "temporal efficiency E(row, column)") -> plt.Figure:
    """Heatmap of a :func:`bench.metrics.te_matrix` (centred at 1: red, row better; blue, column better)."""
    if matrix.empty:
        return empty(title)
    if matrix.isna().all().all():
        return empty(title, "undefined for every pair: runs shorter than the window\n(pass a smaller window / stride)")
    n = len(matrix)
    fig, ax = plt.subplots(figsize=(max(5, 0.7 * n + 3), max(4, 0.6 * n + 2)))
    sns.heatmap(matrix.astype(float), annot=n <= 20, fmt=".2f", cmap="RdBu_r", center=1.0, ax=ax,
                cbar_kws={"label": "E (>1: row better)"}, annot_kws={"fontsize": 8})
    ax.grid(False)
    ax.set_title(title)
    return fig


def te_grid(grid: pd.DataFrame, param: str, title: str) -> plt.Figure:
    """Heatmap of E(a, b) over workers n (rows) and ``param`` (columns) from :func:`bench.metrics.te_grid`: the median
    over the paired repeats, with its 95 % interval beneath where it has one."""
    if grid.empty:
        return empty(title, "no configuration ran for both algorithms")
    if grid["E"].isna().all():
        return empty(title, "undefined for every configuration: runs shorter than the window")
    labelled = grid.assign(**{param: grid[param].astype(object).where(grid[param].notna(), "n/a")},
                           workers=grid["hardware"] + " np" + grid["np"].astype(str))
    pivot = labelled.pivot_table(index="workers", columns=param, values="E", dropna=False)
    low = grid["ci_low"] if "ci_low" in grid else pd.Series(float("nan"), index=grid.index)
    high = grid["ci_high"] if "ci_high" in grid else pd.Series(float("nan"), index=grid.index)
    labelled = labelled.assign(text=[f"{e:.2f}\n[{lo:.2f}, {hi:.2f}]" if pd.notna(lo) and pd.notna(hi) else
                                     (f"{e:.2f}" if pd.notna(e) else "") for e, lo, hi in zip(grid["E"], low, high)])
    text = labelled.pivot_table(index="workers", columns=param, values="text", aggfunc="first", dropna=False)
    text = text.reindex(index=pivot.index, columns=pivot.columns).fillna("")
    wide = text.map(lambda t: "[" in t).to_numpy().any()
    fig, ax = plt.subplots(figsize=(max(5, (1.4 if wide else 0.8) * pivot.shape[1] + 3),
                                    max(3.5, (0.9 if wide else 0.6) * pivot.shape[0] + 2)))
    sns.heatmap(pivot, annot=text.to_numpy(), fmt="", cmap="RdBu_r", center=1.0, ax=ax,
                cbar_kws={"label": "E (geometric mean over seeds; [95 % t-interval])"})
    ax.grid(False)
    ax.set_ylabel("hardware, workers n")
    ax.set_title(title)
    return fig


def hardware(table: pd.DataFrame, y: str = "throughput", title: str = "throughput across hardware") -> plt.Figure:
    """Bars of ``y`` per algorithm and workers, one panel per hardware profile (the median over a study's repeats)."""
    if table.empty:
        return empty(title)
    df = table.sort_values(["hardware", "algorithm", "np"]).assign(workers="np" + table["np"].astype(str))
    g = sns.catplot(data=df, x="algorithm", y=y, hue="workers", col="hardware", kind="bar", height=4, aspect=1.4,
                    sharey=False, hue_order=[f"np{n}" for n in sorted(table["np"].unique())], estimator="median",
                    errorbar=None)
    g.set_ylabels({"throughput": "samples / s"}.get(y, y.replace("_", " ")))
    g.set_xticklabels(rotation=45)
    g.figure.suptitle(title, y=1.03)
    return g.figure


def regimes_heatmap(cells: pd.DataFrame, regimes: list[str], value: str = "speedup_vs_sync",
                    title: str = "throughput against sync in the same regime", mark: str | None = "throughput_window") -> plt.Figure:
    """Heatmap algorithm (rows) × regime (columns, in the given order) of a ratio ``value`` (from
    bench.metrics.regimes; one row per cell, e.g. :func:`bench.metrics.regimes.medians` over the repeats; several
    rows of a cell are shown by their median), coloured on a log2 scale centred at 1 (red: above, blue: below), each
    cell annotated with the ratio; a cell whose ``mark`` column says ``per-worker`` (no span had every worker
    working: no aggregate throughput) gets a ``*`` and the figure says so."""
    import numpy as np

    if cells.empty or cells[value].isna().all():
        return empty(title)
    pivot = cells.pivot_table(index="algorithm", columns="regime", values=value, aggfunc="median").reindex(columns=regimes)
    pivot = pivot.loc[np.log2(pivot).mean(axis=1).sort_values(ascending=False).index]
    starred = set()
    if mark and mark in cells:
        starred = {(a, r) for a, r, m in zip(cells["algorithm"], cells["regime"], cells[mark]) if m == "per-worker"}
    labels = pivot.apply(lambda col: [("" if pd.isna(v) else f"{v:.2f}" + ("*" if (a, col.name) in starred else ""))
                                      for a, v in col.items()])
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(regimes) + 3), max(4, 0.45 * len(pivot) + 2)))
    sns.heatmap(np.log2(pivot.astype(float)), annot=labels.to_numpy(), fmt="", cmap="RdBu_r", center=0.0, ax=ax,
                cbar_kws={"label": f"log2 {value.replace('_', ' ')}"}, annot_kws={"fontsize": 8})
    ax.grid(False)
    ax.set_xlabel("* no span with every worker working: no aggregate throughput (each worker's own rate: the tables)"
                  if starred else "")
    ax.set_ylabel("")
    ax.set_title(title)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    return fig


def _series(df: pd.DataFrame) -> list[str]:
    """A line's name per row of a regimes summary: the algorithm, then what else tells its lines apart where the
    study has several (workers, the grid point without its link, the hardware profile)."""
    rest = ["-".join(p for p in (pt if isinstance(pt, str) else "").split("-") if not p.startswith("link"))
            for pt in df["point"]]
    several = {c: len(set(v)) > 1 for c, v in (("np", df["np"]), ("rest", rest), ("hardware", df["hardware"]))}
    return [a + (f" np{n}" if several["np"] else "") + (f" {r}" if several["rest"] and r else "")
            + (f" @{hw}" if several["hardware"] else "") for a, n, r, hw in zip(df["algorithm"], df["np"], rest, df["hardware"])]


def throughput_vs_link(summary: pd.DataFrame, links: list[str], title: str = "throughput against link bandwidth") -> plt.Figure:
    """Throughput against the link, slowest first, without stragglers, from regimes_summary.csv (``summary``): one
    panel per algorithm family, one line per algorithm (:func:`_series`) through its means over the repeats, the
    band their 95 % t-interval; ``sync`` drawn in every panel as the reference (black, dashed)."""
    df = summary[(summary["straggler"] == "none") & (summary["metric"] == "throughput")].dropna(subset=["mean"]) \
        if not summary.empty else summary
    if df.empty:
        return empty(title)
    order = [lk for lk in links if lk in set(df["link"])] + sorted(set(df["link"]) - set(links))
    df = df.assign(x=df["link"].map({lk: i for i, lk in enumerate(order)}), family=[family(a) for a in df["algorithm"]],
                   series=_series(df)).sort_values("x")
    fams = _families(df["family"])
    others = sorted(set(df.loc[df["algorithm"] != "sync", "series"]))
    colours = dict(zip(others, sns.color_palette("tab10" if len(others) <= 10 else "husl", len(others))))
    fig, axes = plt.subplots(1, len(fams), figsize=(4.8 * len(fams) + 1.5, 4.8), squeeze=False, sharey=True)

    def line(ax, g, marker="o", **kw):
        ax.plot(g["x"], g["mean"], marker=marker, **kw)
        ax.fill_between(g["x"], g["ci_low"], g["ci_high"], color=kw["color"], alpha=0.15, lw=0)

    for ax, fam in zip(axes[0], fams):
        for name, g in df[(df["family"] == fam) & (df["algorithm"] != "sync")].groupby("series"):
            line(ax, g, color=colours[name], label=name)
        for (name, g), marker in zip(df[df["algorithm"] == "sync"].groupby("series"), "os^vD<>"):
            line(ax, g, color="black", ls="--", label=name, marker=marker)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_xlabel("link")
        ax.set_ylabel("samples / s, all workers (mean, 95 % t-interval)")
        ax.set_title(fam)
        ax.legend(fontsize=7, title=None)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def time_to_target(cells: pd.DataFrame, target: float, title: str | None = None) -> plt.Figure:
    """Seconds to the held-out accuracy ``target`` per algorithm (one point per repeat), without and with the
    straggler, one panel per link; a censored run (never reached the target) is drawn at its training time as an
    open triangle, its time to target being more than that: shown, never dropped."""
    title = title or f"time to {target:g} held-out accuracy, without and with a straggler (open triangle: censored)"
    df = cells.dropna(subset=["time_to_target_s"]) if not cells.empty else cells
    if df.empty:
        return empty(title, f"no run to show for {target:g}")
    censored = df["censored"].fillna(False).astype(bool) if "censored" in df else pd.Series(False, index=df.index)
    df = df.assign(reached=["censored (> training time)" if c else "reached" for c in censored])
    order = sorted(df["algorithm"].unique())  # the same x positions in every panel (inner panels have no labels)
    links = link_order(df["link"])
    g = sns.catplot(data=df, x="algorithm", y="time_to_target_s", hue="straggler", col="link", kind="strip", height=3.6,
                    aspect=1.3, sharey=False, col_wrap=min(2, len(links)), dodge=True, jitter=False, order=order,
                    col_order=links)
    for ax, link in zip(g.axes.flat, links):  # censored runs: open triangles over their points
        c = df[(df["link"] == link) & (df["reached"] != "reached")]
        if not c.empty:
            ax.scatter([order.index(a) for a in c["algorithm"]], c["time_to_target_s"], marker="^", s=90,
                       facecolors="none", edgecolors="black", label="censored (> training time)", zorder=5)
    g.set_ylabels("seconds")
    g.set_xticklabels(rotation=60)
    g.figure.suptitle(title, y=1.03)
    return g.figure
