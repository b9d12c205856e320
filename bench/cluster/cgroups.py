"""A share of a core per host: one cgroup v1 ``cpu`` group per host, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``.

Each host's sshd is started inside its host's group, so every session and rank process it
forks inherits the group: ``--cpu 1=0.5`` makes everything host 1 runs share half a core. Every
host gets a group (unlimited, quota -1, unless given a share) so that ``ensure`` can change shares
in place without restarting sshd. A host with a share also gets a high ``cpu.shares`` weight, so that
the processes outside the cluster (the launcher) cannot take its share from it: the hardware profiles'
``cpu_per_host`` gives every host the same share, and while the shares add up to less than the
machine's cores each host computes as fast whatever the others do (``python -m bench.perf isolation``).
Without the v1 ``cpu`` controller (e.g. a cgroup-v2-only system) hosts get no group and asking for a
share is an error.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .. import BenchError
from .spec import CFS_PERIOD_US, CGROUP_ROOT, PREFIX, cgroup_path

_NAME_PREFIX = f"{PREFIX}-h"


def available() -> bool:
    return (CGROUP_ROOT / "cpu.cfs_quota_us").exists() and os.access(CGROUP_ROOT, os.W_OK)


def require() -> None:
    if not available():
        raise BenchError(f"--cpu needs the cgroup v1 cpu controller, writable, at {CGROUP_ROOT} (cpu.cfs_quota_us)")


def create(i: int) -> str:
    """Host i's group (unlimited); its path, or ``""`` without the controller."""
    if not available():
        return ""
    path = cgroup_path(i)
    path.mkdir(exist_ok=True)
    return str(path)


DEFAULT_WEIGHT = 1024
"""``cpu.shares`` of an unlimited host (the kernel's default: the weight of one ordinary process)."""
LIMITED_WEIGHT = 16 * DEFAULT_WEIGHT
"""``cpu.shares`` of a host with a share: under contention the scheduler serves it before the processes outside the
emulated cluster (the launcher, a shell), so its quota is a guarantee as well as a cap while the hosts' shares add up
to less than the machine's cores (:func:`bench.cluster.spec.check_total`)."""


def set_share(path: str, share: float | None) -> None:
    """Limit the group to ``share`` of one core (None: unlimited), and weigh it so that it gets that share."""
    if not path:
        if share is not None:
            require()
        return
    p = Path(path)
    (p / "cpu.cfs_period_us").write_text(f"{CFS_PERIOD_US}\n")
    quota = -1 if share is None else max(1000, round(share * CFS_PERIOD_US))
    (p / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (p / "cpu.shares").write_text(f"{DEFAULT_WEIGHT if share is None else LIMITED_WEIGHT}\n")


def share_of(path: str) -> float | None:
    """The group's share of a core as its quota reads back (None: unlimited or no group)."""
    if not path or not Path(path).exists():
        return None
    quota = int((Path(path) / "cpu.cfs_quota_us").read_text())
    period = int((Path(path) / "cpu.cfs_period_us").read_text())
    return None if quota < 0 else quota / period


def joiner(path: str):
    """A ``preexec_fn`` that moves the child into the group before it execs (its forks inherit it)."""
    if not path:
        return None

    def join() -> None:
        with open(Path(path) / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    return join


def list_groups() -> list[Path]:
    """The suite's groups that exist (``dbemu-h<i>`` directly under the cpu controller)."""
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(p for p in CGROUP_ROOT.iterdir()
                  if p.is_dir() and p.name.startswith(_NAME_PREFIX) and p.name[len(_NAME_PREFIX):].isdigit())


def procs(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def remove_all(kill) -> None:
    """Remove every group of the suite; ``kill(pids)`` ends what still runs in one first."""
    for path in list_groups():
        left = procs(path)
        if left:
            kill(left)
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise BenchError(f"could not remove cgroup {path}: processes {procs(path)} still in it")


def cpu_record(state, hosts_by_rank: list[str], launch) -> dict:
    """What system.json records of an emulated cluster's CPU shares (``network.cpu``): the profile's
    ``cpu_per_host`` and ``slow_mode``, each rank's host's share as its cgroup's quota reads back now (cores;
    None: unlimited), and their sum over the hosts the job uses against this machine's cores."""
    cgroup = {h.address: h.cgroup for h in state.hosts}
    by_rank = [share_of(cgroup.get(addr, "")) for addr in hosts_by_rank]
    per_host = {addr: share for addr, share in zip(hosts_by_rank, by_rank)}
    limited = [s for s in per_host.values() if s is not None]
    return {"cpu_per_host": launch.cpu_per_host or None, "slow_mode": launch.slow_mode, "share_by_rank": by_rank,
            "total_cores": round(sum(limited), 6) if len(limited) == len(per_host) else None,
            "machine_cores": os.cpu_count(),
            "note": "cgroup v1 cpu quota per emulated host (cpu.cfs_quota_us / cpu.cfs_period_us): everything the "
                    "host runs, its rank's communication threads included, shares it"}
