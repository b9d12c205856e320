"""Asynchronous layer-wise gradient descent: per-parameter reductions started in backward,
each parameter updated as soon as its own reduction completes.

References:
    A. Vishnu et al., 2017 (PNNL MaTEx; cf. Vishnu, Siegel, Daily, "Distributed TensorFlow with
    MPI", arXiv:1603.02339): asynchronous layer-wise gradient descent. The paper text
    was not available here.

Update rule (docs/algorithms.md, ``layerwise``): the same as ``sync``, θ ← Opt(θ, mean_k ∇L(θ; B_k)),
applied parameter tensor by parameter tensor. A ``register_post_accumulate_grad_hook`` on every
parameter p starts a non-blocking allreduce (mean) of p.grad the moment backward has finished
accumulating it (last layer first). Each parameter has its own optimizer (SGD/Adam state is
per-parameter, so this is the same update as one optimizer over all parameters). p is updated
as soon as its own handle completes: inside backward (each hook polls the reductions started
earlier and applies the completed ones; p's autograd node has already run, so updating it in
place is safe, the pattern of PyTorch's "optimizer step in backward"), and after backward for
the rest, in completion order, blocking only on the oldest outstanding handle when none has
completed. There is no global wait. Numerically identical to ``sync`` (same reductions, same
per-element arithmetic).

Timing: launching a reduction (inside backward) is ``comm``; time blocked in ``synchronize``
after backward, on a reduction not yet complete, is ``wait``: the communication that was NOT
hidden behind backward. ``stats()`` reports the share of updates applied inside backward.
"""

from __future__ import annotations

from .base import Algorithm, StepStats


class Layerwise(Algorithm):
    name = "layerwise"
    paper = "asynchronous layer-wise gradient descent, per-layer allreduce in backward (Vishnu et al. 2017)"
    family = "allreduce"

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_parameters(model.state_dict(), root=0)  # comm: broadcast rank 0's parameters to every worker
        self.tensors = [p for p in model.parameters() if p.requires_grad]
        # one optimizer per parameter tensor: fresh (zero) state, identical on every rank
        self.opts = [self.ctx.make_optimizer([p]) for p in self.tensors]
        self.pending: list[tuple[int, object]] = []  # (parameter index, handle), in launch order
        self.in_backward = True
        self.applied_in_backward = 0
        self.applied = 0
        for i, p in enumerate(self.tensors):
            p.register_post_accumulate_grad_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(p):
            with self.ctx.timer.comm():
                handle = self.comm.allreduce_async_(p.grad, name=f"layerwise.{i}")  # comm: start the allreduce (mean over all workers) of this layer's gradient
            self.pending.append((i, handle))
            self._apply_completed()
        return hook

    def _apply(self, j: int, synchronized: bool = False) -> None:
        i, handle = self.pending.pop(j)
        if not synchronized:
            self.comm.synchronize(handle)  # comm: take the completed reduction's result (polled: no wait) and release its handle
        self.opts[i].step()
        self.applied += 1
        self.applied_in_backward += self.in_backward

    def _apply_completed(self) -> None:
        j = 0
        while j < len(self.pending):
            if self.comm.poll(self.pending[j][1]):  # comm: ask whether this layer's allreduce has completed (never blocks)
                self._apply(j)
            else:
                j += 1

    def step(self, x, y) -> StepStats:
        self.in_backward = True
        stats = self.forward_backward(x, y)  # hooks launch reductions and apply completed ones
        self.in_backward = False
        while self.pending:
            self._apply_completed()
            if self.pending:
                with self.ctx.timer.wait():
                    self.comm.synchronize(self.pending[0][1])  # comm: wait for the oldest layer's allreduce over all workers only
                self._apply(0, synchronized=True)
        stats.bytes_sent = self.param_bytes(grads=True)
        return stats

    def stats(self) -> dict:
        if self.comm.rank != 0 or not self.applied:
            return {}
        return {"applied_in_backward_share": self.applied_in_backward / self.applied}
