"""A hardware profile's Horovod settings reach the workers' Horovod under real horovodrun, and system.json says so."""

from __future__ import annotations

import json

import torch

from bench.perf.horovod_knobs import summarize_timeline
from support import REPO, horovodrun, run_algorithm


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
    assert rec["settings"] == {"cycle_time_ms": 25.0, "wait_sleep_us": 250.0, "fusion_threshold_bytes": 1048576,
                               "groups": 1}
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


def test_grouped_allreduce_trains_as_per_gradient_allreduces_and_records_each_threads_cpu(tmp_path):
    """``horovod.groups=1`` (the local profile's): sync's gradients are reduced by one grouped allreduce once backward
    has produced all of them, instead of one allreduce per gradient enqueued from its hook. The Horovod timeline
    names the tensors so (``grouped_allreduce.<first>_<k>of<n>`` against ``allreduce.<parameter>``), the run trains to
    the same parameters (to float tolerance: the same sums), and summary.json says where each rank's CPU went: the
    training thread and the threads Horovod's init started, on a CPU and waiting for one."""
    sets = ("max_steps=20", "eval_every=0", "horovod.cycle_time_ms=5")
    runs, names = {}, {}
    for groups in ("null", "1"):
        timeline = tmp_path / f"timeline-{groups}.json"
        runs[groups] = run_algorithm(tmp_path, "sync", 2, f"horovod.groups={groups}", *sets, name=f"groups-{groups}",
                                     env={"HOROVOD_TIMELINE": str(timeline)})
        names[groups] = [n for n in summarize_timeline(timeline)["tensor_names"] if "allreduce" in n]
    grouped, per_grad = runs["1"], runs["null"]
    params = torch.load(per_grad.path / "model.pt").keys()  # the tiny MLP: 2 weights, 2 biases
    assert grouped.system["horovod_settings"]["effective"]["groups"] == 1
    assert str(per_grad.system["horovod_settings"]["effective"]["groups"]).startswith("none")
    assert sorted(names["null"]) == sorted(f"allreduce.{p}" for p in params)
    n = len(params)
    assert len(names["1"]) == n and all(x.startswith("grouped_allreduce.") and x.endswith(f"of{n}") for x in names["1"])
    a, b = torch.load(grouped.path / "model.pt"), torch.load(per_grad.path / "model.pt")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    for run in (grouped, per_grad):
        cpu = run.summary["cpu_threads"]
        assert len(cpu) == 2
        for rank in cpu:
            assert set(rank) >= {"wall_s", "main", "horovod"}
            assert rank["horovod"]["threads"] >= 1 and rank["horovod"]["cpu_s"] > 0  # Horovod's background thread
            assert rank["main"]["threads"] == 1
            assert 0 < rank["main"]["cpu_s"] <= rank["wall_s"] * 1.05  # one thread: at most one core


def test_horovod_best_runs_each_candidates_plain_horovod_loop_beside_plain_ddp(tmp_path, capsys):
    """``python -m bench.perf horovod_best``: under real horovodrun, the plain Horovod loop once per candidate (the
    profile's settings, Horovod's defaults and each ``--candidate`` on top of the profile's) and the plain DDP loop,
    each repeat; the JSON keeps every measurement with the settings it ran at, and the best candidate is named."""
    from bench.perf import horovod_best

    out = tmp_path / "best.json"
    assert horovod_best.main(["--profile", "tiny", "--set", "max_steps=30", "--candidate", "c5:cycle_time_ms=5",
                              "--repeats", "1", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert list(rec["repeats"]) == ["profile", "defaults", "c5", "ddp"]
    assert all(len(v) == 1 and v[0]["throughput"] > 0 for v in rec["repeats"].values())
    profile = rec["repeats"]["profile"][0]["settings"]
    assert profile["wait_sleep_us"] == 250 and "cycle_time_ms" not in profile  # the local profile's settings
    assert rec["repeats"]["c5"][0]["settings"] == {**profile, "cycle_time_ms": 5.0}
    assert rec["repeats"]["defaults"][0]["settings"] == {}
    rows = {r["candidate"]: r for r in rec["summary"]}
    assert rows["profile"]["profile_effect"] == 1.0 and rows["c5"]["ddp_n"] == 1 and rows["c5"]["ddp_effect"] > 0
    assert "best: " in capsys.readouterr().out


def test_wakeup_benchmark_counts_the_sleeping_waits_polls_and_their_cpu(tmp_path, capsys):
    """``python -m bench.perf wakeup``: under real horovodrun, rank 1 waits for rank 0's late allreduce by the sleeping
    wait; a longer wait makes more polls and costs more of the thread's CPU, the polls are at most those the
    performance model counts for that wait (``wait_polls``: a sleep is never short) and the loop keeps polling at its
    cap through the wait (its median time between two polls is the 250 us cap or more), and the fitted CPU a wake-up
    is positive and under a millisecond. How many fewer polls a loaded machine makes is the machine's (CI's: a 250 us
    sleep took 530 us, and a few took milliseconds), so the lower bound is loose: a third of the model's count."""
    from bench.perf import wakeup
    from bench.predict.model import wait_polls

    out = tmp_path / "wakeup.json"
    assert wakeup.main(["--waits-ms", "0,30", "--repeats", "4", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    rows = {r["wait_ms"]: r for r in rec["summary"]}
    late = rows[30.0]
    assert late["wall_ms"] >= 29 and late["polls"] > 2 * rows[0.0]["polls"]  # the 0 ms wait: the operation itself
    assert late["cpu_ms"] > rows[0.0]["cpu_ms"]
    assert late["poll_gap_us"] >= 240, late
    most = wait_polls(late["wall_ms"] / 1e3, 250e-6)
    assert most / 3 <= late["polls"] <= 1.1 * most, (late, most)
    assert 0 < rec["fit"]["wake_s"] < 1e-3 and rec["fit"]["rounds"] == 8
    assert "wake_s = " in capsys.readouterr().out


def test_broadcast_and_allgather_wait_by_sleeping_and_give_horovods_result(tmp_path):
    """With ``wait_sleep_us`` (the emulated cluster's runs), ``Comm.broadcast_parameters`` and ``Comm.allgather``
    wait by the sleeping polls, not Horovod's spin: every rank ends with rank 1's tensors and the ranks' tensors
    concatenated in rank order, and each wait covered the operation's handles (two broadcasts, one allgather)."""
    out = tmp_path / "rows.json"
    proc = horovodrun(3, REPO / "tests/parallel/scripts/sleeping_collectives.py", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert len(rows) == 3
    for row in rows:
        assert row["b"] == [1.0] * 3 and row["a"] == [10.0, 11.0, 12.0, 13.0, 14.0]
        assert row["gathered"] == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]
        assert row["waits"] == [2, 1]
