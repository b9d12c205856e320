"""Slurm on the emulated cluster (``python -m bench cluster up --slurm``), and the checks of a run inside an allocation.

What ``up --slurm`` adds to the hosts (all of it under ``/run/distbench/dbemu/slurm/``, 0700; never
``/etc/slurm``, never a system service)::

    munge.key, munge/        munged's key and socket: one munged on the launcher (root namespace); the
                             daemons in the host namespaces reach its socket through the shared filesystem
                             (slurm.conf ``AuthInfo=socket=...``)
    slurm.conf               the cluster: controller ``dbemu-launcher`` (198.18.0.1, the bridge), one node per
                             host (``NodeName=dbemu-h<i> NodeAddr=<its address>``), one partition ``dbemu``
    ctld/, spool/<node>/     slurmctld's state, each slurmd's spool
    *.log, *.pid, plugstack.conf (empty: the system's SPANK plugins are not loaded), cgroup.conf
    state.json               pids and ports, for ``cluster status`` and ``down``

``slurmctld`` runs in the root namespace under ``unshare --uts --mount`` with the hostname
``dbemu-launcher`` and the cluster's /etc/hosts bind-mounted (slurmctld starts only on a host named
by ``SlurmctldHost``; ``CommunicationParameters=NoCtldInAddrAny`` makes it listen on the bridge address
only). Each host's ``slurmd -N dbemu-h<i>`` runs like the host's sshd: ``ip netns exec`` into the
host's namespace from inside its cgroup (the host's CPU share, :func:`.cgroups.joiner`), its own
hostname and /etc/hosts, ``SlurmdParameters=config_overrides`` (every node is this machine: slurmd
takes the configured CPUs, 4 per core of the machine), and an empty tmpfs over /sys/fs/cgroup in its mount
namespace (slurmd wants a cgroup file system; with task/none and proctrack/linuxproc it uses none, and so never
touches the machine's cgroups: jobs stay in the host's CPU share). So a batch script runs on its first node like on a real compute node:
``hostname`` is the node's name, horovodrun starts the local ranks itself and the others over ssh
through the node names of the allocation (their keys are in the suite's known_hosts).
Ports: slurmctld 16817 (the bridge address), slurmd 16818 (each host's address): not Slurm's defaults,
so that a real Slurm on the machine is never reached or disturbed.

Clients find the cluster through ``SLURM_CONF``: ``pipelines/slurm/run-blocking.sh`` sets it when this
cluster's ``slurm.conf`` exists and ``SLURM_CONF`` is unset (a real cluster has no such file, so nothing
changes there); by hand, ``SLURM_CONF=/run/distbench/dbemu/slurm/slurm.conf sinfo``. ``srun`` works inside a
job (on a node), not from the launcher's shell (it would have to be reached back at the machine's own address).
:func:`bench.cluster.lifecycle.start_slurm` starts it under the cluster's lock (``cluster up --slurm``).
Slurm lives as long as the hosts: ``cluster down``, or a ``--hardware emu*`` run that rebuilds the cluster with
more hosts, ends it (:func:`stop`, called by the cluster's teardown); a run that only reshapes links or CPU
shares keeps it.

:func:`check_allocation` is what ``bench run`` checks of a hardware profile that takes its hosts from a
Slurm allocation (``hostfile: pipelines/hosts/slurm.txt``: ``slurm``, ``emu-slurm``): it must run inside
an allocation (``SLURM_JOB_ID``), and the allocation must hold every process of the run. Such a run reads the
hostfile of its own job (:func:`job_hostfile`, ``pipelines/hosts/slurm-<job id>.txt``), never a file that another job
from the same checkout may have rewritten.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

from .. import BenchError, short
from . import cgroups, sh, sshd
from .spec import BRIDGE_ADDRESS, DIR, PREFIX, SSH_PORT, State

SLURM_DIR = DIR / "slurm"
CONF = SLURM_DIR / "slurm.conf"
STATE = SLURM_DIR / "state.json"
MUNGE_KEY = SLURM_DIR / "munge.key"
MUNGE_DIR = SLURM_DIR / "munge"
MUNGE_SOCKET = MUNGE_DIR / "munge.socket"
CTLD_HOST = f"{PREFIX}-launcher"
CTLD_PORT = 16817
SLURMD_PORT = 16818
PARTITION = PREFIX
#: The hostfile a Slurm hardware profile names: it marks the profile as one whose hosts are an allocation's (the
#: launcher reads the job's own file in its place, :func:`job_hostfile`).
SLURM_HOSTFILE = "pipelines/hosts/slurm.txt"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")


def client_env(base: dict | None = None) -> dict[str, str]:
    """An environment in which Slurm's commands (sbatch, sinfo, scancel, ...) talk to the emulated cluster."""
    env = dict(os.environ if base is None else base)
    env["SLURM_CONF"] = str(CONF)
    return env


