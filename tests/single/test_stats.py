"""bench.metrics.stats and bench.metrics.claims on figures whose answer is known, and a study's repeats (single
process: the plan, the data split and the model initialisation of its repeats)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench import BenchError
from bench.metrics import claims, stats
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


def noisy(rng, n, centre, sd=0.02):
    return centre * np.exp(rng.normal(0.0, sd, n))


def test_bootstrap_interval_of_a_paired_ratio_covers_the_known_ratio():
    rng = np.random.default_rng(1)
    base = noisy(rng, 8, 100.0, sd=0.3)  # repeats differ a lot from each other...
    r = stats.paired_ratio(base * noisy(rng, 8, 1.5, sd=0.05), base)  # ...the pairing removes it
    assert r["n"] == 8 and r["ci_low"] < 1.5 < r["ci_high"] and r["ci_high"] - r["ci_low"] < 0.15
    assert r["outcome"] == "faster" and r["effect"] == pytest.approx(1.5, rel=0.05)
    assert r["sign_p"] == pytest.approx(2 * 0.5**8)  # every ratio above 1: the exact sign test's smallest p
    # a time is better when smaller: the ratio is the reference's over the algorithm's
    t = stats.paired_ratio(base / 2, base, higher_is_better=False)
    assert t["effect"] == pytest.approx(2.0) and t["outcome"] == "faster"


@pytest.mark.parametrize("values, expected", [
    ([1.5, 1.6, 1.55, 1.7], "faster"),         # an interval above 1
    ([0.5, 0.6, 0.55], "slower"),              # below
    ([0.8, 1.3, 1.0, 0.9, 1.2], "inconclusive"),  # across 1
    ([1.4, 1.2], "faster"),                    # no interval with 2 values: the side of the median
    ([0.7], "slower"),
    ([1.0, 1.0], "tie"),
    ([math.nan, math.nan], "undefined"),
])
def test_the_side_of_a_summary_uses_its_interval_and_with_few_values_its_median(values, expected):
    assert stats.side(stats.describe(values)) == expected


def test_identical_runs_are_inconclusive_and_a_2x_effect_with_small_noise_is_faster():
    rng = np.random.default_rng(2)
    runs = noisy(rng, 5, 50.0, sd=0.1)
    same = stats.paired_ratio(runs, runs.copy())
    assert same["effect"] == pytest.approx(1.0) and same["outcome"] == "inconclusive"
    assert same["ci_low"] <= 1.0 <= same["ci_high"]
    double = stats.paired_ratio(2 * runs * noisy(rng, 5, 1.0), runs)
    assert double["outcome"] == "faster" and double["ci_low"] > 1.8
    assert stats.paired_ratio(runs, 2 * runs)["outcome"] == "slower"


def test_fewer_than_three_repeats_have_no_interval():
    for values in ([1.0], [1.0, 2.0]):
        d = stats.describe(values)
        assert math.isnan(d["ci_low"]) and math.isnan(d["ci_high"]) and d["n"] == len(values)
        assert stats.paired_ratio(values, [1.0] * len(values))["outcome"] == "inconclusive"
    d = stats.describe([1.0, 2.0, 3.0, 100.0, np.nan])
    assert d["n"] == 4 and d["median"] == 2.5 and d["olympic_mean"] == 2.5
    assert d["ci_low"] <= d["median"] <= d["ci_high"]


def test_holm_adjusts_step_down_and_keeps_order():
    # m = 4: 0.01*4, 0.02*3, 0.03*2 -> 0.06, 0.04*1 -> max(0.06, 0.04)
    assert stats.holm([0.03, 0.01, 0.04, 0.02]).tolist() == pytest.approx([0.06, 0.04, 0.06, 0.06])
    out = stats.holm([0.5, np.nan, 0.001])
    assert out[0] == pytest.approx(0.5) and math.isnan(out[1]) and out[2] == pytest.approx(0.002)


# ----------------------------------------------------------------------------- cells, claims


REG = {"sha256": "f" * 64, "cells": []}
"""A registration the synthetic cells were made under (their ``judged`` is empty)."""


def cells_frame(effects: dict[str, float], repeats: int, sd: float = 0.02, link: str = "100mbit", seed: int = 3,
                comm_share: float = 0.5) -> pd.DataFrame:
    """Cells of a regime: sync's throughput ~100 per repeat (varying between repeats), each algorithm's x effect."""
    rng = np.random.default_rng(seed)
    base = noisy(rng, repeats, 100.0, sd=0.2)
    rows = []
    for algo, effect in {"sync": 1.0, **effects}.items():
        tp = base * effect * (noisy(rng, repeats, 1.0, sd) if algo != "sync" else 1.0)
        for k in range(repeats):
            rows.append({"hardware": f"emu-{link}", "study": "s", "algorithm": algo, "np": 4, "tag": f"r{k}",
                         "repeat": k, "workload": "regimes", "judged": "", "point": "", "link": link, "link_delay": "0ms", "straggler": "none", "throughput": tp[k],
                         "slowest_worker_rate": tp[k] / 4, "throughput_window": "all-active",
                         "comm_share": comm_share, "time_to_target_s": 1000.0 / tp[k], "censored": False,
                         "final_accuracy": 0.9, "mean_staleness": math.nan, "regime": f"{link}, no straggler"})
    return pd.DataFrame(rows)


def by_source(table: pd.DataFrame, source: str) -> pd.Series:
    return table.set_index("source").loc[source]


def test_claims_reproduced_inconclusive_not_reproduced_and_not_testable():
    table = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25, "sgp": 2.0}, repeats=5), registration=REG)
    assert list(table.columns) == claims.COLUMNS and len(table) == len(claims.LEGACY)
    vishnu = by_source(table, "Vishnu et al. 2017")
    assert vishnu["verdict"] == "reproduced" and vishnu["n"] == 5 and vishnu["tests"] == 2
    assert vishnu["ci_low"] > 1.0 and vishnu["effect"] == pytest.approx(1.25, rel=0.05)  # the weaker of the two
    # sgp at 2x by time: not where communication is half the step, reproduced where it dominates (a slow network)
    assert by_source(table, "Assran et al. 2019")["verdict"] == "not testable here"
    slow = claims.claims(cells_frame({"sgp": 2.0}, repeats=5, comm_share=0.8), registration=REG)
    assert by_source(slow, "Assran et al. 2019")["verdict"] == "reproduced"
    lasgd = by_source(table, "LASGD, 2022")
    assert lasgd["verdict"] == "not testable here"  # lasgd did not run: the published study is named
    assert "docs/results/regimes/tables/claims.csv" in lasgd["evidence"]
    # one subject no better than sync (identical figures): not every test supports -> inconclusive
    same = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.0}, repeats=5, sd=0.0), registration=REG)
    assert by_source(same, "Vishnu et al. 2017")["verdict"] == "inconclusive"
    # one subject clearly slower: contradicted
    worse = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 0.6}, repeats=5), registration=REG)
    assert by_source(worse, "Vishnu et al. 2017")["verdict"] == "not reproduced"
    assert by_source(worse, "Vishnu et al. 2017")["effect"] == pytest.approx(0.6, rel=0.05)
    # a single run per cell (the default study): no verdict on degenerate cells
    single = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=1), registration=REG)
    assert by_source(single, "Vishnu et al. 2017")["verdict"] == "not testable here"
    assert "fewer than 3 repeats" in by_source(single, "Vishnu et al. 2017")["evidence"]
    # communication not comparable to compute: the rule's cells do not exist
    dominated = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5, comm_share=0.95), registration=REG)
    assert by_source(dominated, "Vishnu et al. 2017")["verdict"] == "not testable here"


def test_overlap_gain_above_its_ceiling_is_not_counted_as_support():
    # comm share 0.5: overlap gains at most 1/max(0.5, 0.5) = 2; a 3x "gain" is a measurement problem
    table = claims.claims(cells_frame({"delayed": 3.0, "layerwise": 3.0}, repeats=5), registration=REG)
    row = by_source(table, "Vishnu et al. 2017")
    assert row["verdict"] == "inconclusive" and "above the ceiling" in row["evidence"]


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


# ----------------------------------------------------------------------------- repeats of a study


@pytest.fixture
def params_file(tmp_path):
    """A copy of params.yaml beside the repository's hardware profiles and one study, ``rep`` (:func:`rep_file`)."""
    from bench.resolve import params_path

    path = tmp_path / "params.yaml"
    path.write_text(params_path().read_text())
    (tmp_path / "pipelines" / "studies").mkdir(parents=True)
    (tmp_path / "pipelines" / "hardware").symlink_to(params_path().resolve().parent / "pipelines" / "hardware")
    (tmp_path / "pipelines" / "studies" / "rep.yaml").write_text(
        "profile: tiny\nalgorithms: [sync]\nnp: [1, 2]\nrepeats: 3\nsets: {max_steps: 5}\n")
    return path


