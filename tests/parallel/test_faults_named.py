"""Faults end the run within a minute, named by what failed (issue 40, item 5), under real horovodrun.

- a rank or a parameter server stopped (SIGSTOP): its heartbeats stop and the launcher ends the job after
  ``bench.watchdog.SILENT_S`` (20 s) naming that rank, its pid and that its process is stopped (before: 120-130 s,
  a gloo timeout naming a peer);
- horovodrun killed outright: the reason names it and the ranks it left are ended (before: never named);
- the run directory's file system full, turned read-only (an ext4 error, errors=remount-ro), or the directory deleted:
  the run ends failed with one line, a summary where one can still be written (a full disk: the room the lock file
  kept), no traceback and no ``.lock`` where one can be removed (before: a traceback and no summary; a deleted
  directory noticed only at the end, and its summary written into a directory made anew).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from bench.watchdog import SILENT_S
from faults_support import LIMIT_S, ended, job_processes, nothing_left, start, stepping

@pytest.mark.parametrize("algorithm, np_, rank", [("sync", 2, 1), ("downpour", 2, 2)], ids=["rank", "server"])
def test_a_stopped_rank_or_server_is_named_within_a_minute(tmp_path, algorithm, np_, rank):
    out = tmp_path / "run"
    proc = start(out, algorithm, np_)
    victim = stepping(out, proc, np_ + (1 if algorithm == "downpour" else 0))[f"rank{rank}"]
    t0 = time.time()
    victim.send_signal(signal.SIGSTOP)
    try:
        took, err = ended(proc, t0)
    finally:
        with contextlib.suppress(psutil.Error):  # the job's end killed it; if not, it must not stay stopped
            victim.send_signal(signal.SIGCONT)
    assert proc.returncode == 1
    assert SILENT_S <= took < LIMIT_S, (took, err)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reason"].startswith(f"rank {rank} (pid {victim.pid} on "), summary["reason"]
    assert re.search(rf"no heartbeat for \d+ s \(the limit: {SILENT_S:g} s\): its process is stopped \(SIGSTOP",
                     summary["reason"]), summary["reason"]
    assert "Traceback" not in err and not (out / ".lock").exists()
    nothing_left(out)


def test_a_killed_horovodrun_is_named_and_its_ranks_ended(tmp_path):
    out = tmp_path / "run"
    proc = start(out)
    horovodrun = stepping(out, proc, 2)["horovodrun"]
    t0 = time.time()
    horovodrun.kill()
    took, err = ended(proc, t0)
    assert proc.returncode == 1 and took < LIMIT_S
    reason = json.loads((out / "summary.json").read_text())["reason"]
    assert reason.startswith(f"horovodrun (pid {horovodrun.pid}) was killed by SIGKILL; its ranks were ended"), reason
    nothing_left(out)


@contextlib.contextmanager
def mounted(path: Path, *args: str):
    """A file system mounted at ``path`` for the test; whatever runs on it is ended, then it is unmounted."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", *args, str(path)], check=True, capture_output=True)
    try:
        yield path
    finally:
        for p in job_processes(path / "run").values():
            with contextlib.suppress(psutil.Error):
                p.kill()
        subprocess.run(["umount", "-l", str(path)], check=False)


needs_mount = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting needs root")


@needs_mount
def test_a_full_disk_ends_the_run_with_its_summary(tmp_path):
    with mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=3m", "tmpfs") as disk:
        out = disk / "run"
        proc = start(out)
        took, err = ended(proc, time.time())
        assert proc.returncode == 1, err
        summary = json.loads((out / "summary.json").read_text())  # written in the room the lock file kept
        assert summary["status"] == "failed" and "No space left on device" in summary["reason"], summary
        assert "Traceback" not in err and not (out / ".lock").exists()
        assert err.count("run FAILED") == 1
        nothing_left(out)


@needs_mount
@pytest.mark.skipif(not (shutil.which("mkfs.ext4") and shutil.which("losetup")), reason="needs mkfs.ext4 and loop devices")
def test_a_file_system_turned_read_only_ends_the_run_in_one_line(tmp_path):
    image = tmp_path / "fs.img"
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    with mounted(tmp_path / "disk", "-o", "loop,errors=remount-ro", str(image)) as disk:
        device = Path(subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(disk)], capture_output=True, text=True,
                                     check=True).stdout.strip()).name
        out = disk / "run"
        proc = start(out)
        stepping(out, proc, 2)
        t0 = time.time()
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("issue 40: a disk error\n")  # remounts it read-only
        took, err = ended(proc, t0)
        assert proc.returncode == 1 and took < LIMIT_S
        failed = [line for line in err.splitlines() if "run FAILED" in line]
        assert len(failed) == 1 and "Read-only file system" in failed[0], err
        assert "Traceback" not in err
        nothing_left(out)  # (its .lock stays: nothing can be removed from a read-only file system; nobody holds it)


def test_a_deleted_run_directory_ends_the_run_at_once_and_is_not_made_anew(tmp_path):
    out = tmp_path / "run"
    proc = start(out)
    stepping(out, proc, 2)
    t0 = time.time()
    shutil.rmtree(out)
    took, err = ended(proc, t0)
    assert proc.returncode == 1 and took < 15, (took, err)
    assert f"run directory '{out}' was deleted or replaced while the job ran" in err
    assert not out.exists(), list(out.iterdir())  # nothing written into a directory of that name made anew
    nothing_left(out)