def check_installed() -> None:
    """BenchError naming the install command if munge or a Slurm binary is missing."""
    missing = [b for b in BINARIES if not sh.which(b)]
    if missing:
        raise BenchError(f"Slurm on the emulated cluster needs {', '.join(missing)} (slurm-wlm, munge): "
                         f"run `{sh.install_command()}`")


def slurm_conf(st: State, cpus: int) -> str:
    """The cluster's slurm.conf: the launcher as controller, one node per emulated host with ``cpus`` CPUs."""
    d = SLURM_DIR
    nodes = "".join(f"NodeName={h.netns} NodeAddr={h.address} CPUs={cpus} State=UNKNOWN\n" for h in st.hosts)
    return "\n".join([
        "# Slurm of the emulated cluster (bench.cluster.slurm); removed by `python -m bench cluster down`",
        f"ClusterName={PREFIX}",
        f"SlurmctldHost={CTLD_HOST}({BRIDGE_ADDRESS})",
        f"SlurmctldPort={CTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={MUNGE_SOCKET}",
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        "SlurmdParameters=config_overrides",
        f"StateSaveLocation={d}/ctld",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd.%n.pid",
        f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdLogFile={d}/slurmd.%n.log",
        f"PlugStackConfig={d}/plugstack.conf",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "KillWait=30",
        "MinJobAge=60",
        "InactiveLimit=0",
        "SlurmdTimeout=30",  # a node whose slurmd died is marked down (and its jobs end) after 30 s
        "MailProg=/bin/true",
        nodes.rstrip("\n"),
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ""])


def _ours(pid: int) -> bool:
    """True if ``pid`` is a daemon of the suite's Slurm (its command line names the suite's Slurm directory)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(SLURM_DIR).encode() in cmd and any(n.encode() in cmd.split(b"\0")[0] for n in ("munged", "slurm"))


def daemon_pids() -> list[int]:
    """Every live munged, slurmctld and slurmd of the suite (found by command line, also without a state file)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ours(int(p.name))]


def _wait(what: str, ready, timeout: float, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(0.1)
    detail = [l for l in log.read_text().splitlines() if "error" in l.lower()][-1:] if log and log.exists() else []
    raise BenchError(f"{what} did not come up within {timeout:.0f} s{': ' + detail[0].strip() if detail else ''}")


def _pid(path: Path) -> int:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pid if _ours(pid) else 0


def _listening(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


def nodes() -> dict[str, str]:
    """Node name -> state (``idle``, ``alloc``, ``down*``, ...) as the controller reports it; {} if unreachable."""
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=20,
                              env=client_env(), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) >= 2)


