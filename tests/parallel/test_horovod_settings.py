"""A hardware profile's Horovod settings reach the workers' Horovod under real horovodrun, and system.json says so."""

from __future__ import annotations

import torch

from bench.perf.horovod_knobs import summarize_timeline
from conftest import run_algorithm


def test_cycle_time_setting_reaches_the_background_thread_and_system_json(tmp_path):
    """``--set horovod.cycle_time_ms=25``: the Horovod timeline of the job (cycles marked) shows the background
    thread's cycles 25 ms apart (Horovod's default: 1 ms), which only the job's processes reading
    HOROVOD_CYCLE_TIME=25 in hvd.init() can produce; system.json records the variable and the setting."""
    timeline = tmp_path / "timeline.json"
    run = run_algorithm(tmp_path, "sync", 2, "horovod.cycle_time_ms=25", "max_steps=30", "eval_every=0",
                        "save_model=false", env={"HOROVOD_TIMELINE": str(timeline), "HOROVOD_TIMELINE_MARK_CYCLES": "1",
                                                 "HOROVOD_CYCLE_TIME": "3"})  # the setting wins over the shell
    rec = run.system["horovod_settings"]
    # the local profile's other settings kept
    assert rec["settings"] == {"cycle_time_ms": 25.0, "wait_sleep_us": 50.0, "fusion_threshold_bytes": 1048576}
    assert rec["env"]["HOROVOD_FUSION_THRESHOLD"] == "1048576"
    assert rec["env"]["HOROVOD_CYCLE_TIME"] == "25" and rec["effective"]["cycle_time_ms"] == "25"
    assert rec["env"]["HOROVOD_TIMELINE"] == str(timeline)  # every HOROVOD_* variable the job got is recorded
    s = summarize_timeline(timeline, skip_s=0.0)
    assert s["cycles"] > 20 and s["ops"].get("ALLREDUCE", 0) > 0, s
    assert 20.0 <= s["cycle_gap_median_ms"] <= 60.0, s


def test_sleeping_wait_gives_the_same_training_as_horovods_wait(tmp_path):
    """``horovod.wait_sleep_us``: sync's ranks wait for their allreduces by polling with sleeps (the job says so in
    its log), and the run trains exactly as with Horovod's spinning wait: the same final parameters, bit for bit."""
    sets = ("max_steps=12", "eval_every=0", "horovod.cycle_time_ms=5")
    spin = run_algorithm(tmp_path, "sync", 2, "horovod={}", *sets, name="spin")  # Horovod's wait, whatever the profile
    sleep = run_algorithm(tmp_path, "sync", 2, *sets, "horovod.wait_sleep_us=50", "horovod.wait_spin_us=30",
                          name="sleep")
    assert "polling 30 us, then sleeps doubling up to 50 us" in (sleep.path / "launch.log").read_text()
    assert "polling" not in (spin.path / "launch.log").read_text()
    effective = sleep.system["horovod_settings"]["effective"]
    assert effective["wait_sleep_us"] == 50 and effective["wait_spin_us"] == 30
    a, b = torch.load(spin.path / "model.pt"), torch.load(sleep.path / "model.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
