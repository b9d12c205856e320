"""What a cluster is: the requested :class:`Spec`, the live :class:`State`, and the naming scheme.

Naming. Everything the suite makes in the kernel or on disk carries the prefix ``dbemu``, so that
``down`` and the stale clean-up of ``up`` remove exactly what the suite made and nothing else:

========================  ==============================================  =======================
object                    name                                            where
========================  ==============================================  =======================
host i                    network namespace ``dbemu-h<i>``                ``ip netns``
bridge                    ``dbemu0``, address 198.18.0.1/24               root namespace
host i's link, root end   veth ``dbemu-v<i>`` (enslaved to the bridge)    root namespace
host i's link, host end   veth ``dbemu0``, address 198.18.0.<i+2>/24      namespace ``dbemu-h<i>``
host i's CPU share        cgroup ``/sys/fs/cgroup/cpu/dbemu-h<i>``        cgroup v1 ``cpu``
host i's delay line       process ``/run/distbench/dbemu/bin/dbemu-delay``  namespace ``dbemu-h<i>``
                          on NFQUEUE queue ``QUEUE_BASE + i``, fed by one
                          iptables rule (raw PREROUTING, comment
                          ``dbemu-delay``)                                (only with a delay)
sshd, keys, state         ``/run/distbench/dbemu/`` (0700)                tmpfs: gone at reboot,
                                                                          like the namespaces
========================  ==============================================  =======================

The bridge and every host-side veth end share one name, ``dbemu0``, on purpose: horovodrun's
``--network-interface`` is looked up both in the launcher's namespace (the root namespace, where
Horovod's gloo rendezvous server takes the address of that interface) and in every host namespace
(where gloo binds its sockets to it). One name that exists, with an address in the subnet, on both
sides makes one ``--network-interface dbemu0`` right everywhere.

Addresses are in 198.18.0.0/15, the block reserved for network benchmarking (RFC 2544); hosts
have no default route, so they reach only each other and the launcher on the bridge.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import BenchError
from ..config import normalize_delay, normalize_rate, parse_delay, parse_rate

PREFIX = "dbemu"
BRIDGE = f"{PREFIX}0"
IFNAME = BRIDGE  # host-side veth end inside each host namespace: the same name as the bridge
SUBNET = ipaddress.ip_network("198.18.0.0/24")
BRIDGE_ADDRESS = str(SUBNET.network_address + 1)
MAX_HOSTS = SUBNET.num_addresses - 3  # .0 network, .1 bridge, .255 broadcast
SSH_PORT = 2222
BASE_DIR = Path("/run/distbench")
DIR = BASE_DIR / PREFIX  # the suite's private directory (0700): keys, sshd configs, pid files, state
STATE_FILE = DIR / "state.json"
CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
CFS_PERIOD_US = 100_000
QUEUE_BASE = 0xDBE0  # NFQUEUE queue of host i's delay line: QUEUE_BASE + i (each in the host's own namespace)
def netns_name(i: int) -> str:
    return f"{PREFIX}-h{i}"


def veth_root_name(i: int) -> str:
    return f"{PREFIX}-v{i}"


def host_address(i: int) -> str:
    return str(SUBNET.network_address + 2 + i)


def cgroup_path(i: int) -> Path:
    return CGROUP_ROOT / netns_name(i)


MIN_SHARE = 1000 / CFS_PERIOD_US
"""The smallest share of a core a host can get: the kernel's smallest quota (1 ms) per period."""


def host_shares(hosts: int, cpu_per_host: float, explicit: dict[int, float] | None = None,
                slow: dict[int, float] | None = None) -> dict[int, float]:
    """Host index -> cores for hosts ``0..hosts-1``: ``cpu_per_host`` each (none when 0: unlimited), divided by the
    factor of each host in ``slow`` (a slower device), then ``explicit`` on top for the hosts it names."""
    shares = {i: cpu_per_host for i in range(hosts)} if cpu_per_host > 0 else {}
    for i, factor in (slow or {}).items():
        if i in shares:
            shares[i] = shares[i] / factor
    shares.update(explicit or {})
    return shares


