"""The timing protocol, in one place.

Every step is timed by the worker loop with the *compute stream* synchronised before each clock read
(on a GPU: ``torch.cuda.current_stream().synchronize()``, never a device-wide synchronise, which would
also wait on Horovod's and NCCL's streams and cancel the overlap that delayed, layer-wise, LASGD and
gossip methods exist for). Algorithms mark the parts of a step that communicate (``comm``) or wait on
other workers or on outstanding non-blocking operations (``wait``) with host clocks only (a section
never synchronises the device: layer-wise marks one section per parameter inside backward); compute
is the rest of the step. Warm-up steps are recorded but flagged and excluded from throughput
(:mod:`bench.metrics.throughput`, which also defines the 95% interval).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import torch


def device_sync(device: torch.device | str | None) -> None:
    """Wait for the work queued on ``device``'s current (compute) stream; nothing on a CPU."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.current_stream(device).synchronize()


class StepTimer:
    """Accumulates communication and waiting time (host clock) inside the current step."""

    KINDS = ("comm", "wait")

    def __init__(self):
        self.acc = {k: 0.0 for k in self.KINDS}

    @contextmanager
    def section(self, kind: str):
        if kind not in self.acc:
            raise ValueError(f"unknown timing section {kind!r}; valid: {', '.join(self.KINDS)}")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.acc[kind] += time.perf_counter() - t0

    def comm(self):
        return self.section("comm")

    def wait(self):
        return self.section("wait")

    def take(self) -> dict[str, float]:
        """Return and reset the accumulated sections."""
        out, self.acc = self.acc, {k: 0.0 for k in self.KINDS}
        return out


class ThreadCpu:
    """Where a rank's CPU goes, per thread: the kernel's scheduler statistics of every thread of this process
    (``/proc/self/task/<tid>/schedstat``: nanoseconds on a CPU, nanoseconds runnable but waiting for one, and time
    slices; ``status``: voluntary and involuntary context switches), summed per label between two readings.

    Labels: ``main`` (the thread that trains), ``horovod`` (the threads ``hvd.init()`` started: Horovod's background
    thread and gloo's), ``other`` (the rest: torch.distributed's, the watchdog's, ...). Linux only; elsewhere
    :meth:`read` returns nothing and the summary carries no thread figures.
    """

    FIELDS = ("cpu_s", "runq_s", "slices", "voluntary", "involuntary")

    def __init__(self, horovod_tids: frozenset[int] = frozenset()):
        import threading

        self.main = threading.get_native_id()
        self.horovod = horovod_tids

    @staticmethod
    def tids() -> set[int]:
        try:
            return {int(t) for t in os.listdir("/proc/self/task")}
        except OSError:
            return set()

    def label(self, tid: int) -> str:
        return "main" if tid == self.main else "horovod" if tid in self.horovod else "other"

    @staticmethod
    def _one(tid: int) -> tuple[float, ...] | None:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run_ns, wait_ns, slices = (int(v) for v in f.read().split()[:3])
            vol = invol = 0
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol = int(line.split()[1])
            return run_ns / 1e9, wait_ns / 1e9, slices, vol, invol
        except (OSError, ValueError):  # the thread ended between listing and reading, or no schedstat here
            return None

    def read(self) -> dict[int, tuple[float, ...]]:
        """Every live thread's counters (cumulative since the thread started)."""
        out = {}
        for tid in self.tids():
            one = self._one(tid)
            if one is not None:
                out[tid] = one
        return out

    def between(self, before: dict[int, tuple[float, ...]], after: dict[int, tuple[float, ...]]) -> dict[str, dict]:
        """Per label, what its threads used from ``before`` to ``after`` (a thread that started in between counts
        from zero; one that ended in between is lost: its counters went with it), and how many threads."""
        out: dict[str, dict] = {}
        for tid, now in after.items():
            then = before.get(tid, (0.0,) * len(self.FIELDS))
            acc = out.setdefault(self.label(tid), {**{k: 0.0 for k in self.FIELDS}, "threads": 0})
            for k, a, b in zip(self.FIELDS, now, then):
                acc[k] += a - b
            acc["threads"] += 1
        return {label: {k: (round(v, 6) if isinstance(v, float) and k.endswith("_s") else int(v)) for k, v in acc.items()}
                for label, acc in sorted(out.items())}
