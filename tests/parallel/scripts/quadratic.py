"""The quadratic harness of the exact-rule scripts (allreduce_family.py, outer_optimizers_and_compression.py), run under horovodrun.

Every rank builds an algorithm with a real Context and Comm on a model whose loss is a quadratic with a
known minimiser per step and rank: rows of batch(t, k) are the target c(t, k), so ∇L(w) = w − c(t, k), and a
closed-form reference recurrence that knows every rank's c can be compared with every step. ``run_worker``
runs the real worker loop of the suite inside the same job, into OUT_DIR/<name>.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from bench.algorithms import get_algorithm
from bench.algorithms.base import Context
from bench.comm import Comm
from bench.models import make_optimizer
from bench.resolve import resolve
from bench.results import write_json_atomic
from bench.timing import StepTimer
from bench.worker import Worker

D, B, LR = 5, 4, 0.1


class Quad(nn.Module):
    """out = 0.5‖w − x_i‖² per row; with loss = mean(out), ∇L(w) = w − mean_i x_i."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = nn.Parameter(torch.randn(D, generator=g, dtype=torch.float64))

    def forward(self, x):
        return 0.5 * ((self.w - x) ** 2).sum(1, keepdim=True)


def target(t: int, k: int) -> torch.Tensor:
    return torch.arange(D, dtype=torch.float64) * (k + 1) - 0.3 * t + 0.7 * k


def batch(t: int, k: int):
    return target(t, k).repeat(B, 1), torch.zeros(B, dtype=torch.long)


def build(comm: Comm, algo: str, steps: int, **overrides):
    cfg = resolve(algo, np=comm.size, profile="tiny", overrides={"lr": LR, "optimizer": "sgd", "momentum": 0.0, **overrides})
    cls = get_algorithm(algo)
    params = cfg.params
    ctx = Context(cfg=cfg, comm=comm, device=torch.device("cpu"), build_model=Quad,
                  make_optimizer=lambda ps: make_optimizer(cfg.train, ps), loss_fn=lambda out, y: out.mean(),
                  timer=StepTimer(), worker_index=comm.rank, num_workers=comm.size, steps_per_epoch=steps, total_steps=steps)
    model = Quad()
    with torch.no_grad():
        model.w += 10.0 * comm.rank  # the algorithm's setup must broadcast rank 0's parameters
    a = cls(params, ctx)
    a.setup(model, make_optimizer(cfg.train, model.parameters()))
    return a, model


def close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    err = float((a - b).abs().max())
    assert err < 1e-10, f"{what}: max abs difference {err:.3g}\n  got      {a.tolist()}\n  expected {b.tolist()}"


def run_worker(comm: Comm, out: Path, name: str, algo: str, profile: str, overrides: dict) -> None:
    cfg = resolve(algo, np=comm.size, profile=profile, overrides=overrides, tag=name)
    run_dir = out / name
    if comm.rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / "config.json", cfg.to_dict())
    comm.barrier()  # comm: the run directory exists
    Worker(cfg, run_dir, comm).run()
    print(f"RUN {name} ok rank {comm.rank}", flush=True)