@pytest.fixture
def rep_file(params_file):
    """The study file of ``rep``: pipelines/studies/rep.yaml beside ``params_file``."""
    return params_file.parent / "pipelines" / "studies" / "rep.yaml"


def test_repeats_share_the_split_differ_in_initialisation_and_are_planned_repeat_major(params_file):
    from bench.data import Shard, load_dataset
    from bench.models import build_model
    from bench.study import load_study
    from bench.study.plan import planned_runs

    study = load_study("rep", params_file)
    runs = planned_runs(study, "sync")
    assert [(c.repeat, c.launch.np, c.tag) for c in runs] == [(0, 1, "r0"), (0, 2, "r0"), (1, 1, "r1"), (1, 2, "r1"),
                                                              (2, 1, "r2"), (2, 2, "r2")]
    first, second = runs[0].train, runs[2].train
    assert second.seed == first.seed + 1 and second.split_seed == first.split_seed
    a, b = load_dataset(first), load_dataset(second)
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)  # the same split
    ma, mb = build_model(first, a.input_shape, a.num_classes), build_model(second, b.input_shape, b.num_classes)
    assert not torch.equal(next(ma.parameters()), next(mb.parameters()))  # another initialisation
    sa, sb = Shard(a, 2, 0, 16, first.seed), Shard(b, 2, 0, 16, second.seed)
    assert not np.array_equal(sa.order(0), sb.order(0))  # another shard order