def check_total(shares: dict[int, float], used: int, cores: int | None = None) -> None:
    """BenchError if a share is below :data:`MIN_SHARE`, or if the first ``used`` hosts' shares add up to more than
    this machine's cores: those hosts could not all get their share at once, and a host's speed would depend on
    what the others do."""
    cores = cores or os.cpu_count() or 1
    small = {i: s for i, s in shares.items() if s < MIN_SHARE}
    if small:
        i = min(small)
        raise BenchError(f"emulated host {i} would get {small[i]:g} cores, below the smallest share {MIN_SHARE:g} "
                         f"(1 ms per {CFS_PERIOD_US // 1000} ms period): raise cpu_per_host or lower slow_factor")
    total = sum(s for i, s in shares.items() if i < used)
    if total > cores + 1e-9:
        each = ", ".join(f"{shares[i]:g}" for i in sorted(shares) if i < used)
        raise BenchError(f"the {used} emulated host(s) this run uses need {total:g} cores in all ({each}), more than "
                         f"the {cores} of this machine: lower cpu_per_host (at most {cores / used:.3g} for {used} "
                         f"hosts) or the number of processes")


@dataclass
class Spec:
    """An emulated cluster as asked for (``python -m bench cluster up --hosts 4 --link 1gbit ...``)."""

    hosts: int
    """Number of emulated hosts (network namespaces)."""
    slots: int = 1
    """Processes per host in the hostfiles written for it."""
    link: str = ""
    """Each host's link rate in both directions (``100mbit``, ``1gbit``, ``10gbit``); ``""``: unshaped."""
    cpu: dict[int, float] = field(default_factory=dict)
    """Host index -> share of one core (0.5: half a core); hosts not named are not limited."""
    delay: str = ""
    """One-way delay between any two hosts (``500us``, ``5ms``, ``50ms``): each host's ingress is held that long by
    its delay line (:mod:`.delay`); ``""``: none."""

    def validated(self) -> Spec:
        """A copy with the link rate and the delay normalised; BenchError naming the bad field otherwise."""
        if not isinstance(self.hosts, int) or not 1 <= self.hosts <= MAX_HOSTS:
            raise BenchError(f"--hosts must be between 1 and {MAX_HOSTS}, got {self.hosts!r}")
        if not isinstance(self.slots, int) or self.slots < 1:
            raise BenchError(f"--slots must be >= 1, got {self.slots!r}")
        cpu = {}
        for host, share in (self.cpu or {}).items():
            if isinstance(host, str) and host.strip().isdigit():
                host = int(host)
            if not isinstance(host, int) or not 0 <= host < self.hosts:
                raise BenchError(f"--cpu names host {host!r}; hosts are 0..{self.hosts - 1}")
            if not isinstance(share, (int, float)) or not MIN_SHARE <= share <= (os.cpu_count() or 1):
                raise BenchError(f"--cpu share of host {host} must be in [{MIN_SHARE:g}, {os.cpu_count()}] cores, "
                                 f"got {share!r}")
            cpu[host] = float(share)
        return Spec(self.hosts, self.slots, normalize_rate(self.link), cpu, normalize_delay(self.delay))


@dataclass
class Host:
    index: int
    netns: str
    address: str
    veth: str
    """Root-namespace end of the host's veth pair (the host-side end is :data:`IFNAME`)."""
    cgroup: str
    """cgroup v1 ``cpu`` directory of the host (its sshd and everything it starts), or ``""``."""
    sshd_pid: int = 0
    delay_pid: int = 0
    """The host's delay line (0: no delay), bound to NFQUEUE queue ``queue`` in the host's namespace."""
    queue: int = 0


@dataclass
class State:
    """The live cluster, as written to ``/run/distbench/dbemu/state.json``."""

    hosts: list[Host]
    slots: int
    link: str
    cpu: dict[int, float]
    delay: str = ""
    """One-way delay between hosts (``""``: none); :mod:`.delay`."""
    tcp_buffer_max: int = 0
    """Largest TCP buffer (bytes) set in every host's namespace for the delay's bandwidth-delay product (0: the
    kernel's defaults)."""
    interface: str = IFNAME
    bridge: str = BRIDGE
    bridge_address: str = BRIDGE_ADDRESS
    ssh_port: int = SSH_PORT
    ssh_identity_file: str = ""
    ssh_config: str = ""
    ssh_bin_dir: str = ""
    """Directory holding the ``ssh`` wrapper (``ssh -F <suite config>``): put it first on the
    launcher's PATH so that ssh reads only the suite's config and known_hosts, never ~/.ssh."""
    created_run_sshd: bool = False
    """True if ``up`` created /run/sshd (sshd's privilege-separation directory): ``down`` removes it."""
    created_at: float = 0.0

    @property
    def addresses(self) -> list[str]:
        return [h.address for h in self.hosts]

    def spec(self) -> Spec:
        return Spec(len(self.hosts), self.slots, self.link, dict(self.cpu), self.delay)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> State:
        d = json.loads(text)
        d["hosts"] = [Host(**h) for h in d["hosts"]]
        d["cpu"] = {int(k): float(v) for k, v in d.get("cpu", {}).items()}
        return cls(**d)
