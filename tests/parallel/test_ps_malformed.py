"""The parameter server under malformed messages and SIGTERM, over the real transport (horovodrun -np 2).

Every malformed message (short or long header, short or long payload, NaN / inf in a commit or in SNAP
buffers, a SNAP at a negative step) is refused with a PSProtocolError naming the sender, the centre untouched,
never an abort; the server rank ends at once on SIGTERM while it waits for a message.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.system import horovodrun_launch
from support import REPO

SCRIPT = Path(__file__).parent / "scripts" / "ps_malformed.py"
EXPECTED = {
    "short header": "rank 0: short header (5 of 6 int64 fields arrived)",
    "long header": "rank 0: header longer than 6 int64 fields",
    "nan commit": "rank 0: commit with 1 non-finite value(s)",
    "inf commit": "rank 0: commit with 1 non-finite value(s)",
    "short payload": "rank 0: short commit",
    "long payload": "rank 0: commit longer than the 4 float32 elements",
    "inf buffers": "rank 0: buffers with 1 non-finite value(s)",
    "negative snap": "rank 0: SNAP at step -5",
    "double payload": "rank 0: commit longer than the 50000 float32 elements",  # an abort in gloo before issue 40
}


def start(out: Path, mode: str) -> subprocess.Popen:
    cmd = [*horovodrun_launch(), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, str(SCRIPT), str(out), mode]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(REPO),
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True)


def finish(proc: subprocess.Popen, timeout_s: float) -> str:
    """The job's output once it ends; a job still running after ``timeout_s`` (a hang) is killed and fails the test."""
    try:
        return proc.communicate(timeout=timeout_s)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the job did not end within {timeout_s:g} s:\n{proc.communicate()[0][-3000:]}")


def test_malformed_messages_are_refused_naming_the_sender(tmp_path):
    output = finish(start(tmp_path, "rounds"), 240)
    assert (tmp_path / "server.json").exists(), output[-4000:]
    seen = json.loads((tmp_path / "server.json").read_text())
    for name, message in EXPECTED.items():
        assert seen[name].startswith(f"PSProtocolError: {message}"), (name, seen[name])
        assert seen[f"{name} centre"] == [0.0] * 4, name  # nothing of a refused message reached the centre
    assert seen["well-formed centre"] == [0.5] * 4  # the transport is intact after every refusal
    assert "Exit code: 134" not in output and "SIGABRT" not in output


def test_server_rank_ends_promptly_on_sigterm(tmp_path):
    proc = start(tmp_path, "sigterm")
    ready = tmp_path / "ready"
    deadline = time.time() + 120
    while not (ready.exists() and ready.read_text()) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert ready.exists(), finish(proc, 10)[-3000:]
    os.kill(int(ready.read_text()), signal.SIGTERM)  # the server waits for a message; its receive timeout is 1 h
    output = finish(proc, 90)
    assert proc.returncode != 0
    assert "rank 1: parameter server received SIGTERM while waiting for a message" in output, output[-3000:]
