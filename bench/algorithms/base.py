"""The Algorithm interface: what the algorithm-agnostic worker loop (bench/worker.py) calls.

Life cycle on every rank of a horovodrun job::

    algo = Algo(params, ctx)          # ctx: Context (config, comm, device, data, loss, timer, ...)
    algo.setup(model, optimizer)      # broadcast initial state, wrap the optimizer, open transports
    if algo.is_server():              # parameter-server ranks (server_ranks() of them, the last ranks)
        algo.serve()                  #   serve until every worker has finished
    else:
        for each mini-batch:
            stats = algo.step(x, y)   # one local step, communicating as the algorithm requires
            algo.snapshot()           # every eval_every steps: a copy of what to evaluate (no communication)
    algo.finalize()                   # drain outstanding communication, produce the final model
    algo.own_snapshots()              # snapshots the algorithm took itself (a parameter server's centre)
    algo.snapshot()                   # the final one
    algo.evaluation_model(snap)       # after training, for each snapshot in order: the model to evaluate
    algo.stats()                      # extra numbers for summary.json

Evaluation is off the critical path: during training a rank only copies what it will evaluate
(:func:`bench.vectors.snapshot`); the held-out evaluations (and any communication they need, such
as averaging the replicas) run after the last step, timed apart from the steps.

A new need becomes a method here, never an ``if`` on an algorithm's name in the loop.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from .. import BenchError, vectors
from ..timing import StepTimer


@dataclass
class NoParams:
    """This algorithm has no hyperparameters."""


@functools.cache
def window_params(default: int) -> type:
    """The base of a windowed algorithm's ``Params``: the one declaration of ``communication_window`` (λ), with that
    algorithm's default. What ends a window (an averaging, an elastic exchange, a commit) is said in the docstring
    of the algorithm's ``Params``; :func:`check_window` validates it."""

    @dataclass
    class WindowParams:
        communication_window: int = default
        """λ >= 1: local steps a worker takes between two of its communications."""

    WindowParams.__qualname__ = WindowParams.__name__ = f"WindowParams{default}"
    return WindowParams


def check_window(name: str, params) -> None:
    """λ = ``communication_window`` must be an integer >= 1 (a :class:`bench.BenchError` naming algorithm ``name``)."""
    if params.communication_window < 1:
        raise BenchError(f"{name}: communication_window must be an integer >= 1, got {params.communication_window!r}")


@dataclass
class Context:
    """What an algorithm may use besides its parameters."""

    cfg: Any  # bench.config.RunConfig
    comm: Any  # bench.comm.Comm
    device: torch.device
    build_model: Callable[[], nn.Module]  # a fresh model with the run's architecture (same init seed)
    make_optimizer: Callable[[Any], torch.optim.Optimizer]  # the run's local optimizer for given parameters
    dataset: Any = None  # bench.data.Dataset: the run's data, loaded once per rank
    loss_fn: Callable = field(default_factory=lambda: nn.CrossEntropyLoss())
    timer: StepTimer = field(default_factory=StepTimer)
    worker_index: int = 0  # 0..num_workers-1 on worker ranks, -1 on server ranks
    num_workers: int = 1
    steps_per_epoch: int = 0
    total_steps: int = 0  # steps each worker will take
    t0: float = 0.0  # the job's common time origin (time.time() of the start, the same on every rank)

    def progress(self, step: int) -> dict:
        """Record fields of worker step ``step``: epoch, and samples seen by all workers together."""
        return {"step": step, "epoch": step / max(self.steps_per_epoch, 1),
                "samples_seen": step * self.cfg.train.batch_size * self.num_workers}


@dataclass
class StepStats:
    """What one step reports; the loop adds step, epoch, t, samples and the timing split."""

    loss: float
    correct: int
    staleness: float | None = None  # tau of the commit made in this step (asynchronous algorithms)
    bytes_sent: int = 0  # payload bytes this worker handed to collectives / sent point-to-point


