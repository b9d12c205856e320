"""bench.metrics on curves and records whose figures are known by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import BenchError
from bench.metrics import (accuracy_after_time, integrate_to, speedup_table, status_table, temporal_efficiency,
                           throughput, time_split, time_to_accuracy, window_curve)
from bench.results import Run


def make_run(algorithm="sync", np_=2, status="ok", rates=(100.0,), warmup_rate=1.0, staleness=None, reason=None):
    """An in-memory Run: every worker's timed steps take 0.1 s for 10 x rate/100 samples."""
    rows = []
    for rank in range(np_):
        rows.append(dict(rank=rank, step=1, t=0.0, samples=10, step_s=10 / warmup_rate, accuracy=0.0, loss=1.0,
                         compute_s=1.0, comm_s=1.0, wait_s=1.0, staleness=staleness, warmup=True))
        for i, rate in enumerate(rates, start=2):
            rows.append(dict(rank=rank, step=i, t=0.1 * i, samples=10, step_s=10 / rate, accuracy=0.5, loss=1.0,
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


def test_default_window_five_seconds_stride_one():
    # records every 0.5 s with accuracy 1 before t=5 and 0 from t=5 on, 20 s long
    t = np.arange(0.0, 20.0, 0.5)
    a = (t < 5).astype(float)
    starts, y = window_curve(t, a)
    assert starts[:7].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert y[:7] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0])
    # against a constant 1: int_0^19 f_a = 0.5 (0..1) + ... trapezoids of 1,.8,.6,.4,.2,0 = 2.5
    assert temporal_efficiency(t, a, t, np.ones_like(t)) == pytest.approx(2.5 / 19.0)


def test_invalid_window_and_too_short_runs_are_errors():
    with pytest.raises(BenchError, match="window"):
        window_curve([0.0, 1.0], [1.0, 1.0], window=0.0)
    with pytest.raises(BenchError, match="stride"):
        window_curve([0.0, 1.0], [1.0, 1.0], stride=-1.0)
    with pytest.raises(BenchError, match="too short"):
        temporal_efficiency([0.0, 0.4], [1.0, 1.0], [0.0, 3.0], [1.0, 1.0], window=5.0, stride=1.0)


# ----------------------------------------------------------------------------- throughput, speedup, split


def test_throughput_excludes_warmup_and_sums_workers_with_interval():
    r = make_run(np_=2, rates=(90.0, 110.0))
    tp = throughput(r)
    assert tp["workers"] == 2 and tp["timed_steps"] == 4
    assert tp["per_worker"] == pytest.approx(100.0)
    assert tp["throughput"] == pytest.approx(200.0)
    half = 1.96 * np.std([90, 110, 90, 110], ddof=1) / 2
    assert tp["ci_low"] == pytest.approx(2 * (100 - half)) and tp["ci_high"] == pytest.approx(2 * (100 + half))


def test_speedup_efficiency_and_against_sync():
    tp = pd.DataFrame([
        dict(hardware="h", study="s", algorithm="sync", np=1, tag="", throughput=100.0),
        dict(hardware="h", study="s", algorithm="sync", np=2, tag="", throughput=150.0),
        dict(hardware="h", study="s", algorithm="agn", np=2, tag="", throughput=300.0),
    ])
    df = speedup_table(tp).set_index(["algorithm", "np"])
    assert df.loc[("sync", 2), "speedup"] == pytest.approx(1.5)
    assert df.loc[("sync", 2), "efficiency"] == pytest.approx(0.75)
    assert math.isnan(df.loc[("agn", 2), "speedup"])          # no np=1 run of agn
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


def test_time_to_accuracy_and_accuracy_after_time():
    ev = pd.DataFrame({"t": [1.0, 2.0, 3.0, 4.0], "epoch": [0.5, 1.0, 1.5, 2.0], "accuracy": [0.2, 0.6, 0.5, 0.9]})
    assert time_to_accuracy(ev, 0.55) == 2.0
    assert time_to_accuracy(ev, 0.55, by="epoch") == 1.0
    assert time_to_accuracy(ev, 0.95) != time_to_accuracy(ev, 0.95)   # NaN: never reached
    assert accuracy_after_time(ev, 3.5) == 0.5
    assert math.isnan(accuracy_after_time(ev, 0.5))
