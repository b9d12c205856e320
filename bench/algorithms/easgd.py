"""Synchronous Elastic Averaging SGD, the centre variable replicated on every rank.

References:
    Zhang, Choromanska and LeCun, "Deep learning with Elastic Averaging SGD", NIPS 2015
    (Algorithm 1, synchronous EASGD with communication period τ).
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", MSc thesis, 2017.

Update rule (docs/algorithms.md, ``easgd``): between syncs every worker takes local steps
θᵏ ← Opt(θᵏ, ∇L(θᵏ; B_k)). After every λ = ``communication_window`` local steps, with
α = ηρ (η the local optimizer's ``lr``, ρ = ``rho``):

    e_k = α(θᵏ − θ̃);   θᵏ ← θᵏ − e_k;   θ̃ ← θ̃ + Σ_k e_k

Σ_k e_k is one allreduce (sum) of the flattened elastic differences; θ̃ starts as rank 0's
broadcast initial model and every rank applies the same sum, so the replicas of θ̃ stay equal.
This is Zhang et al.'s Algorithm 1 with the elastic exchange placed after the λ-th local step
instead of before the (λ+1)-th (the same θᵏ, without the empty exchange at t = 0).
End of training: ``finalize`` makes one more exchange if local steps were taken since the last
one, so that the centre includes them. The evaluated model is the centre θ̃ (rank 0's copy, with rank 0's
buffers).

Stability: the centre moves by nα(θ̄ − θ̃), which contracts only for 0 < nα < 2, and a worker
overshoots the centre for α ≥ 1, so ``validate`` requires 0 < α < 1 and nα < 2 (paper: ρ = 5,
β = nα = 0.9).

Timing: the allreduce of the elastic differences is ``comm``; there is no ``wait``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import BenchError, vectors
from .averaging import WindowedAveraging
from .base import window_params


class EASGD(WindowedAveraging):
    name = "easgd"
    paper = "synchronous Elastic Averaging SGD, centre replicated (Zhang, Choromanska & LeCun 2015)"
    averaged_evaluation = False  # the evaluated model is the centre θ̃, the same on every rank

    @dataclass
    class Params(window_params(4)):
        """``communication_window`` λ (τ in the paper): local optimizer steps between two elastic exchanges."""

        rho: float = 5.0
        """ρ: elastic force; the moving rate is α = lr·ρ (needs 0 < α < 1 and np·α < 2)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        if params.rho <= 0:
            raise BenchError(f"easgd: rho must be > 0, got {params.rho!r}")
        alpha = cfg.train.lr * params.rho
        if not 0 < alpha < 1:
            hint = f"choose rho < {1 / cfg.train.lr:.4g}" if cfg.train.lr > 0 else "lr must be > 0"
            raise BenchError(f"easgd: alpha = lr*rho = {cfg.train.lr}*{params.rho} = {alpha:.4g} must be in (0, 1); {hint}")
        n = cfg.launch.np
        if n * alpha >= 2:
            raise BenchError(f"easgd: np*alpha = {n}*{alpha:.4g} = {n * alpha:.4g} must be < 2 (the centre update diverges); "
                             f"choose rho < {2 / (n * cfg.train.lr):.4g}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.alpha = self.ctx.cfg.train.lr * self.p.rho
        self.centre = vectors.flat(model.parameters())  # θ̃, the same on every rank

    def exchange(self) -> int:
        theta = vectors.flat(self.model.parameters())
        e = self.alpha * (theta - self.centre)
        vectors.assign_(self.model.parameters(), theta - e)  # θᵏ ← θᵏ − e_k
        with self.ctx.timer.comm():
            self.comm.allreduce_(e, name="easgd.elastic", average=False)  # comm: allreduce (sum) the elastic differences over all workers: Σ_k e_k
        self.centre += e  # θ̃ ← θ̃ + Σ_k e_k
        return self.centre.numel() * self.centre.element_size()

    def eval_theta(self):
        return self.centre

    def stats(self) -> dict:
        return {"elastic_exchanges": self.exchanges, "alpha": self.alpha} if self.comm.rank == 0 else {}
