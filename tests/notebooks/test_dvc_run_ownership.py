"""`dvc repro` never deletes a run directory behind its holder's back, and never mixes two runs (issue 40, item 1).

A `run@<algo>` stage's output folder is declared `persist` (DVC used to delete it before the stage ran, `.lock` and
all, so that a `bench run` holding a directory there trained on unlinked files and then wrote its summary, evaluations
and model into the pipeline's fresh directory of the same name, which loaded as ok). Now the stage refuses while any
run directory of its folder is held, naming the holder; the holder's directory keeps its own run only; once it has
ended, the stage runs, removes its own stale runs (the plan has fewer repeats) and keeps the ad-hoc one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from support import copy_repository, dvc


@pytest.mark.timeout(1800)
def test_run_stage_refuses_while_a_run_directory_is_held_and_keeps_what_it_does_not_own(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    assert dvc(repo, "config", "--local", "core.autostage", "false").returncode == 0
    params = repo / "params.yaml"
    params.write_text(params.read_text().replace("\nstudy: laptop", "\nstudy: smoke", 1))
    study = repo / "pipelines" / "studies" / "smoke.yaml"  # sync at np 2 only (the test's time is its runs)
    text = study.read_text()
    assert "np_by_algorithm: {sync: [1, 2]}" in text and "repeats: 3" in text
    study.write_text(text.replace("np_by_algorithm: {sync: [1, 2]}", "np_by_algorithm: {sync: [2]}"))
    first = dvc(repo, "repro", "run@sync")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    runs = repo / "results" / "smoke" / "runs" / "sync" / "local"
    assert sorted(p.name for p in runs.iterdir()) == [f"sync-np2-r{k}" for k in range(3)]

    # a user's own run into the study, under a planned run's name, still going when the stage is re-run
    held = runs / "sync-np2-r0"
    env = dict(os.environ, PYTHONPATH=str(repo), BENCH_PROGRESS="0")
    env.pop("BENCH_PARAMS", None)
    user = subprocess.Popen([sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--profile", "tiny", "--study",
                             "smoke", "--tag", "r0", "--force", "--quiet", "--set", "max_steps=100000",
                             "--set", "epochs=10000", "--set", "eval_every=0"], cwd=repo, env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def stepping() -> bool:  # the user's run (not the stage's earlier one) holds the directory and has stepped
        try:
            mine = json.loads((held / "config.json").read_text())["train"]["max_steps"] == 100000
        except (OSError, ValueError):
            return False
        return mine and (held / ".lock").exists() and (held / "rank1.jsonl").exists()

    try:
        t0 = time.time()
        while not stepping() and user.poll() is None and time.time() - t0 < 180:
            time.sleep(0.5)
        assert stepping(), user.communicate()[0][-3000:]
        config = (held / "config.json").read_bytes()
        study.write_text(study.read_text().replace("repeats: 3", "repeats: 2"))  # the stage must run again
        second = dvc(repo, "repro", "run@sync")
        assert second.returncode != 0
        out = second.stdout + second.stderr
        assert f"is in use by pid {user.pid} " in out, out[-3000:]
        assert user.poll() is None and (held / ".lock").exists()  # the holder trains on, in its own directory
        assert (held / "config.json").read_bytes() == config
        assert len(list(runs.iterdir())) == 3  # nothing removed, nothing run
    finally:
        os.killpg(user.pid, signal.SIGTERM)
        user.communicate(timeout=120)
    summary = json.loads((held / "summary.json").read_text())
    assert summary["status"] == "failed" and "SIGTERM" in summary["reason"]  # its own end, in its own directory
    assert (held / "config.json").read_bytes() == config and not (held / ".lock").exists()

    third = dvc(repo, "repro", "run@sync")  # the holder is gone: the stage runs its plan (2 repeats now)
    assert third.returncode == 0, third.stdout[-4000:] + third.stderr[-2000:]
    assert sorted(p.name for p in runs.iterdir()) == ["sync-np2-r0", "sync-np2-r1"]
    for d in runs.iterdir():
        planned = repo / "results" / "smoke" / "plan" / "sync" / "local" / f"{d.name}.json"
        assert (d / "config.json").read_bytes() == planned.read_bytes()  # the planned runs only, none mixed
        assert json.loads((d / "summary.json").read_text())["status"] == "ok"
    assert "removed" in third.stdout and "sync-np2-r2" in third.stdout
