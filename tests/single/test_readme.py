"""bench.study.readme: speedup over n summarised per grid point and drawn per family and link."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.metrics import stats
from bench.metrics.regimes import summary


def test_speedup_over_n_is_summarised_per_grid_point_with_intervals_and_drawn_per_family_and_link(tmp_path):
    from bench import plots
    from bench.metrics.selection import frame_grid_points
    from bench.metrics.throughput import speedup_table
    from bench.study.readme import speedup_lines

    rows = []
    for k in range(3):
        for link, slow in (("linknone", 1.0), ("linkslow", 0.5)):  # the slow link halves every n > 1 run
            for algo, n, tp in (("sync", 1, 100.0), ("sync", 2, 180.0), ("sync", 4, 320.0), ("ddp", 2, 170.0),
                                ("ddp", 4, 300.0), ("downpour", 4, 280.0)):
                rows.append(dict(hardware="emu", study="s", algorithm=algo, np=n, tag=f"{link}-r{k}", repeat=k,
                                 throughput=(tp if n == 1 else tp * slow) * (1 + 0.01 * k)))
    table = speedup_table(pd.DataFrame(rows))
    table["point"] = frame_grid_points(table)
    # S(n) paired on the repeat and the point: over sync np 1 of the same link and seed
    slow4 = table[(table["algorithm"] == "sync") & (table["np"] == 4) & (table["point"] == "linkslow")]
    assert slow4["speedup"].tolist() == pytest.approx([1.6] * 3)
    cell = ["hardware", "algorithm", "np", "point"]
    summary = stats.summarize(table, cell, ["throughput", "speedup", "efficiency", "vs_sync"])
    fig = plots.speedup_over_n(summary)  # the figures draw the table the notebook writes
    assert len(fig.axes) == 2 * 2  # two links x two families (allreduce, parameter-server), never mixed
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == ["allreduce, linknone", "allreduce, linkslow", "parameter-server, linknone",
                      "parameter-server, linkslow"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "sync (S/n 0.80 at 4)" in legend and "ddp (S/n 0.75 at 4)" in legend
    scaling = plots.scaling(summary, table)
    assert len(scaling.axes) == 2 * 3  # one row of three panels per link
    sync4 = next(line for line in scaling.axes[0].lines if list(line.get_xdata()) == [1, 2, 4])  # sync's throughput
    assert list(sync4.get_ydata()) == pytest.approx(summary.query("metric == 'throughput' and algorithm == 'sync' and "
                                                                  "point == 'linknone'")["mean"].tolist())
    both = pd.concat([table, table.assign(hardware="other")], ignore_index=True)
    machines = plots.scaling(stats.summarize(both, cell, ["throughput", "speedup"]), both)
    assert sorted({ax.get_title() for ax in machines.axes}) == ["emu linknone", "emu linkslow", "other linknone",
                                                                 "other linkslow"]  # nor are machines pooled
    assert len(plots.efficiency(summary).axes) == 2  # one panel per link
    # a configuration of one run draws that run's own throughput interval (speedup.csv), its repeats giving none
    one = table[table["repeat"] == 0].assign(ci_low=90.0, ci_high=110.0)
    lone = plots._own_intervals(plots._cells(stats.summarize(one, cell, ["throughput"]), ["throughput"]), one)
    assert (lone["throughput_low"] == 90.0).all() and (lone["throughput_high"] == 110.0).all()
    (tmp_path / "tables").mkdir()
    summary.to_csv(tmp_path / "tables" / "speedup_summary.csv", index=False)
    lines = speedup_lines(tmp_path)
    header = next(line for line in lines if line.startswith("| grid point"))
    assert header == "| grid point | algorithm | repeats | S(1) | S(2) | S(4) | S(n)/n at the largest n |"
    sync_slow = next(line for line in lines if line.startswith("| linkslow | sync |"))
    assert "| 1.00 [1.00, 1.00] | 0.90 [0.90, 0.90] | 1.60 [1.60, 1.60] | 0.40 [0.40, 0.40] (n = 4) |" in sync_slow
    assert any(line.startswith("| linknone | downpour | 3 |  |  | 2.80 [") for line in lines)
    no_one = speedup_table(pd.DataFrame([r for r in rows if r["np"] > 1]))  # no one-worker run to divide by
    no_one["point"] = frame_grid_points(no_one)
    no_one_summary = stats.summarize(no_one, cell, ["throughput", "speedup"])
    no_one_summary.to_csv(tmp_path / "tables" / "speedup_summary.csv", index=False)
    assert speedup_lines(tmp_path) == []
    assert "no algorithm has an np=1 run" in [t.get_text() for t in plots.speedup_over_n(no_one_summary).axes[0].texts][0]