def test_sets_by_np_apply_per_worker_count_before_an_algorithms_own_and_name_only_counts_the_study_runs(params_file, rep_file):
    from bench.study import load_study
    from bench.study.plan import planned_runs

    text = rep_file.read_text()
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {2: {lr: 0.4}}\n", 1))
    runs = planned_runs(load_study("rep", params_file), "sync")
    assert {(c.launch.np, c.train.lr) for c in runs} == {(1, 0.05), (2, 0.4)}  # tiny's lr 0.05 at np 1
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {2: {lr: 0.4}}\n"
                                        "sets_by_algorithm: {sync: {lr: 0.2}}\n", 1))
    assert {c.train.lr for c in planned_runs(load_study("rep", params_file), "sync")} == {0.2}
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {4: {lr: 0.4}}\n", 1))
    with pytest.raises(BenchError, match="sets_by_np names worker counts 4, which the study does not run; valid: 1, 2"):
        load_study("rep", params_file)


def test_repeats_must_be_positive(params_file, rep_file):
    from bench.study import load_study

    rep_file.write_text(rep_file.read_text().replace("repeats: 3", "repeats: 0"))
    with pytest.raises(BenchError, match="repeats must be >= 1, got 0"):
        load_study("rep", params_file)


def test_a_censored_time_to_target_bounds_the_comparison_one_way_only():
    """A run that never reached the target has only a lower bound for its time: against a reference that reached it
    sooner it may be ``slower`` but never ``faster``, even when its bound is short; a pair censored on both sides is
    left out; a censored reference can be beaten but not lost to."""
    from bench.metrics.stats import censored_ratio

    def pairs(alg, ref, alg_c, ref_c):
        return pd.DataFrame({"repeat": range(len(alg)), "time_to_target_s": alg, "time_to_target_s_ref": ref,
                             "censored": alg_c, "censored_ref": ref_c})

    # the algorithm's runs were cut short at 1 s (censored) while sync needed 4 s: its bound looks 4x faster
    r = censored_ratio(pairs([1.0, 1.01, 0.99, 1.0], [4.0, 4.1, 3.9, 4.0], [True] * 4, [False] * 4))
    assert r["ci_low"] > 1 and r["outcome"] == "inconclusive" and math.isnan(r["p_above"])
    # censored at 8 s where sync reached the target at 4 s: slower, whatever the true time
    r = censored_ratio(pairs([8.0, 8.1, 7.9, 8.0], [4.0, 4.1, 3.9, 4.0], [True] * 4, [False] * 4))
    assert r["outcome"] == "slower" and r["p_below"] < 0.05
    # sync censored at 8 s, the algorithm reached the target at 2 s: faster
    assert censored_ratio(pairs([2.0, 2.1, 1.9, 2.0], [8.0] * 4, [False] * 4, [True] * 4))["outcome"] == "faster"
    # both censored in every repeat: nothing to compare
    r = censored_ratio(pairs([2.0] * 4, [8.0] * 4, [True] * 4, [True] * 4))
    assert r["n"] == 0 and r["outcome"] == "inconclusive"


