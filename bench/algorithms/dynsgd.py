"""DynSGD: staleness-dependent scaling of asynchronous commits.

References:
    Jiang, Cui, Zhang, Yu, "Heterogeneity-aware Distributed Parameter Servers", SIGMOD 2017.
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", master's thesis,
    Université de Liège, 2017 (the form implemented here).

Update rule (docs/algorithms.md, ``dynsgd``): a worker pulls θ̃, takes λ = ``communication_window``
local Opt steps, commits the accumulated change Δ and pulls again (one round trip). The server
computes τ = clock − clock_at_pull(k) and applies θ̃ ← θ̃ + Δ/(τ+1); clock += 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import window_params
from .ps_base import CommitWindow, WindowAlgorithm


def dynsgd_update(centre, delta, tau: int) -> None:
    """θ̃ ← θ̃ + Δ/(τ+1), in place."""
    centre.add_(delta, alpha=1.0 / (tau + 1))


class DynSGD(CommitWindow):
    name = "dynsgd"
    paper = "DynSGD: commits scaled by 1/(staleness+1) (Jiang et al. SIGMOD 2017; Hermans 2017)"

    @dataclass
    class Params(window_params(1), WindowAlgorithm.Params):
        """``communication_window`` λ: local steps between a worker's commits (each commit is followed by a pull)."""

    def server_rule(self, centre, payload, tau, worker, pulled) -> bool:
        dynsgd_update(centre, payload, tau)
        return True
