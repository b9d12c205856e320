"""A hardware profile's Horovod settings reach the workers' Horovod under real horovodrun, and system.json says so."""

from __future__ import annotations

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
    assert rec["settings"] == {"cycle_time_ms": 25.0}
    assert rec["env"]["HOROVOD_CYCLE_TIME"] == "25" and rec["effective"]["cycle_time_ms"] == "25"
    assert rec["env"]["HOROVOD_TIMELINE"] == str(timeline)  # every HOROVOD_* variable the job got is recorded
    s = summarize_timeline(timeline, skip_s=0.0)
    assert s["cycles"] > 20 and s["ops"].get("ALLREDUCE", 0) > 0, s
    assert 20.0 <= s["cycle_gap_median_ms"] <= 60.0, s
