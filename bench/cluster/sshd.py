"""One sshd per emulated host, and the launcher's ssh set-up; all of it in the suite's private directory.

``/run/distbench/dbemu/`` (0700, root) holds::

    ssh/host_ed25519_key      the hosts' host key (one for all: they are one machine)
    ssh/id_ed25519            the launcher's identity; its public half in ssh/authorized_keys,
                              usable only from 198.18.0.0/24
    ssh/known_hosts           every host's address:port with the host key (nothing to learn at run time)
    ssh/ssh_config            the launcher's whole ssh configuration (identity, port, known_hosts)
    ssh/sshd_config.h<i>      host i's sshd: ListenAddress = its address only, key login only
    ssh/hosts.h<i>            host i's /etc/hosts (every emulated host by name)
    ssh/sshd.h<i>.pid|.log
    bin/ssh                   ``exec /usr/bin/ssh -F ssh/ssh_config "$@"``

Horovod runs ``ssh -o StrictHostKeyChecking=no HOST -p PORT -i KEY ...`` through the shell. Plain
ssh would read and write ``~/.ssh`` (known_hosts; it even creates the directory). With ``bin/`` first
on the launcher's PATH (``launch_settings()['env']``), ssh reads only the suite's config (``-F``
also stops ssh from creating ``~/.ssh``), and since every host key is known in advance it writes nothing.

sshd is started with ``ip netns exec dbemu-h<i>`` from inside host i's cgroup, so the daemon,
every session it forks and every rank process of a job live in host i's network namespace and
CPU share. It also gets its own UTS namespace with hostname ``dbemu-h<i>`` and, bind-mounted over
/etc/hosts inside the private mount namespace of ``ip netns exec``, a hosts file naming every
emulated host (``ssh/hosts.h<i>``). This is not cosmetic: Horovod 0.28.1 builds the gloo contexts
of its process sets (the global one included, at ``hvd.init()``) without ``HOROVOD_GLOO_IFACE``, so
gloo falls back to the address of the hostname; with the machine's shared hostname that is
127.0.0.1 in every namespace, and ranks on different hosts cannot connect. With one hostname per
host that resolves to the host's own address, they can (as on a real cluster). It needs its privilege-separation directory /run/sshd; if that is missing, ``up``
creates it and ``down`` removes it again (only then, and only if empty).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from .. import BenchError
from . import cgroups, sh
from .spec import BRIDGE_ADDRESS, DIR, PREFIX, SSH_PORT, SUBNET, Host

SSH_DIR = DIR / "ssh"
BIN_DIR = DIR / "bin"
HOST_KEY = SSH_DIR / "host_ed25519_key"
IDENTITY = SSH_DIR / "id_ed25519"
AUTHORIZED_KEYS = SSH_DIR / "authorized_keys"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
SSH_CONFIG = SSH_DIR / "ssh_config"
WRAPPER = BIN_DIR / "ssh"
PRIVSEP_DIR = Path("/run/sshd")
PRIVSEP_MARKER = DIR / "created-run-sshd"


def sshd_binary() -> str | None:
    path = sh.which("sshd")
    return path if path and os.path.isabs(path) else None


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def prepare(hosts: list[Host]) -> None:
    """Keys, known_hosts, the launcher's ssh config and wrapper, one sshd config per host."""
    SSH_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    BIN_DIR.mkdir(mode=0o700, exist_ok=True)
    for key, comment in ((HOST_KEY, "dbemu-host"), (IDENTITY, "dbemu-launcher")):
        if not key.exists():
            sh.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
    pub_id = Path(f"{IDENTITY}.pub").read_text().strip()
    _write(AUTHORIZED_KEYS, f'from="{SUBNET}",no-agent-forwarding,no-X11-forwarding,no-port-forwarding {pub_id}\n')
    host_pub = " ".join(Path(f"{HOST_KEY}.pub").read_text().split()[:2])
    _write(KNOWN_HOSTS, "".join(f"[{h.address}]:{SSH_PORT} {host_pub}\n" for h in hosts))
    _write(SSH_CONFIG, "\n".join([
        "# the emulated cluster's launcher side (bench.cluster); used as ssh -F <this file>",
        "Host *",
        "    User root",
        f"    Port {SSH_PORT}",
        f"    IdentityFile {IDENTITY}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {KNOWN_HOSTS}",
        "    GlobalKnownHostsFile /dev/null",
        "    StrictHostKeyChecking yes",
        "    UpdateHostKeys no",
        "    CheckHostIP no",
        "    BatchMode yes",
        "    ConnectTimeout 20",
        "    LogLevel ERROR",
        ""]))
    _write(WRAPPER, f'#!/bin/sh\n# ssh with only the emulated cluster\'s config (never ~/.ssh)\nexec /usr/bin/ssh -F {SSH_CONFIG} "$@"\n',
           mode=0o700)
    names = "".join(f"{h.address} {h.netns}\n" for h in hosts)
    for h in hosts:
        _write(config_path(h.index), sshd_config(h))
        _write(hosts_path(h.index), f"127.0.0.1 localhost\n{BRIDGE_ADDRESS} {PREFIX}-launcher\n{names}", mode=0o644)


