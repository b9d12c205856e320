"""Isolated emulated hosts: every host inside its CPU share (cgroup v1 ``cpu`` quota), the slower-host straggler,
and ``python -m bench.perf isolation``, for real (root; skipped with one line where no emulated cluster can exist).

Run beside no other user of the emulated cluster (``flock /tmp/dbemu.lock``): there is one per machine.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, run_algorithm
from cluster_support import ENV, cluster, skip_reason, suite_objects

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]
CPU = Path("/sys/fs/cgroup/cpu")


def quota(host: int) -> float:
    """Host ``host``'s share of a core as the kernel has it (-1: unlimited)."""
    q = int((CPU / f"dbemu-h{host}" / "cpu.cfs_quota_us").read_text())
    return q / int((CPU / f"dbemu-h{host}" / "cpu.cfs_period_us").read_text()) if q > 0 else -1.0


def test_isolation_benchmark_prints_a_finite_worst_ratio_last():
    proc = subprocess.run([sys.executable, "-m", "bench.perf", "isolation", "--hosts", "2", "--trials", "1",
                           "--seconds", "1", "--profile", "tiny"], capture_output=True, text=True, env=ENV,
                          cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    m = re.fullmatch(r"isolation: worst ratio (\S+)", lines[-1])
    assert m and math.isfinite(float(m.group(1))) and float(m.group(1)) > 0, lines[-1]
    assert "the loads ran in cpu cgroups /dbemu-h0, /dbemu-h1" in proc.stdout  # inside the hosts' groups
    rows = [line.split() for line in lines if re.match(r"\s+2\s+0\.36\s+[01]\s", line)]
    assert [r[2] for r in rows] == ["0", "1"], proc.stdout  # each host alone and busy at the emu profile's share
    assert suite_objects()["cgroups"] == [], "no cluster was up: the benchmark takes down the one it made"
    assert "idle CPUs: poll" in lines[0]  # as the emu profile's runs


def test_hosts_get_the_profile_share_a_cpu_straggler_a_smaller_one_and_down_removes_the_groups(tmp_path):
    run = run_algorithm(tmp_path, "sync", 2, "max_steps=6", "eval_every=0", "save_model=false", "slow_ranks=[1]",
                        "slow_factor=2", "slow_mode=cpu", extra=["--hardware", "emu-1gbit"])
    assert run.status == "ok"
    # the kernel's quotas: host 0 the profile's 0.36 core, the straggler's host 1 0.36 / 2
    assert quota(0) == pytest.approx(0.36) and quota(1) == pytest.approx(0.18)
    assert int((CPU / "dbemu-h1" / "cpu.shares").read_text()) > 1024  # served before what runs outside the hosts
    cpu = run.system["network"]["cpu"]
    assert cpu["cpu_per_host"] == 0.36 and cpu["slow_mode"] == "cpu"
    assert cpu["share_by_rank"] == pytest.approx([0.36, 0.18]) and cpu["total_cores"] == pytest.approx(0.54)
    assert run.config["launch"]["slow_mode"] == "cpu" and run.config["launch"]["cpu_per_host"] == 0.36
    assert run.system["cpu_idle"]["mode"] == "poll" and run.system["cpu_idle"]["held"] is True  # the emu profiles'
    # a slower host, not a sleeping loop: the straggler injected no delay
    assert (run.steps["injected_s"] == 0).all()
    cluster("down")
    assert suite_objects()["cgroups"] == []
