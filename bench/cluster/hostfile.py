"""What horovodrun needs to launch over the emulated hosts: a hostfile and the ssh/interface settings.

Ranks fill hosts in hostfile order (Horovod assigns rank 0.. to the first host's slots, then the
next host's), so ``hosts[r]`` of :func:`launch_settings` is rank r's host. Parameter-server
algorithms put the server on the last rank; with ``server_host=True`` that rank gets a host of its
own: the worker hosts' slots add up to exactly the number of workers, and one more host with one
slot follows. Hosts are named by address in the hostfile, so ``HOROVOD_HOSTNAME`` of a rank is its
host's address, and an address that is not the launcher's makes Horovod start the rank over ssh.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import BenchError, short
from ..config import HOST_NAME
from .spec import DIR, State

HOSTFILE_DIR = DIR / "hostfiles"


def placement(st: State, workers: int, server_host: bool) -> list[tuple[str, int]]:
    """``[(address, slots), ...]`` for ``workers`` worker processes (+ a server host); BenchError if too few."""
    if workers < 1:
        raise BenchError(f"need at least 1 worker process, got {workers}")
    slots, n_hosts = st.slots, len(st.hosts)
    worker_hosts = -(-workers // slots)
    needed = worker_hosts + (1 if server_host else 0)
    if needed > n_hosts:
        server = " plus 1 host for the server rank" if server_host else ""
        raise BenchError(
            f"the emulated cluster has {n_hosts} host(s) with {slots} slot(s) each: {workers} worker process(es) need "
            f"{worker_hosts} host(s){server}, {needed} in all (python -m bench cluster up --hosts {needed} --slots {slots})")
    out, left = [], workers
    for h in st.hosts[:worker_hosts]:
        out.append((h.address, min(slots, left)))
        left -= out[-1][1]
    if server_host:
        out.append((st.hosts[worker_hosts].address, 1))
    return out


def write_hostfile(st: State, workers: int, server_host: bool = False) -> Path:
    """Write a horovodrun ``--hostfile`` (``ADDRESS slots=N`` lines) under the suite's directory; its path."""
    lines = "".join(f"{addr} slots={n}\n" for addr, n in placement(st, workers, server_host))
    HOSTFILE_DIR.mkdir(mode=0o700, exist_ok=True)
    path = HOSTFILE_DIR / f"hostfile-w{workers}{'-ps' if server_host else ''}-s{st.slots}.txt"
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(lines)
    os.replace(tmp, path)
    return path


def check_hostfile(path: Path) -> list[tuple[str, int]]:
    """A horovodrun hostfile read and checked before launch: ``HOST [slots=N]`` lines (``#`` comments and blank lines
    aside), every host a plain name (horovodrun writes it unquoted into the ssh command and the ranks' environment);
    ``[(host, slots), ...]``. BenchError naming the file and line otherwise."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"hostfile {str(path)!r} cannot be read ({getattr(e, 'strerror', None) or e})") from None
    hosts = []
    for i, line in enumerate(lines, start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        slots = fields[1].removeprefix("slots=") if len(fields) == 2 else "1"
        if len(fields) > 2 or not HOST_NAME.fullmatch(fields[0]) or not slots.isdigit() or int(slots) < 1:
            raise BenchError(f"{path}:{i}: {short(line.strip())} is not 'HOST slots=N' (a host name or IPv4 address: "
                             f"letters, digits, '.', '-', '_'; N >= 1)")
        hosts.append((fields[0], int(slots)))
    if not hosts:
        raise BenchError(f"hostfile {str(path)!r} names no host")
    return hosts


def launch_settings(st: State, processes: int, server_host: bool) -> dict:
    """horovodrun settings for ``processes`` ranks (``-np``; with ``server_host``, the last is the server,
    on a host of its own).

    Keys: ``hostfile``, ``network_interface``, ``ssh_port``, ``ssh_identity_file``, ``hosts`` (rank r's
    host address at ``hosts[r]``), ``link``, ``delay`` (one way; ``""``: none), ``delay_lines`` (host, address, pid,
    queue of each host's delay line; :func:`bench.cluster.delay.watched` watches them), ``emulated`` (True), ``np``
    (= ``processes``) and ``env``:
    variables to add to horovodrun's environment (``PATH`` with the suite's ssh wrapper first, so that ssh
    uses only the suite's keys and known_hosts and never reads or writes ~/.ssh).
    """
    workers = processes - (1 if server_host else 0)
    hostfile = write_hostfile(st, workers, server_host)
    hosts = [addr for addr, n in placement(st, workers, server_host) for _ in range(n)]
    return {
        "hostfile": str(hostfile),
        "network_interface": st.interface,
        "ssh_port": st.ssh_port,
        "ssh_identity_file": st.ssh_identity_file,
        "hosts": hosts,
        "link": st.link,
        "delay": st.delay,
        "delay_lines": [{"host": h.index, "address": h.address, "pid": h.delay_pid, "queue": h.queue}
                        for h in st.hosts if h.delay_pid],
        "emulated": True,
        "np": processes,
        "env": {"PATH": f"{st.ssh_bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    }


def horovodrun_args(settings: dict) -> list[str]:
    """The horovodrun flags of ``settings`` (after ``horovodrun``; add ``--gloo`` and the command)."""
    return ["-np", str(settings["np"]), "--hostfile", settings["hostfile"],
            "--network-interface", settings["network_interface"], "-p", str(settings["ssh_port"]),
            "--ssh-identity-file", settings["ssh_identity_file"]]