def test_a_claims_evidence_says_where_runs_never_reached_the_target():
    """A subject that never reaches the target within its epochs ends sooner than sync: its 'time' is a bound, and the
    evidence beside the effect says so (regimes-lm's LASGD read x2.24 [2.06, 2.44] with nothing saying it was one)."""
    cells = cells_frame({"lasgd": 2.0, "sgp": 1.5}, repeats=5, link="42mbit", comm_share=0.8)
    cells.loc[cells["algorithm"] == "lasgd", "censored"] = True
    row = by_source(claims.claims(cells, registration=REG), "LASGD, 2022")
    assert row["verdict"] == "inconclusive" and row["effect"] > 1
    assert "never reached the target in the 5 pairs compared: lasgd in 5, sync in 0; the effect is an upper bound: " \
        "it cannot support" in row["evidence"] and "lasgd in 5, sgp in 0;" in row["evidence"]
    # sync's run of repeat 0 censored too: that pair says nothing and is left out, the rest still bound one way
    cells.loc[(cells["algorithm"] == "sync") & (cells["repeat"] == 0), "censored"] = True
    row = by_source(claims.claims(cells, registration=REG), "LASGD, 2022")
    assert "in the 4 pairs compared: lasgd in 4, sync in 0; 1 pair(s) where neither did left out; the effect is an " \
        "upper bound" in row["evidence"]
    assert "never reached" not in by_source(claims.claims(cells_frame({"sgp": 2.0}, repeats=5, comm_share=0.8),
                                                          registration=REG), "Assran et al. 2019")["evidence"]


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


# ----------------------------------------------------------------------------- link calibration, per-cell repeats


def test_link_rate_gives_the_aimed_share_of_a_ring_allreduce_step():
    from bench.study.calibrate import link_rate, rate_text

    compute, payload, n = 0.014, 431_144, 4
    for share in (0.1, 0.5, 0.75, 0.9):
        rate = link_rate(share, compute, payload, n)
        t = 2 * (n - 1) / n * 8 * payload / rate  # the allreduce's time on that link, bandwidth only
        assert t / (t + compute) == pytest.approx(share)
    assert link_rate(0.9, compute, payload, n) < link_rate(0.5, compute, payload, n)
    assert rate_text(369.6e6) == "370mbit" and rate_text(2e5) == "1mbit"
    with pytest.raises(BenchError, match="0 < share < 1"):
        link_rate(1.0, compute, payload, n)


