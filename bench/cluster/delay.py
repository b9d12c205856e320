"""Latency on the emulated links: one delay line per host, holding the host's ingress for the one-way delay.

This kernel has no ``netem`` (nor ``fq`` or ``etf``), so ``tc`` cannot delay. Each host gets instead a delay line
(``python -m bench cluster up --delay 5ms``; the hardware-profile key ``delay``):

- one iptables rule in the host's namespace, ``-t raw -A PREROUTING -i dbemu0 -m comment --comment dbemu-delay -j
  NFQUEUE --queue-num QUEUE_BASE+i``, sends every IPv4 packet that arrives on the host's interface to a queue;
- a small C program, ``dbemu-delay`` (``delayline.c``, built here with the system's compiler against Debian's
  libnetfilter_queue), bound to that queue inside the namespace, accepts each packet D after it arrived.

So a packet from host a to host b waits D at b's door, and a round trip between two hosts takes 2D plus what the
machine adds (veths, bridge, the shapers' queues, scheduling). The launcher's traffic *to* a host (ssh, Horovod's
rendezvous) is delayed D too; what a host sends *to the launcher* is not (the launcher, in the root namespace, has
no delay line), nor what a host sends to itself (``lo``), nor ARP. The delay comes after both shapers (the sender's
and the bridge port's ``tbf``), and the shapers keep their rate: the ``tbf`` queue grows to at least one round trip
(:func:`bench.cluster.net.tbf_args`), as a bottleneck buffer sized for the bandwidth-delay product, and every
host's TCP buffers (``net.ipv4.tcp_rmem``/``tcp_wmem`` maxima, set inside its namespace only) to 4x its
bandwidth-delay product (:func:`tcp_buffer_max`).

Fail closed: the rule has no ``--queue-bypass``, so while a host's delay line is not bound (before it starts, or
after it died) the kernel drops that host's ingress; traffic never passes undelayed while the cluster says it is
delayed. A job on a delayed cluster is watched (:func:`watched`): a delay line that dies ends the job, and the run
fails naming it.

The delay lines are started by ``up`` (and by ``ensure`` when the delay changes) from the launcher's side, outside
the hosts' CPU shares (in the root ``cpu`` cgroup, SCHED_FIFO priority 1 where allowed); their CPU time is shown by
``cluster status`` and recorded in system.json (``network.delay_line``). ``down`` ends them with everything else
in the namespaces; the rules and queues die with the namespaces. Nothing is added outside the hosts' namespaces.

Hand-written: the delay line's timed loop and ring (``delayline.c``); the queueing itself is libnetfilter_queue's.
Chosen over the Python binding ``NetfilterQueue`` (per-packet callbacks, no batch verdicts, no GSO flag) by
measurement: at 1 Gbit with a 5 ms delay both held the rate (935 against 944 Mbit/s), the Python line at 3.1
CPU-seconds per GB, the C one at 0.5 (docs/results/link/NOTES.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from .. import BenchError
from . import cgroups, sh
from .spec import CGROUP_ROOT, DIR, IFNAME, PREFIX, QUEUE_BASE, Host, State, parse_delay, parse_rate

SOURCE = Path(__file__).with_name("delayline.c")
BINARY = DIR / "bin" / f"{PREFIX}-delay"
STATE_DIR = DIR / "delay"
RULE = ["-i", IFNAME, "-m", "comment", "--comment", f"{PREFIX}-delay", "-j", "NFQUEUE"]  # in raw PREROUTING
TCP_DEFAULT_MAX = {"tcp_rmem": 6291456, "tcp_wmem": 4194304}  # the kernel's maxima in a new namespace
TCP_BUFFER_CAP = 256 << 20
UNSHAPED_BPS = 10e9  # the rate a delay's TCP buffers are sized for on an unshaped link
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _install() -> str:
    return f"run `{sh.install_command()}`"


def installed() -> bool:
    """True if the system has what a delay line needs (iptables, a C compiler, libnetfilter_queue's header)."""
    return bool((sh.which("iptables-nft") or sh.which("iptables")) and (sh.which("cc") or sh.which("gcc"))
                and Path("/usr/include/libnetfilter_queue/libnetfilter_queue.h").exists())


def _iptables(what: str = "a link delay") -> str:
    """``iptables-nft`` where there is one (it takes no lock file outside the namespace), else ``iptables``."""
    tool = sh.which("iptables-nft") or sh.which("iptables")
    if not tool:
        raise BenchError(f"{what} needs iptables (NFQUEUE rules in the hosts' namespaces): {_install()}")
    return tool


def build(dest: Path, what: str = "a link delay") -> Path:
    """Compile ``delayline.c`` to ``dest`` with the system's C compiler against libnetfilter_queue."""
    cc = sh.which("cc") or sh.which("gcc")
    if not cc:
        raise BenchError(f"{what} needs a C compiler to build its delay line: {_install()}")
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = sh.run([cc, "-O2", "-Wall", "-o", str(dest), str(SOURCE), "-lnetfilter_queue", "-lnfnetlink"],
                  check=False, timeout=120)
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise BenchError(f"building the delay line of {what} failed ({err}); it needs libnetfilter-queue-dev: "
                         f"{_install()}")
    return dest


@functools.lru_cache(maxsize=4)
def check_supported(delay: str) -> None:
    """BenchError naming ``delay`` and what it needs and is missing here: root, iptables, a compiler and
    libnetfilter_queue, the kernel's NFQUEUE target and queue (probed in a throw-away namespace: nothing of the
    machine's is touched)."""
    what = f"delay {delay!r}"
    if os.geteuid() != 0:
        raise BenchError(f"{what} needs root (iptables rules and NFQUEUE in the emulated hosts' namespaces)")
    iptables = _iptables(what)
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-delay-check-") as tmp:
        binary = build(Path(tmp) / f"{PREFIX}-delay", what)
        probe = (f"{iptables} -t raw -A PREROUTING -i lo -j NFQUEUE --queue-num {QUEUE_BASE} && "
                 f"{binary} {QUEUE_BASE} check")
        proc = subprocess.run(["unshare", "-n", "sh", "-c", probe], check=False, capture_output=True, text=True,
                              timeout=60)
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise BenchError(f"{what} needs the kernel's NFQUEUE support (iptables NFQUEUE target, nfnetlink_queue), "
                         f"missing here: {err}")


def check_value(launch) -> None:
    """A run's ``link_delay`` (a LaunchConfig): a valid value, on an emulated cluster; BenchError with one line
    otherwise. Checked wherever a configuration is read (``bench.runconfig.check_values``)."""
    seconds = parse_delay(launch.link_delay, "link_delay")
    if seconds and not launch.emulated_hosts:
        raise BenchError(f"link_delay {launch.link_delay!r} delays the links of an emulated cluster: set "
                         f"emulated_hosts > 0 (an emu* hardware profile), or link_delay 0ms on hardware "
                         f"{launch.hardware!r}")


def check_machine(launch) -> None:
    """What a run's ``link_delay`` needs of the launching machine (root, NFQUEUE), before anything starts (the
    resolver's ``check_machine``: never probed again by the ranks)."""
    if parse_delay(launch.link_delay, "link_delay"):
        check_supported(launch.link_delay)


def tcp_buffer_max(link: str, delay: str) -> int:
    """Largest TCP buffer (bytes) for a host's sockets: 4x the bandwidth-delay product of a round trip (2D at the
    link's rate; 10 Gbit/s for an unshaped link), at most 256 MiB; 0 without a delay (the kernel's defaults)."""
    seconds = parse_delay(delay)
    if not seconds:
        return 0
    bdp = (parse_rate(link) or UNSHAPED_BPS) * 2 * seconds / 8
    return int(min(TCP_BUFFER_CAP, max(max(TCP_DEFAULT_MAX.values()), 4 * bdp)))


def set_tcp_buffers(h: Host, buffer_max: int) -> None:
    """Raise the maxima of ``tcp_rmem``/``tcp_wmem`` in host h's namespace to ``buffer_max`` (0: the defaults)."""
    cmds = []
    for name, default in TCP_DEFAULT_MAX.items():
        low, mid = ("4096 131072" if name == "tcp_rmem" else "4096 16384").split()
        cmds.append(f"echo '{low} {mid} {max(default, buffer_max)}' > /proc/sys/net/ipv4/{name}")
    sh.run(sh.in_netns(h.netns, ["sh", "-c", " && ".join(cmds)]))


def _state_path(i: int) -> Path:
    return STATE_DIR / f"h{i}.json"


def ours(pid: int) -> bool:
    """True if ``pid`` runs a delay line of the suite (its program lies in the suite's directory)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return cmd[0] == str(BINARY).encode()


def pids() -> list[int]:
    """Every live delay line of the suite (found by its command line, also where its namespace is gone)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and ours(int(p.name))]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and ours(pid)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (None if it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(f[11]) + int(f[12])) / CLK_TCK


