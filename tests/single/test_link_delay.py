"""A link delay's value: what is accepted, and every bad one refused in one line with exit 2 before anything starts.

(The delay itself, measured, is in tests/cluster/test_delay.py.)
"""

from __future__ import annotations

import math

import pytest

from bench import BenchError
from bench.cluster.net import tbf_args
from bench.cluster.delay import tcp_buffer_max
from bench.cluster.spec import Spec, normalize_delay, parse_delay
from support import bench_cli

FORM = "give a number with a unit us, ms or s, from 0 to 10 s"


@pytest.mark.parametrize("text, seconds, canonical", [
    ("500us", 5e-4, "500us"), ("5ms", 5e-3, "5ms"), ("50ms", 0.05, "50ms"), ("0.1ms", 1e-4, "100us"),
    ("1.5ms", 1.5e-3, "1500us"), ("5MS", 5e-3, "5ms"), ("10s", 10.0, "10s"), ("0", 0.0, ""), ("", 0.0, ""),
    (0, 0.0, ""), ("0ms", 0.0, ""),
])
def test_valid_delays_and_their_one_spelling(text, seconds, canonical):
    assert math.isclose(parse_delay(text), seconds, rel_tol=1e-9)
    assert normalize_delay(text) == canonical


@pytest.mark.parametrize("bad", ["-1ms", "nan", "NaNms", "inf ms", "5", 5, "11s", "10.001s", "5 m", "ms", "1e9us", True])
def test_bad_delays_name_the_value_and_the_form(bad):
    with pytest.raises(BenchError) as e:
        parse_delay(bad)
    assert repr(bad) in str(e.value) and FORM in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(BenchError):
        Spec(hosts=2, delay=bad).validated()


@pytest.mark.parametrize("bad", ["-1ms", "nan", "5", "11s"])
def test_cluster_up_refuses_a_bad_delay_with_exit_2(bad):
    proc = bench_cli("cluster", "up", "--hosts", "2", f"--delay={bad}", timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and f"bad delay {bad!r}" in proc.stderr and FORM in proc.stderr


@pytest.mark.parametrize("hardware, value, fragment", [
    ("local", "5ms", "link_delay '5ms' delays the links of an emulated cluster"),  # not an emulated profile
    ("emu-1gbit", "11s", f"bad link_delay '11s': {FORM}"),
    ("emu-1gbit", "5", f"bad link_delay 5: {FORM}"),  # YAML reads 5 as a number: no unit
    ("emu-1gbit", "-2ms", f"bad link_delay '-2ms': {FORM}"),
])
def test_a_run_with_a_bad_link_delay_is_refused_before_it_starts(tmp_path, hardware, value, fragment):
    out = tmp_path / "run"
    proc = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--hardware", hardware, "--out", str(out),
                     "--set", f"link_delay={value}", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert not out.exists()


def test_the_shaper_queue_and_tcp_buffers_grow_with_the_delay():
    assert tbf_args("1gbit")[-1] == "25000us" and tbf_args("1gbit", "5ms")[-1] == "25000us"
    assert tbf_args("1gbit", "50ms")[-1] == "100000us"  # one round trip
    assert tcp_buffer_max("1gbit", "") == 0
    assert tcp_buffer_max("100mbit", "1ms") == 6291456  # the kernel's default is already more than 4 x BDP
    assert tcp_buffer_max("1gbit", "50ms") == 4 * int(1e9 * 0.1 / 8)  # 4 x the bandwidth-delay product of 2D
    assert tcp_buffer_max("", "5s") == 256 << 20  # capped
