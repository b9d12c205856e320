"""Staleness-aware asynchronous SGD (n-softsync with a staleness-dependent learning rate).

References:
    Zhang, Gupta, Lian, Liu, "Staleness-aware Async-SGD for Distributed Deep Learning",
    IJCAI 2016.

Update rule (docs/algorithms.md, ``sasgd``): each worker computes g_l = ∇L at the centre it last
pulled, commits g_l and receives the current θ̃ in the same round trip (it never waits for
the update: the reply comes at once). The server collects c = ``c`` gradients and then applies

    θ̃ ← θ̃ − (1/c) Σ_l (η/τ_l) g_l ;   clock += 1

with η the run's ``lr`` and τ_l measured in server updates. A gradient computed on the
current centre has τ = 0; the paper's timestamps make the smallest staleness 1, so η/max(τ, 1)
is used (inferred). With c = λ/n this is the paper's n-softsync protocol. Gradients still
buffered when the run ends (fewer than c) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .ps_base import GradientAlgorithm, check_positive_int


class SoftSyncBuffer:
    """The server's state: Σ (η/τ_l) g_l over the current group of c gradients."""

    def __init__(self, c: int, lr: float):
        self.c, self.lr, self.count, self.acc = c, lr, 0, None

    def __call__(self, centre, grad, tau, worker=None, pulled=None) -> bool:
        if self.acc is None:
            self.acc = torch.zeros_like(centre)
        self.acc.add_(grad, alpha=self.lr / max(tau, 1))
        self.count += 1
        if self.count < self.c:
            return False
        centre.sub_(self.acc, alpha=1.0 / self.c)
        self.acc.zero_()
        self.count = 0
        return True


class SASGD(GradientAlgorithm):
    name = "sasgd"
    paper = "staleness-aware async SGD, n-softsync, lr η/τ (Zhang, Gupta, Lian, Liu IJCAI 2016)"
    keep_pulled = False

    @dataclass
    class Params(GradientAlgorithm.Params):
        c: int = 1
        """Gradients the server collects per update (n-softsync: c = λ/n; 1 = update on every commit)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_positive_int(params, "c")

    def setup(self, model, optimizer):
        self.server_rule = SoftSyncBuffer(self.p.c, self.ctx.cfg.train.lr)
        super().setup(model, optimizer)
