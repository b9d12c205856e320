"""The emulated cluster for real: network namespaces, shaped veths, sshd per host, horovodrun over ssh.

No mocks: every test creates and removes real kernel objects, so the module is skipped (one line)
only where it cannot run at all: not root, or no network namespaces. There is one emulated cluster
per machine (fixed names), so these tests must not run beside another user of it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cluster_support import REPO, cluster, sh, skip_reason, suite_objects


pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


@pytest.fixture(scope="module", autouse=True)
def system_ready():
    """Install sshd if missing (the script is idempotent), clear leftovers, remember what existed, tear down after."""
    subprocess.run(["bash", str(REPO / "scripts" / "setup-cluster.sh")], check=True, timeout=900)
    # first remove a cluster an earlier, interrupted session may have left (with the /run/sshd its `up`
    # made), then remember what exists that the suite did not make
    cluster("down")
    had_privsep = Path("/run/sshd").exists()
    yield {"had_privsep": had_privsep}
    cluster("down", check=False)


def assert_nothing_left(system_ready) -> None:
    assert suite_objects() == {"netns": [], "links": [], "qdiscs": [], "cgroups": [], "sshd": [], "files": []}
    assert Path("/run/sshd").exists() == system_ready["had_privsep"], "/run/sshd: only what up created is removed"


def test_up_status_and_shaped_stream():
    from bench.cluster.stream import measure

    out = cluster("up", "--hosts", "2", "--link", "100mbit").stdout
    assert "host 1: 198.18.0.3" in out
    status = cluster("status").stdout
    assert "2 host(s)" in status and "198.18.0.2" in status and "198.18.0.3" in status and "100Mbit" in status
    st = json.loads(cluster("status", "--json").stdout)["state"]
    assert [h["netns"] for h in st["hosts"]] == ["dbemu-h0", "dbemu-h1"] and st["link"] == "100mbit"
    objs = suite_objects()
    assert objs["netns"] == ["dbemu-h0", "dbemu-h1"] and len(objs["sshd"]) == 2
    assert sorted(objs["links"]) == ["dbemu-v0", "dbemu-v1", "dbemu0"]
    assert sum("tbf" in q and "100Mbit" in q for q in objs["qdiscs"]) == 2  # root-side ends
    for ns in ("dbemu-h0", "dbemu-h1"):  # host-side ends
        assert "rate 100Mbit" in sh("tc", "-n", ns, "qdisc", "show", "dev", "dbemu0").stdout
    result = measure("dbemu-h0", "dbemu-h1", "198.18.0.3", seconds=2.0)
    rate = result["bps"] / 100e6
    assert 0.85 <= rate <= 1.15, f"TCP stream between two 100mbit hosts: {result['bps'] / 1e6:.1f} Mbit/s"
    assert result["peer"] == "198.18.0.2"


def test_down_removes_everything_and_twice_is_a_noop(system_ready):
    cluster("up", "--hosts", "2", "--link", "1gbit", "--cpu", "1=0.5")
    assert suite_objects()["cgroups"] == ["dbemu-h0", "dbemu-h1"]
    assert Path("/sys/fs/cgroup/cpu/dbemu-h1/cpu.cfs_quota_us").read_text().strip() == "50000"
    assert Path("/run/sshd").is_dir()
    assert "removed" in cluster("down").stdout
    assert_nothing_left(system_ready)
    second = cluster("down")
    assert second.returncode == 0 and "nothing to remove" in second.stdout
    assert_nothing_left(system_ready)


def test_up_over_stale_leftovers(system_ready):
    # a crash that lost the state file while everything ran
    cluster("up", "--hosts", "2")
    Path("/run/distbench/dbemu/state.json").unlink()
    assert "no emulated cluster" in cluster("status").stdout and "leftovers" in cluster("status").stdout
    # and a half-made host from a crashed `up`: a namespace, a veth, a cgroup and a process inside
    sh("ip", "netns", "add", "dbemu-h7", check=True)
    sh("ip", "link", "add", "name", "dbemu-v7", "type", "veth", "peer", "name", "dbemu0", "netns", "dbemu-h7", check=True)
    Path("/sys/fs/cgroup/cpu/dbemu-h7").mkdir(exist_ok=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", "dbemu-h7", "sleep", "600"])
    try:
        cluster("up", "--hosts", "3", "--link", "1gbit")
        objs = suite_objects()
        assert objs["netns"] == ["dbemu-h0", "dbemu-h1", "dbemu-h2"]
        assert sorted(objs["links"]) == ["dbemu-v0", "dbemu-v1", "dbemu-v2", "dbemu0"]
        assert objs["cgroups"] == ["dbemu-h0", "dbemu-h1", "dbemu-h2"] and len(objs["sshd"]) == 3
        assert sleeper.wait(timeout=10) != 0  # the leftover's process was ended
        assert "3 host(s)" in cluster("status").stdout
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    cluster("down")
    assert_nothing_left(system_ready)


def test_what_the_suite_did_not_make_is_left_alone(system_ready):
    tag = f"dbtest{os.getpid() % 10000}"
    sh("ip", "netns", "add", f"{tag}-ns", check=True)
    sh("ip", "link", "add", "name", f"{tag}a", "type", "veth", "peer", "name", f"{tag}b", check=True)
    sh("ip", "netns", "add", "dbemu-other", check=True)  # the prefix, but not a name the suite makes
    group = Path(f"/sys/fs/cgroup/cpu/{tag}")
    if Path("/sys/fs/cgroup/cpu").is_dir():
        group.mkdir(exist_ok=True)
    try:
        cluster("up", "--hosts", "2", "--link", "100mbit")
        cluster("down")
        cluster("down")
        names = sh("ip", "netns", "list").stdout
        assert f"{tag}-ns" in names and "dbemu-other" in names
        assert f"{tag}a" in sh("ip", "-o", "link", "show").stdout
        assert not Path("/sys/fs/cgroup/cpu").is_dir() or group.is_dir()
    finally:
        sh("ip", "netns", "del", f"{tag}-ns")
        sh("ip", "netns", "del", "dbemu-other")
        sh("ip", "link", "del", f"{tag}a")
        if group.is_dir():
            group.rmdir()
    assert_nothing_left(system_ready)


def test_horovodrun_over_ssh_on_two_hosts(system_ready):
    from bench.cluster import Spec, launch_settings, up
    from bench.cluster.probe import run_job

    st = up(Spec(hosts=2, link="1gbit"))
    settings = launch_settings(st, 2, server_host=False)
    assert settings["network_interface"] == "dbemu0" and settings["hosts"] == ["198.18.0.2", "198.18.0.3"]
    assert Path(settings["hostfile"]).read_text() == "198.18.0.2 slots=1\n198.18.0.3 slots=1\n"
    home_ssh_before = Path.home().joinpath(".ssh").exists()
    records, output = run_job(st, 2, ["check", "--p2p-bytes", str(4 << 20)], timeout=240)
    assert len(records) == 2, output[-3000:]
    by_rank = {r["rank"]: r for r in records}
    assert {by_rank[r]["horovod_hostname"] for r in (0, 1)} == {"198.18.0.2", "198.18.0.3"}
    for r, rec in by_rank.items():
        host = st.hosts[r]
        assert rec["horovod_hostname"] == host.address == rec["address"] and rec["hostname"] == host.netns
        assert rec["allreduce_ok"] and rec["p2p_ok"]
        # the rank process ran inside its host's network namespace and cgroup
        assert rec["netns"] == f"net:[{os.stat(f'/run/netns/{host.netns}').st_ino}]"
        assert rec["cgroup_cpu"] == f"/{host.netns}"
        # the environment arrived over ssh
        assert rec["pythonpath"] == str(REPO) and rec["path"] == settings["env"]["PATH"]
        # the point-to-point bytes left through the host's emulated interface, between emulated addresses
        assert rec["tx_bytes_during_p2p"] >= rec["p2p_bytes"]
        peers = {c["remote"].rsplit(":", 1)[0] for c in rec["connections"] if c["state"] == "ESTAB"}
        assert peers and peers <= {"198.18.0.2", "198.18.0.3"}, rec["connections"]
    assert Path.home().joinpath(".ssh").exists() == home_ssh_before, "ssh must not touch ~/.ssh"
    # a parameter-server layout needs a host of its own for the server rank
    from bench import BenchError

    with pytest.raises(BenchError, match="2 host"):
        launch_settings(st, 3, server_host=True)
    cluster("down")
    assert_nothing_left(system_ready)
