"""What the model-averaging algorithms share (``localsgd``, ``lasgd``, ``easgd``; not an algorithm itself).

- :func:`check_window`: λ = ``communication_window`` must be an integer >= 1;
- :class:`WindowedAveraging`: a common start (rank 0's parameters and optimizer state) and a local
  step counter; the replicas differ between averagings, so the evaluated model is the average of
  every rank's snapshot, formed after training (:meth:`bench.algorithms.base.Algorithm.averaged_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import BenchError
from .base import Algorithm


def check_window(name: str, params) -> None:
    if params.communication_window < 1:
        raise BenchError(f"{name}: communication_window must be an integer >= 1, got {params.communication_window!r}")


class WindowedAveraging(Algorithm):
    """Local optimizer steps, the replicas averaged every λ = ``communication_window`` steps (by the subclass)."""

    family = "allreduce"
    averaged_evaluation = True

    @dataclass
    class Params:
        communication_window: int = 4
        """λ: local optimizer steps between two model averagings (1 with plain SGD equals sync)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        check_window(cls.name, params)

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: common start (parameters and optimizer state)
        self.t = 0
        self.averagings = 0
