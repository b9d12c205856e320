"""A running job watched by its launcher, so that a fault ends the job within seconds, named by what failed:

- a rank stopped (SIGSTOP), hung outside Python, or cut off (its host or link down): its heartbeats stop
  (:class:`bench.watchdog.Heartbeats`, silent :data:`bench.watchdog.SILENT_S` seconds); the reason names the rank, its
  pid and host, and what the launcher can see of it (a process of this machine in the stopped state, an emulated
  host's link that is down);
- a run directory deleted or replaced (its lock no longer the job's: :func:`bench.ownership.still_ours`);
- a run's ``launch.log`` that cannot be written (a full disk, a read-only file system);
- a run's record file (``rank<r>.jsonl``, ``eval.jsonl``: appended to, never replaced) deleted, replaced or
  truncated, or its ``config.json`` rewritten, while the job runs: the run would end ``ok`` with records lost or
  with another configuration than the one that ran (:class:`RunFiles`; a rank's writer notices its own file too,
  :meth:`bench.results.JsonlWriter.check_intact`, should it change before the launcher first saw it);
- horovodrun itself stopped (SIGSTOP) :data:`bench.watchdog.SILENT_S` seconds: the ranks live on, but nobody
  collects their end;
- a delay line of the emulated cluster that died (:class:`bench.cluster.DelayLineDown`).

:class:`JobWatch` ``wait`` replaces ``proc.wait``: it checks all of them every :data:`CHECK_S` seconds and raises
:class:`JobFault` with the reason; the launcher then ends the job and marks its runs failed.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import psutil

from ..cluster import DelayLineDown
from ..cluster.net import down_links
from ..cluster.spec import BRIDGE_ADDRESS, host_index
from ..config import RunConfig
from ..ownership import still_ours
from ..watchdog import SILENT_S, Heartbeats
from .output import Tee

CHECK_S = 1.0
"""How often the launcher checks a running job."""


class JobFault(Exception):
    """What ended a job while it ran (the reason, naming the rank, directory, file or delay line)."""


def listen_address(cfg: RunConfig, emulated: dict | None) -> str:
    """The address the job's ranks reach the launcher on: loopback for a job on this machine, the emulated cluster's
    bridge, the configured interface's address, else this host's name's address."""
    launch = cfg.launch
    if emulated is not None:
        return BRIDGE_ADDRESS
    if not (launch.hosts or launch.hostfile):
        return "127.0.0.1"
    for name in filter(None, launch.network_interface.split(",")):
        for addr in psutil.net_if_addrs().get(name, []):
            if addr.family == socket.AF_INET:
                return addr.address
    return socket.gethostbyname(socket.gethostname())


def _identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, modification time in ns) of ``path``; None if it is not there."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class RunFiles:
    """What the job's runs hold that must not change under it: each run's config.json as the job found it, and its
    record files as they grow (appended to only: a file seen once must stay the same file, never shorter)."""

    RECORDS = ("rank*.jsonl", "eval.jsonl")

    def __init__(self, run_dirs):
        self.dirs = list(run_dirs)
        self.configs = {d / "config.json": _identity(d / "config.json") for d in self.dirs}
        self.records: dict[Path, tuple[int, int, int]] = {}

    def check(self) -> None:
        """JobFault naming the first file changed under the job."""
        for path, was in self.configs.items():
            if _identity(path) != was:
                raise JobFault(f"{path} was rewritten or removed while the job ran: the run's configuration is no longer "
                               f"the one that ran; the job was ended")
        for d in self.dirs:
            for pattern in self.RECORDS:
                for path in d.glob(pattern):
                    self.records.setdefault(path, _identity(path) or (0, 0, 0))
        for path, was in list(self.records.items()):
            now = _identity(path)
            if now is None or now[0] != was[0]:
                raise JobFault(f"{path} was deleted or replaced while the job ran: its records are lost; the job was "
                               f"ended")
            if now[1] < was[1]:
                raise JobFault(f"{path} was truncated while the job ran ({was[1]} bytes, now {now[1]}): its records are "
                               f"lost; the job was ended")
            self.records[path] = now


class JobWatch:
    """The checks of a running job (module docstring): ``tokens`` (run directory -> its lock's token when the job
    started), ``delay`` the emulated cluster's :class:`bench.cluster.delay.Watch`, ``log`` the job's :class:`Tee`;
    ``heartbeats`` receives the ranks' heartbeats."""

    def __init__(self, cfg: RunConfig, emulated: dict | None, tokens: dict[Path, str | None], delay, log: Tee):
        self.emulated, self.tokens, self.delay, self.log = emulated, tokens, delay, log
        self.heartbeats = Heartbeats(listen_address(cfg, emulated))
        self.files = RunFiles(list(tokens))
        self.stopped_since: float | None = None  # when horovodrun was first seen stopped

    def check(self) -> None:
        try:
            self.delay.check()
        except DelayLineDown as e:
            raise JobFault(str(e)) from None
        for d, token in self.tokens.items():
            if not still_ours(d, token):
                raise JobFault(f"run directory {str(d)!r} was deleted or replaced while the job ran")
        for name, e in self.log.errors.items():
            raise JobFault(f"cannot write {name}: {e.strerror or e} (errno {e.errno}): the job was ended")
        self.files.check()
        for rank, info, silent_s in self.heartbeats.silent():
            raise JobFault(self.lost(rank, info, silent_s))

    def check_horovodrun(self, proc: subprocess.Popen) -> None:
        """JobFault once horovodrun has been stopped (state T) :data:`SILENT_S` seconds."""
        try:
            stopped = psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED
        except psutil.Error:
            stopped = False
        now = time.monotonic()
        self.stopped_since = (self.stopped_since or now) if stopped else None
        if stopped and now - self.stopped_since >= SILENT_S:
            raise JobFault(f"horovodrun (pid {proc.pid}) is stopped (SIGSTOP: state T) for {now - self.stopped_since:.0f} "
                           f"s (the limit: {SILENT_S:g} s): nobody collects the ranks' end; the job was ended")

    def lost(self, rank: int, info: dict, silent_s: float) -> str:
        """The reason of a rank whose heartbeats stopped, with what this machine can see of it."""
        seen = []
        try:
            if psutil.Process(info["pid"]).status() == psutil.STATUS_STOPPED:
                seen.append("its process is stopped (SIGSTOP: state T)")
        except psutil.Error:
            pass
        if self.emulated is not None:
            seen += down_links(sorted({host_index(a) for a in self.emulated["hosts"]}))
        what = "; ".join(seen) or "stopped, hung, or its host or link down"
        return (f"rank {rank} (pid {info['pid']} on {info['host']}): no heartbeat for {silent_s:.0f} s (the limit: "
                f"{SILENT_S:g} s): {what}; the job was ended")

    def wait(self, proc: subprocess.Popen, timeout: float) -> int:
        """``proc.wait(timeout)``, checking the job every :data:`CHECK_S` seconds: JobFault when a check fails,
        ``subprocess.TimeoutExpired`` past ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            self.check_horovodrun(proc)
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            try:
                rc = proc.wait(timeout=min(CHECK_S, left))
            except subprocess.TimeoutExpired:
                continue
            self.check()  # a job that ended (maybe of it) after a fault fails naming it
            return rc

    def close(self) -> None:
        self.heartbeats.close()
