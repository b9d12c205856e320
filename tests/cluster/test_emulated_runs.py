"""Benchmark runs on the emulated cluster, launched by the real multi-host horovodrun over ssh.

Skipped (one line) only where an emulated cluster cannot exist: not root, or no network namespaces.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.results import load_run, read_json
from support import REPO, run_algorithm
from cluster_support import skip_reason

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]
COMM_HEAVY = ("max_steps=6", "warmup_steps=2", "eval_every=0", "save_model=false")


def test_sync_runs_over_ssh_on_two_hosts_and_a_slow_link_slows_it(tmp_path):
    local = run_algorithm(tmp_path, "sync", 2, *COMM_HEAVY, profile="comm-heavy", name="local")
    emu = run_algorithm(tmp_path, "sync", 2, *COMM_HEAVY, profile="comm-heavy", name="emu-100mbit",
                        extra=["--hardware", "emu-100mbit"])
    assert emu.status == "ok" and local.status == "ok"
    system = emu.system
    hosts = system["hosts_by_rank"]
    assert len(hosts) == 2 and len(set(hosts)) == 2 and all(h.startswith("198.18.") for h in hosts)
    assert system["network"]["emulated"] and system["network"]["link"] == "100mbit"
    assert not system["network"]["latency_emulated"]
    cmd = system["launch_command"]
    assert "--hostfile" in cmd and "--network-interface" in cmd and "--ssh-identity-file" in cmd
    assert emu.config["launch"]["link"] == "100mbit" and emu.config["launch"]["network_interface"] == "dbemu0"
    # 19 MB of gradients per step through 100 Mbit/s (about 1.5 s) against an unshaped loopback
    ratio = emu.summary["throughput"] / local.summary["throughput"]
    assert ratio < 0.3, f"100 Mbit run at {ratio:.2f} of the local run's throughput"
    assert not local.system["network"]["emulated"]


def test_parameter_server_gets_a_host_of_its_own(tmp_path):
    run = run_algorithm(tmp_path, "downpour", 2, "max_steps=10", extra=["--hardware", "emu-1gbit"])
    assert run.status == "ok"
    hosts = run.system["hosts_by_rank"]
    assert len(set(hosts)) == 3  # two workers and the server, each on its own emulated host


def test_a_link_going_down_fails_the_run_within_its_timeout_and_leaves_nothing(tmp_path):
    earlier = run_algorithm(tmp_path, "sync", 2, "max_steps=5", name="earlier", extra=["--hardware", "emu-1gbit"])
    before = (earlier.path / "summary.json").read_bytes()
    out = tmp_path / "cut"
    args = [sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--profile", "tiny", "--hardware", "emu-1gbit",
            "--out", str(out), "--quiet", "--set", "max_steps=100000", "--set", "epochs=1000", "--set", "eval_every=0",
            "--set", "timeout_s=45"]
    env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")
    t0 = time.time()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
            assert proc.poll() is None and time.time() - t0 < 120, "the run did not start"
            time.sleep(0.5)
        subprocess.run(["ip", "link", "set", "dbemu-v1", "down"], check=True)  # host 1's cable pulled
        output, _ = proc.communicate(timeout=150)
    finally:
        subprocess.run(["ip", "link", "set", "dbemu-v1", "up"], check=False)
    assert proc.returncode == 1, output[-2000:]
    assert time.time() - t0 < 160
    summary = read_json(out / "summary.json")
    assert summary["status"] == "failed" and summary["reason"], summary
    needle = str(out / "config.json")
    left = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True).stdout.split()
    assert not left, f"processes of the cut run survived: {left}"
    assert (earlier.path / "summary.json").read_bytes() == before
    assert load_run(out).steps["step"].max() >= 1
