"""A job's ranks and its launcher watch over each other: the two ends of one protocol, defined once.

Heartbeats (:class:`Heartbeats`, the launcher's end; :func:`send_heartbeats`, a rank's): every rank sends the launcher
a UDP datagram every :data:`HEARTBEAT_S` seconds from a thread of its own, signed with the job's key (HMAC-SHA256;
the launcher listens on the job's address only and drops anything unsigned, oversized or malformed). A rank heard
from once and then silent for :data:`SILENT_S` seconds is lost: its process is stopped (SIGSTOP) or hung outside
Python, or its host or link is down; the launcher ends the job naming that rank, instead of its peers failing minutes
later with a timeout that names only themselves. The thread runs whatever the training loop waits for, so that no
legitimate wait trips it: a straggler, a slow or 50 ms delayed link, a long evaluation or a parameter server's idle
wait leave the heartbeat at its period (a 50 ms link adds 50 ms to each datagram, a CPU quota of 0.36 core at most one
quota period, ~64 ms). What must happen for a false alarm is ten heartbeats in a row lost, or no thread of the
process scheduled for 20 s. A rank says goodbye when it ends (:func:`send_heartbeats`'s returned function), so that a
rank that has finished is never counted as lost.

The launcher (:mod:`bench.launch`) passes its identity to every rank in the environment
(:func:`launcher_identity`: pid, process start time and the machine's boot id, so that a recycled pid or another
machine is never mistaken for it). A rank (:mod:`bench.worker`) watches it (:func:`watch_launcher`): should the
launcher die without ending the job (SIGKILL), the rank marks the job's unfinished runs failed and exits, instead
of training on with nobody to collect it. A rank that receives SIGTERM (horovodrun ending the job because another
rank failed, or a cancelled job) raises :class:`Terminated` (:func:`on_sigterm_raise`), so its failure is recorded
with that reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .results import mark_failed, read_json

PID, START, BOOT = "BENCH_LAUNCHER_PID", "BENCH_LAUNCHER_START", "BENCH_LAUNCHER_BOOT"
HEARTBEAT, HEARTBEAT_KEY = "BENCH_HEARTBEAT", "BENCH_HEARTBEAT_KEY"
HEARTBEAT_S = 2.0
"""A rank's heartbeat period (seconds)."""
SILENT_S = 20.0
"""A rank heard from and then silent this long is lost (module docstring: ten periods; with the launcher's check every
second, a stopped rank is named within 22 s)."""
AWAKE_S = 2.0
"""The launcher judges silence only if its receiving thread found the socket drained within this many seconds (it
looks at least every 0.5 s)."""
HEARTBEAT_MAX_BYTES = 512
"""Largest heartbeat datagram accepted (a heartbeat is about 100 bytes)."""
MAC_BYTES = 16
RANK_ENV = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
"""Where a rank finds its rank before Horovod starts (horovodrun, mpirun)."""
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def launcher_identity() -> dict[str, str]:
    """The environment a rank on this machine needs to notice that this process (the launcher) is gone."""
    import psutil

    me = psutil.Process()
    return {PID: str(me.pid), START: repr(me.create_time()), BOOT: _boot_id()}


def unfinished(run_dirs: list[Path]) -> list[Path]:
    """The run directories of the job without an ``ok`` summary (those a failure of the job must mark)."""
    left = []
    for d in run_dirs:
        try:
            ok = read_json(d / "summary.json").get("status") == "ok"
        except Exception:  # missing or unreadable: not finished
            ok = False
        if not ok:
            left.append(d)
    return left


def launcher_gone() -> bool | None:
    """True if the launcher that started this rank (on this machine) is gone, False if it runs, None if it cannot be
    watched from here (not started by bench.launch, or on another machine)."""
    import psutil

    pid, start, boot = (os.environ.get(k) for k in (PID, START, BOOT))
    if not pid or not boot or _boot_id() != boot:
        return None
    try:
        launcher = psutil.Process(int(pid))
        return repr(launcher.create_time()) != start or launcher.status() == psutil.STATUS_ZOMBIE  # dead, not reaped
    except psutil.NoSuchProcess:
        return True


def watch_launcher(run_dirs: list[Path], interval_s: float = 1.0, owned=lambda run_dir: True) -> None:
    """End this rank if the launcher that started the job (on this machine) is gone: marks the job's unfinished
    runs failed (those still ``owned``: not deleted or replaced meanwhile) and exits. Without it a launcher killed
    outright (SIGKILL) would leave the ranks running."""
    pid = os.environ.get(PID)
    if launcher_gone() is None:
        return  # not started by bench.launch, or on another machine: its launcher cannot be watched from here

    def watch():
        while not launcher_gone():
            time.sleep(interval_s)
        with contextlib.suppress(Exception):
            for d in unfinished(run_dirs):
                if owned(d):
                    mark_failed(d, f"the launcher (pid {pid}) is gone: job cancelled")
        os._exit(1)

    threading.Thread(target=watch, name="bench-launcher-watch", daemon=True).start()


class Terminated(Exception):
    """This rank received SIGTERM (its job was cancelled or another rank failed)."""


