"""The advise-validation study's plan and arithmetic (bench.advise.validate), and the time-to-target relation's
interpolation between measured worker counts (bench.predict.target): no run here (the study's runs are its own)."""

from __future__ import annotations

import datetime
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.advise import validate

V1, V2 = validate.DESIGNS["advise-validation"], validate.DESIGNS["advise-validation-2"]
from bench.predict import target
from bench.study import load_study
from bench.study.register import seeds_of


def test_relation_interpolates_between_measured_worker_counts_and_never_extrapolates():
    rel = target.relation()
    measured = {k: v for k, v in rel.items() if "interpolated" not in v["source"]}
    assert ("sync", 2) in measured and ("sync", 4) in measured and ("sync", 3) not in measured
    s2, s4, s3 = rel["sync", 2]["samples"], rel["sync", 4]["samples"], rel["sync", 3]["samples"]
    w = math.log(1.5) / math.log(2)
    assert s3 == pytest.approx(math.exp((1 - w) * math.log(s2) + w * math.log(s4)), rel=1e-12)
    assert min(s2, s4) <= s3 <= max(s2, s4)
    assert rel["sync", 3]["source"] == "regimes-speedup/sync/np3 interpolated between np2 and np4"
    top = max(n for _, n in measured)
    assert not any(n > top for _, n in rel)  # no worker count beyond the measured ones
    assert {a for a, _ in rel} == {a for a, _ in measured}


def test_relation_moves_to_another_learning_rate_by_the_sweeps_measured_ratio_or_backs_nothing():
    rel, sweep = target.relation(), target._sweep()
    r = rel["sync", 4]
    assert r["lr"] == pytest.approx(0.1)  # regimes-speedup runs sync at the profile's rate
    assert target.backing("sync", 4, 0.1, rel, sweep) == (r["samples"], r["source"])
    samples, source = target.backing("sync", 4, 0.2, rel, sweep)
    assert samples == pytest.approx(r["samples"] * sweep["sync", 0.2] / sweep["sync", 0.1], rel=1e-12)
    assert source.endswith("(regimes-lr/sync lr 0.1 -> 0.2)")
    # a method the sweep does not run moves as its family's representative does
    assert target.backing("ddp", 4, 0.2, rel, sweep)[1].endswith("(regimes-lr/sync lr 0.1 -> 0.2)")
    # AGN's relation is at 0.05, where neither AGN nor DOWNPOUR reached the target in the sweep: nothing backs 0.2
    assert rel["agn", 4]["lr"] == pytest.approx(0.05) and ("agn", 0.05) not in sweep
    assert target.backing("agn", 4, 0.2, rel, sweep) is None
    assert target.time_to_target("agn", 4, 1000.0, rel, lr=0.2, sweep=sweep) is None
    assert target.backing("sync", 4, 0.3, rel, sweep) is None  # a rate the sweep never ran
    assert target.time_to_target("sync", 4, 1000.0, rel, lr=0.2, sweep=sweep) == pytest.approx(samples / 1000.0)


@pytest.mark.parametrize("d", [V1, V2], ids=lambda d: d.study)
def test_every_scenario_runs_every_method_at_every_seed_on_the_generators_cluster(d):
    s = next(x for x in validate.scenarios(d) if x["straggler_host"] is not None and x["delay_ms"])
    planned = validate.configs(s, d)
    assert len(planned) == len(validate.METHODS) * len(d.seeds)
    assert [c.algorithm for _, c in planned[:len(validate.METHODS)]] == list(validate.METHODS)  # seed-major
    for name, c in planned:
        assert c.launch.np == s["np"] and c.study == d.study and c.profile == "regimes"
        rate = s["rate_bps"]
        assert c.launch.link == (f"{rate / 1e9:g}gbit" if rate >= 1e9 else f"{rate / 1e6:g}mbit")
        assert c.launch.link_delay == f"{s['delay_ms']:g}ms"
        assert c.launch.cpu_per_host == s["cpu_per_host"]
        assert c.launch.emulated_cpu == {s["straggler_host"]: s["cpu_per_host"] / 2}
        assert name.endswith(f"-seed{c.train.seed}")
    # the test's seeds are none of the relation's study's (whose runs the forecast's samples to target come from)
    assert not set(d.seeds) & seeds_of(load_study(target.CALIBRATION_STUDY))
    assert validate.plan_file(s, planned[0][0], d).is_relative_to(d.runs)


