"""bench.metrics.report: the report's summary of each configuration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.metrics import stats


def test_the_reports_summary_gives_each_configuration_its_median_interval_and_censored_repeats(tmp_path):
    from bench.metrics.report import summary_table

    rows, conv = [], []
    for k in range(3):
        for algo, n, tp, secs, censored in (("sync", 1, 100.0 + k, 2.0 + k, False), ("sync", 2, 150.0 + k, 1.0 + k, False),
                                            ("downpour", 2, 120.0 + k, 9.0, k == 0)):
            tag = f"r{k}"
            rows.append(dict(hardware="local", study="s", algorithm=algo, np=n, tag=tag, repeat=k, throughput=tp))
            conv.append(dict(hardware="local", study="s", algorithm=algo, np=n, tag=tag, repeat=k, final_accuracy=0.9,
                             censored=censored, **{"seconds_to_0.9": secs}))
    from bench.metrics.selection import frame_grid_points
    from bench.metrics.throughput import speedup_table

    # the tables the analysis writes: speedup.csv, speedup_summary.csv, regimes_summary.csv
    speedup = speedup_table(pd.DataFrame(rows))
    speedup_summary = stats.summarize(speedup.assign(point=frame_grid_points(speedup)),
                                      ["hardware", "algorithm", "np", "point"], ["throughput", "speedup"])
    cells = pd.DataFrame(conv).rename(columns={"seconds_to_0.9": "time_to_target_s"}).assign(link="local", straggler="none")
    regimes_summary = stats.summarize(cells.assign(point=frame_grid_points(cells)),
                                      ["algorithm", "hardware", "link", "straggler", "np", "point"],
                                      ["time_to_target_s", "final_accuracy"])
    regimes_summary.to_csv(Path(tmp_path) / "regimes_summary.csv", index=False)  # as the report reads it back
    table = summary_table(speedup, speedup_summary, pd.read_csv(Path(tmp_path) / "regimes_summary.csv"))
    table = table.set_index(["algorithm", "np"])
    assert list(table.index) == [("sync", 1), ("sync", 2), ("downpour", 2)]  # allreduce family first
    assert table.loc[("sync", 2), "samples/s"] == "151 [149, 154]" and table.loc[("sync", 2), "repeats"] == 3
    assert table.loc[("downpour", 2), "speedup over"] == "sync np 1"
    assert table.loc[("downpour", 2), "speedup"].startswith("1.20 [")
    assert table.loc[("downpour", 2), "censored"] == 1 and table.loc[("sync", 1), "censored"] == 0
    assert table.loc[("sync", 1), "seconds to target"] == "2.88 [1.21, 6.85]"
    assert table.loc[("downpour", 2), "final accuracy"] == "0.900 [0.900, 0.900]"