LAUNCHER_GRACE_S = 0.5
"""How long a rank that receives SIGTERM looks for its launcher's end before it records a plain SIGTERM: killed
together with horovodrun, the launcher may still be dying when horovodrun's helpers' SIGTERM arrives (a loaded
machine: the fresh-clone make test of 2026-11-28 recorded "received SIGTERM" for a run whose launcher was killed)."""


def _raise_terminated(signum, frame):
    end = time.monotonic() + LAUNCHER_GRACE_S
    while True:
        gone = launcher_gone()
        if gone:  # horovodrun's helpers end the ranks when horovodrun dies, the launcher with it (SIGKILL)
            raise Terminated(f"received SIGTERM; the launcher (pid {os.environ.get(PID)}) is gone: job cancelled")
        if gone is None or time.monotonic() >= end:
            raise Terminated("received SIGTERM")
        time.sleep(0.05)


def on_sigterm_raise() -> None:
    """horovodrun ends a job's ranks with SIGTERM: raise :class:`Terminated` so the reason is recorded."""
    signal.signal(signal.SIGTERM, _raise_terminated)


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).digest()[:MAC_BYTES]


class Heartbeats:
    """The launcher's end: a UDP socket on ``address`` (the job's: loopback for a job on this machine, the emulated
    cluster's bridge, the configured interface's address) receiving the ranks' signed heartbeats in a thread."""

    def __init__(self, address: str):
        self.key = secrets.token_bytes(16)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, 0))
        self.sock.settimeout(0.5)
        self.address = self.sock.getsockname()
        self.ranks: dict[int, dict] = {}  # rank -> {"pid", "host", "last", "bye"}
        self.refused = 0  # datagrams dropped: unsigned, oversized, malformed
        self.awake = time.monotonic()  # when the receiving thread last found the socket drained (every 0.5 s at most)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, name="bench-heartbeats", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """What the job's processes need to send heartbeats here."""
        return {HEARTBEAT: f"{self.address[0]}:{self.address[1]}", HEARTBEAT_KEY: self.key.hex()}

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.sock.recvfrom(HEARTBEAT_MAX_BYTES + 1)
            except socket.timeout:
                self.awake = time.monotonic()
                continue
            except OSError:
                return
            body, mac = data[:-MAC_BYTES], data[-MAC_BYTES:]
            try:
                if len(data) > HEARTBEAT_MAX_BYTES or not hmac.compare_digest(mac, _mac(self.key, body)):
                    raise ValueError("unsigned or oversized")
                beat = json.loads(body)
                rank = int(beat["rank"])
                self.ranks[rank] = {"pid": int(beat["pid"]), "host": str(beat["host"])[:64], "last": time.monotonic(),
                                    "bye": bool(beat.get("bye"))}
            except (ValueError, KeyError, TypeError):
                self.refused += 1
            with contextlib.suppress(OSError, ValueError):
                if not select.select([self.sock], [], [], 0)[0]:
                    self.awake = time.monotonic()  # drained: every heartbeat sent until now is counted

    def silent(self) -> list[tuple[int, dict, float]]:
        """(rank, what it said of itself, seconds since its last heartbeat) of every rank silent past :data:`SILENT_S`
        that has not said goodbye. Nothing while the receiving thread has not drained the socket for :data:`AWAKE_S` (this
        process was suspended or starved: the heartbeats are waiting in the socket, and a healthy job was ended
        blaming rank 0 when the launcher resumed after 20 s of SIGSTOP)."""
        now = time.monotonic()
        if now - self.awake > AWAKE_S:
            return []
        return [(r, info, now - info["last"]) for r, info in sorted(self.ranks.items())
                if not info["bye"] and now - info["last"] > SILENT_S]

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(timeout=2)


def send_heartbeats() -> Callable[[], None]:
    """A rank's end: if its launcher listens (:data:`HEARTBEAT` in the environment), send a heartbeat every
    :data:`HEARTBEAT_S` seconds from a daemon thread. Returns the function that says goodbye and stops (a no-op when
    nobody listens)."""
    where, key = os.environ.get(HEARTBEAT, ""), os.environ.get(HEARTBEAT_KEY, "")
    rank = next((os.environ[k] for k in RANK_ENV if os.environ.get(k, "").isdigit()), None)
    if not where or not key or rank is None:
        return lambda: None
    host, _, port = where.rpartition(":")
    addr, secret = (host, int(port)), bytes.fromhex(key)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with contextlib.suppress(OSError):
        sock.connect(addr)  # bound to the address that reaches the launcher, open to nothing else
    me = {"rank": int(rank), "pid": os.getpid(), "host": os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname()}
    stop = threading.Event()

    def beat(bye: bool = False) -> None:
        body = json.dumps({**me, "bye": bye}).encode()
        with contextlib.suppress(OSError):
            sock.send(body + _mac(secret, body))

    def run():
        while not stop.is_set():
            beat()
            stop.wait(HEARTBEAT_S)

    threading.Thread(target=run, name="bench-heartbeat", daemon=True).start()

    def goodbye() -> None:
        stop.set()
        beat(bye=True)

    return goodbye
