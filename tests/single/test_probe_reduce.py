"""bench.probe's reduction of the job's records (bench.probe.describe), its wait for hosts (bench.probe.cli) and
bench.advise's ordering (bench.advise.rank), on records made here: the numbers the file and the ranking must hold."""

from __future__ import annotations

import socket
import time

import pytest

from bench import BenchError
from bench.advise import rank
from bench.probe import describe
from bench.probe.cli import check_answer

MADE = {"commit": "0" * 40, "date": "2026-11-28 10:00 UTC", "machine": "here"}


def records(n: int, rtt: float, goodput: float, share: float = 0.36, sender_cpu: float = 0.05) -> list[dict]:
    hosts = [{"kind": "host", "rank": r, "address": f"198.18.0.{r + 2}", "hostname": f"h{r}", "cpu_share": share + r / 100,
              "step_s": [0.01] * 5, "step_s_median": 0.012, "step_s_mean": 0.03, "step_cpu_s_median": 0.004 + r / 1000,
              "model_bytes": 431144, "workload": "lenet@32"} for r in range(n)]
    pairs = [{"kind": "pair", "src": i, "dst": j, "rtts_s": [rtt] * 3, "rtt_s_median": rtt + (i + j) * 1e-4,
              "goodput_bps": goodput * (1 + j / 100), "counted_s": 1.0, "sender_cpu_s_per_s": sender_cpu}
             for i in range(n) for j in range(i + 1, n)]
    coll = [{"kind": "collective", "op": "sendrecv", "bytes": 4096, "np": n, "median_s": 0.006, "iters": 10,
             "times_s": [0.006] * 3}]
    return hosts + pairs + coll


def test_the_medians_of_hosts_and_pairs():
    m = describe.reduce(records(4, 0.010, 95e6), MADE, 4, 0.958)
    assert m["one_way_s"] == pytest.approx((0.010 + 3e-4) / 2)  # the median pair (i + j = 3) of six, halved
    assert m["delay_s"] == m["one_way_s"]
    assert m["rate_bps"] == pytest.approx(m["goodput_bps"] / 0.958)
    assert m["cpu_share"] == pytest.approx(0.375) and m["step_s"] == pytest.approx(0.0055)  # medians over 4 hosts
    assert not m["cpu_bound"] and len(m["pairs"]) == 6 and m["pairs"][0]["pings"] == 3


def test_a_short_round_trip_is_no_delay_and_a_busy_sender_no_rate():
    m = describe.reduce(records(2, 2e-4, 3e9, sender_cpu=0.35), MADE, 2, 0.958)
    assert m["delay_s"] == 0.0 and m["one_way_s"] == pytest.approx(1.5e-4)
    assert m["cpu_bound"] and m["rate_bps"] is None
    d = describe.description(m, "emu", "emu", "regimes", True, {"link": ""})
    assert d["probed"]["link"] == "" and d["probed"]["link_delay"] == "" and "CPU-bound" in d["probed"]["link_source"]


def test_a_missing_host_or_pair_is_an_error():
    recs = [r for r in records(3, 0.01, 95e6) if not (r["kind"] == "pair" and r["dst"] == 2 and r["src"] == 1)]
    with pytest.raises(RuntimeError, match="2 of 3 pairs"):
        describe.reduce(recs, MADE, 3, 0.958)


def test_rates_and_delays_as_profiles_write_them():
    assert [describe.rate_text(v) for v in (99.7e6, 1.2e9, 5e5)] == ["99.7mbit", "1.2gbit", "500kbit"]
    assert describe.delay_text(0.00527) == "5.27ms" and describe.delay_text(0.0) == ""


def test_a_host_that_does_not_answer_is_named():
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(BenchError, match=rf"do not answer on ssh within 1 s: 127.0.0.1:{port} "):
            check_answer([("127.0.0.1", port)], wait_s=1)
        assert time.monotonic() - t0 < 10


def test_ranking_times_first_then_throughput_then_refused():
    def row(a, ttt, thr):
        return {"algorithm": a, "family": "allreduce", "np": 4, "throughput": thr, "speedup": 1.0, "step_s": 0.1,
                "compute_s": 0.05, "comm_s": 0.05, "wait_s": 0.0, "bound": "network", "time_to_target_s": ttt,
                "time_to_target_median_abs_error": 0.2 if ttt else None, "nearest": "allreduce, delay 5ms",
                "nearest_median_abs_error": 0.1, "nearest_cells": 16, "family_median_abs_error": 0.07, "family_cells": 9}
    rows = [row("slow", 20.0, 900.0), row("fast", 5.0, 100.0), row("high", None, 5000.0), row("low", None, 10.0),
            {"algorithm": "easgd", "np": 4, "family": "parameter-server", "refused": "n alpha >= 2"}]
    ranked = rank.ranking(rows)
    assert [(r["rank"], r["algorithm"], r["basis"]) for r in ranked] == [
        (1, "fast", "time to target"), (2, "slow", "time to target"), (3, "high", "throughput only"),
        (4, "low", "throughput only"), (None, "easgd", "refused")]
    assert ranked[0]["error"] == 0.2 and ranked[2]["error"] == 0.1 and "nearest" in ranked[2]["error_source"]
    assert rank.winner(ranked)["algorithm"] == "fast"
