"""The emulated cluster under a hostile or careless user (issue 40), for real: namespaces, sshd, horovodrun over ssh.

- a host's link taken down under a job (``ip link set dbemu-v1 down``): the launcher ends the job within a minute,
  naming the rank on that host and its link (before: 120-130 s, the reason naming a peer); ``cluster status`` says
  the cluster is broken and the next job rebuilds it and runs (before: the health check ignored the link, and every
  later job failed until ``cluster down``);
- the job's environment over ssh: a value of shell metacharacters reaches the remote ranks as text (horovodrun writes
  it into the ssh command line; a name that is not an identifier is refused before launch on any hardware,
  tests/parallel/test_listeners.py);
- the remote ranks listen on their hosts' addresses only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.cluster import lifecycle, net
from support import REPO, bench_cli
from cluster_support import cluster, skip_reason

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]
TINY = ["--profile", "tiny", "--quiet", "--set", "eval_every=0", "--set", "save_model=false"]


def start(out: Path, *sets: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "bench", "run", "sgp", "--np", "2", "--hardware", "emu", "--out", str(out), *TINY,
            "--set", "max_steps=1000000", "--set", "epochs=100000", "--set", "timeout_s=400", *sets]
    return subprocess.Popen(args, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stepping(out: Path, proc: subprocess.Popen) -> None:
    """Wait until both ranks have written a step (the caller ends the launcher, whatever happens)."""
    t0 = time.time()
    while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
        assert proc.poll() is None, proc.communicate()[1][-3000:]  # it ended: its output is all there
        assert time.time() - t0 < 240, "the ranks wrote no step in 240 s"
        time.sleep(0.5)


def end(proc: subprocess.Popen, sig: int) -> None:
    """End the launcher's session (it and every process it started), if it still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    proc.communicate(timeout=120)


def ranks_in(netns: str, out: Path) -> list[psutil.Process]:
    """The run's ranks in an emulated host's namespace (``python -m bench.worker``, Horovod's variables in its
    environment: not the shell that ssh started for it, whose one argument names both)."""
    found = []
    for pid in net.netns_pids(netns):
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            argv = p.cmdline()
            if "bench.worker" in argv and any(str(out) in a for a in argv) and "HOROVOD_RANK" in p.environ():
                found.append(p)
    return found


def listening(netns: str, pid: int) -> set[str]:
    """The addresses process ``pid`` listens on (TCP) or has bound (UDP) in namespace ``netns`` (``ss`` there: a
    process's sockets are listed in its own namespace only)."""
    out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltunp"], capture_output=True, text=True).stdout
    return {line.split()[4].rsplit(":", 1)[0] for line in out.splitlines() if f"pid={pid}," in line}


def test_environment_over_ssh_is_text_and_ranks_listen_on_their_hosts(tmp_path):
    marker = tmp_path / "injected"
    value = f"x;touch {marker};$(touch {marker})`touch {marker}`'\"|&"
    out = tmp_path / "run"
    proc = start(out, "--set", "env=" + json.dumps({"BENCH_PROBE": value}))
    try:
        stepping(out, proc)
        for host in (0, 1):
            (rank,) = ranks_in(f"dbemu-h{host}", out)
            assert rank.environ()["BENCH_PROBE"] == value  # over ssh, as text
            assert listening(f"dbemu-h{host}", rank.pid) == {f"198.18.0.{host + 2}"}  # its host's address only
        assert not marker.exists()
    finally:
        end(proc, signal.SIGTERM)


def test_a_downed_link_is_named_within_a_minute_and_the_next_job_runs(tmp_path):
    out = tmp_path / "cut"
    proc = start(out)
    try:
        stepping(out, proc)
        (victim,) = ranks_in("dbemu-h1", out)
        t0 = time.time()
        subprocess.run(["ip", "link", "set", "dbemu-v1", "down"], check=True)
        _, err = proc.communicate(timeout=90)
        took = time.time() - t0
    finally:
        end(proc, signal.SIGKILL)
    assert proc.returncode == 1 and took < 60, (took, err)
    reason = json.loads((out / "summary.json").read_text())["reason"]
    assert reason.startswith(f"rank 1 (pid {victim.pid} on 198.18.0.3): no heartbeat for "), reason
    assert "emulated host 1's link (dbemu-v1, the bridge's end) is down" in reason, reason
    status = cluster("status").stdout
    assert "BROKEN" in status and "emulated host 1's link (dbemu-v1, the bridge's end) is down" in status, status
    assert lifecycle.state() is None  # the health check sees the link
    again = bench_cli("run", "sync", "--np", "2", "--hardware", "emu", "--out", str(tmp_path / "again"), *TINY,
                      "--set", "max_steps=6")
    assert again.returncode == 0, again.stderr[-3000:]  # rebuilt, and run
    assert lifecycle.state() is not None
