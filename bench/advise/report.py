"""What ``bench advise`` writes: the ranking and the map of winners, as files a browser and a notebook read.

Files under the output folder (default ``results/advise/<hardware>/np<n>/``): ``advice.json`` (the query, the
hardware's probe record where it has one, the ranking), ``ranking.csv``, ``winners.csv`` (per n and one-way delay:
the forecast winner, its basis and time to target or throughput, the runner-up and the margin between them),
``winners.png`` (that map), with ``--confirm`` ``confirmation.csv`` (forecast beside measured; the runs themselves in
the folder ``<out>.runs/``), and ``index.html`` (all of it on one page). Written into a fresh folder beside the output
and moved into place at the end, so that a failed advise leaves an older report whole.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pandas as pd

from . import rank

MAP_DELAYS = ("0", "1ms", "5ms", "25ms")
"""One-way delays the map varies on an emulated (or probed emulated) hardware."""
MAP_TOP = 8
"""Algorithms the map forecasts at every point: the ranking's first ones (each point costs a forecast of each)."""


def winners(algorithms: list[str], nps: list[int], delays: list[str], hardware: str, profile: str | None,
            overrides: dict, progress=None) -> pd.DataFrame:
    """The forecast winner at every (n, delay) point (``delays`` empty: n only)."""
    rows = []
    points = [(n, d) for n in nps for d in (delays or [None])]
    for k, (n, d) in enumerate(points, 1):
        sets = dict(overrides) if d is None else {**overrides, "link_delay": "" if d == "0" else d}
        ranked = rank.ranking(rank.forecasts(algorithms, n, hardware, profile, sets))
        ok = [r for r in ranked if r["rank"] is not None]
        first, second = (ok + [None, None])[:2]
        key = "time_to_target_s" if first and first["basis"] == "time to target" else "throughput"
        margin = None
        if first and second and second["basis"] == first["basis"]:
            margin = (second[key] / first[key]) if key == "time_to_target_s" else (first[key] / second[key])
        rows.append({"np": n, "delay": d or "", "winner": first["algorithm"] if first else None,
                     "basis": first["basis"] if first else None, "value": first[key] if first else None,
                     "runner_up": second["algorithm"] if second else None, "margin": margin})
        if progress:
            progress(f"map {k}/{len(points)}: n={n}{'' if d is None else f', delay {d}'} -> "
                     f"{rows[-1]['winner']}")
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, title: str):
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ..plots import empty

    if table.empty or table["winner"].isna().all():
        return empty(title)
    delays = list(dict.fromkeys(table["delay"]))
    names = sorted(set(table["winner"].dropna()))
    code = {a: i for i, a in enumerate(names)}
    label = table.assign(label=[w if b == "time to target" else f"{w}*" for w, b in zip(table["winner"], table["basis"])])
    grid = table.pivot(index="np", columns="delay", values="winner")[delays]
    labels = label.pivot(index="np", columns="delay", values="label")[delays]
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(delays), 1.2 + 0.7 * len(grid)))
    sns.heatmap(grid.apply(lambda c: c.map(code)).astype(float), annot=labels.values, fmt="", cbar=False,
                cmap=sns.color_palette("Set2", len(names)), ax=ax, linewidths=0.5)
    ax.set_xlabel("one-way link delay" if delays != [""] else "")
    ax.set_ylabel("workers n")
    ax.set_title(title + ("\n* throughput only (no measured relation at this n)" if labels.stack().str.endswith("*").any()
                          else ""))
    return fig


def write(out: Path, query: dict, ranked: list[dict], table: pd.DataFrame, probed: dict | None, text: str,
          confirmation: dict | None = None) -> Path:
    """The files of the module docstring in ``out`` (replaced whole)."""
    from ..plots import save

    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "advice.json").write_text(json.dumps({"query": query, "probed": probed, "ranking": ranked,
                                                  "winners": table.to_dict("records"), "confirmation": confirmation},
                                                 indent=2, default=float) + "\n")
    if confirmation:
        pd.DataFrame(confirmation["table"]).to_csv(tmp / "confirmation.csv", index=False)
    pd.DataFrame(ranked, columns=rank.COLUMNS).to_csv(tmp / "ranking.csv", index=False)
    table.to_csv(tmp / "winners.csv", index=False)
    save(figure(table, f"forecast winner on {query['hardware']}"), tmp / "winners.png")
    ranking = pd.DataFrame(ranked, columns=rank.COLUMNS).to_html(index=False, na_rep="-", float_format="%.4g")
    page = [f"<!doctype html><meta charset='utf-8'><title>advise: {html.escape(query['hardware'])}</title>",
            "<style>body{font-family:sans-serif;max-width:75em;margin:auto}td,th{padding:2px 6px}"
            "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style>",
            f"<h1>Which method wins on {html.escape(query['hardware'])} (n = {query['np']})</h1>",
            f"<p>{html.escape(query['command'])}</p>",
            "<p>Forecasts of <code>bench predict</code>'s model, not measurements: each line states the median "
            "|error| of the validated cells nearest it. Ranked by time to the target accuracy where a measured "
            "relation backs it, then by throughput (\"throughput only\").</p>",
            f"<pre>{html.escape(text)}</pre>", "<h2>Ranking</h2>", ranking,
            "<h2>Which method wins as n and the link delay vary</h2>", "<img src='winners.png'>",
            table.to_html(index=False, na_rep="-", float_format="%.4g")]
    if confirmation:
        page += ["<h2>Forecast beside measurement</h2>", f"<pre>{html.escape(confirmation['text'])}</pre>"]
    if probed:
        page += ["<h2>What bench probe measured</h2>", f"<pre>{html.escape(json.dumps(probed, indent=2))}</pre>"]
    (tmp / "index.html").write_text("\n".join(page) + "\n")
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
    return out
