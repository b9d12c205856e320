"""bench.metrics on curves and records whose figures are known by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import BenchError
from bench.metrics.accuracy import accuracy_after_time, convergence_table, time_to_accuracy, time_to_target
from bench.metrics.selection import status_table
from bench.metrics.temporal import integrate_to, temporal_efficiency, window_curve, window_for
from bench.metrics.throughput import speedup_table, throughput, window_throughput, worker_rates
from bench.metrics.timesplit import time_split
from bench.results import Run


def make_run(algorithm="sync", np_=2, status="ok", step_s=(0.1,), warmup_s=1.0, staleness=None, reason=None):
    """An in-memory Run: every worker takes one warm-up step of ``warmup_s``, then steps of ``step_s`` (10 samples)."""
    rows = []
    for rank in range(np_):
        t = warmup_s
        rows.append(dict(rank=rank, step=1, t=t, samples=10, step_s=warmup_s, accuracy=0.0, loss=1.0,
                         compute_s=1.0, comm_s=1.0, wait_s=1.0, staleness=staleness, warmup=True))
        for i, dt in enumerate(step_s, start=2):
            t += dt
            rows.append(dict(rank=rank, step=i, t=t, samples=10, step_s=dt, accuracy=0.5, loss=1.0,
                             compute_s=0.06, comm_s=0.03, wait_s=0.01, staleness=staleness, warmup=False))
    config = {"algorithm": algorithm, "launch": {"np": np_, "hardware": "local"}, "study": "s", "tag": ""}
    summary = {"status": status, **({"reason": reason} if reason else {})}
    return Run(Path(f"/x/{algorithm}-np{np_}"), config, {}, summary, pd.DataFrame(rows), pd.DataFrame())


# ----------------------------------------------------------------------------- temporal efficiency


def test_window_curve_means_records_in_each_window_and_skips_empty_starts():
    t = [10.0, 10.5, 11.0, 11.2, 14.0]          # earliest record is the origin: 0, .5, 1, 1.2, 4
    acc = [0.0, 1.0, 0.2, 0.4, 0.9]
    starts, y = window_curve(t, acc, window=1.0, stride=1.0)
    assert starts.tolist() == [0.0, 1.0, 4.0]   # starts 2 and 3 have no record in [s, s+1)
    assert y == pytest.approx([0.5, 0.3, 0.9])
    starts, y = window_curve(t, acc, window=2.0, stride=1.0)
    assert starts.tolist() == [0.0, 1.0, 3.0, 4.0]
    assert y == pytest.approx([0.4, 0.3, 0.9, 0.9])


def test_integral_of_piecewise_linear_curve():
    x, y = np.array([0.0, 2.0, 4.0]), np.array([0.0, 1.0, 1.0])
    assert integrate_to(x, y, 4.0) == pytest.approx(1.0 + 2.0)
    assert integrate_to(x, y, 3.0) == pytest.approx(1.0 + 1.0)
    assert integrate_to(x, y, 1.0) == pytest.approx(0.25)


def test_constant_curves_ratio_of_levels():
    t = np.arange(0, 10, 0.1)
    assert temporal_efficiency(t, np.full_like(t, 0.5), t, np.full_like(t, 0.25)) == pytest.approx(2.0)
    assert temporal_efficiency(t, np.full_like(t, 0.25), t, np.full_like(t, 0.5)) == pytest.approx(0.5)


def test_linear_against_constant_up_to_the_shorter_run():
    # a: one record per second, accuracy t/10 for t = 0..10 -> f_a(t) = t/10 on [0, 10]
    ta = np.arange(0.0, 11.0)
    # b: constant 0.5 for t = 0..6 -> last window start 6 = m; int_0^6 t/10 = 1.8, int_0^6 0.5 = 3
    tb = np.arange(0.0, 7.0)
    e = temporal_efficiency(ta, ta / 10, tb, np.full_like(tb, 0.5), window=1.0, stride=1.0)
    assert e == pytest.approx(1.8 / 3.0)


def test_interpolates_across_skipped_windows_and_ignores_time_origin():
    # a: accuracy 1 at t=0 and 0 at t=4, nothing between: f_a falls linearly, integral 2 on [0, 4]
    # b: accuracy 1 every second up to 6 -> m = 4, integral 4
    e = temporal_efficiency([100.0, 104.0], [1.0, 0.0], np.arange(7.0), np.ones(7), window=1.0, stride=1.0)
    assert e == pytest.approx(0.5)


def test_window_of_five_seconds_stride_one():
    # records every 0.5 s with accuracy 1 before t=5 and 0 from t=5 on, 20 s long
    t = np.arange(0.0, 20.0, 0.5)
    a = (t < 5).astype(float)
    starts, y = window_curve(t, a, window=5.0, stride=1.0)
    assert starts[:7].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert y[:7] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0])
    # against a constant 1: int_0^19 f_a = 0.5 (0..1) + ... trapezoids of 1,.8,.6,.4,.2,0 = 2.5
    assert temporal_efficiency(t, a, t, np.ones_like(t), window=5.0, stride=1.0) == pytest.approx(2.5 / 19.0)


def test_default_window_is_a_fraction_of_the_shorter_run_so_short_runs_have_a_value():
    t = np.arange(0.0, 20.0, 0.5)  # span 19.5 s
    a = (t < 5).astype(float)
    assert window_for(t, t) == pytest.approx((19.5 / 20, 19.5 / 100))
    assert temporal_efficiency(t, a, t, np.ones_like(t)) == pytest.approx(
        temporal_efficiency(t, a, t, np.ones_like(t), window=19.5 / 20, stride=19.5 / 100))
    # two runs of under a second (what a fixed 5 s window leaves undefined): defined, a better than b
    short = np.linspace(0.0, 0.8, 17)
    assert temporal_efficiency(short, np.full(17, 0.9), short * 1.2, np.full(17, 0.3)) == pytest.approx(3.0)


def test_invalid_window_and_too_short_runs_are_errors():
    with pytest.raises(BenchError, match="window"):
        window_curve([0.0, 1.0], [1.0, 1.0], window=0.0)
    with pytest.raises(BenchError, match="stride"):
        window_curve([0.0, 1.0], [1.0, 1.0], stride=-1.0)
    with pytest.raises(BenchError, match="too short"):
        temporal_efficiency([0.0, 0.4], [1.0, 1.0], [0.0, 3.0], [1.0, 1.0], window=5.0, stride=1.0)


# ----------------------------------------------------------------------------- throughput, speedup, split


def test_throughput_is_samples_over_the_timed_window_not_a_mean_of_step_rates():
    # local SGD with lambda = 4: three cheap local steps (1/64 s) and one slow averaging step (1/8 s), 32 samples
    # each, 2 workers (durations exact in binary, so window edges fall exactly between cycles). True rate:
    # 2 x 4 x 32 / (11/64 s) = 1489.5 samples/s; the mean of per-step rates, (3 x 2048 + 256) / 4 = 1600 per worker,
    # would say 3200.
    cycle = (1 / 64, 1 / 64, 1 / 64, 1 / 8) * 5
    rows = []
    for rank in range(2):
        t = 0.5
        rows.append(dict(rank=rank, t=t, step_s=0.5, samples=32, warmup=True))
        for dt in cycle:
            t += dt
            rows.append(dict(rank=rank, t=t, step_s=dt, samples=32, warmup=False))
    tp = window_throughput(pd.DataFrame(rows), windows=5)
    assert tp["throughput"] == pytest.approx(2 * 4 * 32 / (11 / 64))
    assert tp["window_s"] == pytest.approx(55 / 64) and tp["window_samples"] == 2 * 20 * 32
    # each sub-window holds one whole cycle: the interval is a point
    assert tp["ci_low"] == pytest.approx(tp["throughput"]) and tp["ci_high"] == pytest.approx(tp["throughput"])


def worker_steps(rank: int, warm_end: float, step_s: float, steps: int) -> list[dict]:
    """One warm-up step ending at ``warm_end``, then ``steps`` steps of ``step_s``, 10 samples each."""
    return [dict(rank=rank, t=warm_end, step_s=warm_end, samples=10, warmup=True)] + [
        dict(rank=rank, t=warm_end + step_s * k, step_s=step_s, samples=10, warmup=False) for k in range(1, steps + 1)]


def test_timed_window_opens_after_the_last_warmup_and_closes_at_the_first_finish():
    # rank 0: warm-up ends at 1 s, steps of 0.1 s until 2 s; rank 1 warms up until 1.5 s and runs until 3 s
    tp = window_throughput(pd.DataFrame(worker_steps(0, 1.0, 0.1, 10) + worker_steps(1, 1.5, 0.1, 15)))
    assert tp["window_s"] == pytest.approx(0.5)  # [1.5, 2.0]: both workers working
    assert tp["throughput"] == pytest.approx(2 * 10 / 0.1)  # steps of both ending in (1.5, 2.0]
    assert tp["workers"] == 2


def test_throughput_falls_back_to_per_worker_rates_when_no_span_has_every_worker_working():
    # the fast worker (10 steps of 0.1 s after a 1 s warm-up) is done at 2 s; the straggler's warm-up ends at 2.5 s
    tp = window_throughput(pd.DataFrame(worker_steps(0, 1.0, 0.1, 10) + worker_steps(1, 2.5, 0.3, 10)))
    assert tp["window"] == "per-worker"
    # no aggregate over different spans: each worker's own rate, and the slowest
    assert math.isnan(tp["throughput"]) and math.isnan(tp["ci_low"])
    assert tp["worker_rates"] == pytest.approx({0: 10 / 0.1, 1: 10 / 0.3})
    assert tp["slowest_worker_rate"] == pytest.approx(10 / 0.3)
    # with overlap the all-active window is used
    overlapping = worker_steps(0, 1.0, 0.1, 10) + worker_steps(1, 1.5, 0.3, 10)
    assert window_throughput(pd.DataFrame(overlapping))["window"] == "all-active"


def test_throughput_of_a_run_with_interval_only_from_five_or_more_sub_windows():
    r = make_run(np_=2, step_s=(0.1,) * 25)  # 25 timed steps a worker: 5 sub-windows of 5 steps
    tp = throughput(r)
    assert tp["throughput"] == pytest.approx(2 * 10 / 0.1) and tp["workers"] == 2
    assert tp["ci_low"] <= tp["throughput"] <= tp["ci_high"]
    assert tp["slowest_worker_rate"] == pytest.approx(10 / 0.1) and worker_rates(r.steps) == pytest.approx({0: 100.0, 1: 100.0})
    short = throughput(make_run(np_=2, step_s=(0.1, 0.1, 0.1, 0.1)))  # room for 2 sub-windows only: no interval
    assert short["throughput"] == pytest.approx(2 * 10 / 0.1) and math.isnan(short["ci_low"]) and math.isnan(short["ci_high"])


def test_speedup_efficiency_and_against_sync():
    tp = pd.DataFrame([
        dict(hardware="h", study="s", algorithm="sync", np=1, tag="", throughput=100.0),
        dict(hardware="h", study="s", algorithm="sync", np=2, tag="", throughput=150.0),
        dict(hardware="h", study="s", algorithm="agn", np=2, tag="", throughput=300.0),
        dict(hardware="h", study="s", algorithm="ddp", np=1, tag="", throughput=50.0),
        dict(hardware="h", study="s", algorithm="ddp", np=2, tag="", throughput=150.0),
        dict(hardware="h", study="s", algorithm="sgp", np=2, tag="x", throughput=150.0),
    ])
    df = speedup_table(tp).set_index(["algorithm", "np"])
    assert df.loc[("sync", 2), "speedup"] == pytest.approx(1.5)
    assert df.loc[("sync", 2), "efficiency"] == pytest.approx(0.75)
    assert df.loc[("sync", 2), "speedup_over"] == "sync np 1"
    # no np=1 run of agn: over sync's np=1 run (plain SGD at one worker); ddp has its own
    assert df.loc[("agn", 2), "speedup"] == pytest.approx(3.0) and df.loc[("agn", 2), "speedup_over"] == "sync np 1"
    assert df.loc[("ddp", 2), "speedup"] == pytest.approx(3.0) and df.loc[("ddp", 2), "speedup_over"] == "ddp np 1"
    assert math.isnan(df.loc[("sgp", 2), "speedup"]) and df.loc[("sgp", 2), "speedup_over"] == ""  # no np=1 at its point
    assert df.loc[("agn", 2), "vs_sync"] == pytest.approx(2.0)


def test_time_split_shares_and_failed_runs_left_out_but_listed():
    runs = [make_run("sync"), make_run("ddp", status="failed", reason="rank 1: RuntimeError")]
    split = time_split(runs)
    assert split["algorithm"].tolist() == ["sync"]
    row = split.iloc[0]
    assert (row.compute_s, row.comm_s, row.wait_s) == pytest.approx((0.06, 0.03, 0.01))
    assert (row.compute_share, row.comm_share, row.wait_share) == pytest.approx((0.6, 0.3, 0.1))
    st = status_table(runs).set_index("algorithm")
    assert st.loc["ddp", "status"] == "failed" and "RuntimeError" in st.loc["ddp", "reason"]


def test_time_to_accuracy_is_interpolated_and_a_run_that_never_reaches_it_is_censored():
    ev = pd.DataFrame({"t": [1.0, 2.0, 3.0, 4.0], "epoch": [0.5, 1.0, 1.5, 2.0], "accuracy": [0.2, 0.6, 0.5, 0.9]})
    assert time_to_accuracy(ev, 0.5) == pytest.approx(1.75)  # 0.2 at 1 s, 0.6 at 2 s: 3/4 of the way
    assert time_to_accuracy(ev, 0.5, by="epoch") == pytest.approx(0.875)
    assert time_to_accuracy(ev, 0.1) == 1.0  # the first evaluation already reaches it
    assert time_to_accuracy(ev, 0.95) != time_to_accuracy(ev, 0.95)   # NaN: never reached
    assert time_to_target(ev, 0.5, train_s=4.5) == (pytest.approx(1.75), False)
    assert time_to_target(ev, 0.95, train_s=4.5) == (4.5, True)  # censored: > its training time
    assert accuracy_after_time(ev, 3.5) == 0.5
    assert math.isnan(accuracy_after_time(ev, 0.5))


def test_a_target_window_needs_the_mean_of_the_last_evaluations_to_reach_the_target():
    # one evaluation at 0.9 between ones near 0.6: window 1 takes it, window 3 waits for the mean of three to reach it
    ev = pd.DataFrame({"t": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "epoch": [0, 1, 2, 3, 4, 5],
                       "accuracy": [0.1, 0.9, 0.6, 0.9, 0.9, 0.9]})
    assert time_to_accuracy(ev, 0.85) == pytest.approx(0.75 / 0.8)  # 0.1 at 0 s, 0.9 at 1 s
    # means of the last three: 0.1, 0.5, 0.533, 0.8, 0.8, 0.9: 0.85 halfway between 4 s and 5 s
    assert time_to_accuracy(ev, 0.85, window=3) == pytest.approx(4.5)
    assert time_to_accuracy(ev, 0.85, by="epoch", window=3) == pytest.approx(4.5)
    assert time_to_target(ev, 0.85, train_s=5.5, window=3) == (pytest.approx(4.5), False)
    assert time_to_target(ev, 0.95, train_s=5.5, window=3) == (5.5, True)
    assert time_to_target(ev, 0.85, train_s=5.5, window=1)[0] == time_to_accuracy(ev, 0.85)  # 1: the evaluations
    run = make_run("sync")
    run.evals, run.summary["train_s"] = ev, 5.5
    assert convergence_table([run], 0.85, 10.0, window=3).iloc[0]["seconds_to_0.85"] == pytest.approx(4.5)
    with pytest.raises(ValueError, match="window must be a number of evaluations >= 1, got 0"):
        time_to_accuracy(ev, 0.85, window=0)


def test_a_censored_run_stays_in_the_convergence_table():
    reached, never = make_run("sync"), make_run("ddp")
    reached.evals = pd.DataFrame({"t": [1.0, 2.0], "epoch": [0.5, 1.0], "accuracy": [0.4, 0.8]})
    never.evals = pd.DataFrame({"t": [1.0, 2.0], "epoch": [0.5, 1.0], "accuracy": [0.3, 0.5]})
    reached.summary["train_s"], never.summary["train_s"] = 2.5, 3.0
    conv = convergence_table([reached, never], 0.6, 10.0).set_index("algorithm")
    assert conv.loc["sync", "seconds_to_0.6"] == pytest.approx(1.5) and not conv.loc["sync", "censored"]
    assert conv.loc["ddp", "seconds_to_0.6"] == 3.0 and conv.loc["ddp", "censored"]


def repeat_run(algorithm: str, repeat: int, accuracy: float) -> Run:
    """A 2-worker run of a study's repeat ``repeat`` whose workers' mini-batch accuracy is ``accuracy`` throughout."""
    run = make_run(algorithm, step_s=(0.1,) * 40)
    steps = run.steps.assign(accuracy=accuracy)
    config = {**run.config, "tag": f"r{repeat}", "repeat": repeat}
    return Run(Path(f"/x/{algorithm}-np2-r{repeat}"), config, {}, run.summary, steps, pd.DataFrame())


def test_temporal_efficiency_pairs_repeats_with_the_same_seed_and_the_matrix_is_their_median():
    from bench.metrics.temporal import te_matrix, te_pairs

    runs = [repeat_run("sync", k, 0.5) for k in range(4)]  # repeat 3 has no partner: left out of sync vs ddp
    runs += [repeat_run("ddp", k, acc) for k, acc in enumerate((0.25, 0.5, 0.125))]
    pairs = te_pairs(runs)
    ab = pairs[(pairs["a"] == "sync-np2@local") & (pairs["b"] == "ddp-np2@local")].sort_values("repeat")
    assert ab["repeat"].tolist() == [0, 1, 2]
    assert ab["E"].tolist() == pytest.approx([2.0, 1.0, 4.0])
    matrix = te_matrix(runs, pairs=pairs)
    assert sorted(matrix.index) == ["ddp-np2@local", "sync-np2@local"]  # configurations, not runs
    assert matrix.loc["sync-np2@local", "ddp-np2@local"] == pytest.approx(2.0)
    assert matrix.loc["ddp-np2@local", "sync-np2@local"] == pytest.approx(0.5)
    assert matrix.loc["sync-np2@local", "sync-np2@local"] == pytest.approx(1.0)
    assert len(pairs[(pairs["a"] == "sync-np2@local") & (pairs["b"] == "sync-np2@local")]) == 4
    assert te_matrix(runs).equals(matrix)


def test_te_grid_pairs_each_lambda_by_seed_and_calls_a_winner_only_outside_the_interval(tmp_path):
    from bench.metrics.temporal import te_grid

    def at(algorithm, repeat, accuracy, lam):
        run = repeat_run(algorithm, repeat, accuracy)
        run.config = {**run.config, "params": {"communication_window": lam}}
        return run

    runs = [at("agn", k, 0.5, lam) for lam in (1, 4) for k in range(3)]
    runs += [at("aeasgd", k, acc, 1) for k, acc in enumerate((0.25, 0.5, 0.125))]  # E 2, 1, 4: the interval holds 1
    runs += [at("aeasgd", k, acc, 4) for k, acc in enumerate((0.25, 0.2, 0.5 / 3))]  # E 2, 2.5, 3: above 1
    runs.append(at("aeasgd", 3, 0.5, 4))  # no agn partner of the same seed: left out
    grid = te_grid(runs, "agn", "aeasgd", "communication_window").set_index("communication_window")
    # E is the geometric mean over the seeds, its interval the t-interval of the mean log E (t(2) = 4.303)
    assert grid.loc[1, "E"] == pytest.approx(2.0) and grid.loc[1, "n"] == 3
    logs = np.log([2.0, 1.0, 4.0])
    low = np.exp(logs.mean() - 4.302653 * logs.std(ddof=1) / np.sqrt(3))
    assert grid.loc[1, "ci_low"] == pytest.approx(low, rel=1e-5) and grid.loc[1, "winner"] == "inconclusive"
    assert grid.loc[4, "E"] == pytest.approx((2 * 2.5 * 3) ** (1 / 3)) and grid.loc[4, "n"] == 3
    assert grid.loc[4, "ci_low"] > 1.0 and grid.loc[4, "winner"] == "agn"
    from bench.study.readme import te_lines

    (tmp_path / "tables").mkdir()
    (tmp_path / "metrics").mkdir()
    grid.reset_index()[["hardware", "np", "communication_window", "E", "ci_low", "ci_high", "n", "winner"]].to_csv(
        tmp_path / "tables" / "te_grid.csv", index=False)
    assert te_lines(tmp_path) == []  # no metrics file: the notebook did not finish
    (tmp_path / "metrics" / "temporal_efficiency.json").write_text('{"grid": {"a": "agn", "b": "aeasgd"}}')
    lines = te_lines(tmp_path)
    assert lines[1].startswith("## Temporal efficiency E(agn, aeasgd)")
    assert "| local | 2 | 1 | 2.00 [0.36, 11.19] | 3 | inconclusive |" in lines
    assert any(line.startswith("| local | 2 | 4 | 2.47 [") and line.endswith("| 3 | agn |") for line in lines)
    one = te_grid([at("agn", 0, 0.25, 1), at("aeasgd", 0, 0.5, 1)], "agn", "aeasgd", "communication_window")
    assert one["E"].tolist() == pytest.approx([0.5]) and one["winner"].tolist() == ["aeasgd"]  # one seed: E's side
    assert math.isnan(one["ci_low"].iloc[0])


def test_configuration_keys_drop_the_repeat_and_families_come_from_the_registry():
    from bench.metrics.selection import family, frame_points, point_key
    from bench.results import steps_frame

    run = repeat_run("downpour", 2, 0.5)
    assert point_key(run) == "downpour-np2@local"
    df = steps_frame([run, repeat_run("sync", 1, 0.5)])
    assert set(frame_points(df)) == {"downpour-np2@local", "sync-np2@local"}
    assert (family("downpour"), family("sgp"), family("lasgd")) == ("parameter-server", "decentralised", "allreduce")
    assert family("no-such-algorithm") == "other"


def test_temporal_efficiency_up_to_the_slower_runs_time_to_target_is_not_drowned_by_the_plateau():
    """a reaches the plateau 0.9 at t = 2 s, b at t = 8 s, both train on to 100 s: over the whole span E is near 1
    (the plateau dominates); up to b's time to the target, where they differ, a is clearly better."""
    t = np.arange(0.0, 100.0, 0.1)
    a, b = np.minimum(0.9, 0.45 * t), np.minimum(0.9, 0.1125 * t)
    whole = temporal_efficiency(t, a, t, b, window=0.5, stride=0.1)
    early = temporal_efficiency(t, a, t, b, window=0.5, stride=0.1, horizon=8.0)
    assert whole < 1.05 and early > 1.5