def test_share_links_are_planned_at_their_calibrated_rate_and_repeats_where_chooses_each_cells_repeats(params_file, rep_file):
    from bench.study import load_study
    from bench.study.plan import plan, planned_runs

    text = rep_file.read_text().replace(
        "np: [1, 2]\nrepeats: 3\nsets: {max_steps: 5}\n",
        "np: [2]\nrepeats: 1\nhardware: emu\nsets: {max_steps: 5}\n"
        "grid: {link: ['', share0.5], slow_factor: [1.0, 3.0]}\nsets_by_np: {2: {slow_ranks: [1]}}\n"
        "repeats_where:\n  - {sets: {link: [share0.5], slow_factor: [3.0]}, repeats: 0}\n"
        "  - {algorithms: [sync], sets: {link: ['']}, repeats: 3}\n", 1)
    rep_file.write_text(text)
    study = load_study("rep", params_file)
    with pytest.raises(BenchError, match="needs its calibration .* run `python -m bench study calibrate`"):
        planned_runs(study, "sync")
    study.layout.dir.mkdir(parents=True)
    (study.layout.dir / "calibration.json").write_text(json.dumps(
        {"target_accuracy": 0.5, "links": {"share0.5": {"share": 0.5, "rate": "37mbit", "bits_per_s": 3.7e7}}}))
    runs = planned_runs(study, "sync")
    got = [(c.tag, c.launch.link, c.launch.link_share_aimed, c.repeat) for c in runs]
    assert got == [("linknone-slow_factor1.0-r0", "", 0.0, 0), ("linknone-slow_factor3.0-r0", "", 0.0, 0),
                   ("linkshare0.5-slow_factor1.0-r0", "37mbit", 0.5, 0),
                   ("linknone-slow_factor1.0-r1", "", 0.0, 1), ("linknone-slow_factor3.0-r1", "", 0.0, 1),
                   ("linknone-slow_factor1.0-r2", "", 0.0, 2), ("linknone-slow_factor3.0-r2", "", 0.0, 2)]
    assert plan(study)["sync"] == 7
    ones = "sets: {link: ['']}, repeats: 3}"
    for old, bad, error in (  # each bad study is refused when loaded, naming the value and the valid choices
            ("slow_factor: [3.0]}, repeats: 0", "slow_factor: [3.0]}, repeats: -1",
             r"repeats_where\[0\]: repeats must be an integer >= 0 \(0: not run\), got -1"),
            ("algorithms: [sync], sets", "algorithms: [ddp], sets",
             r"repeats_where\[1\] names ddp, which the study does not run; valid: sync"),
            (ones, "sets: {link: ['']}, repeat: 3}",
             r"unknown study 'rep' key 'repeats_where' 'repeat'; valid: algorithms, np, repeats, sets"),
            (ones, "sets: {link: ['']}}", r"repeats_where\[1\] has no repeats; give one, an integer >= 0"),
            (ones, "sets: {link: ''}, repeats: 3}", r"invalid study 'rep' key 'repeats_where' 'sets' '': expected a list"),
            ("share0.5]", "share1.5]", "'share1.5' aims at a communication share outside")):
        assert old in text
        rep_file.write_text(text.replace(old, bad))
        with pytest.raises(BenchError, match=error):
            load_study("rep", params_file)


def test_the_claims_table_is_rendered_once_for_the_report_the_regimes_notebook_and_the_readme():
    from bench.metrics.report import claims_lines, table_html

    table = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5), registration=REG)
    lines = claims_lines(table)
    assert lines[2] == "| source | claim | verdict | effect [95 % interval] | n | rule | quote |"
    assert "registration `ffffffffffff`" in lines[0]
    assert "every verdict is `exploratory`" in claims_lines(claims.claims(cells_frame({"delayed": 1.3}, repeats=5)))[0]
    vishnu = next(line for line in lines if line.startswith("| Vishnu et al. 2017 |"))
    row = by_source(table, "Vishnu et al. 2017")
    assert f"| reproduced | x{row['effect']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] | 5 |" in vishnu
    assert claims_lines(table, evidence=True)[2].endswith("| rule | quote | evidence |")
    untestable = claims_lines(claims.claims(cells_frame({}, repeats=1), registration=REG))
    assert len(untestable) == 1 and "every claim is `not testable here` (Vishnu et al. 2017 / LASGD" in untestable[0]
    assert claims_lines(pd.DataFrame()) == []
    # a report table: no index, no column empty in every row (vs_sync.csv's point of an ungridded study)
    html = table_html(pd.DataFrame({"algorithm": ["ddp", "sgp"], "point": [math.nan, math.nan], "tag": ["", ""],
                                    "effect": [1.23456, math.nan]}))
    assert ">algorithm<" in html and ">effect<" in html and "1.235" in html
    assert ">point<" not in html and ">tag<" not in html and "row_heading" not in html


def test_a_hash_that_reads_as_a_number_stays_a_name_in_the_tables_and_the_rendered_claims(tmp_path):
    """A registration hash or commit of hex digits can also be a float (727525265e09) or an integer: read back
    from claims.csv or runs.csv it must still be the text that was written (a fresh clone's CI met one)."""
    from bench.metrics.report import claims_lines, read_table

    table = claims.claims(cells_frame({"delayed": 1.3}, repeats=5), registration={**REG, "sha256": "727525265e09" + "0" * 52})
    table.to_csv(tmp_path / "claims.csv", index=False)
    pd.DataFrame({"run": ["1e3"], "git_commit": ["0123456"], "config_hash": ["12e4"], "registration": ["727525265e09"],
                  "wall_s": [1.5]}).to_csv(tmp_path / "runs.csv", index=False)
    back = read_table(tmp_path / "claims.csv")
    assert (back["registration"] == "727525265e09").all()
    assert "registration `727525265e09`" in claims_lines(back)[0]
    runs = read_table(tmp_path / "runs.csv")
    assert runs.iloc[0][["run", "git_commit", "config_hash", "registration"]].tolist() == ["1e3", "0123456", "12e4", "727525265e09"]
    assert runs["wall_s"].dtype == float and read_table(tmp_path / "absent.csv").empty


