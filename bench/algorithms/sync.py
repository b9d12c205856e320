"""Synchronous data-parallel SGD with allreduce: the baseline.

References:
    Sergeev and Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
    arXiv:1802.05799, 2018 (ring allreduce of gradients, the DistributedOptimizer used here).

Update rule (docs/algorithms.md, ``sync``): every worker k computes g_k = ∇L(θ; B_k) on its own
mini-batch; g = mean_k g_k by allreduce; θ ← Opt(θ, g). All replicas start from rank 0's
broadcast parameters and optimizer state, so they stay identical, and the run equals
single-process training on the union batch (to float tolerance).

Timing: gradients are reduced by Horovod's background thread while backward runs (hooks);
``comm_s`` is the part that is not hidden, the wait in ``synchronize()`` before the update.
"""

from __future__ import annotations

from .base import Algorithm, StepStats


class Sync(Algorithm):
    name = "sync"
    paper = "synchronous allreduce SGD (Horovod, Sergeev & Del Balso 2018)"

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: common start (parameters and optimizer state)
        self.dist_opt = self.comm.distributed_optimizer(optimizer, model.named_parameters())  # comm:

    def step(self, x, y) -> StepStats:
        self.dist_opt.zero_grad()
        stats = self.forward_backward(x, y)
        with self.ctx.timer.comm():
            self.dist_opt.synchronize()  # comm: wait for the gradient allreduces started in backward
        with self.dist_opt.skip_synchronize():
            self.dist_opt.step()
        stats.bytes_sent = self.param_bytes(grads=True)
        return stats
