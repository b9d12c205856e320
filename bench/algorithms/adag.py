"""ADAG: Asynchronous Distributed Adaptive Gradients.

References:
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", master's thesis,
    Université de Liège, 2017, chapter on ADAG. (dist-keras's class named ADAG implements AGN;
    this module follows the thesis.)

Update rule (docs/algorithms.md, ``adag``): workers as in ``agn``, which this class extends (pull; λ
local Opt steps accumulated in a; commit Δ = a/λ; pull). The server scales each commit element-wise by how
far the centre has moved since that worker pulled it:

    θ̃ ← θ̃ + Δ ⊙ 1 / (γ⁻¹ (θ̃_t − θ̃_{t−τ})² + 1)

with θ̃_{t−τ} the centre the worker pulled (the server keeps each worker's pulled copy) and
γ = ``gamma`` (default 1e-4). The commit's Δ being a/λ (as in AGN) is read from "workers as
in agn" in the specification.
"""

from __future__ import annotations

from dataclasses import dataclass

from .agn import AGN
from .ps_base import check_range


def adag_update(centre, delta, pulled, gamma: float) -> None:
    """θ̃ ← θ̃ + Δ ⊙ 1/(γ⁻¹(θ̃ − θ̃_pulled)² + 1), in place."""
    centre.add_(delta / ((centre - pulled).square_().div_(gamma).add_(1.0)))


class ADAG(AGN):
    name = "adag"
    paper = "ADAG: asynchronous distributed adaptive gradients (Hermans 2017)"
    keep_pulled = True

    @dataclass
    class Params(AGN.Params):
        gamma: float = 1e-4
        """γ: the centre's squared drift since the worker's pull is divided by γ (smaller γ: stronger damping)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_range("gamma", params.gamma, 0.0, float("inf"), lo_open=True)

    def server_rule(self, centre, payload, tau, worker, pulled) -> bool:
        adag_update(centre, payload, pulled, self.p.gamma)
        return True
