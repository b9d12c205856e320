"""``python -m bench.perf overhead`` measures with the suite's own metric definitions (bench.metrics.throughput and
bench.metrics.timesplit), not second copies: the plain loop's window and a run's time split, on known records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.perf.overhead import time_split
from bench.perf.plain import window
from bench.results import Run


def test_plain_loop_window_counts_the_samples_after_the_warmup_over_its_span():
    # 2 warm-up steps end at 1 and 2 s; 3 timed steps of 10 samples end at 3, 4 and 5 s: 30 samples in 3 s
    assert window([(0, t, 10, t <= 2.0) for t in (1.0, 2.0, 3.0, 4.0, 5.0)]) == pytest.approx(10.0)
    assert window([(0, 1.0, 8, True), (0, 2.0, 8, False), (0, 2.5, 8, False), (0, 3.0, 16, False)]) == pytest.approx(32 / 2.0)
    # two ranks (a plain distributed loop): the window opens at the last warm-up step of any rank (2 s) and closes
    # at the first rank's last step (2.8 s: every rank works throughout); its samples are every rank's inside it
    two = [(0, 1.0, 10, True), (0, 2.5, 10, False), (0, 3.0, 10, False), (1, 2.0, 10, True), (1, 2.8, 10, False)]
    assert window(two) == pytest.approx(20 / 0.8)
    with pytest.raises(ValueError, match="warmup_steps >= 1"):
        window([(0, 1.0, 10, False), (0, 2.0, 10, False)])


def test_time_split_is_the_metrics_split_plus_step_and_loop_time():
    rows = []
    for rank in (0, 1):
        t = 0.0
        for step in range(5):
            t += 0.010 + 0.002  # 10 ms step, then 2 ms of loop before the next one
            rows.append({"rank": rank, "step": step, "t": t, "step_s": 0.010, "compute_s": 0.006 + 0.001 * rank,
                         "comm_s": 0.003, "wait_s": 0.001 - 0.001 * rank, "samples": 32, "warmup": step == 0})
    run = Run(path=Path("r"), config={"algorithm": "sync", "launch": {"np": 2, "hardware": "local"}, "study": "s",
                                      "tag": "", "profile": "tiny"},
              system={}, summary={"status": "ok"}, steps=pd.DataFrame(rows), evals=pd.DataFrame())
    split = time_split(run)
    assert list(split) == ["step_ms", "compute_ms", "comm_ms", "wait_ms", "loop_ms"]
    assert split["step_ms"] == pytest.approx(10.0)
    assert split["compute_ms"] == pytest.approx(6.5) and split["comm_ms"] == pytest.approx(3.0)
    assert split["wait_ms"] == pytest.approx(0.5) and split["loop_ms"] == pytest.approx(2.0)


def test_thread_cpu_per_step_is_each_groups_seconds_over_the_steps_mean_over_ranks():
    from bench.perf.overhead import thread_cpu

    summary = {"steps_per_worker": 100, "cpu_threads": [
        {"wall_s": 1.0, "main": {"cpu_s": 0.8, "runq_s": 0.1, "involuntary": 200}, "horovod": {"cpu_s": 0.2, "runq_s": 0.3}},
        {"wall_s": 1.0, "main": {"cpu_s": 0.6, "runq_s": 0.3, "involuntary": 0}, "other": {"cpu_s": 0.1}}]}
    got = thread_cpu(summary)
    assert got["main_cpu_ms"] == pytest.approx(7.0) and got["main_runq_ms"] == pytest.approx(2.0)
    assert got["hvd_cpu_ms"] == pytest.approx(1.0)  # a rank without the group counts 0
    assert got["other_cpu_ms"] == pytest.approx(0.5) and got["main_preempt"] == pytest.approx(1.0)
    assert thread_cpu({"steps_per_worker": 10}) == {}  # no figures recorded: none made up


def test_verdict_against_a_target_needs_the_interval_to_exclude_it():
    from bench.perf.overhead import verdict

    def res(a, b):
        return {"a": [{"throughput": x} for x in a], "b": [{"throughput": x} for x in b]}

    assert verdict(res([99, 101, 100, 98, 102], [100, 100, 101, 99, 100]), "a", "b", 0.95)["verdict"] == "above"
    assert verdict(res([80, 81, 79, 80, 82], [100, 100, 101, 99, 100]), "a", "b", 0.95)["verdict"] == "below"
    wide = verdict(res([70, 120, 95, 80, 110], [100, 100, 100, 100, 100]), "a", "b", 0.95)
    assert wide["verdict"] == "inconclusive" and wide["ci_low"] < 0.95 < wide["ci_high"] and wide["n"] == 5


def test_at_np_1_sync_np1_is_measured_once_beside_the_plain_loops_at_np_1():
    from bench.perf.overhead import _parser, plan

    pl = plan(_parser().parse_args(["--profile", "tiny", "--np", "1"]), "tiny")
    labels = [v[0] for v in pl.variants]
    assert len(labels) == len(set(labels))  # once per repeat: the paired ratios pair repeat k with repeat k
    assert {"harness np=1 [tuned]", "sync np=1 [tuned]", "ddp np=1 [tuned]", "horovod plain np=1 [tuned]",
            "ddp plain np=1 [tuned]"} <= set(labels)
