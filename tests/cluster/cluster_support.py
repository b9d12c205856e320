"""Helpers of the emulated-cluster tests (``from cluster_support import cluster, skip_reason, ...``): the module skip,
the cluster's command line, and every kernel object the suite makes, looked up directly. The folder's fixtures
(``cluster_ready``) are in conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "emulated cluster tests need root (network namespaces)"
    try:
        ok = subprocess.run(["unshare", "-n", "true"], check=False, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "this system does not support network namespaces (unshare -n failed)"


def cluster(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "bench.cluster", *args], check=False, capture_output=True, text=True,
                          env=ENV, cwd=str(REPO), timeout=180)
    if check and proc.returncode != 0:
        pytest.fail(f"bench.cluster {' '.join(args)} failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def sh(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=check)


def suite_objects() -> dict:
    """Everything with the suite's names, each looked up directly (not through bench.cluster)."""
    netns = sorted(line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines() if line.startswith("dbemu-"))
    links = [line.split(":")[1].strip().split("@")[0] for line in sh("ip", "-o", "link", "show").stdout.splitlines()
             if ": dbemu" in line]
    qdiscs = [line for line in sh("tc", "qdisc", "show").stdout.splitlines() if "dev dbemu" in line]
    cgroups = sorted(p.name for p in Path("/sys/fs/cgroup/cpu").glob("dbemu-*")) if Path("/sys/fs/cgroup/cpu").is_dir() else []
    sshd = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "/run/distbench/dbemu" in cmd and "sshd" in cmd:
                sshd.append(f"{p.name}: {cmd}")
    files = [str(p) for p in (Path("/run/distbench/dbemu"), Path("/run/distbench/dbemu.lock")) if p.exists()]
    return {"netns": netns, "links": links, "qdiscs": qdiscs, "cgroups": cgroups, "sshd": sshd, "files": files}
