"""Delayed links for real: each host's delay line (NFQUEUE in its namespace), measured by the suite's TCP ping and by
iputils ``ping -U`` (an independent probe), a job through them, a delay line killed, and ``down`` leaving nothing.

Skipped (one line) only where an emulated cluster cannot exist: not root, or no network namespaces.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cluster import Spec, delay, ensure, state
from bench.cluster.stream import measure, round_trips
from bench.results import read_json
from support import REPO, run_algorithm
from cluster_support import cluster, sh, skip_reason, suite_objects

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]


def within(rtt: float, two_d: float) -> bool:
    """The issue's accuracy target for a round trip: within 10 % of 2D plus 0.1 ms."""
    return abs(rtt - two_d) <= 0.1 * two_d + 1e-4


def ping_u(src_ns: str | None, addr: str, count: int, interval: float) -> list[float]:
    """iputils ``ping -U`` round trips (seconds; user to user), from a host's namespace or the launcher's (None)."""
    cmd = ["ping", "-U", "-n", "-c", str(count), "-i", f"{interval:.3f}", "-W", "2", addr]
    out = sh(*(["ip", "netns", "exec", src_ns, *cmd] if src_ns else cmd)).stdout
    return [float(t) / 1e3 for t in re.findall(r"time=([0-9.]+) ms", out)]


def firewall() -> str:
    """The root namespace's iptables rules, nft and legacy, without comments and counters (what the suite must never
    touch)."""
    text = sh("iptables-nft-save").stdout + sh("iptables-legacy-save").stdout
    return re.sub(r"\[\d+:\d+\]", "[]", "\n".join(line for line in text.splitlines() if not line.startswith("#")))


def test_round_trip_is_twice_the_delay_and_the_rate_holds():
    out = cluster("up", "--hosts", "2", "--link", "200mbit", "--delay", "10ms").stdout
    assert "delay 10ms one way" in out
    st = state()
    a, b = st.hosts
    assert st.delay == "10ms" and all(h.delay_pid and delay.alive(h.delay_pid) for h in st.hosts)
    # the rule that feeds each host's queue, in the host's namespace only
    for h in st.hosts:
        rules = sh("ip", "netns", "exec", h.netns, "iptables-nft", "-t", "raw", "-S", "PREROUTING").stdout
        assert f"-i dbemu0 -m comment --comment dbemu-delay -j NFQUEUE --queue-num {h.queue}" in rules
    suite = statistics.median(round_trips(a.netns, b.netns, b.address, count=60))
    independent = statistics.median(ping_u(a.netns, b.address, 30, 0.05))
    assert within(suite, 0.020) and within(independent, 0.020), (suite, independent)
    # the launcher's traffic to a host is delayed, the host's answer is not: D, not 2D
    assert within(statistics.median(ping_u(None, b.address, 20, 0.05)), 0.010)
    # the shaped rate holds through the delay (steady state, after slow start)
    r = measure(a.netns, b.netns, b.address, seconds=3, warmup=1)
    assert r["bps"] >= 0.9 * 200e6, f"{r['bps'] / 1e6:.1f} Mbit/s through 200mbit with 10 ms"

    # the delay changed in place (same hosts and sshd), then measured again
    sshd_pids = [h.sshd_pid for h in st.hosts]
    st = ensure(Spec(hosts=2, link="200mbit", delay="4ms"))
    assert [h.sshd_pid for h in st.hosts] == sshd_pids and st.delay == "4ms"
    suite = statistics.median(round_trips(a.netns, b.netns, b.address, count=200))
    independent = statistics.median(ping_u(a.netns, b.address, 50, 0.01))
    assert within(suite, 0.008) and within(independent, 0.008), (suite, independent)
    assert "delay 4ms one way" in cluster("status").stdout


def test_a_dead_delay_line_drops_its_hosts_traffic_and_the_cluster_is_broken():
    # 5 ms, not 1: the rebuilt line is checked against 2D within 10 % + 0.1 ms, and with the other test stream beside
    # it the machine added 0.43 ms to a 2 ms round trip (CI, median of 100); the accuracy itself: the test above
    st = ensure(Spec(hosts=2, link="1gbit", delay="5ms"))
    a, b = st.hosts
    assert ping_u(a.netns, b.address, 3, 0.05)
    os.kill(b.delay_pid, signal.SIGKILL)
    time.sleep(0.2)
    assert ping_u(a.netns, b.address, 3, 0.2) == []  # fail closed: nothing reaches host 1, undelayed or not
    assert state() is None  # a cluster with a dead delay line is broken: the next ensure rebuilds it
    assert "DEAD" not in cluster("status").stdout  # (status reports no cluster then, and the leftovers)
    st = ensure(Spec(hosts=2, link="1gbit", delay="5ms"))
    assert within(statistics.median(round_trips(a.netns, b.netns, b.address, count=100)), 0.010)


def test_runs_through_delayed_links_and_a_killed_delay_line_fails_the_run(tmp_path):
    run = run_algorithm(tmp_path, "sync", 2, "max_steps=5", "link_delay=5ms", name="delayed",
                        extra=["--hardware", "emu-1gbit"])
    assert run.status == "ok"
    net = run.system["network"]
    assert net["link_delay"] == "5ms" and net["link_delay_s"] == 0.005 and net["latency_emulated"]
    line = net["delay_line"]
    assert [h["host"] for h in line["by_host"]][:2] == [0, 1] and all(h["packets"] > 0 for h in line["by_host"][:2])
    assert line["cpu_s"] >= 0 and all(h["sched"] for h in line["by_host"])
    assert run.config["launch"]["link_delay"] == "5ms"

    out = tmp_path / "cut"
    args = [sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--profile", "tiny", "--hardware", "emu-1gbit",
            "--out", str(out), "--quiet", "--set", "link_delay=5ms", "--set", "max_steps=100000", "--set", "epochs=1000",
            "--set", "eval_every=0", "--set", "timeout_s=300"]
    env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")
    t0 = time.time()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
        assert proc.poll() is None and time.time() - t0 < 120, "the run did not start"
        time.sleep(0.5)
    victim = state().hosts[1].delay_pid
    os.kill(victim, signal.SIGKILL)
    t_kill = time.time()
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output[-2000:]
    assert time.time() - t_kill < 60, "the run went on long after its delay line died"
    summary = read_json(out / "summary.json")
    assert summary["status"] == "failed", summary
    assert f"delay line of emulated host 1 (198.18.0.3, pid {victim}) died" in summary["reason"], summary["reason"]
    left = subprocess.run(["pgrep", "-f", str(out / "config.json")], capture_output=True, text=True).stdout.split()
    assert not left, f"processes of the run survived: {left}"


def test_down_leaves_no_process_rule_queue_or_namespace():
    rules_before = firewall()
    cluster("up", "--hosts", "3", "--link", "100mbit", "--delay", "500us")
    assert len(delay.pids()) == 3
    assert cluster("down").returncode == 0
    assert suite_objects() == {"netns": [], "links": [], "qdiscs": [], "cgroups": [], "sshd": [], "files": []}
    assert delay.pids() == []
    assert sh("pgrep", "-f", "dbemu/bin/dbemu-delay").stdout == ""
    assert firewall() == rules_before  # the root namespace's rules are the same, ours lived in the hosts' namespaces
    queues = Path("/proc/net/netfilter/nfnetlink_queue")
    assert not queues.exists() or not queues.read_text().strip()  # no queue bound in the root namespace
    assert not Path("/run/distbench").exists()
