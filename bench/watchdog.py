"""A job's ranks and its launcher watch over each other: the two ends of one protocol, defined once.

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
import os
import signal
import threading
import time
from pathlib import Path

from .results import mark_failed, read_json

PID, START, BOOT = "BENCH_LAUNCHER_PID", "BENCH_LAUNCHER_START", "BENCH_LAUNCHER_BOOT"
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


def watch_launcher(run_dirs: list[Path], interval_s: float = 1.0) -> None:
    """End this rank if the launcher that started the job (on this machine) is gone: marks the job's unfinished
    runs failed and exits. Without it a launcher killed outright (SIGKILL) would leave the ranks running."""
    import psutil

    pid, start, boot = (os.environ.get(k) for k in (PID, START, BOOT))
    if not pid or not boot or _boot_id() != boot:
        return  # not started by bench.launch, or on another machine: its launcher cannot be watched from here

    def alive() -> bool:
        try:
            return repr(psutil.Process(int(pid)).create_time()) == start
        except psutil.NoSuchProcess:
            return False

    def watch():
        while alive():
            time.sleep(interval_s)
        with contextlib.suppress(Exception):
            for d in unfinished(run_dirs):
                mark_failed(d, f"the launcher (pid {pid}) is gone: job cancelled")
        os._exit(1)

    threading.Thread(target=watch, name="bench-launcher-watch", daemon=True).start()


class Terminated(Exception):
    """This rank received SIGTERM (its job was cancelled or another rank failed)."""


def _raise_terminated(signum, frame):
    raise Terminated("received SIGTERM")


def on_sigterm_raise() -> None:
    """horovodrun ends a job's ranks with SIGTERM: raise :class:`Terminated` so the reason is recorded."""
    signal.signal(signal.SIGTERM, _raise_terminated)
