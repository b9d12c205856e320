"""The job's listeners bind to the job's address, and configuration never reaches a shell (issue 40, items 2 and 3).

A local gossip run (sgp --np 2, the point-to-point transport open): every socket its ranks and its launcher listen
on is bound to loopback — rank 0's torch.distributed store (before issue 40: all interfaces), gloo's pairs, the
launcher's heartbeat socket; horovodrun's own rendezvous server still listens on all interfaces (Horovod binds it
to '' and offers no setting: docs/guide.md, what remains). A value of the job's environment made of shell
metacharacters reaches the ranks as text; a name that is not an identifier is refused before launch (before issue 40
horovodrun wrote it unquoted into the ranks' shell command, which ran what it said).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from support import REPO, bench_cli


def listening(pid: int) -> set[tuple[str, str]]:
    """(protocol, address) of the sockets process ``pid`` listens on (TCP LISTEN, UDP bound)."""
    out = set()
    for kind in ("tcp", "udp"):
        for c in psutil.Process(pid).net_connections(kind=kind):
            if kind == "udp" or c.status == psutil.CONN_LISTEN:
                out.add((kind, c.laddr.ip))
    return out


VALUE = "x;touch {marker};$(touch {marker})`touch {marker}`'\"|&"
"""A value of the job's environment made of shell metacharacters (``{marker}``: a file it must never create)."""


def test_ranks_and_launcher_listen_on_the_jobs_address_only(tmp_path):
    out, marker = tmp_path / "run", tmp_path / "injected"
    value = VALUE.format(marker=marker)
    args = [sys.executable, "-m", "bench", "run", "sgp", "--np", "2", "--profile", "tiny", "--out", str(out), "--quiet",
            "--set", "max_steps=1000000", "--set", "epochs=100000", "--set", "eval_every=0",
            "--set", "env=" + json.dumps({"BENCH_PROBE": value})]
    launcher = subprocess.Popen(args, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0"),
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while not ((out / "rank1.jsonl").exists() and (out / "rank1.jsonl").stat().st_size):
            assert launcher.poll() is None and time.time() - t0 < 180, launcher.communicate()[1][-3000:]
            time.sleep(0.5)
        ranks = [p for p in psutil.process_iter(["cmdline"]) if "bench.worker" in " ".join(p.info["cmdline"] or [])
                 and str(out) in " ".join(p.info["cmdline"] or []) and "HOROVOD_RANK" in p.environ()]
        assert len(ranks) == 2
        seen = {p.environ()["HOROVOD_RANK"]: listening(p.pid) for p in ranks}
        seen["launcher"] = listening(launcher.pid)
        assert any(seen[r] for r in ("0", "1")) and ("udp", "127.0.0.1") in seen["launcher"], seen
        assert all(addr == "127.0.0.1" for sockets in seen.values() for _, addr in sockets), seen
        assert [p.environ()["BENCH_PROBE"] for p in ranks] == [value, value] and not marker.exists()  # text, not code
    finally:
        os.killpg(launcher.pid, signal.SIGTERM)
        launcher.communicate(timeout=120)


def test_an_environment_name_that_is_not_an_identifier_is_refused(tmp_path):
    marker = tmp_path / "injected"
    refused = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--out", str(tmp_path / "refused"), "--quiet",
                        "--set", f"env={{'A;touch {marker};B': x}}")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "environment variable's name" in refused.stderr
    assert not marker.exists() and not (tmp_path / "refused").exists()
