"""``up``, ``down``, ``ensure``, ``state`` and ``check_supported``: the life of the one emulated cluster.

There is at most one emulated cluster per machine (its names are fixed). Every operation takes
an exclusive lock (``flock`` on ``/run/distbench/dbemu.lock``) so that two launchers never build
or tear down at the same time.

``up`` first tears down whatever the suite left behind (a crashed ``up``, a lost state file, a
namespace whose processes outlived it): it finds leftovers by their exact names (``dbemu-h<i>``
namespaces, ``dbemu-v<i>``/``dbemu0`` links, ``dbemu-h<i>`` cgroups, sshd processes started with a
config in the suite's directory, the delay lines of :mod:`.delay` (their iptables rules and queues live in the
hosts' namespaces and go with them), and with ``--slurm`` munged, slurmctld and the slurmd's of
:mod:`.slurm`) and never touches anything else. A failing ``up`` removes what it
made before raising. ``down`` does the same teardown and says whether there was anything to remove.

In use: a job on the cluster holds it (:func:`in_use`, recorded in ``/run/distbench/dbemu.job.json`` with the
job's pid). While a live job holds it, another process's ``up``, ``down``, second job, or ``ensure`` that would
rebuild or reshape it is refused naming the job; a record whose process is gone is ignored (and removed).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import BenchError
from . import cgroups, delay, net, sh, slurm, sshd
from .sh import SETUP_SCRIPT, install_command
from .spec import (
    BASE_DIR,
    DIR,
    STATE_FILE,
    SUBNET,
    Host,
    Spec,
    State,
    host_address,
    netns_name,
    veth_root_name,
)

LOCK_FILE = BASE_DIR / "dbemu.lock"
JOB_FILE = BASE_DIR / "dbemu.job.json"  # the job using the cluster (outside DIR: a rebuild by that job keeps it)
_held = 0  # nesting depth of this process's in_use()


def check_supported(need_sshd: bool = True) -> None:
    """Raise BenchError naming what is missing: root, network namespaces, ip/tc with tbf, sshd."""
    if os.geteuid() != 0:
        raise BenchError("the emulated cluster needs root (network namespaces, veth, tc need CAP_NET_ADMIN)")
    if not Path("/proc/self/ns/net").exists():
        raise BenchError("the emulated cluster needs network namespaces (this kernel has no /proc/self/ns/net)")
    for tool in ("ip", "tc"):
        if not sh.which(tool):
            raise BenchError(f"the emulated cluster needs `{tool}` (iproute2): run `{install_command()}`")
    for tool in ("unshare", "mount"):
        if not sh.which(tool):
            raise BenchError(f"the emulated cluster needs `{tool}` (util-linux)")
    # probe, side-effect free, in a throw-away namespace: veth, bridge and tbf
    probe = ("ip link add name dbprobe0 type veth peer name dbprobe1 && ip link add name dbprobe2 type bridge"
             " && tc qdisc add dev dbprobe0 root tbf rate 1mbit burst 32kb latency 25ms")
    proc = subprocess.run(["unshare", "-n", "sh", "-c", probe], check=False, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise BenchError(f"the emulated cluster needs network namespaces with veth, bridge and tc tbf: {err}")
    if need_sshd and not sshd.sshd_binary():
        raise BenchError(f"the emulated cluster needs sshd (openssh-server), not installed: run `{install_command()}`")
    if need_sshd and not (sh.which("ssh") and sh.which("ssh-keygen")):
        raise BenchError(f"the emulated cluster needs ssh and ssh-keygen (openssh-client): run `{install_command()}`")


@contextlib.contextmanager
def _lock():
    while True:
        BASE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:  # a `down` removed /run/distbench just now
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.fstat(fd).st_ino == os.stat(LOCK_FILE).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # a `down` removed the lock file while we waited: lock the new one
    try:
        yield
    finally:
        # drop the lock file (and /run/distbench if empty) once no cluster is left
        if not DIR.exists():
            with contextlib.suppress(OSError):
                LOCK_FILE.unlink()
            with contextlib.suppress(OSError):
                BASE_DIR.rmdir()
        os.close(fd)


def _read_state() -> State | None:
    try:
        return State.from_json(STATE_FILE.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_state(st: State) -> None:
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(st.to_json())
    os.replace(tmp, STATE_FILE)


def _problems(st: State) -> list[str]:
    """What is wrong with the cluster ``st`` describes (empty: healthy): a namespace or the bridge missing, an sshd or
    delay line dead, a link down (``ip link set ... down``: every job on that host would fail until a rebuild)."""
    if net.list_netns() != [h.netns for h in st.hosts] or st.bridge not in net.list_links():
        return ["its namespaces or bridge are not all there"]
    dead = [f"host {h.index}'s sshd is gone" for h in st.hosts if not (h.sshd_pid and sshd.ours(h.sshd_pid))]
    return dead + ([] if delay.healthy(st) else ["a delay line is dead"]) + net.down_links(range(len(st.hosts)))


def _healthy(st: State) -> bool:
    return not _problems(st)


def problems() -> list[str]:
    """``cluster status``: what is wrong with the cluster whose state file exists (empty: none, or healthy); the next
    run or ``up`` rebuilds a broken one."""
    st = _read_state() if os.geteuid() == 0 else None
    return _problems(st) if st is not None else []


def state() -> State | None:
    """The live cluster (None if there is none, or if what is left of one is broken)."""
    if os.geteuid() != 0:
        return None
    st = _read_state()
    return st if st is not None and _healthy(st) else None


def leftovers() -> dict[str, list[str]]:
    """Everything of the suite's that exists now, by kind (empty lists: nothing)."""
    return {
        "netns": net.list_netns(),
        "links": net.list_links(),
        "cgroups": [str(p) for p in cgroups.list_groups()],
        "sshd": [str(p) for p in sshd.suite_sshd_pids()],
        "delay": [str(p) for p in delay.pids()],
        "slurm": [str(p) for p in slurm.daemon_pids()],
        "files": [str(DIR)] if DIR.exists() else [],
    }


