"""Delayed gradient updates: the allreduce of step t overlaps the compute of steps t+1..t+d.

References:
    A. Vishnu et al., 2017 (PNNL MaTEx; cf. Vishnu, Siegel, Daily, "Distributed TensorFlow with
    MPI", arXiv:1603.02339): "delaying gradient updates a fixed number of times". The paper
    text was not available here, so the start-up and drain behaviour below are this
    module's reading.

Update rule (docs/algorithms.md, ``delayed``), d = ``delay``: at step t every worker computes
g_tᵏ = ∇L(θ_t; B_tᵏ) at its current parameters, copies it into a buffer and starts a
non-blocking allreduce (mean) of that buffer; it then waits for the reduction started at
step t−d and applies it: θ_{t+1} = Opt(θ_t, mean_k g_{t−d}ᵏ). For t < d there is nothing to
apply yet, so the first d steps only compute and launch (inferred: the paper does not say
what happens at start-up). d = 0 is exactly ``sync``. The gradients are flattened into one
buffer per step; d + 1 buffers are kept (d reductions in flight plus the one just started).

End of training: ``finalize`` drains the d outstanding reductions and APPLIES them, in order,
so that every gradient computed is applied exactly once (T steps, T updates).

Timing: copying the gradients and launching the reduction is ``comm``; the time blocked in
``synchronize`` on the reduction of step t−d (not hidden behind d steps of compute) is ``wait``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from .. import BenchError, vectors
from .base import Algorithm, StepStats


class Delayed(Algorithm):
    name = "delayed"
    paper = "delayed gradient updates, allreduce overlapped with d steps (Vishnu et al. 2017)"
    family = "allreduce"

    @dataclass
    class Params:
        delay: int = 1
        """d: a gradient is applied d steps after it was computed (0: synchronous SGD)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        if params.delay < 0:
            raise BenchError(f"delayed: delay must be an integer >= 0, got {params.delay!r}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.tensors = [p for p in model.parameters() if p.requires_grad]
        n = vectors.numel(self.tensors)
        self.buffers = [torch.zeros(n, dtype=self.tensors[0].dtype, device=self.ctx.device) for _ in range(self.p.delay + 1)]
        self.inflight: deque = deque()  # (slot, handle), oldest first
        self.applied = 0

    def _apply(self, slot: int) -> None:
        """Put the reduced gradient of ``slot`` into .grad and take one optimizer step."""
        for p in self.tensors:
            if p.grad is None:
                p.grad = torch.empty_like(p)
        vectors.assign_([p.grad for p in self.tensors], self.buffers[slot])
        self.optimizer.step()
        self.applied += 1

    def _complete_oldest(self) -> None:
        slot, handle = self.inflight.popleft()
        with self.ctx.timer.wait():
            self.comm.synchronize(handle)  # comm: wait for the allreduce over all workers started at step t-d
        self._apply(slot)

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y)
        t = self.t - 1  # this step, counted from 0
        slot = t % (self.p.delay + 1)  # free: the reduction that used it was applied at step t-1
        with self.ctx.timer.comm():
            torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.tensors],
                      out=self.buffers[slot])
            handle = self.comm.allreduce_async_(self.buffers[slot], name=f"delayed.{slot}")  # comm: start the allreduce (mean over all workers) of this step's gradient g_t
        self.inflight.append((slot, handle))
        if len(self.inflight) > self.p.delay:
            self._complete_oldest()
        stats.bytes_sent = self.buffers[slot].numel() * self.buffers[slot].element_size()
        return stats

    def finalize(self) -> None:
        while self.inflight:  # the last d reductions: drained and applied in order
            self._complete_oldest()

    def stats(self) -> dict:
        return {"updates_applied": self.applied} if self.comm.rank == 0 else {}