def hosts_path(i: int) -> Path:
    return SSH_DIR / f"hosts.h{i}"


def config_path(i: int) -> Path:
    return SSH_DIR / f"sshd_config.h{i}"


def pid_path(i: int) -> Path:
    return SSH_DIR / f"sshd.h{i}.pid"


def sshd_config(h: Host) -> str:
    return "\n".join([
        f"# sshd of emulated host {h.index} (netns {h.netns}); made by bench.cluster",
        f"ListenAddress {h.address}",
        f"Port {SSH_PORT}",
        "AddressFamily inet",
        f"HostKey {HOST_KEY}",
        f"PidFile {pid_path(h.index)}",
        f"AuthorizedKeysFile {AUTHORIZED_KEYS}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "X11Forwarding no",
        "AllowAgentForwarding no",
        "AllowTcpForwarding no",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "MaxStartups 256",
        "MaxSessions 256",
        "LogLevel ERROR",
        ""])


def ensure_privsep_dir() -> None:
    if not PRIVSEP_DIR.exists():
        PRIVSEP_DIR.mkdir(mode=0o755)
        PRIVSEP_MARKER.write_text("up created /run/sshd; down removes it\n")


def start(h: Host, timeout: float = 15) -> int:
    """Start host h's sshd inside its namespace and cgroup; wait until it accepts connections; its pid."""
    binary = sshd_binary()
    if not binary:
        raise BenchError("sshd is not installed: run `bash scripts/setup-cluster.sh` (installs openssh-server)")
    pid_path(h.index).unlink(missing_ok=True)
    log = SSH_DIR / f"sshd.h{h.index}.log"
    # own hostname (UTS namespace) and /etc/hosts (bind mount inside the mount namespace `ip netns exec`
    # makes, which is a slave of the root one: nothing leaks out); see the module docstring
    boot = (f"mount --bind {hosts_path(h.index)} /etc/hosts && echo {h.netns} > /proc/sys/kernel/hostname && "
            f"exec {binary} -f {config_path(h.index)} -E {log}")
    sh.run(sh.in_netns(h.netns, ["unshare", "--uts", "sh", "-c", boot]), preexec_fn=cgroups.joiner(h.cgroup))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(pid_path(h.index).read_text())
            with socket.create_connection((h.address, SSH_PORT), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return pid
        except (OSError, ValueError):
            time.sleep(0.05)
    detail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
    raise BenchError(f"sshd of emulated host {h.index} did not come up on {h.address}:{SSH_PORT} within "
                     f"{timeout:.0f} s{': ' + detail[0] if detail else ''}")


def ours(pid: int) -> bool:
    """True if process ``pid`` runs an sshd of the suite (its command line names the suite's directory)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(str(DIR).encode() in part for part in cmd) and any(b"sshd" in part for part in cmd[:2])


def suite_sshd_pids() -> list[int]:
    """Every live sshd of the suite, also one whose namespace is gone (found by its command line)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and ours(int(p.name))]


def other_sshd_running() -> bool:
    """True if an sshd that is not the suite's runs (then /run/sshd is left alone)."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                comm = (p / "comm").read_text().strip()
            except OSError:
                continue
            if comm == "sshd" and _alive(int(p.name)) and not ours(int(p.name)) and not _in_suite_netns(int(p.name)):
                return True
    return False


def _in_suite_netns(pid: int) -> bool:
    """True if ``pid`` lives in a namespace of the suite (a session sshd forked for a connection)."""
    try:
        inode = os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return False
    return any(os.stat(ns).st_ino == inode for ns in Path("/run/netns").glob(f"{PREFIX}-h*"))


def remove_privsep_dir_if_ours() -> None:
    if PRIVSEP_MARKER.exists() and PRIVSEP_DIR.is_dir() and not other_sshd_running():
        try:
            PRIVSEP_DIR.rmdir()
        except OSError:
            pass  # not empty: something else uses it now


def kill(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to each of ``pids`` (never this process or its parents)."""
    protected = {os.getpid()}
    p = os.getppid()
    while p > 1 and p not in protected:
        protected.add(p)
        try:
            p = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    pids = [p for p in set(pids) if p not in protected]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline:
            pids = [pid for pid in pids if _alive(pid)]
            if not pids:
                return
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
