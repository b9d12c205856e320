"""bench.metrics.claims on synthetic cells whose answer is known: verdicts, ceilings, censored evidence, registration,
the rendered and published claims tables."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from bench.metrics import claims
from support import noisy


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



def test_the_leave_one_seed_out_range_shows_a_verdict_that_hangs_on_one_seed():
    """loo_low, loo_high: the deciding bound with each repeat left out. A clear effect keeps its lower bound above 1
    whichever seed goes; one seed that carries the effect drags the range below 1 (the verdict is fragile)."""
    steady = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.3}, repeats=5), claims.select(["vishnu"]),
                           registration=REG).iloc[0]
    assert steady["verdict"] == "reproduced" and 1 < steady["loo_low"] <= steady["ci_low"] <= steady["loo_high"]
    cells = cells_frame({"delayed": 1.02, "layerwise": 1.3}, repeats=5, sd=0.005)
    lucky = (cells["algorithm"] == "delayed") & (cells["repeat"] == 0)
    cells.loc[lucky, "throughput"] *= 1.25  # one seed carries delayed's whole effect
    row = claims.claims(cells, claims.select(["vishnu"]), registration=REG).iloc[0]
    assert row["effect"] > 1 and row["loo_low"] < 1 < row["loo_high"]
    # what leave_one_out recomputes is what a table without that seed gives
    without = claims.claims(cells[cells["repeat"] != 0], claims.select(["vishnu"]), registration=REG).iloc[0]
    assert min(row["loo_low"], row["loo_high"]) <= without["ci_low"] <= max(row["loo_low"], row["loo_high"])


def test_a_rule_changed_after_its_registration_gives_an_exploratory_verdict_naming_what_changed():
    """The registration records every rule it judges (as_record); a rule edited after the runs (a threshold lowered,
    a cell added) or never recorded does not carry a registered verdict: exploratory, the changed fields named."""
    import dataclasses

    cells = cells_frame({"delayed": 1.3, "layerwise": 1.3}, repeats=5)
    (vishnu,) = claims.select(["vishnu"])
    reg = {**REG, "claims": [claims.as_record(vishnu)]}
    assert claims.claims(cells, (vishnu,), registration=reg).iloc[0]["verdict"] == "reproduced"
    edited = dataclasses.replace(vishnu, threshold=1.1)
    row = claims.claims(cells, (edited,), registration=reg).iloc[0]
    assert row["verdict"] == "exploratory: reproduced"
    assert "the rule differs from the registered one (text, threshold)" in row["evidence"]
    (lasgd,) = claims.select(["lasgd"])
    assert "does not record this rule" in claims.claims(cells, (lasgd,), registration=reg).iloc[0]["evidence"]

def test_a_rule_registered_before_a_field_came_in_keeps_its_registered_verdict():
    """min_effect, baseline and over_points came after the first registrations: a record without them holds the
    defaults they had then, so a rule at those defaults is still the registered one and one that sets them is not."""
    import dataclasses

    cells = cells_frame({"delayed": 1.3, "layerwise": 1.3}, repeats=5)
    (vishnu,) = claims.select(["vishnu"])
    old = {k: v for k, v in claims.as_record(vishnu).items() if k not in ("min_effect", "baseline", "over_points")}
    reg = {**REG, "claims": [old]}
    assert claims.not_as_registered(vishnu, reg) == ""
    assert claims.claims(cells, (vishnu,), registration=reg).iloc[0]["verdict"] == "reproduced"
    raised = dataclasses.replace(vishnu, min_effect=0.05)
    assert "(min_effect, text)" in claims.not_as_registered(raised, reg)


def test_cells_measured_with_another_target_or_window_than_registered_give_exploratory_verdicts():
    """The registration records the target accuracy and its window; cells computed with others (the target moved, a
    window of 3 after the runs) carry no registered verdict. A registration from before the window existed measured
    with window 1."""
    cells = cells_frame({"delayed": 1.3, "layerwise": 1.3}, repeats=5)
    (vishnu,) = claims.select(["vishnu"])
    reg = {**REG, "claims": [claims.as_record(vishnu)], "metrics": {"target_accuracy": 0.85}}
    same = {"target_accuracy": 0.85, "target_window": 1}
    assert claims.metrics_not_as_registered(same, reg) == ""
    assert claims.claims(cells, (vishnu,), registration=reg, metrics=same).iloc[0]["verdict"] == "reproduced"
    row = claims.claims(cells, (vishnu,), registration=reg, metrics={**same, "target_window": 3}).iloc[0]
    assert row["verdict"] == "exploratory: reproduced"
    assert "measured with target_window 3, registered 1: its verdict is exploratory" in row["evidence"]
    moved = claims.metrics_not_as_registered({**same, "target_accuracy": 0.8}, {**reg, "metrics": {
        "target_accuracy": 0.85, "target_window": 1}})
    assert moved == "measured with target_accuracy 0.8, registered 0.85: its verdict is exploratory"


def rule(**fields) -> claims.Rule:
    """A throughput rule of ``sgp`` against ``sync`` (and ``ddp``) on the synthetic cells, with ``fields``."""
    return claims.Rule("test", "sgp beats its references", ("sgp",), fields.pop("references", ("sync",)),
                       fields.pop("metric", "throughput"), **fields)


def test_a_minimum_effect_turns_a_real_but_small_gain_into_a_contradiction():
    """x1.02 measured tightly is better than sync, but not by the 5 % worth reporting: supported without a minimum
    effect, contradicted with one; a x1.3 gain is supported either way, and the rule says its bar."""
    small = cells_frame({"sgp": 1.02}, repeats=6, sd=0.002)
    assert claims.claims(small, (rule(),), registration=REG).iloc[0]["verdict"] == "reproduced"
    row = claims.claims(small, (rule(min_effect=0.05),), registration=REG).iloc[0]
    assert row["verdict"] == "not reproduced" and row["ci_high"] < 1.05
    assert "> 1.05 (threshold 1, minimum effect 5%)" in row["rule"]
    big = claims.claims(cells_frame({"sgp": 1.3}, repeats=6), (rule(min_effect=0.05),), registration=REG).iloc[0]
    assert big["verdict"] == "reproduced" and big["ci_low"] > 1.05 and big["loo_low"] > 1.05


def test_the_strongest_baseline_is_the_best_reference_of_each_cell_and_claims_csv_names_it():
    """sgp at x1.3 of sync where ddp runs at x1.5 of sync: against every reference it loses to ddp; against the
    strongest baseline only ddp is tested, named in ``baseline``; a baseline that never reached the target in any
    repeat is not the strongest, whatever its recorded times."""
    cells = cells_frame({"sgp": 1.3, "ddp": 1.5}, repeats=5)
    each = claims.claims(cells, (rule(references=("sync", "ddp")),), registration=REG).iloc[0]
    assert each["verdict"] == "not reproduced" and each["baseline"].startswith("ddp (every reference")
    best = claims.claims(cells, (rule(references=("sync", "ddp"), baseline="best"),), registration=REG).iloc[0]
    assert best["verdict"] == "not reproduced" and best["tests"] == 1
    assert best["baseline"] == "ddp (the best of sync, ddp here by median throughput)"
    assert best["effect"] == pytest.approx(1.3 / 1.5, rel=0.05) and "vs the best of sync and ddp" in best["rule"]
    from bench.metrics.report import claims_lines
    assert "| ddp (the best of sync, ddp here by median throughput) |" in "\n".join(claims_lines(pd.DataFrame([best])))
    faster = claims.claims(cells_frame({"sgp": 2.0, "ddp": 1.5}, repeats=5),
                           (rule(references=("sync", "ddp"), baseline="best"),), registration=REG).iloc[0]
    assert faster["verdict"] == "reproduced" and faster["effect"] == pytest.approx(2.0 / 1.5, rel=0.05)
    timed = cells_frame({"sgp": 1.3, "ddp": 1.5}, repeats=5)
    timed.loc[timed["algorithm"] == "ddp", "censored"] = True  # ddp's times are its budget's end, not the target
    by_time = claims.claims(timed, (rule(references=("sync", "ddp"), baseline="best", metric="time_to_target_s"),),
                            registration=REG).iloc[0]
    assert by_time["baseline"].startswith("sync (the best of") and by_time["verdict"] == "reproduced"


def test_robustness_compares_each_methods_worst_over_the_grid_it_shares():
    """Hermans' robustness: agn holds 0.9 at both rates where downpour diverges (0.1) at one. Point by point one test
    finds no difference; the worst over the shared grid is x9. A point only one method ran is not in its worst."""
    cells = pd.concat([cells_frame({"agn": 1.0, "downpour": 1.0}, repeats=5, seed=s).assign(point=p)
                       for s, p in ((3, "lr0.05"), (4, "lr0.2"))], ignore_index=True)
    cells = cells[cells["algorithm"] != "sync"].copy()
    rng = np.random.default_rng(5)
    cells["final_accuracy"] = noisy(rng, len(cells), 0.9, sd=0.01)
    diverged = (cells["algorithm"] == "downpour") & (cells["point"] == "lr0.2")
    cells.loc[diverged, "final_accuracy"] = noisy(rng, int(diverged.sum()), 0.1, sd=0.01)
    point_by_point = claims.tests(claims.Rule("t", "c", ("agn",), ("downpour",), "final_accuracy"), cells)
    assert sorted(point_by_point["point"]) == ["lr0.05", "lr0.2"]
    worst = claims.Rule("t", "c", ("agn",), ("downpour",), "final_accuracy", over_points="worst", min_effect=0.05)
    row = claims.claims(cells, (worst,), registration=REG).iloc[0]
    assert row["verdict"] == "reproduced" and row["effect"] == pytest.approx(9.0, rel=0.05)
    assert "/np4/worst of 2: x8.9" in row["evidence"] and "the worst over the grid of final_accuracy" in row["rule"]
    lonely = pd.concat([cells, cells[(cells["algorithm"] == "agn") & (cells["point"] == "lr0.05")]
                        .assign(point="lr1.0", final_accuracy=0.01)], ignore_index=True)
    assert claims.claims(lonely, (worst,), registration=REG).iloc[0]["effect"] == pytest.approx(row["effect"])
    with pytest.raises(claims.BenchError, match="over_points 'worst' needs a metric"):
        claims.tests(claims.Rule("t", "c", ("agn",), ("downpour",), "time_to_target_s", over_points="worst"), cells)


def test_robustness_over_the_workers_too_takes_one_worst_across_them():
    """Robust to the distributed hyperparameters: agn is the weaker at 2 workers (0.85 against 0.95 at lr 0.05) and
    downpour diverges at 4 (0.1 at lr 0.2). Per number of workers the 2-worker test contradicts; over the learning
    rates and the workers together each method has one worst (agn 0.85, downpour 0.1): one test, x8.5. A rule limited
    to some workers takes the worst over those only."""
    acc = {("agn", 2, "lr0.05"): 0.85, ("downpour", 4, "lr0.2"): 0.1}
    cells = pd.concat([cells_frame({"agn": 1.0, "downpour": 1.0}, repeats=6, seed=s).assign(point=p, np=n)
                       for s, (n, p) in enumerate([(2, "lr0.05"), (2, "lr0.2"), (4, "lr0.05"), (4, "lr0.2")])],
                      ignore_index=True)
    cells = cells[cells["algorithm"] != "sync"].copy()
    rng = np.random.default_rng(7)
    centre = [acc.get(k, 0.95) for k in zip(cells["algorithm"], cells["np"], cells["point"])]
    cells["final_accuracy"] = np.asarray(centre) * noisy(rng, len(cells), 1.0, sd=0.01)
    per_np = claims.Rule("t", "c", ("agn",), ("downpour",), "final_accuracy", over_points="worst", min_effect=0.05)
    split = claims.claims(cells, (per_np,), registration=REG).iloc[0]
    assert split["verdict"] == "not reproduced" and split["effect"] == pytest.approx(0.85 / 0.95, rel=0.03)
    together = dataclasses.replace(per_np, over_points="worst_workers")
    row = claims.claims(cells, (together,), registration=REG).iloc[0]
    assert row["verdict"] == "reproduced" and row["tests"] == 1 and row["effect"] == pytest.approx(8.5, rel=0.05)
    assert "/np2+4/worst of 4: x8." in row["evidence"]
    assert "the worst over the grid and the numbers of workers of final_accuracy" in row["rule"]
    assert math.isfinite(row["loo_low"]) and row["loo_low"] > 1.05
    only_two = claims.claims(cells, (dataclasses.replace(together, workers=(2,)),), registration=REG).iloc[0]
    assert "/np2/worst of 2: x0.90" in only_two["evidence"] and only_two["verdict"] == "not reproduced"
    with pytest.raises(claims.BenchError, match="over_points 'best' is not one of each, worst, worst_workers"):
        claims.tests(dataclasses.replace(per_np, over_points="best"), cells)


def test_overlap_gain_above_its_ceiling_is_not_counted_as_support():
    # comm share 0.5: overlap gains at most 1/max(0.5, 0.5) = 2; a 3x "gain" is a measurement problem
    table = claims.claims(cells_frame({"delayed": 3.0, "layerwise": 3.0}, repeats=5), registration=REG)
    row = by_source(table, "Vishnu et al. 2017")
    assert row["verdict"] == "inconclusive" and "above the ceiling" in row["evidence"]


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


def test_the_claims_table_is_rendered_once_for_the_report_the_regimes_notebook_and_the_readme():
    from bench.metrics.report import claims_lines, table_html

    table = claims.claims(cells_frame({"delayed": 1.3, "layerwise": 1.25}, repeats=5), registration=REG)
    lines = claims_lines(table)
    assert lines[2] == "| source | claim | verdict | effect [95 % interval] | deciding bound, one seed left out | n | rule | quote |"
    before = claims_lines(table.drop(columns=claims.LOO_COLUMNS))  # a table analysed before those columns
    assert before[2] == "| source | claim | verdict | effect [95 % interval] | n | rule | quote |"
    assert "registration `ffffffffffff`" in lines[0]
    assert "every verdict is `exploratory`" in claims_lines(claims.claims(cells_frame({"delayed": 1.3}, repeats=5)))[0]
    vishnu = next(line for line in lines if line.startswith("| Vishnu et al. 2017 |"))
    row = by_source(table, "Vishnu et al. 2017")
    assert (f"| reproduced | x{row['effect']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] | "
            f"[{row['loo_low']:.2f}, {row['loo_high']:.2f}] | 5 |") in vishnu
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