def stats(i: int) -> dict:
    """What host i's delay line last wrote of itself (once a second): packets, batches, release error, ..."""
    try:
        return json.loads(_state_path(i).read_text())
    except (OSError, ValueError):
        return {}


def _rule(h: Host, action: str) -> list[str]:
    """``iptables`` adding (``-A``), checking (``-C``) or deleting (``-D``) the rule that feeds host h's queue, in its
    namespace."""
    return sh.in_netns(h.netns, [_iptables(), "-t", "raw", action, "PREROUTING", *RULE, "--queue-num", str(h.queue)])


def start(h: Host, delay: str, timeout: float = 10) -> int:
    """Start host h's delay line for ``delay`` (the program must be built) and feed its queue; its pid."""
    h.queue = QUEUE_BASE + h.index
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    state = _state_path(h.index)
    state.unlink(missing_ok=True)
    log = STATE_DIR / f"h{h.index}.log"
    ns = round(parse_delay(delay) * 1e9)
    # detached (the shell exits at once), in the namespace, in the root cpu cgroup: outside every host's share
    sh.run(sh.in_netns(h.netns, ["sh", "-c", f"{BINARY} {h.queue} {ns} {state} </dev/null >>{log} 2>&1 &"]),
           preexec_fn=cgroups.joiner(str(CGROUP_ROOT)) if cgroups.available() else None)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = stats(h.index).get("pid", 0)
        if pid and alive(pid):
            h.delay_pid = pid
            if not sh.ok(_rule(h, "-C")):  # only now: the queue has its reader, nothing passes undelayed
                sh.run(_rule(h, "-A"))
            return pid
        time.sleep(0.02)
    detail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
    raise BenchError(f"the delay line of emulated host {h.index} did not start within {timeout:.0f} s"
                     f"{': ' + detail[0] if detail else ''}")


