"""Synchronous data-parallel SGD with allreduce: the baseline, with Horovod's own compression and Adasum options.

References:
    Sergeev and Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
    arXiv:1802.05799, 2018 (ring allreduce of gradients, the DistributedOptimizer used here).
    Maleki, Musuvathi, Mytkowicz, Saarikivi, Xu, Eksarevskiy, Ekanayake and Barsoum, "Scaling Distributed
    Training with Adaptive Summation", MLSys 2021 (arXiv:2006.02924): Adasum, Horovod's ``op=hvd.Adasum``.

Update rule (docs/algorithms.md, ``sync``): every worker k computes g_k = ∇L(θ; B_k) on its own
mini-batch; g = mean_k g_k by allreduce; θ ← Opt(θ, g). All replicas start from rank 0's
broadcast parameters and optimizer state, so they stay identical, and the run equals
single-process training on the union batch (to float tolerance).

Options, passed to ``hvd.DistributedOptimizer`` as they are:

- ``compression: fp16`` (``hvd.Compression.fp16``): each gradient is cast to float16 before its allreduce
  and back to its dtype after it, so the payload is 2 bytes per element (``bytes_sent``) and the mean is
  taken in float16 (rounding, and overflow above 65504).
- ``op: adasum`` (``hvd.Adasum``): Horovod's Adasum optimizer: each worker applies its own optimizer step
  to a copy (in the backward hooks), the per-worker updates δ_k are combined by Adasum's adaptive sum
  (pairwise: δ_a + δ_b − (δ_a·δ_b)/(2‖δ_a‖²)·δ_a − (δ_a·δ_b)/(2‖δ_b‖²)·δ_b, recursively over a power of two of
  ranks) and θ ← θ_start + Adasum_k δ_k. Horovod implements the Adasum reduction only with MPI
  (``AdasumMPIAllreduceOp``; NCCL+MPI on GPUs) and only for a power-of-two number of ranks; with the
  Gloo controller a job fails at the first reduction ("No Adasum operation enabled"). ``validate`` refuses
  it before launch unless the Horovod build has MPI and the hardware profile uses ``controller: mpi``.
  (Not exercised on this suite's default gloo-only CPU build.)

The update: after ``synchronize()`` has written the averaged gradients into ``p.grad``, the run's own optimizer
steps (it shares its parameter groups with the DistributedOptimizer, which Horovod builds from them; its state is the
one ``broadcast_state`` made equal). ``dist_opt.step()`` under ``skip_synchronize()`` would apply the same update
through Horovod's generated subclass, whose ``step`` torch wraps in a second profiler hook around the first: 16 us
of CPU a step on laptop's MLP, about 2 % of its step (docs/horovod.md, R).

Timing: gradients are reduced by Horovod's background thread, started from backward's hooks (per gradient, or, with
the launch setting ``horovod.groups``, per group once the group's last gradient is ready: with 1, one allreduce
after backward); ``comm_s`` is the part that is not hidden, the wait in ``synchronize()`` before the update
(with Adasum, the whole ``step()``, which waits for the reductions and applies them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .. import BenchError
from ..system import horovod_build
from .base import Algorithm, StepStats


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


ADASUM_NEEDS = "Horovod built with MPI (HOROVOD_WITH_MPI=1) and a hardware profile with controller: mpi"


def _adasum_refused(why: str) -> BenchError:
    return BenchError(f"sync: op=adasum cannot run: Horovod reduces Adasum only over MPI (NCCL+MPI on GPUs), never Gloo "
                      f"(a gloo job fails with 'No Adasum operation enabled'); {why}; it needs {ADASUM_NEEDS}")


def check_adasum(cfg) -> None:
    """Refuse ``op: adasum`` where the run's settings cannot run it (one line naming why and what is needed)."""
    if cfg.launch.controller != "mpi":
        raise _adasum_refused(f"the job's controller is {cfg.launch.controller}")
    if not _is_power_of_two(cfg.launch.np):
        raise BenchError(f"sync: op=adasum needs a power-of-two number of workers (Horovod's Adasum), got np={cfg.launch.np}")


def check_adasum_build() -> None:
    """Refuse ``op: adasum`` where this machine's Horovod has no MPI (``horovodrun --check-build``)."""
    build = horovod_build()
    if not (build.get("available") or {}).get("MPI"):
        raise _adasum_refused(f"Horovod {build.get('version') or '(version unknown)'} here is built without MPI (Gloo only)")


class Sync(Algorithm):
    name = "sync"
    paper = "synchronous allreduce SGD (Horovod, Sergeev & Del Balso 2018)"

    @dataclass
    class Params:
        compression: Literal["none", "fp16"] = "none"
        """Horovod's gradient compression: none, or fp16 (gradients cast to float16 for the allreduce)."""
        op: Literal["average", "adasum"] = "average"
        """Horovod's reduction: average (mean gradient), or adasum (needs an MPI build and controller mpi)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        if params.op == "adasum":
            check_adasum(cfg)

    @classmethod
    def check_machine(cls, params, cfg) -> None:
        if params.op == "adasum":
            check_adasum_build()

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.dist_opt = self.comm.distributed_optimizer(optimizer, model.named_parameters(),  # comm: wrap the optimizer: backward hooks start each gradient's allreduce over all workers
                                                        compression=self.p.compression, op=self.p.op)
        self.payload = sum(p.numel() * (2 if self.p.compression == "fp16" and p.is_floating_point() else p.element_size())
                           for p in model.parameters() if p.requires_grad)

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y)  # zeroes the gradients first (what dist_opt.zero_grad() would do)
        if self.p.op == "adasum":
            with self.ctx.timer.comm():
                self.dist_opt.step()  # comm: wait for the Adasum reductions of the updates over all workers, apply them
        else:
            with self.ctx.timer.comm():
                self.comm.wait_optimizer(self.dist_opt)  # comm: wait (sleeping, horovod.wait_sleep_us) for the gradient allreduces over all workers
                self.dist_opt.synchronize()  # comm: wait for the gradient allreduces over all workers started in backward
            self.optimizer.step()  # the local optimizer on the averaged gradients (see the docstring)
        stats.bytes_sent = self.payload
        return stats
