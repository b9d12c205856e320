"""bench.launch.horovodrun: horovodrun, its build question answered from the suite's cached `horovodrun --check-build`
(the record bench.system.horovod_build keeps; a real two-rank job)."""

import json
import os
import subprocess
import sys

from bench.system import check_build_cache, horovod_build
from support import REPO

JOB = ["-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "-c",
       "import os; print('rank', os.environ['HOROVOD_RANK'])"]


def wrapped(cache_dir, gloo: bool, monkeypatch) -> subprocess.CompletedProcess:
    """The job through the wrapper, with a check-build record in ``cache_dir`` that says Gloo is (not) built."""
    record = json.loads(json.dumps(horovod_build()))
    record["available"]["Gloo"] = gloo
    monkeypatch.setenv("BENCH_CACHE", str(cache_dir))  # where check_build_cache() and the wrapper look
    path = check_build_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "bench.launch.horovodrun", *JOB], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(REPO))


def test_the_wrapper_runs_horovodrun_and_answers_its_build_question_from_the_cached_record(tmp_path, monkeypatch):
    assert check_build_cache() is not None and horovod_build()["available"]["Gloo"]
    ran = wrapped(tmp_path / "built", gloo=True, monkeypatch=monkeypatch)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(line.split("<stdout>:")[-1] for line in ran.stdout.splitlines() if "rank" in line) == ["rank 0", "rank 1"]
    # the same job, the record saying Gloo is not built: horovodrun refuses it as its own check would, starting no rank
    refused = wrapped(tmp_path / "unbuilt", gloo=False, monkeypatch=monkeypatch)
    assert refused.returncode != 0 and "Gloo support has not been built" in refused.stderr + refused.stdout
    assert "rank 0" not in refused.stdout


def test_a_failing_job_fails_the_wrapper():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ran = subprocess.run([sys.executable, "-m", "bench.launch.horovodrun", *JOB[:5], sys.executable, "-c",
                          "raise SystemExit(3)"], env=env, capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert ran.returncode != 0