def test_a_claim_is_judged_on_its_repeated_cells_and_says_which_it_left_out():
    five = cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5)
    one = cells_frame({"delayed": 0.5, "layerwise": 0.5}, repeats=1, link="1gbit")
    row = by_source(claims.claims(pd.concat([five, one], ignore_index=True), registration=REG), "Vishnu et al. 2017")
    assert row["verdict"] == "reproduced" and row["n"] == 5 and row["tests"] == 2
    assert "2 test(s) with fewer than 3 repeats left out" in row["evidence"] and "at 1gbit/" in row["evidence"]


def test_only_runs_the_registration_allows_carry_a_verdict_and_without_one_every_verdict_is_exploratory():
    five = cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5)
    row = by_source(claims.claims(five, registration=REG), "Vishnu et al. 2017")
    assert row["verdict"] == "reproduced" and row["registration"] == "f" * 12 and row["workload"] == "regimes"
    assert row["interval_method"].startswith("Student t") and row["quote"] == claims.RULES["vishnu"].quote
    # two of the five repeats from a dirty tree: the verdict rests on the three others, and says so
    dirty = five.assign(judged=["run from a dirty tree" if k >= 3 else "" for k in five["repeat"]])
    row = by_source(claims.claims(dirty, registration=REG), "Vishnu et al. 2017")
    assert row["n"] == 3 and "not judged: 6 run(s) run from a dirty tree" in row["evidence"]
    # every run dirty: nothing to judge
    assert by_source(claims.claims(five.assign(judged="run from a dirty tree"), registration=REG),
                     "Vishnu et al. 2017")["verdict"] == "not testable here"
    # no registration: the same numbers, but the verdict is exploratory
    row = by_source(claims.claims(five), "Vishnu et al. 2017")
    assert row["verdict"] == "exploratory: reproduced" and row["registration"] == "none"
    # a parameter server is a host more: the verdict says so
    ps = cells_frame({"downpour": 1.2}, repeats=5).assign(straggler="1x3.0-cpu")
    ps["cpu_cores"] = [1.8 if a == "downpour" else 1.44 for a in ps["algorithm"]]
    ps["straggler_pace"] = 1.0
    row = by_source(claims.claims(ps, claims.select(["async-straggler"]), registration=REG), "Lian et al. 2018")
    assert "unequal CPU: downpour 1.8 cores" in row["evidence"] and "sync 1.44 cores" in row["evidence"]
    # the CPU of the tested cells only: delayed and sync on 2 hosts of 0.9 of a core are equal, though sync also ran
    # elsewhere on 4 hosts of 0.36 (regimes v2's Vishnu cells had read "unequal CPU: delayed 1.8, sync 1.44")
    two_hosts = cells_frame({"delayed": 1.3}, repeats=5).assign(np=2, cpu_cores=1.8)
    four_hosts = cells_frame({}, repeats=5).assign(cpu_cores=1.44)
    both = pd.concat([two_hosts, four_hosts], ignore_index=True)
    row = by_source(claims.claims(both, claims.select(["vishnu"]), registration=REG), "Vishnu et al. 2017")
    assert row["tests"] == 1 and "unequal CPU" not in row["evidence"]
    # one row per claim and workload
    two = pd.concat([five, five.assign(workload="regimes-lm")], ignore_index=True)
    table = claims.claims(two, claims.select(["vishnu"]), registration=REG)
    assert sorted(table["workload"]) == ["regimes", "regimes-lm"] and list(table.columns[1:12]) == [
        "claim", "quote", "workload", "effect", "ci_low", "ci_high", "interval_method", "n", "rule", "registration",
        "verdict"]


