"""SlowMo: local SGD for τ steps, an exact average, then a slow momentum step.

References:
    Wang, Tantia, Ballas and Rabbat, "SlowMo: Improving Communication-Efficient Distributed SGD with
    Slow Momentum", ICLR 2020 (arXiv:1910.00643), Algorithm 1; the base algorithm here is local SGD.
    fairscale's ``SlowMoDistributedDataParallel`` (the authors' implementation: slowmo_lr 1.0,
    slowmo_momentum 0.5 by default).

Update rule (docs/algorithms.md, ``slowmo``), outer iteration s, x_{s,0} the same on every rank,
γ the base learning rate (the run's ``lr``), τ = ``communication_window``, β = ``slow_momentum``,
α = ``slow_lr``::

    τ times:   xᵏ ← BaseOpt(xᵏ, ∇L(xᵏ; B_k))                      (local steps, no communication)
    then:      x̄ = mean_k xᵏ                                      (exact average: one blocking allreduce)
               u ← β·u + (x_{s,0} − x̄)/γ                          (slow momentum, u_0 = 0)
               x_{s+1,0} = x_{s,0} − α·γ·u;   xᵏ ← x_{s+1,0}        (every worker restarts from it)

With β = 0 and α = 1, x_{s+1,0} = x̄: exactly ``localsgd`` with λ = τ (to float rounding). For a constant γ,
SlowMo(β, α) is ``diloco`` with a heavy-ball outer step (outer_lr α, outer_momentum β, outer_nesterov false,
inner_optimizer run): both are tested against each other.

Inferred (documented in docs/algorithms.md): γ is the run's constant ``lr`` (the suite has no schedule;
with ``optimizer: adam`` it is Adam's lr, as in the paper's WMT runs); the base optimizer's state (momentum
buffers, Adam moments) stays local and is kept across outer iterations, neither averaged nor reset (as
in ``localsgd`` and fairscale's implementation); u lives on every rank (all compute the same update from
the same x̄). End of training: ``finalize`` makes one more outer iteration if local steps were taken since
the last, so the final model includes them.

Evaluated model: x_{s,0}, the last outer iterate (rank 0's copy, identical on every rank; rank 0's
buffers); between outer iterations the replicas differ, the outer iterate is what SlowMo deploys.

Timing: the allreduce is ``comm``; no ``wait``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import BenchError, vectors
from .averaging import WindowedAveraging
from .base import window_params


class SlowMo(WindowedAveraging):
    name = "slowmo"
    paper = "SlowMo: local SGD, exact average and slow momentum every τ steps (Wang, Tantia, Ballas, Rabbat, ICLR 2020)"
    averaged_evaluation = False  # the evaluated model is the outer iterate x_{s,0}, the same on every rank

    @dataclass
    class Params(window_params(4)):
        """``communication_window`` τ: local base-optimizer steps per outer iteration (fairscale's slowmo_frequency)."""

        slow_momentum: float = 0.5
        """β: slow momentum, 0 <= β < 1 (fairscale's default 0.5; 0 with slow_lr 1 is localsgd)."""
        slow_lr: float = 1.0
        """α: slow learning rate, > 0 (the paper and fairscale: 1.0)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        if not 0 <= params.slow_momentum < 1:
            raise BenchError(f"slowmo: slow_momentum must be in [0, 1), got {params.slow_momentum!r}")
        if not params.slow_lr > 0:
            raise BenchError(f"slowmo: slow_lr must be > 0, got {params.slow_lr!r}")
        if not cfg.train.lr > 0:
            raise BenchError(f"slowmo: the run's lr (γ, which the slow momentum divides by) must be > 0, got {cfg.train.lr!r}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.x0 = vectors.flat(model.parameters())  # x_{s,0}, the same on every rank
        self.u = torch.zeros_like(self.x0)  # slow momentum
        self.gamma = self.ctx.cfg.train.lr

    def exchange(self) -> int:
        """One outer iteration."""
        x = vectors.flat(self.model.parameters())
        with self.ctx.timer.comm():
            self.comm.allreduce_(x, name="slowmo.avg")  # comm: allreduce the flat model over all workers: x̄ = mean_k xᵏ (exact average)
        self.u.mul_(self.p.slow_momentum).add_((self.x0 - x) / self.gamma)  # u ← βu + (x_{s,0} − x̄)/γ
        self.x0.sub_(self.u, alpha=self.p.slow_lr * self.gamma)  # x_{s+1,0} = x_{s,0} − αγu
        vectors.assign_(self.model.parameters(), self.x0)
        return self.param_bytes()

    def eval_theta(self) -> torch.Tensor:
        return self.x0

    def stats(self) -> dict:
        return {"outer_steps": self.exchanges} if self.comm.rank == 0 else {}