def _teardown() -> bool:
    """Remove everything of the suite's; True if there was anything."""
    found = any(leftovers().values())
    slurm.stop()  # munged, slurmctld (root namespace) and the slurmd's, before the hosts' processes
    pids = sshd.suite_sshd_pids() + delay.pids()  # a delay line's end drops its host's ingress: never undelayed
    for ns in net.list_netns():
        pids += net.netns_pids(ns)
    for group in cgroups.list_groups():
        pids += cgroups.procs(group)
    if pids:
        sshd.kill(pids)
    net.delete_all()
    cgroups.remove_all(sshd.kill)
    sshd.remove_privsep_dir_if_ours()
    if DIR.exists():
        shutil.rmtree(DIR)
    left = {k: v for k, v in leftovers().items() if v}
    if left:
        raise BenchError(f"could not remove all of the emulated cluster: {left}")
    return found


def _up(spec: Spec) -> State:
    clash = net.subnet_users()
    if clash:
        raise BenchError(f"the emulated cluster's subnet {SUBNET} is already in use here: {', '.join(clash)}")
    _teardown()
    DIR.mkdir(mode=0o700, parents=True)
    hosts = [Host(i, netns_name(i), host_address(i), veth_root_name(i), "") for i in range(spec.hosts)]
    try:
        sshd.ensure_privsep_dir()
        net.create_bridge()
        for h in hosts:
            net.add_host(h.index)
            net.shape(h.index, spec.link, spec.delay)
            h.cgroup = cgroups.create(h.index)
            cgroups.set_share(h.cgroup, spec.cpu.get(h.index))
        st = State(hosts=hosts, slots=spec.slots, link=spec.link, cpu=dict(spec.cpu),
                   ssh_identity_file=str(sshd.IDENTITY), ssh_config=str(sshd.SSH_CONFIG),
                   ssh_bin_dir=str(sshd.BIN_DIR), created_at=time.time())
        delay.apply(st, spec.delay, sshd.kill)  # before sshd: its first connection already crosses the delay
        sshd.prepare(hosts)
        for h in hosts:
            h.sshd_pid = sshd.start(h)
        st.created_run_sshd = sshd.PRIVSEP_MARKER.exists()
        _write_state(st)
        return st
    except BaseException:
        with contextlib.suppress(Exception):
            _teardown()
        raise


