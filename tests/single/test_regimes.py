"""bench.metrics.regimes: cells of repeats paired, summarised, censored runs kept."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.metrics.regimes import cell_table, summary, versus_sync, winners
from bench.results import Run


def make_run(algorithm: str, step_s: float, steps: int, repeat: int) -> Run:
    """An in-memory run of repeat ``repeat``: 2 workers, a 1 s warm-up step, then ``steps`` steps of ``step_s``
    (10 samples each)."""
    rows = []
    for rank in range(2):
        t = 1.0
        rows.append(dict(rank=rank, step=1, t=t, samples=10, step_s=1.0, comm_s=0.0, wait_s=0.0, warmup=True))
        for i in range(steps):
            t += step_s
            rows.append(dict(rank=rank, step=i + 2, t=t, samples=10, step_s=step_s, comm_s=0.0, wait_s=0.0, warmup=False))
    config = {"algorithm": algorithm, "launch": {"np": 2, "hardware": "local"}, "study": "s", "tag": f"r{repeat}",
              "repeat": repeat, "train": {}}
    return Run(Path(f"/x/{algorithm}-r{repeat}"), config, {}, {"status": "ok", "train_s": 2.0}, pd.DataFrame(rows),
               pd.DataFrame())


def test_cells_of_repeats_are_paired_summarised_and_censored_runs_kept():
    runs = []
    for k in range(3):
        for algo, step in (("sync", 0.1), ("ddp", 0.05)):
            r = make_run(algo, step, 6, k)
            reached = algo == "ddp"
            r.evals = pd.DataFrame({"t": [0.5, 1.0], "epoch": [0.5, 1.0], "accuracy": [0.2, 0.9 if reached else 0.4]})
            runs.append(r)
    cells = cell_table(runs, target=0.55, budget_s=10.0)
    assert len(cells) == 6 and set(cells["repeat"]) == {0, 1, 2} and set(cells["point"]) == {""}
    sync = cells[cells["algorithm"] == "sync"]
    assert sync["censored"].all() and (sync["time_to_target_s"] == 2.0).all()  # kept at its training time
    assert cells.loc[cells["algorithm"] == "ddp", "speedup_vs_sync"].tolist() == pytest.approx([2.0] * 3)
    s = summary(cells).set_index(["algorithm", "metric"])
    assert s.loc[("ddp", "throughput"), "n"] == 3 and s.loc[("sync", "time_to_target_s"), "censored"] == 3
    v = versus_sync(cells).set_index("metric")
    # the ratio is exactly 2 in every repeat: a point interval, which excludes 1
    assert v.loc["throughput", "outcome"] == "faster" and v.loc["throughput", "n"] == 3
    assert v.loc["throughput", "effect"] == pytest.approx(2.0) and v.loc["throughput", "ci_low"] == pytest.approx(2.0)
    assert v.loc["time_to_target_s", "outcome"] == "faster"  # sync censored at 2 s, ddp at 0.5 + 0.35/0.7 * 0.5 s
    best = winners(cells).iloc[0]
    assert best["highest_throughput"] == "ddp" and best["first_to_target"] == "ddp" and best["repeats"] == 3
    # a faster run at another worker count competes only at its own count
    one = cells[cells["algorithm"] == "sync"].assign(np=1, throughput=1e9, time_to_target_s=0.01, censored=False)
    w = winners(pd.concat([cells, one], ignore_index=True)).set_index("np")
    assert w.loc[1, "highest_throughput"] == "sync" and w.loc[1, "first_to_target"] == "sync"
    n = int(cells["np"].iloc[0])
    assert w.loc[n, "highest_throughput"] == "ddp" and w.loc[n, "first_to_target"] == "ddp"
