"""PyTorch DistributedDataParallel: the reference a user would pick instead of Horovod, with its own comm hooks.

References:
    Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
    VLDB 2020.
    Vogels, Karimireddy and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
    Optimization", NeurIPS 2019 (``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``).
    Lin, Stich, Patel and Jaggi, "Don't use large mini-batches, use local SGD", ICLR 2020 (post-local SGD;
    ``post_localSGD_hook`` with ``model_averaging.averagers.PeriodicModelAverager``).

Update rule: identical to ``sync`` (θ ← Opt(θ, mean_k ∇L(θ; B_k))), but gradients are
bucketed and allreduced by torch.distributed (gloo on CPU, NCCL on GPU) during backward.
The job starts torch.distributed alone (``runtime = "torch"``): horovodrun launches it, but no rank calls
``hvd.init()``, so no Horovod background thread runs beside DDP; the process group is opened from horovodrun's
rank, size and rendezvous (:class:`bench.comm.torch_runtime.TorchComm`), and the harness's own collectives go
through it too.

``comm_hook`` (docs/algorithms.md, ``ddp``), PyTorch's DDP communication hooks as documented:

- ``allreduce``: no hook registered, DDP's built-in bucketed mean-allreduce (what ``allreduce_hook``
  reproduces); 4 bytes per gradient element per step.
- ``fp16``: ``default_hooks.fp16_compress_hook``: each bucket cast to float16, divided by n, sum-allreduced,
  cast back; 2 bytes per element per step.
- ``powersgd``: ``powerSGD_hook`` with ``PowerSGDState(matrix_approximation_rank=powersgd_rank,
  start_powerSGD_iter=powersgd_start_iter)`` and PyTorch's other defaults (error feedback and warm start on,
  min_compression_rate 2). The first ``powersgd_start_iter`` steps are a plain allreduce; after them each
  gradient viewed as an n×m matrix with (n + m)·r·2 < n·m is replaced by a rank-r approximation P Qᵀ (one
  power iteration; P and Q allreduced), the others (biases) are allreduced as they are. ``bytes_sent`` is
  what the hook hands to its allreduces: (n + m)·r elements per compressed tensor plus the uncompressed
  elements (read from the state's counters), in the gradients' dtype.
- ``post_localsgd``: ``post_localSGD_hook`` with ``PostLocalSGDState(start_localSGD_iter=post_localsgd_start_iter,
  post_local_gradient_allreduce=False)`` and ``PeriodicModelAverager(period=post_localsgd_period,
  warmup_steps=post_localsgd_start_iter)`` called after every optimizer step: plain DDP for the first
  ``post_localsgd_start_iter`` steps, then local SGD: no gradient communication, the parameters averaged
  (one allreduce) after the optimizer step of steps S, S + K, S + 2K, ... (0-based; K the period).
  PyTorch's default subgroup is the intra-node group, which on one machine is every rank: gradients
  would still be allreduced every step (DDP plus redundant averaging), so the post-local phase here
  has no gradient allreduce, which is Lin et al.'s post-local SGD. The replicas differ between
  averagings, so the evaluated model is the mean of the replicas (as ``localsgd``).

``comm_s`` is not separable for the hooks that run inside backward (DDP overlaps them there; recorded
as 0); the post-local SGD parameter averaging runs after the optimizer step and is recorded as ``comm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch.nn.parallel import DistributedDataParallel

from .. import BenchError
from .base import Algorithm, StepStats


class DDP(Algorithm):
    name = "ddp"
    paper = "PyTorch DistributedDataParallel (Li et al., VLDB 2020)"
    runtime = "torch"

    @dataclass
    class Params:
        comm_hook: Literal["allreduce", "fp16", "powersgd", "post_localsgd"] = "allreduce"
        """DDP communication hook: allreduce (built-in), fp16 (fp16_compress_hook), powersgd, post_localsgd."""
        powersgd_rank: int = 1
        """PowerSGD's matrix_approximation_rank r >= 1 (PyTorch's default 1)."""
        powersgd_start_iter: int = 10
        """PowerSGD's start_powerSGD_iter >= 2: plain allreduce before it (PyTorch's default 1000 suits long runs)."""
        post_localsgd_start_iter: int = 10
        """Post-local SGD's warm-up: steps of plain DDP before local SGD starts (start_localSGD_iter, >= 0)."""
        post_localsgd_period: int = 4
        """Post-local SGD: steps between two parameter averagings after the warm-up (>= 1)."""

    def __init__(self, params, ctx):
        super().__init__(params, ctx)
        # post-local SGD: replicas differ between averagings, the evaluated model is their mean
        self.averaged_evaluation = params.comm_hook == "post_localsgd"

    @classmethod
    def validate(cls, params, cfg) -> None:
        if params.powersgd_rank < 1:
            raise BenchError(f"ddp: powersgd_rank must be an integer >= 1, got {params.powersgd_rank!r}")
        if params.powersgd_start_iter < 2:
            raise BenchError(f"ddp: powersgd_start_iter must be an integer >= 2 (PowerSGD's error feedback and warm start "
                             f"need one plain allreduce first), got {params.powersgd_start_iter!r}")
        if params.post_localsgd_start_iter < 0:
            raise BenchError(f"ddp: post_localsgd_start_iter must be an integer >= 0, got {params.post_localsgd_start_iter!r}")
        if params.post_localsgd_period < 1:
            raise BenchError(f"ddp: post_localsgd_period must be an integer >= 1, got {params.post_localsgd_period!r}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.init_torch_distributed()  # comm: open torch.distributed's group over all workers (horovodrun's rank, size and rendezvous)
        dev = self.ctx.device
        self.ddp = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)  # comm: wrap the model: DDP broadcasts rank 0's parameters to every worker
        self.comm.broadcast_optimizer_state(optimizer, root=0)  # comm: broadcast rank 0's optimizer state to every worker
        self.grad_bytes = self.param_bytes(grads=True)
        self.grad_numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.elsize = next(model.parameters()).element_size()
        self.powersgd = self.averager = None
        self.averagings = 0
        hook = self.p.comm_hook
        if hook == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            self.ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)  # comm: each float16 bucket allreduced over all workers
        elif hook == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

            self.powersgd = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=self.p.powersgd_rank,
                                                        start_powerSGD_iter=self.p.powersgd_start_iter)
            self.ddp.register_comm_hook(self.powersgd, powerSGD_hook.powerSGD_hook)  # comm: the P and Q factors allreduced over all workers
        elif hook == "post_localsgd":
            from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
            from torch.distributed.algorithms.model_averaging import averagers

            state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=None,
                                                         start_localSGD_iter=self.p.post_localsgd_start_iter,
                                                         post_local_gradient_allreduce=False)
            self.ddp.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)  # comm: gradients allreduced over all workers during the warm-up only
            self.averager = averagers.PeriodicModelAverager(period=self.p.post_localsgd_period,
                                                            warmup_steps=self.p.post_localsgd_start_iter)

    def step(self, x, y) -> StepStats:
        compressed_before = self.powersgd.total_numel_after_compression if self.powersgd is not None else 0
        stats = self.forward_backward(x, y, model=self.ddp)  # comm: backward allreduces the gradient buckets over all workers (or the hook does)
        self.optimizer.step()
        if self.powersgd is not None:
            sent = self.powersgd.total_numel_after_compression - compressed_before  # elements handed to P/Q/uncompressed allreduces
            stats.bytes_sent = sent * self.elsize if sent else self.grad_bytes  # 0: a plain allreduce step (before start_powerSGD_iter)
        elif self.averager is not None:
            warm, avg = self.p.post_localsgd_start_iter, self.averager
            stats.bytes_sent = self.grad_bytes if self.t <= warm else 0  # self.t counts from 1
            if avg.step >= avg.warmup_steps and (avg.step - avg.warmup_steps) % avg.period == 0:
                with self.ctx.timer.comm():
                    avg.average_parameters(self.model.parameters())  # comm: allreduce the parameters over all workers: θᵏ ← mean_j θʲ
                stats.bytes_sent += self.param_bytes()
                self.averagings += 1
            else:
                avg.average_parameters(self.model.parameters())  # no communication: advances the averager's step count
        else:
            stats.bytes_sent = self.grad_numel * 2 if self.p.comm_hook == "fp16" else self.grad_bytes
        return stats

    def stats(self) -> dict:
        if self.comm.rank != 0:
            return {}
        if self.powersgd is not None:
            before, after = self.powersgd.total_numel_before_compression, self.powersgd.total_numel_after_compression
            return {"powersgd_compression_rate": before / after if after else None}
        if self.averager is not None:
            return {"post_localsgd_averagings": self.averagings}
        return {}
