"""Several runs in one horovodrun job (bench.launch.run_many): each run as if alone, failures kept apart."""

from __future__ import annotations

import os

from bench import launch
from bench.resolve import parse_set, resolve
from bench.results import load_run, read_json
from support import REPO, max_diff, saved_model


def cfg(algorithm: str, tag: str, *sets: str, np: int = 2):
    return resolve(algorithm, np=np, profile="tiny", overrides=parse_set(["max_steps=12", "eval_every=4", *sets]),
                   study="jobs", tag=tag)


def test_runs_of_one_job_match_the_same_runs_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("BENCH_PROGRESS", "0")
    a, b = cfg("sync", "a"), cfg("sync", "b", "lr=0.1", "seed=3")
    ps1, ps2 = cfg("downpour", "p1"), cfg("downpour", "p2", "slow_ranks=[1]", "slow_factor=2")
    d = cfg("ddp", "d")  # the same launch settings as sync's, but another runtime (torch.distributed alone): its own job
    lines: list[str] = []
    done = launch.run_many([(a, tmp_path / "a", None), (b, tmp_path / "b", None), (d, tmp_path / "d", None),
                            (ps1, tmp_path / "p1", None), (ps2, tmp_path / "p2", None)],
                           echo=False, progress=lines.append)
    assert [rc for _, rc in done] == [0] * 5, [read_json(d / "summary.json") for d, _ in done]
    assert [line.split("(")[1].split(" run")[0] for line in lines] == ["2", "1", "2"], lines  # sync, ddp, downpour
    for d, _ in done:
        run = load_run(d)
        assert run.status == "ok" and run.summary["steps_per_worker"] == 12 and len(run.evals)
    systems = [read_json(d / "system.json") for d, _ in done]
    assert [s["runtime"]["name"] for s in systems] == ["horovod", "horovod", "torch", "horovod", "horovod"]
    del systems[2]
    assert [(s["job_runs"], s["job_position"]) for s in systems] == [(2, 0), (2, 1), (2, 0), (2, 1)]
    assert systems[0]["launch_command"] == systems[1]["launch_command"]
    assert systems[0]["launch_command"].count("--config") == 2
    # the second downpour run had its own straggler, the first none: each run's settings stay its own
    inj = [load_run(d).steps.groupby("rank")["injected_s"].sum() for d in (tmp_path / "p1", tmp_path / "p2")]
    assert inj[0].max() == 0 and inj[1][1] > 0 and inj[1][0] == 0

    # the first run of the job, run again alone: the same model to the bit (nothing carried between runs)
    alone, rc = launch.run(a, tmp_path / "a-alone", echo=False)
    assert rc == 0 and "job_runs" not in read_json(alone / "system.json")
    assert max_diff(saved_model(tmp_path / "a"), saved_model(alone)) == 0.0
    # and the second run differs from the first (its own lr and seed were used)
    assert max_diff(saved_model(tmp_path / "a"), saved_model(tmp_path / "b")) > 0


def test_a_failed_run_fails_the_rest_of_its_job_and_keeps_the_earlier_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("BENCH_PROGRESS", "0")
    monkeypatch.setenv("BENCH_INJECT_FAULT", "1:5:raise:second")  # rank 1 raises at step 5 of the run "second"
    items = [(cfg("sync", t), tmp_path / t, None) for t in ("first", "second", "third")]
    done = launch.run_many(items, echo=False, progress=None)
    assert [rc for _, rc in done] == [0, 1, 1]
    first, second, third = (load_run(d) for d, _ in done)
    assert first.status == "ok" and first.summary["steps_per_worker"] == 12 and (tmp_path / "first" / "model.pt").exists()
    assert second.status == "failed" and "injected fault at step 5" in second.summary["reason"]
    assert third.status == "failed" and third.summary["reason"].startswith("not run: second")
    assert not list((tmp_path / "third").glob("rank*.jsonl"))
    # nothing of the job is left running
    import psutil

    left = [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])
            and p.pid != os.getpid()]
    assert not left, [p.info["cmdline"] for p in left]
