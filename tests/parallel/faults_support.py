"""Helpers of the fault tests (tests/parallel/test_faults_*.py): a long ``bench run`` started in its own session, its
processes found by role, the launcher's end timed against :data:`LIMIT_S`, nothing of the job left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from support import REPO

LIMIT_S = 60.0


def start(out: Path, algorithm: str = "sync", np_: int = 2) -> subprocess.Popen:
    """A long ``bench run`` into ``out`` (its own session), stepping until it is ended."""
    args = [sys.executable, "-m", "bench", "run", algorithm, "--np", str(np_), "--profile", "tiny", "--out", str(out),
            "--quiet", "--set", "max_steps=1000000", "--set", "epochs=100000", "--set", "eval_every=0",
            "--set", "timeout_s=400"]
    return subprocess.Popen(args, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0"),
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def job_processes(out: Path) -> dict[str, psutil.Process]:
    """The job's processes by role: ``rank<r>`` (from its HOROVOD_RANK) and ``horovodrun``."""
    found = {}
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if str(out / "config.json") not in cmd:
                continue
            if "bench.worker" in cmd and "HOROVOD_RANK" in p.environ():  # not the shell horovodrun starts it with
                found[f"rank{p.environ()['HOROVOD_RANK']}"] = p
            elif any(a.endswith("horovodrun") for a in (p.info["cmdline"] or [])[1:3]):  # horovodrun, or -m bench.launch.horovodrun
                found["horovodrun"] = p
        except psutil.Error:
            pass
    return found


def stepping(out: Path, proc: subprocess.Popen, ranks: int) -> dict[str, psutil.Process]:
    t0 = time.time()
    while time.time() - t0 < 180 and proc.poll() is None:
        found = job_processes(out)
        if (out / "rank1.jsonl").is_file() and (out / "rank1.jsonl").stat().st_size and len(
                [k for k in found if k.startswith("rank")]) == ranks:
            return found
        time.sleep(0.5)
    pytest.fail(f"the job in {out} did not start stepping: {proc.communicate()[1][-3000:] if proc.poll() is not None else ''}")


def ended(proc: subprocess.Popen, since: float) -> tuple[float, str]:
    """(seconds from ``since`` to the launcher's end, its stderr); fails the test past :data:`LIMIT_S`."""
    try:
        _, err = proc.communicate(timeout=LIMIT_S + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the launcher did not end within {LIMIT_S + 30:g} s")
    return time.time() - since, err


def nothing_left(out: Path) -> None:
    time.sleep(1)
    assert not job_processes(out), f"processes of the job left: {job_processes(out)}"
