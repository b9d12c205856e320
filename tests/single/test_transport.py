"""The transport's terms (bench/predict/transport.py) on known cases, the fit on cells of known constants, the step
model's delay terms, and the collectives benchmark's command line (bench/perf/collectives.py)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from bench.predict import transport
from support import REPO

D = 0.005
K = {"eff": 0.96, "h_s": 0.001, "h0_s": 0.0002, "byte_s": 0.0, "w_allgather": 1.0, "burst": 0.0,
     **{f"a_{op}": 0.0 for op in transport.OPS}, **{f"nu_{op}": 1.0 for op in transport.HOROVOD_OPS}}


def test_gloo_segments_follow_allreduce_cc():
    # at least two segments a rank (2n), segments of at most 1 MiB, a whole number of segments a rank
    assert transport.segments(4096, 2) == (1024, 4)
    assert transport.segments(4096, 4) == (512, 8)
    assert transport.segments(16 << 20, 3) == (1 << 20, 18)
    assert transport.segments(64 << 20, 4) == (1 << 20, 64)


def test_two_in_flight_closed_form_equals_the_recurrence():
    rng = random.Random(1)
    for _ in range(300):
        transfers, first, wire = rng.randint(1, 80), rng.uniform(1e-4, 0.1), rng.uniform(0, 0.05)
        wire = min(wire, first)
        c = [0.0, 0.0]  # c_{k-2}, c_{k-1}
        for _k in range(transfers):
            c = [c[1], max(c[1] + wire, c[0] + first)]
        assert transport.ring_loop_s(transfers, first, wire) == pytest.approx(c[1], rel=1e-12)


def test_a_delay_costs_each_operation_its_transfers_round_trips():
    # a small ring allreduce: 2 loops of 2(n-1) transfers two in flight = 2(n-1) waves of a notice and the data
    for n in (2, 3, 4):
        added = transport.delay_added_s("allreduce_gloo", 4096, n, 12e6, D, K)
        assert added == pytest.approx(2 * (n - 1) * 2 * D + 2 * (n - 1) * (K["h0_s"] - K["h_s"]), rel=1e-9)
    # Horovod: its negotiation (a tiny ring allreduce, nu of them) first
    assert transport.delay_added_s("allreduce_hvd", 4096, 4, 12e6, D, K) == pytest.approx(
        2 * transport.delay_added_s("allreduce_gloo", 4096, 4, 12e6, D, K), rel=1e-9)
    # a message whose receive was posted early: one delay
    assert transport.delay_added_s("sendrecv", 4096, 2, 12e6, D, K) == pytest.approx(D + K["h0_s"] - K["h_s"] / 2)
    # a large buffer on a slow link is bandwidth-bound: the delay adds only the first transfer's round trip a loop
    big = transport.delay_added_s("allreduce_gloo", 64 << 20, 2, 12e6, D, K)
    assert 2 * 2 * D - 1e-9 <= big + 2 * (K["h_s"] - K["h0_s"]) <= 2 * 2 * D + 1e-9


def test_the_fit_recovers_known_constants():
    truth = {**K, "eff": 0.93, "h_s": 0.0015, "h0_s": 0.0003, "a_allreduce_hvd": 0.002, "nu_allreduce_hvd": 1.5,
             "nu_broadcast": 2.5, "nu_allgather": 3.0, "w_allgather": 1.4}
    truth.pop("burst")
    cells = [{"op": op, "bytes": size, "np": n, "rate_bps": rate, "delay_s": d,
              "median_s": transport.seconds(op, size, n, rate, d, truth)}
             for op in transport.OPS for size in (4096, 1 << 20, 16 << 20) for n in (2, 3, 4)
             for rate in (1e8, 1e9) for d in (0.0, 0.001, 0.005, 0.025)]
    fit = transport.fit(cells)
    for name in ("eff", "h_s", "h0_s", "nu_allreduce_hvd", "nu_broadcast", "w_allgather"):
        assert fit["constants"][name] == pytest.approx(truth[name], rel=0.02, abs=2e-5), name
    assert all(row["median_abs_error"] < 1e-3 for row in fit["table"])


def test_the_step_model_pays_the_delay_as_the_transport_does():
    """sync at 4 workers: two ring allreduces a step (the negotiation's and the gradients'), about 24 one-way delays
    (regimes-latency measured ~28); gossip a round: two at most (the notice, then the data); a parameter-server
    visit 6, four of them holding the server."""
    from bench.predict import hardware
    from bench.predict.model import Model
    from bench.predict.query import resolve_run

    cal = hardware.load_calibration()
    assert "transport" in cal and cal["transport_fit"]["cells"] > 0
    step = {}
    for delay in ("0ms", "25ms"):
        for algo in ("sync", "sgp", "downpour"):
            cfg, _ = resolve_run(algo, 4, "emu", None, {"link_delay": delay})
            step[algo, delay] = Model(cal).predict(cfg, *hardware.for_config(cfg, cal)).step_s
    grow = {a: (step[a, "25ms"] - step[a, "0ms"]) / 0.025 for a in ("sync", "sgp", "downpour")}
    assert 16 < grow["sync"] < 36
    assert 0 < grow["sgp"] <= 2.0 + 1e-9
    assert 4 < grow["downpour"] < 4 * 6
    assert transport.PROTOCOL_DELAYS["ps_commit"] == (1, 4, 1)


@pytest.mark.parametrize("args, fragment", [
    (["--np", "1"], "bad --np '1'"),
    (["--np", "two"], "bad --np"),
    (["--sizes", "3X"], "bad size '3X'"),
    (["--sizes", "512M"], "bad size '512M'"),
    (["--ops", "allreduce,reduce"], "bad --ops"),
    (["--delays=-1ms"], "bad delay '-1ms'"),
    (["--rates", "fast"], "bad link rate 'fast'"),
    (["--repeats", "0"], "bad --repeats '0'"),
    (["--budget-s", "nan"], "bad --budget-s 'nan'"),
])
def test_collectives_bad_arguments_one_line_exit_2_nothing_written(tmp_path, args, fragment):
    out = tmp_path / "cells.jsonl"
    proc = subprocess.run([sys.executable, "-m", "bench.perf", "collectives", *args, "--jsonl", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=str(REPO), env={"PYTHONPATH": str(REPO),
                                                                                           "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: ") and fragment in proc.stderr
    assert not out.exists()


def test_a_forecast_says_when_its_calibration_is_from_elsewhere():
    from bench.predict.calibrate import made, staleness_note

    here = {**made(), "commit": "unknown"}
    assert staleness_note({"made": here}) == ""
    assert "another machine (elsewhere)" in staleness_note({"made": {**here, "machine": "elsewhere"}})
    assert "unknown origin" in staleness_note({})
