"""The Algorithm interface: what the algorithm-agnostic worker loop (bench/worker.py) calls.

Life cycle on every rank of a horovodrun job::

    algo = Algo(params, ctx)          # ctx: Context (config, comm, device, loss, timer, ...)
    algo.setup(model, optimizer)      # broadcast initial state, wrap the optimizer, open transports
    if algo.is_server():              # parameter-server ranks (server_ranks() of them, the last ranks)
        algo.serve()                  #   serve until every worker has finished
    else:
        for each mini-batch:
            stats = algo.step(x, y)   # one local step, communicating as the algorithm requires
            algo.eval_model()         # every eval_every steps: the model that matters, or None
    algo.finalize()                   # drain outstanding communication, produce the final model
    algo.eval_model()                 # the model evaluated for summary.json
    algo.stats()                      # extra numbers for summary.json

A new need becomes a method here, never an ``if`` on an algorithm's name in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from ..config import NoParams
from ..timing import StepTimer


@dataclass
class Context:
    """What an algorithm may use besides its parameters."""

    cfg: Any  # RunConfig
    comm: Any  # bench.comm.Comm
    device: torch.device
    build_model: Callable[[], nn.Module]  # a fresh model with the run's architecture (same init seed)
    make_optimizer: Callable[[Any], torch.optim.Optimizer]  # the run's local optimizer for given parameters
    loss_fn: Callable = field(default_factory=lambda: nn.CrossEntropyLoss())
    timer: StepTimer = field(default_factory=StepTimer)
    worker_index: int = 0  # 0..num_workers-1 on worker ranks
    num_workers: int = 1
    steps_per_epoch: int = 0
    total_steps: int = 0  # steps each worker will take


@dataclass
class StepStats:
    """What one step reports; the loop adds step, epoch, t, samples and the timing split."""

    loss: float
    correct: int
    staleness: float | None = None  # tau of the commit made in this step (asynchronous algorithms)
    bytes_sent: int = 0  # payload bytes this worker handed to collectives / sent point-to-point


class Algorithm:
    """Base class. Subclasses set ``name``, ``paper``, optionally ``Params``, and implement ``step``."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    family: ClassVar[str] = "allreduce"
    Params: ClassVar[type] = NoParams

    def __init__(self, params, ctx: Context):
        self.p = params
        self.ctx = ctx
        self.comm = ctx.comm
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None

    # -- class-level hooks, used before anything is launched ------------------------------
    @classmethod
    def server_ranks(cls, params, np: int) -> int:
        """Extra (non-worker) ranks this algorithm launches besides the ``np`` workers."""
        return 0

    @classmethod
    def validate(cls, params, cfg) -> None:
        """Raise bench.BenchError for invalid hyperparameters (before any job starts)."""

    # -- per-rank life cycle --------------------------------------------------------------
    def setup(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def is_server(self) -> bool:
        return False

    def serve(self) -> None:
        raise NotImplementedError(f"{self.name} has no server role")

    def step(self, x: torch.Tensor, y: torch.Tensor) -> StepStats:
        raise NotImplementedError

    def eval_model(self) -> nn.Module | None:
        """The model that matters, on the rank that evaluates it (rank 0 by default); None elsewhere.

        Called on every rank at the same step counts, so an implementation may use collectives.
        """
        return self.model if self.comm.rank == 0 else None

    def finalize(self) -> None:
        """Complete outstanding communication before the final evaluation."""

    def stats(self) -> dict:
        """Extra figures for summary.json (e.g. commits applied by a server)."""
        return {}

    # -- helpers shared by subclasses ----------------------------------------------------
    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, model: nn.Module | None = None) -> StepStats:
        """Zero the gradients, forward, loss, backward; returns loss and the number of correct predictions."""
        model = model or self.model
        model.zero_grad(set_to_none=True)  # backward allocates fresh gradients: no accumulate pass
        out = model(x)
        loss = self.ctx.loss_fn(out, y)
        loss.backward()
        correct = int((out.detach().argmax(1) == y).sum())
        return StepStats(loss=float(loss.detach()), correct=correct)

    def local_step(self, x: torch.Tensor, y: torch.Tensor) -> StepStats:
        """One step of the local optimizer on this worker's mini-batch, no communication."""
        stats = self.forward_backward(x, y)
        self.optimizer.step()
        return stats

    def param_bytes(self, grads: bool = False) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters() if not grads or p.requires_grad)
