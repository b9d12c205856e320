"""A run directory has one owner: while a real job writes it, a second writer is refused naming the holder.

A ``bench run`` under real horovodrun holds its run directory; another ``bench run`` into it (with or without
``--force``, another algorithm) and a study's ``run_many(force=True)`` are refused with exit 2 / BenchError
naming the holder's pid, and the directory keeps the first run's files only. Once the holder is gone (even
killed outright), ``--force`` may replace the directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import BenchError
from bench.launch import run_many
from bench.launch.lock import LOCK_NAME, claim
from bench.resolve import resolve
from support import REPO, bench_cli


def start(run_dir: Path) -> subprocess.Popen:
    """A long ``python -m bench run sync --np 2`` into ``run_dir``, in its own process group."""
    args = [sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--profile", "tiny", "--out", str(run_dir),
            "--quiet", "--set", "max_steps=100000", "--set", "epochs=1000", "--set", "eval_every=0"]
    env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")
    return subprocess.Popen(args, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for_steps(run_dir: Path, proc: subprocess.Popen, timeout_s: float = 180.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout_s and proc.poll() is None:
        ranks = list(run_dir.glob("rank*.jsonl"))
        if len(ranks) == 2 and all(r.stat().st_size > 0 for r in ranks):
            return
        time.sleep(0.5)
    output = proc.stdout.read()[-3000:] if proc.poll() is not None else ""
    pytest.fail(f"the job in {run_dir} did not start stepping: {output}")


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    run_dir = tmp_path / "ddp-np2"
    proc = start(run_dir)
    try:
        wait_for_steps(run_dir, proc)
        config = (run_dir / "config.json").read_bytes()
        other = bench_cli("run", "ddp", "--np", "2", "--profile", "tiny", "--set", "epochs=30", "--out", str(run_dir),
                          "--quiet", "--force")
        assert other.returncode == 2, other.stderr
        assert f"is in use by pid {proc.pid} " in other.stderr, other.stderr
        assert "python -m bench run sync --np 2" in other.stderr, other.stderr  # the holder's command
        with pytest.raises(BenchError, match=f"in use by pid {proc.pid} "):
            claim(run_dir)  # without --force: the holder is named too (not just "already exists")
        cfg = resolve("ddp", np=2, profile="tiny", study="smoke")
        with pytest.raises(BenchError, match=f"in use by pid {proc.pid} "):
            run_many([(cfg, run_dir, None)], force=True, echo=False, progress=None)  # a study's run@ stage
        assert (run_dir / "config.json").read_bytes() == config
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_NAME, "config.json", "launch.log", "rank0.jsonl",
                                                              "rank1.jsonl", "system.json"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher dies outright: the kernel releases its lock
        proc.wait()
    t0 = time.time()
    while (run_dir / "summary.json").exists() is False and time.time() - t0 < 60:
        time.sleep(0.5)  # the ranks notice that their launcher is gone and mark the run failed
    with claim(run_dir, force=True):  # the stale lock file of a dead holder does not hold the directory
        assert [p.name for p in run_dir.iterdir()] == [LOCK_NAME]
    assert not list(run_dir.iterdir())