class Algorithm:
    """Base class. Subclasses set ``name``, ``paper``, optionally a nested ``Params`` dataclass, and implement ``step``."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    family: ClassVar[str] = "allreduce"
    Params: ClassVar[type] = NoParams
    runtime: ClassVar[str] = "horovod"
    """What the job must start: ``horovod`` (``hvd.init()``: Horovod's collectives and background thread, and
    torch.distributed on demand) or ``torch`` (an algorithm that communicates only through torch.distributed: no
    Horovod in its job, so none of Horovod's cycles on its cores; ``self.comm`` then offers the collectives of
    :class:`bench.comm.base.CommBase` and the point-to-point transport, not Horovod's own operations)."""
    averaged_evaluation: ClassVar[bool] = False
    """True when the replicas differ (local SGD, gossip): the evaluated model is the mean of every rank's
    snapshot; False: rank 0's snapshot is the evaluated model."""

    def __init__(self, params, ctx: Context):
        self.p = params
        self.ctx = ctx
        self.comm = ctx.comm
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.eval_net = vectors.EvalNet(ctx.build_model)
        self.t = 0
        """The steps this worker has begun, counted by :meth:`forward_backward` (one call per step): between steps the
        steps taken; within a step, once its gradient is computed, that step's number counted from 1."""
        self._grad_tensors: tuple[nn.Module | None, list] = (None, [])  # forward_backward's model and its parameters

    # -- class-level hooks, used before anything is launched ------------------------------
    @classmethod
    def server_ranks(cls, params, np: int) -> int:
        """Extra (non-worker) ranks this algorithm launches besides the ``np`` workers."""
        return 0

    @classmethod
    def validate(cls, params, cfg) -> None:
        """Raise bench.BenchError for invalid hyperparameters (before any job starts). Reads the configuration only:
        every rank runs it again when it reads its config.json."""

    @classmethod
    def check_machine(cls, params, cfg) -> None:
        """Raise bench.BenchError for what the hyperparameters need of the launching machine (a file they name),
        checked before launch and never by the ranks (:func:`bench.resolve.check_machine`)."""

    # -- per-rank life cycle --------------------------------------------------------------
    def setup(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def is_server(self) -> bool:
        return False

    def serve(self) -> None:
        raise NotImplementedError(f"{self.name} has no server role")

    def step(self, x: torch.Tensor, y: torch.Tensor) -> StepStats:
        raise NotImplementedError

    def eval_theta(self) -> torch.Tensor:
        """The parameter vector this rank contributes to the evaluated model (default: its model's parameters)."""
        return vectors.flat(self.model.parameters())

    def snapshot(self) -> dict | None:
        """A copy of what this rank contributes to the evaluated model, or None. Called between steps at the same
        step counts on every worker rank, and once more after :meth:`finalize` on every rank; must not wait on
        other ranks. Default: :meth:`eval_theta` and the buffers, on every rank if :attr:`averaged_evaluation`,
        else on rank 0 only."""
        if self.averaged_evaluation or self.comm.rank == 0:
            # the default eval_theta is already a new vector: snapshot() flattens the parameters once, where an
            # overriding eval_theta (a centre, an outer model: state the algorithm keeps changing) is copied
            own = type(self).eval_theta is not Algorithm.eval_theta
            return vectors.snapshot(self.model, theta=self.eval_theta() if own else None)
        return None

    def own_snapshots(self) -> list[tuple[dict, dict]]:
        """(record fields, snapshot) pairs this rank took outside the loop's evaluation points (after finalize)."""
        return []

    def evaluation_model(self, snap: dict | None) -> nn.Module | None:
        """After training, for each snapshot in the order taken (the same number on every rank that took any):
        the model to evaluate on the rank that evaluates, None elsewhere. May communicate."""
        if self.averaged_evaluation:
            return self.averaged_model(snap)
        return None if snap is None else self.eval_net.load(snap["theta"], snap["buffers"])

    def finalize(self) -> None:
        """Complete outstanding communication before the final snapshot."""

    def stats(self) -> dict:
        """Extra figures for summary.json (e.g. commits applied by a server)."""
        return {}

    # -- helpers shared by subclasses ----------------------------------------------------
    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, model: nn.Module | None = None) -> StepStats:
        """Zero the gradients, forward, loss, backward; returns loss and the number of correct predictions.
        Every step calls it once: it counts the step (:attr:`t`)."""
        self.t += 1
        model = model or self.model
        if self._grad_tensors[0] is not model:  # a module's parameter walk costs more than the loop below
            self._grad_tensors = (model, list(model.parameters()))
        for p in self._grad_tensors[1]:
            p.grad = None  # model.zero_grad(set_to_none=True): backward allocates fresh gradients, no accumulate pass
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
        return vectors.nbytes(p for p in self.model.parameters() if not grads or p.requires_grad)

    def averaged_model(self, snap: dict) -> nn.Module | None:
        """The mean over every rank of the snapshots ``snap`` (parameters and floating-point buffers; integer
        buffers such as BatchNorm's batch counter are rank 0's) as a model on rank 0, None elsewhere.
        For the algorithms whose replicas differ (local SGD, gossip); collective: every rank calls it."""
        device = self.ctx.device
        vec = snap["theta"].to(device)
        self.comm.allreduce_(vec, name=f"{self.name}.eval.theta")  # comm: allreduce the evaluated model over all ranks: the mean of the replicas
        floats = [b for b in snap["buffers"] if b.is_floating_point()]
        if floats:
            buf = vectors.flat(floats).to(device)
            self.comm.allreduce_(buf, name=f"{self.name}.eval.buffers")  # comm: allreduce the buffers over all ranks: the mean running statistics
            vectors.assign_(floats, buf.cpu())
        return self.eval_net.load(vec, snap["buffers"]) if self.comm.rank == 0 else None
