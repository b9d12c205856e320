"""Idle CPUs that poll while a job runs (launch setting ``cpu_idle``, bench.cpu_idle): the choices, the one-line
errors, and the kernel's PM QoS request held for exactly the block (real /dev/cpu_dma_latency; root)."""

from __future__ import annotations

import os

import pytest

import bench.cpu_idle as cpu_idle
from bench import BenchError
from bench.resolve import load_hardware, resolve

WRITABLE = os.access(cpu_idle.DEVICE, os.W_OK)


def test_emu_profiles_poll_and_local_keeps_the_kernels_idle_states():
    for name in ("emu", "emu-10gbit", "emu-1gbit", "emu-100mbit", "emu-slurm"):
        assert load_hardware(name)["cpu_idle"] == "poll", name
    assert resolve("sync", np=2, profile="tiny").launch.cpu_idle == "default"


def test_a_bad_mode_is_refused_in_one_line_naming_the_choices():
    with pytest.raises(BenchError) as e:
        resolve("sync", np=2, profile="tiny", overrides={"cpu_idle": "spin"})
    assert "'spin'" in str(e.value) and "default, poll" in str(e.value) and "\n" not in str(e.value)


def test_poll_without_the_device_is_refused_before_anything_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_idle, "DEVICE", tmp_path / "cpu_dma_latency")  # a machine without the interface
    with pytest.raises(BenchError) as e:
        resolve("sync", np=2, profile="tiny", overrides={"cpu_idle": "poll"})
    assert "missing here" in str(e.value) and "valid cpu_idle: default, poll" in str(e.value)


@pytest.mark.skipif(not WRITABLE, reason="/dev/cpu_dma_latency is not writable here (needs root)")
def test_poll_holds_a_zero_latency_request_for_the_block_only():
    before = cpu_idle.requested_latency_us()
    with cpu_idle.held("poll") as record:
        assert cpu_idle.requested_latency_us() == 0
        assert record["mode"] == "poll" and record["held"] is True
        assert any(s["exit_latency_us"] == 0 for s in record["states"]) or not record["states"]
    assert cpu_idle.requested_latency_us() == before  # released (another process may hold its own request)
    with cpu_idle.held("default") as record:
        assert cpu_idle.requested_latency_us() == before and record["held"] is False
