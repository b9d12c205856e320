"""Asynchronous EASGD: elastic averaging against a parameter server.

References:
    Zhang, Choromanska, LeCun, "Deep learning with Elastic Averaging SGD", NIPS 2015
    (Algorithm 1, asynchronous EASGD).
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", master's thesis,
    Université de Liège, 2017 (AEASGD with α = ηρ).

Update rule (docs/algorithms.md, ``aeasgd``): worker k takes λ = ``communication_window`` local
Opt steps; then pulls θ̃, computes the elastic difference E = α(θᵏ − θ̃) with α = η·ρ
(η the run's ``lr``), moves θᵏ ← θᵏ − E and commits E; the server applies θ̃ ← θ̃ + E on
arrival. Workers keep their own parameters between windows (they are only pulled elastically
towards the centre). τ counts the centre updates between the pull and the commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import BenchError
from .base import StepStats, check_window, window_params
from .ps_base import PSAlgorithm, check_range, merge


class AEASGD(PSAlgorithm):
    name = "aeasgd"
    paper = "asynchronous elastic averaging SGD (Zhang, Choromanska, LeCun NIPS 2015; Hermans 2017)"

    @dataclass
    class Params(window_params(4), PSAlgorithm.Params):
        """``communication_window`` λ: local steps between a worker's elastic exchanges with the server."""

        rho: float = 5.0
        """ρ: elasticity; the moving rate is α = η·ρ (η the run's lr) and must lie in (0, 1]."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_window(cls.name, params)
        check_range("rho", params.rho, 0.0, float("inf"), lo_open=True)
        alpha = cfg.train.lr * params.rho
        if not 0.0 < alpha <= 1.0:
            raise BenchError(f"alpha = lr * rho = {cfg.train.lr:g} * {params.rho:g} = {alpha:g} must be in (0, 1]")

    def step(self, x, y) -> StepStats:
        stats = self.local_step(x, y)
        if self.t % self.p.communication_window == 0:
            with self.ctx.timer.comm():
                self.client.pull(self._buf, snapshot=True)  # comm: pull the centre θ̃ from the server
            theta = self.flat()
            elastic = (theta - self._buf).mul_(self.ctx.cfg.train.lr * self.p.rho)
            self.load(theta - elastic)
            stats = merge(stats, self.commit(elastic))
        return stats