def apply(st: State, delay: str, kill) -> None:
    """Give the live cluster ``st`` the one-way ``delay`` (``""``: none) in place: each host's delay line restarted with
    the new delay (``kill(pids)`` ends the old one; its rule stays, so the host's ingress is dropped, never passed
    undelayed, until the new line reads the queue), or ended with its rule for none; every host's TCP buffers sized
    for it."""
    if delay and not BINARY.exists():  # built once per cluster (its directory goes with ``down``)
        build(BINARY)
    st.tcp_buffer_max = tcp_buffer_max(st.link, delay)
    for h in st.hosts:
        if h.delay_pid:
            kill([h.delay_pid])
            h.delay_pid = 0
        set_tcp_buffers(h, st.tcp_buffer_max)
        if delay:
            start(h, delay)
        elif h.queue:
            sh.ok(_rule(h, "-D"))
            h.queue = 0
    st.delay = delay


def healthy(st: State) -> bool:
    return not st.delay or all(h.delay_pid and alive(h.delay_pid) for h in st.hosts)


def status_lines(st: State) -> list[str]:
    """``cluster status``'s lines about the delay lines (empty without a delay)."""
    if not st.delay:
        return []
    lines = [f"  delay {st.delay} one way between hosts (launcher -> host too; host -> launcher not), TCP buffers "
             f"up to {st.tcp_buffer_max >> 20} MiB in each host"]
    for h in st.hosts:
        s, cpu = stats(h.index), cpu_seconds(h.delay_pid)
        err = s.get("late_us", {}).get("all", {})
        state = "alive" if alive(h.delay_pid) else "DEAD (the host's ingress is dropped)"
        lines.append(f"    host {h.index}: delay line pid {h.delay_pid} ({state}), queue {h.queue}, "
                     f"{s.get('packets', 0)} packets, cpu {cpu or 0:.2f} s, release error p50 {err.get('p50', 0)} us "
                     f"p99 {err.get('p99', 0)} us, {s.get('sched', '?')}")
    return lines


class DelayLineDown(BenchError):
    """A delay line of the cluster a job runs on died: its host's ingress is dropped (never passed undelayed)."""


class Watch:
    """The delay lines of a job's cluster, checked while the launcher waits for the job (:func:`watched`;
    :class:`bench.launch.health.JobWatch` calls :meth:`check`)."""

    def __init__(self, lines: list[dict]):
        self.lines = lines
        self.cpu0 = {d["pid"]: cpu_seconds(d["pid"]) or 0.0 for d in lines}

    def check(self) -> None:
        for d in self.lines:
            if not alive(d["pid"]):
                raise DelayLineDown(f"the delay line of emulated host {d['host']} ({d['address']}, pid {d['pid']}) "
                                    f"died during the job: its host's traffic was dropped from then on, not passed "
                                    f"undelayed; the run is void (python -m bench cluster status)")

    def record(self) -> dict:
        """The delay lines' CPU during the job, and what they report of themselves."""
        by_host = []
        for d in self.lines:
            cpu = cpu_seconds(d["pid"])
            s = stats(d["host"])
            by_host.append({"host": d["host"], "pid": d["pid"], "queue": d["queue"],
                            "cpu_s": None if cpu is None else round(cpu - self.cpu0[d["pid"]], 3),
                            "packets": s.get("packets"), "release_error_us": s.get("late_us"), "sched": s.get("sched")})
        return {"by_host": by_host, "cpu_s": round(sum(h["cpu_s"] or 0 for h in by_host), 3),
                "note": "CPU of the hosts' delay lines during the job (outside the hosts' CPU shares); it includes "
                        "the kernel's receive path of each released packet, run in the delay line's verdict call"}


@contextlib.contextmanager
def watched(settings: dict | None, run_dirs: list[Path]):
    """While a job runs on the emulated cluster of ``settings`` (``launch_settings``; None: no cluster), yield a
    :class:`Watch` whose ``check`` the launcher calls while it waits; afterwards, with a delay, record the delay lines' CPU in
    each run's system.json (``network.delay_line``)."""
    lines = (settings or {}).get("delay_lines") or []
    watch = Watch(lines)
    try:
        yield watch
    finally:
        if lines:
            from ..results import read_json, write_json_atomic  # pandas: not for every user of bench.cluster

            record = watch.record()
            for d in run_dirs:
                with contextlib.suppress(OSError, ValueError):
                    system = read_json(Path(d) / "system.json")
                    system.setdefault("network", {})["delay_line"] = record
                    write_json_atomic(Path(d) / "system.json", system)
