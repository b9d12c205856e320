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
