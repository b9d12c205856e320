"""EAMSGD: asynchronous elastic averaging with Nesterov momentum on the workers.

References:
    Zhang, Choromanska, LeCun, "Deep learning with Elastic Averaging SGD", NIPS 2015
    (Algorithm 2, EAMSGD).

Update rule (docs/algorithms.md, ``eamsgd``): as ``aeasgd`` (every λ steps: pull θ̃,
E = α(θᵏ − θ̃) with α = η·ρ, θᵏ ← θᵏ − E, commit E; server θ̃ ← θ̃ + E), but the local steps
use SGD with Nesterov momentum δ = ``nesterov_momentum`` (velocity kept across exchanges). The paper
uses δ = 0.99 with small η; the default here is 0.9, which stays stable at the profiles'
learning rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .aeasgd import AEASGD
from .ps_base import check_range


class EAMSGD(AEASGD):
    name = "eamsgd"
    paper = "elastic averaging momentum SGD, Nesterov workers (Zhang, Choromanska, LeCun NIPS 2015)"

    @dataclass
    class Params(AEASGD.Params):
        nesterov_momentum: float = 0.9
        """δ: Nesterov momentum of the workers' local SGD (paper: 0.99), in [0, 1). It replaces the run's
        optimizer settings (``optimizer``, ``momentum``, ``nesterov``) on the workers."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_range("nesterov_momentum", params.nesterov_momentum, 0.0, 1.0, hi_open=True)

    def setup(self, model, optimizer):
        t = self.ctx.cfg.train
        optimizer = torch.optim.SGD(model.parameters(), lr=t.lr, momentum=self.p.nesterov_momentum,
                                    nesterov=self.p.nesterov_momentum > 0, weight_decay=t.weight_decay)
        super().setup(model, optimizer)
