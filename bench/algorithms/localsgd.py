"""Local SGD / periodic model averaging.

References:
    Povey, Zhang and Khudanpur, "Parallel training of DNNs with natural gradient and
    parameter averaging", ICLR workshop 2015 (arXiv:1410.7455, 2014).
    Lin, Stich, Patel and Jaggi, "Don't use large mini-batches, use local SGD", ICLR 2020.

Update rule (ALGORITHMS.md, ``localsgd``): every worker k takes λ = ``communication_window``
local steps θᵏ ← Opt(θᵏ, ∇L(θᵏ; B_k)) on its own mini-batches, then all replicas are
replaced by their mean, θᵏ ← mean_j θʲ (one blocking allreduce of the flattened
parameters). With λ = 1 and plain SGD, mean_k(θ − η g_k) = θ − η mean_k g_k: exactly
``sync``. Only parameters are averaged; the local optimizer's state (momentum, Adam
moments) stays local, as in Lin et al.

End of training: ``finalize`` averages once more if steps were taken since the last
averaging, so the final model is the average. ``eval_model`` evaluates the average of the
current replicas (an extra allreduce into a copy; the replicas are left untouched).

Timing: the blocking allreduce is ``comm``; there is no ``wait``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import BenchError
from .base import Algorithm, StepStats


def flat_params(model: torch.nn.Module) -> torch.Tensor:
    """A new contiguous 1-D tensor holding all parameters (detached copy)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@torch.no_grad()
def load_flat_(model: torch.nn.Module, vec: torch.Tensor) -> None:
    """Copy ``vec`` into the parameters in place (parameter objects, and so optimizers, are kept)."""
    i = 0
    for p in model.parameters():
        n = p.numel()
        p.copy_(vec[i:i + n].view_as(p))
        i += n


class AveragedEval:
    """Mixin: evaluate the average of the replicas (rank 0) without changing them."""

    def eval_model(self):
        vec = flat_params(self.model)
        self.comm.allreduce_(vec, name=f"{self.name}.eval")  # comm: average of the replicas, for evaluation only
        if self.comm.rank != 0:
            return None
        if getattr(self, "_eval_net", None) is None:
            self._eval_net = self.ctx.build_model()
        self._eval_net.load_state_dict(self.model.state_dict())  # buffers (e.g. BatchNorm) from rank 0
        load_flat_(self._eval_net, vec)
        return self._eval_net


@dataclass
class Params:
    communication_window: int = 4
    """λ: local optimizer steps between two model averagings (1 with plain SGD equals sync)."""


def check_window(name: str, params) -> None:
    if params.communication_window < 1:
        raise BenchError(f"{name}: communication_window must be an integer >= 1, got {params.communication_window!r}")


class WindowedAveraging(AveragedEval, Algorithm):
    """Shared by localsgd and lasgd: a common start, λ = ``communication_window`` local steps per averaging."""

    family = "allreduce"
    Params = Params

    @classmethod
    def validate(cls, params, cfg) -> None:
        check_window(cls.name, params)

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: common start (parameters and optimizer state)
        self.t = 0
        self.averagings = 0


class LocalSGD(WindowedAveraging):
    name = "localsgd"
    paper = "local SGD / model averaging every λ steps (Povey et al. 2014; Lin et al. 2020)"

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.last_average = 0

    def average(self) -> None:
        vec = flat_params(self.model)
        with self.ctx.timer.comm():
            self.comm.allreduce_(vec, name="localsgd.avg")  # comm: θᵏ ← mean_j θʲ
        load_flat_(self.model, vec)
        self.last_average = self.t
        self.averagings += 1

    def step(self, x, y) -> StepStats:
        stats = self.local_step(x, y)
        self.t += 1
        if self.t % self.p.communication_window == 0:
            self.average()
            stats.bytes_sent = self.param_bytes()
        return stats

    def finalize(self) -> None:
        if self.t > self.last_average:
            self.average()

    def stats(self) -> dict:
        return {"averagings": self.averagings} if self.comm.rank == 0 else {}
