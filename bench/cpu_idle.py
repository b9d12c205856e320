"""Idle CPUs that poll instead of halting, while a job is measured (the launch setting ``cpu_idle: poll``).

On a virtual machine an idle vCPU halts and the hypervisor takes it back; waking it costs microseconds, and
its caches come back cold. An emulated host inside a CPU quota is idle most of each CFS period (a host at
0.36 core runs 36 ms of every 100 ms), and a rank waiting for a collective is idle too, so the halts land on
the measured path, unevenly: measured here (2 vCPUs under Firecracker, ``cpuidle-haltpoll`` with
``guest_halt_poll_ns=0``) a host at 0.36 core stepped comm-heavy's model at 34-39 ms alone with 14-32 %
spread between trials, against 30-31 ms with 2-8 % spread when idle CPUs poll (docs/results/isolation).

``poll`` asks the kernel's PM QoS interface for a 0 us wake-up latency, the way tuned's latency-performance
profile does: the launcher opens ``/dev/cpu_dma_latency``, writes 0 and keeps it open for the job; the
cpuidle governor then only picks idle states with a 0 us exit latency (``POLL``). The request is the open
file: it ends when the file is closed, by the kernel when the process ends however it ends (SIGKILL
included), so nothing outside the repository outlives the launcher. Needs write access to the device (root).
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

from . import BenchError

DEVICE = Path("/dev/cpu_dma_latency")
CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")
MODES = ("default", "poll")


def check(mode: str) -> None:
    """BenchError (before any job starts) if ``mode`` is not a valid choice or ``poll`` cannot be had here."""
    if mode not in MODES:
        raise BenchError(f"cpu_idle must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "poll" and not os.access(DEVICE, os.W_OK):
        raise BenchError(f"cpu_idle 'poll' holds {DEVICE} at 0 us while the job runs and needs write access to it "
                         f"(root; it is {'missing' if not DEVICE.exists() else 'not writable'} here); valid cpu_idle: "
                         f"{', '.join(MODES)}")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def describe(mode: str, held: bool) -> dict:
    """What system.json records (``cpu_idle``): the mode, whether the 0 us request was held for the job, the
    cpuidle driver and the idle states of CPU 0 with their exit latencies (us)."""
    states = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cpuidle").glob("state*")):
        name, latency = _read(d / "name"), _read(d / "latency")
        states.append({"name": name, "exit_latency_us": int(latency) if latency and latency.isdigit() else None})
    return {"mode": mode, "held": held, "driver": _read(CPUIDLE / "current_driver"),
            "governor": _read(CPUIDLE / "current_governor_ro") or _read(CPUIDLE / "current_governor"),
            "states": states}


@contextlib.contextmanager
def held(mode: str):
    """While the block runs, idle CPUs poll (``mode == "poll"``); yields :func:`describe`'s record."""
    check(mode)
    if mode != "poll":
        yield describe(mode, False)
        return
    fd = os.open(DEVICE, os.O_WRONLY)
    try:
        os.write(fd, struct.pack("i", 0))
        yield describe(mode, True)
    finally:
        os.close(fd)


def requested_latency_us() -> int | None:
    """The PM QoS wake-up latency in force now (us; the smallest any process holds), None if unreadable."""
    try:
        fd = os.open(DEVICE, os.O_RDONLY)
    except OSError:
        return None
    try:
        return struct.unpack("i", os.read(fd, 4))[0]
    finally:
        os.close(fd)
