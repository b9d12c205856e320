"""DC-ASGD: asynchronous SGD with delay compensation.

References:
    Zheng, Meng, Wang, Chen, Yu, Ma, Liu, "Asynchronous Stochastic Gradient Descent with Delay
    Compensation", ICML 2017 (DC-ASGD-c, constant λ).

Update rule (docs/algorithms.md, ``dcasgd``): worker m pulls θ_bak(m) = θ̃, computes g = ∇L(θ_bak)
and commits it (receiving the new θ̃ in the same round trip). The server, which kept θ_bak(m),
compensates the delay with the diagonal first-order Taylor term and applies

    g̃ = g + λ_dc · g ⊙ g ⊙ (θ̃ − θ_bak(m)) ;   θ̃ ← θ̃ − η g̃

with η the run's ``lr`` and λ_dc = ``lambda_dc`` (default 0.04).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ps_base import GradientAlgorithm, check_range


def dcasgd_update(centre, grad, backup, lr: float, lambda_dc: float) -> None:
    """θ̃ ← θ̃ − η (g + λ g⊙g⊙(θ̃ − θ_bak)), in place."""
    compensated = grad + lambda_dc * grad * grad * (centre - backup)
    centre.sub_(compensated, alpha=lr)


class DCASGD(GradientAlgorithm):
    name = "dcasgd"
    paper = "DC-ASGD: async SGD with delay compensation (Zheng et al. ICML 2017)"

    @dataclass
    class Params(GradientAlgorithm.Params):
        lambda_dc: float = 0.04
        """λ_dc: weight of the delay-compensation term g⊙g⊙(θ̃ − θ_bak) (0: plain ASGD)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_range("lambda_dc", params.lambda_dc, 0.0, float("inf"))

    def server_rule(self, centre, payload, tau, worker, pulled) -> bool:
        dcasgd_update(centre, payload, pulled, self.ctx.cfg.train.lr, self.p.lambda_dc)
        return True
