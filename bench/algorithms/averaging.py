"""What the model-averaging algorithms share (``localsgd``, ``lasgd``, ``easgd``, ``slowmo``, ``diloco``; not an
algorithm itself): :class:`WindowedAveraging`, the loop they all run.

A common start (rank 0's parameters and optimizer state), then in every step one local optimizer step and
:meth:`WindowedAveraging.communicate`: an exchange after every λ = ``communication_window`` local steps, and at the
end (:meth:`WindowedAveraging.finalize`) one more if local steps were taken since the last. A subclass supplies its
exchange rule (:meth:`WindowedAveraging.exchange`), or replaces the schedule where its rule has another (``lasgd``'s
averagings in flight, ``diloco``'s fragments). The replicas differ between averagings, so by default the evaluated
model is the average of every rank's snapshot, formed after training
(:meth:`bench.algorithms.base.Algorithm.averaged_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Algorithm, StepStats, check_window, window_params


class WindowedAveraging(Algorithm):
    """Local optimizer steps, the subclass's exchange every λ = ``communication_window`` steps and at the end."""

    family = "allreduce"
    averaged_evaluation = True

    @dataclass
    class Params(window_params(4)):
        """``communication_window`` λ: local optimizer steps between two model averagings (1 with plain SGD equals sync)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        check_window(cls.name, params)

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.exchanges = 0
        self.last_exchange = 0  # the step (self.t) of the last exchange

    def step(self, x, y) -> StepStats:
        stats = self.local_step(x, y)
        stats.bytes_sent = self.communicate()
        return stats

    def communicate(self) -> int:
        """After step ``self.t``'s local step: exchange if it ends a window. Returns the bytes this worker sent."""
        return self.close_window() if self.t % self.p.communication_window == 0 else 0

    def close_window(self) -> int:
        """:meth:`exchange`, counted and remembered as the last; returns its bytes."""
        sent = self.exchange()
        self.last_exchange = self.t
        self.exchanges += 1
        return sent

    def exchange(self) -> int:
        """The algorithm's rule at the end of a window (communicates); returns the bytes this worker sent."""
        raise NotImplementedError

    def finalize(self) -> None:
        if self.t > self.last_exchange:  # the leftover steps of an unfinished window
            self.close_window()