def test_a_studys_run_time_is_its_span_and_the_time_covered_by_its_runs(tmp_path):
    """run_times: a pause between runs (or a run redone later) is in the span, not in the busy time."""
    import os

    from bench.study.publish import run_times

    assert all(math.isnan(v) for v in run_times(tmp_path))
    for name, start, end in [("a-r0", 0, 100), ("a-r1", 50, 120), ("b-r0", 1000, 1030), ("c-r0", 1010, 1020)]:
        d = tmp_path / name.split("-")[0] / "emu" / name
        d.mkdir(parents=True)
        for f, t in (("config.json", start), ("summary.json", end)):
            (d / f).write_text("{}")
            os.utime(d / f, (t, t))
    (tmp_path / "d" / "emu" / "d-r0").mkdir(parents=True)  # planned, never ended: not a run yet
    (tmp_path / "d" / "emu" / "d-r0" / "config.json").write_text("{}")
    assert run_times(tmp_path) == (1030, 120 + 30)


def test_runs_prepared_together_are_laid_end_to_end_though_their_records_differ_by_seconds(tmp_path):
    """``study run`` prepares every run of an algorithm before the first runs, a second or so apart (regimes-latency:
    16 runs of sync prepared within 6 s ran for 17 min): each starts when the one before it ended, so the busy time is
    the sum of their wall times, and a later study run starts at its own preparation."""
    import json
    import time as _time

    from bench.study.publish import run_times

    def made(name, created, wall):
        d = tmp_path / name.split("-")[0] / "emu" / name
        d.mkdir(parents=True)
        stamp = _time.strftime("%Y-%m-%dT%H:%M:%S+0000", _time.gmtime(created))
        (d / "config.json").write_text("{}")
        (d / "system.json").write_text(json.dumps({"created": stamp}))
        (d / "summary.json").write_text(json.dumps({"wall_s": wall}))

    t0 = 1_790_000_000
    for k in range(3):
        made(f"a-r{k}", t0 + k, 100.0)  # prepared 1 s apart, each ran 100 s after the one before it
    made("b-r0", t0 + 1000, 50.0)  # the next algorithm's study run, after a pause
    span, busy = run_times(tmp_path)
    assert busy == pytest.approx(300 + 50)
    assert span == pytest.approx(1050)


def test_the_t_interval_covers_at_small_n_where_the_percentile_bootstrap_did_not():
    """The coverage simulation behind the choice of interval (docs/statistics.md): at n = 5 normal log-ratios, the
    t-interval holds its 95 % (4,000 replicates: +-0.007 of binomial noise), the percentile bootstrap falls well short."""
    from bench.metrics.coverage import bootstrap_cover, draw, t_cover

    rng = np.random.default_rng(1)
    x, truth = draw(rng, "normal", 4000, 5)
    assert 0.935 <= t_cover(x, truth) <= 0.965
    assert bootstrap_cover(x[:1000], truth, rng) < 0.9


def test_a_registered_companion_without_runs_yet_publishes_nothing_of_it_and_refuses_nothing():
    """``publish`` of a study whose registered companion has not run (regimes v2 beside regimes-lm): its runs table is
    empty but has the provenance columns, and the registration check passes on it (it raised KeyError)."""
    from bench.study.publish import RUN_COLUMNS, check_registered, runs_table
    from bench.study.spec import load_study

    table = runs_table([], {"sha256": "0" * 64})
    assert list(table.columns) == RUN_COLUMNS and table.empty
    check_registered(load_study("regimes-lm"), table, {"sha256": "0" * 64})


def test_the_published_claims_have_a_row_per_claim_and_workload_and_say_where_a_claim_was_not_registered():
    """Two workloads' claims.csv: the claims one study registered and the other did not get a row on the other
    workload saying so, not a silent gap; rows grouped by claim, the judged rows unchanged."""
    lenet = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5), registration=REG)
    lm = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5).assign(workload="lm"),
                       rules=claims.select(claims.LEGACY[:1]), registration=REG)
    table = claims.every_workload([lenet, lm])
    assert len(table) == 2 * len(lenet) and list(table.columns) == claims.COLUMNS
    assert table.groupby(["source", "claim"], sort=False).size().eq(2).all()
    added = table[table["evidence"] == claims.NOT_REGISTERED]
    assert len(added) == len(lenet) - 1 and set(added["workload"]) == {"lm"}
    assert (added["verdict"] == "not testable here").all() and (added["n"] == 0).all() and added["effect"].isna().all()
    judged = table[table["evidence"] != claims.NOT_REGISTERED]
    pd.testing.assert_frame_equal(judged.sort_values(["workload", "claim"]).reset_index(drop=True),
                                  pd.concat([lenet, lm]).sort_values(["workload", "claim"]).reset_index(drop=True))