def start(st: State, timeout: float = 60) -> dict:
    """Start munged, slurmctld and one slurmd per host of the live cluster ``st``; wait until every node is idle.

    Returns what ``state.json`` records (pids, ports, the configuration's path). The caller holds the cluster's
    lock and stops everything (:func:`stop`) if this raises."""
    check_installed()
    for sub in ("", "munge", "ctld", "spool", *(f"spool/{h.netns}" for h in st.hosts)):
        (SLURM_DIR / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    if not MUNGE_KEY.exists():
        fd = os.open(MUNGE_KEY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
    (SLURM_DIR / "plugstack.conf").write_text("# no SPANK plugins on the emulated cluster\n")
    (SLURM_DIR / "cgroup.conf").write_text("# no cgroup is made or used (task/none, proctrack/linuxproc)\n"
                                           "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
    # each node offers 4 CPUs per core of the machine (the suite's limit of processes per core, `--oversubscribe`):
    # bench.sbatch's default --ntasks-per-node=8 fits on 2 cores
    CONF.write_text(slurm_conf(st, max(st.slots, 4 * (os.cpu_count() or 1))))
    # the allocation's hostfile names nodes: make their host keys known under those names too (ssh never learns one)
    host_pub = " ".join(Path(f"{sshd.HOST_KEY}.pub").read_text().split()[:2])
    known = sshd.KNOWN_HOSTS.read_text()
    known += "".join(f"[{h.netns}]:{SSH_PORT} {host_pub}\n" for h in st.hosts if f"[{h.netns}]:" not in known)
    sshd.KNOWN_HOSTS.write_text(known)

    sh.run(["munged", f"--key-file={MUNGE_KEY}", f"--socket={MUNGE_SOCKET}", f"--pid-file={SLURM_DIR}/munged.pid",
            f"--log-file={SLURM_DIR}/munged.log", f"--seed-file={SLURM_DIR}/munged.seed", "--num-threads=4",
            "--force"])  # --force: the socket lies under the 0700 private directory (munged wants it world-searchable)
    munged = _wait("munged", lambda: _pid(SLURM_DIR / "munged.pid"), 10, SLURM_DIR / "munged.log")

    hosts_file = sshd.hosts_path(0)  # every host's /etc/hosts names the launcher and every host
    boot = (f"mount --bind {hosts_file} /etc/hosts && echo {CTLD_HOST} > /proc/sys/kernel/hostname && "
            f"exec slurmctld -c -f {CONF}")
    sh.run(["unshare", "--uts", "--mount", "sh", "-c", boot])
    ctld = _wait("slurmctld", lambda: _pid(SLURM_DIR / "slurmctld.pid") if _listening(BRIDGE_ADDRESS, CTLD_PORT) else 0,
                 timeout, SLURM_DIR / "slurmctld.log")
    slurmd = {}
    for h in st.hosts:
        # `ip netns exec` mounts a fresh /sys (no cgroup file systems) and slurmd insists on finding one: an empty
        # tmpfs stands in, so that slurmd (task/none, proctrack/linuxproc) never touches the machine's cgroups
        boot = (f"mount --bind {sshd.hosts_path(h.index)} /etc/hosts && echo {h.netns} > /proc/sys/kernel/hostname && "
                f"mount -t tmpfs -o size=64k,mode=755 {PREFIX}-nocgroup /sys/fs/cgroup && "
                f"exec slurmd -N {h.netns} -f {CONF}")
        sh.run(sh.in_netns(h.netns, ["unshare", "--uts", "sh", "-c", boot]), preexec_fn=cgroups.joiner(h.cgroup))
    for h in st.hosts:
        log = SLURM_DIR / f"slurmd.{h.netns}.log"
        slurmd[h.netns] = _wait(f"slurmd of emulated host {h.index}", lambda: _pid(SLURM_DIR / f"slurmd.{h.netns}.pid"),
                                timeout, log)
    names = [h.netns for h in st.hosts]
    _wait("every Slurm node (idle in sinfo)", lambda: all(nodes().get(n) == "idle" for n in names), timeout,
          SLURM_DIR / "slurmctld.log")
    info = {"conf": str(CONF), "controller": f"{CTLD_HOST} {BRIDGE_ADDRESS}:{CTLD_PORT}", "slurmd_port": SLURMD_PORT,
            "partition": PARTITION, "munged_pid": munged, "slurmctld_pid": ctld, "slurmd_pids": slurmd,
            "started_at": time.time()}
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=2, sort_keys=True))
    os.replace(tmp, STATE)
    return info


def state() -> dict | None:
    """What ``start`` recorded, if Slurm of the emulated cluster runs (its controller alive), else None."""
    try:
        info = json.loads(STATE.read_text())
    except (OSError, ValueError):
        return None
    return info if _ours(int(info.get("slurmctld_pid", 0))) else None


def stop() -> bool:
    """End every daemon of the suite's Slurm (slurmd first, so that their jobs' steps end, then slurmctld and
    munged); True if there was any. Its files go with the cluster's directory; job processes left in a host
    namespace or cgroup are ended by the cluster's teardown."""
    pids = daemon_pids()
    if not pids:
        return False
    order = {"slurmd": 0, "slurmctld": 1, "munged": 2}

    def kind(pid: int) -> int:
        try:
            exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            return 3
        return order.get(Path(exe).name, 3)

    for k in sorted({kind(p) for p in pids}):
        sshd.kill([p for p in pids if kind(p) == k], grace=5.0)
    return True


def status_lines() -> list[str]:
    """``cluster status``'s lines about Slurm (empty if it does not run)."""
    info = state()
    if info is None:
        return []
    node_states = nodes()
    lines = [f"  slurm: controller {info['controller']} (slurmctld pid {info['slurmctld_pid']}, munged pid "
             f"{info['munged_pid']}), partition {info['partition']}, config {info['conf']}"]
    for name, pid in info["slurmd_pids"].items():
        lines.append(f"    node {name}: {node_states.get(name, 'unreachable')}, slurmd pid {pid}")
    lines.append(f"  pipelines/slurm/run-blocking.sh finds it by itself; by hand: SLURM_CONF={info['conf']} sinfo")
    return lines


# -- a run inside an allocation (bench.launch)


def uses_allocation(cfg) -> bool:
    """True if the run's hardware profile takes its hosts from a Slurm allocation (its hostfile is
    :data:`SLURM_HOSTFILE`; the launcher reads the job's own, :func:`job_hostfile`)."""
    hostfile = cfg.launch.hostfile
    return bool(hostfile) and Path(hostfile).as_posix().endswith(SLURM_HOSTFILE)


def job_id(cfg, env: dict | None = None) -> str:
    """The id of the Slurm job a run on a Slurm hardware profile runs in (``SLURM_JOB_ID``); BenchError outside an
    allocation (or with an id that is not one: it names a file, :func:`job_hostfile`)."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID", "")
    if not job:
        raise BenchError(f"hardware {cfg.launch.hardware!r} runs inside a Slurm allocation and SLURM_JOB_ID is not "
                         f"set: submit it with pipelines/slurm/run-blocking.sh [SBATCH OPTIONS --] python -m bench "
                         f"run ... (or choose another --hardware)")
    if not job.isdigit():
        raise BenchError(f"SLURM_JOB_ID={short(job)} is not a Slurm job id (digits)")
    return job


def job_hostfile(cfg, env: dict | None = None) -> str:
    """The hostfile of the Slurm job a run on a Slurm hardware profile runs in, relative to the repository:
    ``pipelines/slurm/bench.sbatch`` writes one per job, ``pipelines/hosts/slurm-<job id>.txt`` (:data:`SLURM_HOSTFILE`
    with the job's id), and removes it when the job's command ends, so that two jobs from one checkout never read
    each other's. BenchError outside an allocation (:func:`job_id`)."""
    path = Path(SLURM_HOSTFILE)
    return path.with_stem(f"{path.stem}-{job_id(cfg, env)}").as_posix()


def tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed task counts (``SLURM_TASKS_PER_NODE``: ``2(x3),1``) expanded, one number per node."""
    out = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise BenchError(f"cannot read SLURM_TASKS_PER_NODE={text!r} (expected e.g. 2(x3),1)")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def check_allocation(cfgs: list, processes_of, env: dict | None = None) -> None:
    """For runs on a Slurm hardware profile (:func:`uses_allocation`), before anything is written: BenchError outside
    an allocation (no ``SLURM_JOB_ID``), or when the allocation holds fewer tasks (``SLURM_TASKS_PER_NODE``) than a
    run's processes (``processes_of(cfg)``: its workers plus server ranks, as the launcher counts them), naming both
    numbers. No-op for every other run."""
    env = os.environ if env is None else env
    for cfg in cfgs:
        if not uses_allocation(cfg):
            continue
        job = job_id(cfg, env)
        per_node = tasks_per_node(env.get("SLURM_TASKS_PER_NODE", ""))
        # SLURM_NTASKS (set by --ntasks / --ntasks-per-node) can be below the per-node counts' sum (--ntasks=3 on
        # 2 nodes of 2 CPUs reads 2(x2)): the tasks asked for are what the job may use
        tasks = int(env.get("SLURM_NTASKS") or sum(per_node))
        processes = processes_of(cfg)
        if tasks < processes:
            servers = processes - cfg.launch.np
            need = f"--np {cfg.launch.np}" + (f" + {servers} server rank(s)" if servers else "")
            raise BenchError(f"the Slurm allocation (job {job}) has {tasks} task(s) on {len(per_node)} "
                             f"node(s), fewer than the {processes} process(es) {cfg.algorithm} needs ({need}): ask for "
                             f"more, e.g. --nodes={processes} --ntasks-per-node=1")