def test_the_second_design_is_new_scenarios_new_seeds_and_its_own_probes():
    """advise-validation-2 shares no seed and no scenario with the first (the same generator, another seed), and
    probes each scenario itself, beside its runs, where the first read the probe study's committed files."""
    assert not set(V1.seeds) & set(V2.seeds) and len(V2.seeds) > len(V1.seeds)
    spec1, spec2 = (yaml.safe_load(d.scenarios_file.read_text()) for d in (V1, V2))
    assert spec1["seed"] != spec2["seed"] and spec2["generator"] == spec1["generator"] == "bench.probe.validate.draw"
    from bench.probe.validate import draw

    assert spec2["scenarios"] == draw(spec2["seed"], len(spec2["scenarios"]))  # what the generator draws, untouched
    assert len(spec2["scenarios"]) >= 8
    assert V2.probe_live and not V1.probe_live
    assert validate.probed_file(spec2["scenarios"][0], V2).is_relative_to(V2.runs)
    assert validate.probed_file(spec1["scenarios"][0], V1).is_file()  # the first study's probed files are committed


def test_an_unknown_study_or_until_is_refused_in_one_line(capsys):
    assert validate.main(["report", "--study", "advise-validation-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: unknown study 'advise-validation-3'; valid: advise-validation, advise-validation-2"
    assert validate.main(["run", "--study", "advise-validation-2", "--until", "25:00"]) == 2
    assert capsys.readouterr().err.strip() == "error: bad --until '25:00': give a UTC time HH:MM, e.g. 14:05"
    at = validate.parse_until("00:00")
    now = datetime.datetime.now(datetime.UTC)
    assert now < at <= now + datetime.timedelta(days=1) and (at.hour, at.minute) == (0, 0)
    assert validate.parse_until(None) is None


def _runs(ttt: dict[str, list[float]], censored: dict[str, list[bool]] | None = None) -> pd.DataFrame:
    rows = []
    for m, times in ttt.items():
        for k, t in enumerate(times):
            rows.append({"id": "s1", "method": m, "seed": V1.seeds[k], "np": 3, "throughput": 1000.0,
                         "time_to_target_s": t, "censored": (censored or {}).get(m, [False] * 3)[k],
                         "train_s": 20.0, "final_accuracy": 0.9, "judged": ""})
    return pd.DataFrame(rows)


def _forecasts(order: list[str], ttt: dict[str, float | None]) -> dict[str, pd.DataFrame]:
    return {"s1": pd.DataFrame([{"algorithm": m, "rank": i, "basis": "time to target" if ttt[m] else "throughput only",
                                 "time_to_target_s": ttt[m] if ttt[m] else np.nan, "throughput": 1000.0}
                                for i, m in enumerate(order, 1)])}


def test_regret_is_the_picks_median_over_the_best_with_a_paired_interval():
    speed = ["sync", "ddp", "localsgd", "lasgd", "sgp", "adpsgd"]  # measured: sync fastest, adpsgd slowest
    assert sorted(speed) == sorted(validate.METHODS)
    times = {m: [10.0 + i, 11.0 + i, 12.0 + i] for i, m in enumerate(speed)}
    times["lasgd"] = [12.5, 13.5, 15.0]
    order = ["lasgd", "sync", "ddp", "localsgd", "sgp", "adpsgd"]  # the forecast picks lasgd
    fc = {m: 10.0 + i for i, m in enumerate(speed)} | {"adpsgd": None}
    runs = _runs(times)
    cells = validate.cells(runs, _forecasts(order, fc))
    v = validate.verdicts(runs, cells, len(V1.seeds)).iloc[0]
    assert (v["pick"], v["best"]) == ("lasgd", "sync")
    assert v["regret"] == pytest.approx(13.5 / 11.0)
    ratios = np.log(np.array([12.5, 13.5, 15.0]) / np.array([10.0, 11.0, 12.0]))
    half = 4.302652729911275 * ratios.std(ddof=1) / math.sqrt(3)  # t(0.975, 2)
    assert v["regret_low"] == pytest.approx(math.exp(ratios.mean() - half))
    assert v["regret_high"] == pytest.approx(math.exp(ratios.mean() + half))
    assert not v["right"]  # 1.23 > 1.10
    assert v["spearman"] == pytest.approx(1.0)  # forecast and measured medians in the same order (adpsgd: none)
    c = cells.set_index("method")
    assert c.loc["sync", "time_to_target_error"] == pytest.approx(10.0 / 11.0 - 1)
    assert math.isnan(c.loc["adpsgd", "time_to_target_error"]) or c.loc["adpsgd", "time_to_target_error"] is None


def test_a_censored_pick_has_infinite_regret_and_a_censored_cell_is_never_the_best():
    methods = list(validate.METHODS)
    times = {m: [20.0, 21.0, 22.0] for m in methods} | {"sgp": [5.0, 5.0, 30.0], "localsgd": [8.0, 8.5, 9.0]}
    cens = {"sgp": [False, True, True]}  # most of sgp's seeds never reached the target: censored cell
    order = ["sgp", "localsgd", "lasgd", "ddp", "sync", "adpsgd"]
    runs = _runs(times, cens)
    v = validate.verdicts(runs, validate.cells(runs, _forecasts(order, {m: 10.0 + i for i, m in enumerate(methods)})),
                           len(V1.seeds))
    assert v.iloc[0]["best"] == "localsgd" and v.iloc[0]["regret"] == math.inf and not v.iloc[0]["right"]


def test_an_incomplete_scenario_gets_no_verdict():
    methods = list(validate.METHODS)
    runs = _runs({m: [10.0, 11.0] for m in methods})  # two seeds of three
    cells = validate.cells(runs, _forecasts(methods, {m: 10.0 + i for i, m in enumerate(methods)}))
    assert validate.verdicts(runs, cells, len(V1.seeds)).empty


def test_one_definition_of_a_measured_time_to_target_serves_confirm_and_the_study():
    """`advise --confirm` and advise-validation call a method's measured time to target the same thing: the median
    over the runs that reached the target when most did, else censored; a method whose minority reached it quickly
    never wins on that time."""
    from bench.advise.confirm import measured_time_to_target, measured_winner

    assert measured_time_to_target([10.0, 12.0], 3) == 11.0
    assert measured_time_to_target([10.0], 3) is None and measured_time_to_target([], 3) is None
    rows = [{"algorithm": "lucky", "time_to_target_s": measured_time_to_target([5.0], 3), "throughput": 900.0},
            {"algorithm": "steady", "time_to_target_s": measured_time_to_target([20.0, 22.0, 21.0], 3),
             "throughput": 500.0}]
    assert measured_winner(rows) == rows[1] | {"basis": "time to target"}
    assert measured_winner([r | {"time_to_target_s": None} for r in rows])["algorithm"] == "lucky"  # throughput
    runs = pd.DataFrame({"id": "s1", "method": ["m"] * 3, "seed": [1, 2, 3], "time_to_target_s": [5.0, 40.0, 40.0],
                         "censored": [False, True, True], "throughput": [1.0, 1.0, 1.0]})
    fc = {"s1": pd.DataFrame({"algorithm": ["m"], "rank": [1], "basis": ["time to target"],
                              "time_to_target_s": [4.0], "throughput": [1.0]})}
    assert validate.cells(runs, fc)["measured_time_to_target_s"].isna().all()  # the same rule in the study's table
