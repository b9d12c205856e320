"""DOWNPOUR SGD: asynchronous SGD against a parameter server.

References:
    Dean, Corrado, Monga, Chen, Devin, Le, Mao, Ranzato, Senior, Tucker, Yang, Ng,
    "Large Scale Distributed Deep Networks", NIPS 2012 (Downpour SGD, n_fetch / n_push).
    Hermans, "On Scalable Deep Learning and Parallelizing Gradient Descent", master's thesis,
    Université de Liège, 2017 (DOWNPOUR as the baseline of the asynchronous family).

Update rule (docs/algorithms.md, ``downpour``): worker k pulls θᵏ ← θ̃ every ``n_fetch`` steps,
takes a local Opt step every step, and every ``n_push`` steps commits Δ = the sum of its
local changes since its last commit (a pull in between replaces θᵏ but not Δ); the server
applies θ̃ ← θ̃ + Δ on arrival, with no barrier. With one worker and n_fetch = n_push = 1
this is sequential SGD (to float rounding: θ̃ + (θ' − θ) instead of θ').
"""

from __future__ import annotations

from dataclasses import dataclass

from .ps_base import WindowAlgorithm, check_positive_int


class Downpour(WindowAlgorithm):
    name = "downpour"
    paper = "DOWNPOUR async SGD with a parameter server (Dean et al. NIPS 2012; Hermans 2017)"

    @dataclass
    class Params(WindowAlgorithm.Params):
        n_fetch: int = 1
        """Pull the centre variable every this many local steps."""
        n_push: int = 1
        """Commit the accumulated change every this many local steps."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_positive_int(params, "n_fetch", "n_push")

    def fetch_push(self):
        return self.p.n_fetch, self.p.n_push, 1.0