def _ready(spec: Spec) -> Spec:
    """Validate ``spec`` and the system; install what is missing (sshd, a delay line's needs) on first use."""
    spec = spec.validated()
    check_supported(need_sshd=False)
    if (not sshd.sshd_binary() or (spec.delay and not delay.installed())) and SETUP_SCRIPT.exists():
        print(f"[bench.cluster] first use: installing the system packages ({install_command()})", file=sys.stderr)
        proc = subprocess.run(["bash", str(SETUP_SCRIPT)], check=False, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise BenchError(f"installing the emulated cluster's system packages failed ({install_command()}): {err}")
    check_supported()
    if spec.delay:
        delay.check_supported(spec.delay)
    if spec.cpu:
        cgroups.require()
    return spec


def _job() -> dict | None:
    """The live job recorded as using the cluster, or None (a record whose process is gone is removed)."""
    import psutil

    try:
        rec = json.loads(JOB_FILE.read_text())
        if repr(psutil.Process(int(rec["pid"])).create_time()) == rec["start"]:
            return rec
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass
    with contextlib.suppress(OSError):
        JOB_FILE.unlink()
    return None


def _refuse_if_used(action: str) -> None:
    """BenchError naming the job if another live process holds the cluster (call under :func:`_lock`)."""
    job = _job()
    if job is not None and job["pid"] != os.getpid():
        since = time.strftime("%H:%M:%S", time.localtime(job["since"]))
        raise BenchError(f"the emulated cluster is in use by {job['job']} (pid {job['pid']}, since {since}): "
                         f"{action} refused while it runs; wait for it to end")


@contextlib.contextmanager
def in_use(job: str):
    """Hold the cluster for ``job`` (a description naming it) while the block runs: other processes may not bring
    it up, reshape, rebuild or tear it down, nor start a job of their own on it. Nests within one process."""
    import psutil

    global _held
    with _lock():
        _refuse_if_used(f"a second job ({job})")
        if _held == 0:
            me = psutil.Process()
            JOB_FILE.write_text(json.dumps({"pid": me.pid, "start": repr(me.create_time()), "since": time.time(),
                                            "job": job}))
        _held += 1
    try:
        yield
    finally:
        with _lock():
            _held -= 1
            if _held == 0 and (_job() or {}).get("pid") == os.getpid():
                JOB_FILE.unlink()


def up(spec: Spec) -> State:
    """Create the cluster ``spec`` describes (replacing any cluster or leftovers of the suite's)."""
    spec = _ready(spec)
    with _lock():
        _refuse_if_used("up")
        return _up(spec)


def down() -> bool:
    """Remove every namespace, link, qdisc, cgroup, sshd and file of the suite's; False if there was nothing."""
    if os.geteuid() != 0:
        raise BenchError("the emulated cluster needs root (network namespaces, veth, tc need CAP_NET_ADMIN)")
    with _lock():
        _refuse_if_used("down")
        return _teardown()


def _reshape(st: State, link: str, cpu: dict[int, float], delay_: str) -> State:
    """Change link rates, the delay and CPU shares in place (no namespace or sshd is restarted; a new delay restarts
    the delay lines)."""
    if (link, delay_) != (st.link, st.delay):
        for h in st.hosts:
            net.shape(h.index, link, delay_)
        st.link = link
        delay.apply(st, delay_, sshd.kill)
    for h in st.hosts:
        if cpu.get(h.index) != st.cpu.get(h.index):
            cgroups.set_share(h.cgroup, cpu.get(h.index))
    st.cpu = {i: s for i, s in cpu.items() if i < len(st.hosts)}
    return st


def ensure(spec: Spec) -> State:
    """A cluster with at least ``spec.hosts`` hosts, shaped as ``spec`` says.

    No cluster (or a broken one, e.g. a delay line dead): ``up``. Too few hosts: rebuilt. Otherwise the live cluster
    is kept and its link rate, delay, CPU shares and slots are changed in place."""
    spec = _ready(spec)
    with _lock():
        st = _read_state()
        if st is None or not _healthy(st) or len(st.hosts) < spec.hosts:
            _refuse_if_used(f"bringing it up with {spec.hosts} host(s)")
            return _up(spec)
        if (spec.link, spec.delay, spec.cpu, spec.slots) != (st.link, st.delay, dict(st.cpu), st.slots):
            _refuse_if_used(f"reshaping it (link {spec.link or 'unshaped'}, delay {spec.delay or 0}, cpu {spec.cpu}, "
                            f"{spec.slots} slot(s))")
        st = _reshape(st, spec.link, spec.cpu, spec.delay)
        st.slots = spec.slots
        _write_state(st)
        return st



def start_slurm() -> dict:
    """Start Slurm on the live emulated cluster (``cluster up --slurm``; :mod:`.slurm`), under the cluster's lock; if
    it already runs, keep it. A failing start stops whatever it started before raising."""
    slurm.check_installed()
    with _lock():
        st = state()
        if st is None:
            raise BenchError("Slurm needs the emulated cluster: python -m bench cluster up --hosts N --slurm")
        info = slurm.state()
        if info is not None and sorted(info["slurmd_pids"]) == sorted(h.netns for h in st.hosts):
            return info
        slurm.stop()
        try:
            return slurm.start(st)
        except BaseException:
            slurm.stop()
            raise
