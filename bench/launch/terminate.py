"""Ending a job: the launcher's signals (SIGTERM, SIGHUP, SIGINT) turned into an exception while a job runs, and
every process of the job terminated, then killed: the tree below horovodrun (each rank in a process group of its
own) and the ranks that ssh started on this machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil


class Terminated(Exception):
    """The launcher received SIGTERM, SIGHUP or SIGINT (``signum``; its name is the message)."""

    def __init__(self, name: str, signum: int = 0):
        super().__init__(name)
        self.signum = signum


@contextlib.contextmanager
def signals_end_the_job():
    """While a job runs, SIGTERM, SIGHUP and SIGINT raise :class:`Terminated` (in the main thread; elsewhere a
    no-op). SIGINT gets the handler too, not Python's KeyboardInterrupt: a launcher started in the background by a
    shell without job control (``cmd &``, nohup) inherits SIGINT ignored, and Python then installs no handler of its
    own, so a Ctrl-C or a ``kill -INT`` of its process group left the job running."""
    def handler(signum, frame):
        raise Terminated(signal.Signals(signum).name, signum)

    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread (e.g. a notebook kernel's worker thread): leave signals alone
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def kill_job(proc: subprocess.Popen, config_path: Path, grace_s: float = 10.0) -> None:
    """SIGTERM horovodrun, every process below it (found before anything dies, since horovodrun puts each rank in
    a process group of its own) and every other process of this machine running this run's config (ranks that
    ssh started, on an emulated cluster), then SIGKILL whatever is left after ``grace_s``."""
    try:
        root = psutil.Process(proc.pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    procs += [p for p in running(config_path) if p.pid not in {q.pid for q in procs}]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
            p.resume()  # a stopped process (SIGSTOP) takes its SIGTERM only once continued
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def running(config_path: Path) -> list:
    """Processes of this machine whose command line names ``config_path`` (this run's ranks)."""
    needle, found = str(config_path), []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if p.pid != os.getpid() and needle in " ".join(p.info["cmdline"] or []):
                found.append(p)
    return found
