"""Outer optimizers over local SGD: diloco and slowmo rules on known tensors, Streaming DiLoCo's schedule, and the validation of
diloco, slowmo, sync's compression/op and ddp's comm hooks (one process, nothing launched)."""

from __future__ import annotations

import importlib

import pytest
import torch
from torch import nn

from bench import BenchError
from bench.algorithms import get_algorithm, names
from bench.algorithms.base import Context
from bench.algorithms.diloco import fragment_offsets, fragment_slices, outer_sgd_
from bench.models import make_optimizer
from bench.resolve import resolve
from bench.timing import StepTimer


@pytest.mark.parametrize("algo", ["diloco", "slowmo"])
def test_registered_with_citation_and_defaults(algo):
    cls = get_algorithm(algo)
    assert algo in names() and cls.name == algo and cls.family == "allreduce" and cls.paper
    doc = importlib.import_module(cls.__module__).__doc__
    assert "References:" in doc and "Inferred" in doc
    assert cls.averaged_evaluation is False  # the outer iterate, the same on every rank, is evaluated
    resolve(algo, np=2, profile="laptop")  # the params.yaml defaults are valid


def test_paper_defaults_reach_the_algorithms():
    d = resolve("diloco", np=2, profile="laptop").params
    assert (d.outer_lr, d.outer_momentum, d.outer_nesterov, d.streaming) == (0.7, 0.9, True, False)
    s = resolve("slowmo", np=2, profile="laptop").params
    assert (s.slow_lr, s.slow_momentum) == (1.0, 0.5)
    assert resolve("sync", np=2).params.compression == "none" and resolve("sync", np=2).params.op == "average"
    assert resolve("ddp", np=2).params.comm_hook == "allreduce"


@pytest.mark.parametrize("momentum, nesterov", [(0.9, True), (0.9, False), (0.0, False), (0.5, True)])
def test_outer_step_is_torch_sgd_on_the_outer_gradient(momentum, nesterov):
    g = torch.Generator().manual_seed(1)
    theta0 = torch.randn(7, generator=g, dtype=torch.float64)
    deltas = [torch.randn(7, generator=g, dtype=torch.float64) for _ in range(5)]
    ref = nn.Parameter(theta0.clone())
    opt = torch.optim.SGD([ref], lr=0.7, momentum=momentum, nesterov=nesterov)
    theta, buf = theta0.clone(), torch.zeros(7, dtype=torch.float64)
    for delta in deltas:
        ref.grad = delta.clone()
        opt.step()
        outer_sgd_(theta, buf, delta, 0.7, momentum, nesterov)
        assert torch.allclose(theta, ref.detach(), rtol=0, atol=1e-14)


def test_first_outer_nesterov_step_on_known_numbers():
    theta, buf = torch.tensor([1.0, 2.0], dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    outer_sgd_(theta, buf, torch.tensor([0.5, -1.0], dtype=torch.float64), 0.7, 0.9, True)
    # u = Δ = [0.5, -1]; step = Δ + 0.9 u = 1.9 Δ; θ = θ − 0.7·1.9·Δ
    assert torch.allclose(theta, torch.tensor([1.0 - 0.665, 2.0 + 1.33], dtype=torch.float64), atol=1e-15)
    outer_sgd_(theta, buf, torch.tensor([0.5, -1.0], dtype=torch.float64), 0.7, 0.9, True)
    # u = 0.9·Δ + Δ = 1.9 Δ; step = Δ + 0.9·1.9 Δ = 2.71 Δ
    assert torch.allclose(buf, torch.tensor([0.95, -1.9], dtype=torch.float64), atol=1e-15)
    assert torch.allclose(theta, torch.tensor([1.0 - 0.665 - 0.7 * 2.71 * 0.5, 2.0 + 1.33 + 0.7 * 2.71], dtype=torch.float64), atol=1e-14)


def test_fragments_and_offsets():
    slices = fragment_slices(101_770, 4)
    assert slices[0].start == 0 and slices[-1].stop == 101_770
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))
    assert max(s.stop - s.start for s in slices) - min(s.stop - s.start for s in slices) <= 1
    assert fragment_offsets(8, 4) == [0, 2, 4, 6] and fragment_offsets(8, 3) == [0, 2, 5] and fragment_offsets(5, 1) == [0]


# -- one worker (size 1) on a quadratic with known gradients: the rule and the schedule, without a job -----------
class OneRank:
    """The part of bench.comm.Comm the algorithms use, for a single process: every reduction is the identity."""

    rank, size = 0, 1

    def broadcast_state(self, model, optimizer=None, root=0):
        pass

    def allreduce_(self, tensor, name=None, average=True):
        return tensor

    def allreduce_async_(self, tensor, name=None, average=True):
        return tensor

    def poll(self, handle):
        return True

    def synchronize(self, handle):
        return handle


class Quad(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=torch.float64))

    def forward(self, x):
        return 0.5 * ((self.w - x) ** 2).sum(1, keepdim=True)


def one_worker(algo: str, steps: int, **overrides):
    cfg = resolve(algo, np=1, profile="tiny", overrides={"lr": 0.1, "optimizer": "sgd", "momentum": 0.0, **overrides})
    ctx = Context(cfg=cfg, comm=OneRank(), device=torch.device("cpu"), build_model=Quad,
                  make_optimizer=lambda ps: make_optimizer(cfg.train, ps), loss_fn=lambda out, y: out.mean(),
                  timer=StepTimer(), steps_per_epoch=steps, total_steps=steps)
    model = Quad()
    a = get_algorithm(algo)(cfg.params, ctx)
    a.setup(model, make_optimizer(cfg.train, model.parameters()))
    return a, model


def target(t: int) -> torch.Tensor:
    return torch.tensor([0.0, 1.0, -1.0, 2.0], dtype=torch.float64) + 0.1 * t


def test_diloco_one_worker_outer_step_is_torch_nesterov_sgd():
    algo, model = one_worker("diloco", 7, communication_window=3)
    outer = nn.Parameter(Quad().w.detach().clone())
    outer_opt = torch.optim.SGD([outer], lr=0.7, momentum=0.9, nesterov=True)
    x = outer.detach().clone()
    for t in range(7):
        x = x - 0.1 * (x - target(t))
        algo.step(target(t).repeat(2, 1), torch.zeros(2, dtype=torch.long))
        if (t + 1) % 3 == 0:
            outer.grad = outer.detach() - x  # Δ = θ̃ − θ (one worker)
            outer_opt.step()
            x = outer.detach().clone()
            assert torch.allclose(model.w.detach(), outer.detach(), atol=1e-14)  # the worker restarts from θ̃
        assert torch.allclose(algo.outer, outer.detach(), atol=1e-14)
        assert torch.allclose(model.w.detach(), x, atol=1e-14)
    assert torch.equal(algo.eval_theta(), algo.outer)


def test_slowmo_one_worker_known_update():
    algo, model = one_worker("slowmo", 4, communication_window=2, slow_momentum=0.5, slow_lr=1.0)
    x0 = Quad().w.detach().clone()
    u = torch.zeros(4, dtype=torch.float64)
    x = x0.clone()
    for t in range(4):
        x = x - 0.1 * (x - target(t))
        algo.step(target(t).repeat(2, 1), torch.zeros(2, dtype=torch.long))
        if (t + 1) % 2 == 0:
            u = 0.5 * u + (x0 - x) / 0.1
            x0 = x0 - 1.0 * 0.1 * u
            x = x0.clone()
        assert torch.allclose(model.w.detach(), x, atol=1e-13)
    assert torch.allclose(algo.x0, x0, atol=1e-13) and torch.allclose(algo.u, u, atol=1e-12)
    assert algo.exchanges == 2  # outer steps


def test_streaming_schedule_one_worker():
    H, P, tau, steps = 8, 4, 2, 40
    algo, _ = one_worker("diloco", steps, communication_window=H, streaming=True, stream_fragments=P, stream_overlap=tau)
    sent_bytes = []
    for t in range(steps):
        sent_bytes.append(algo.step(target(t).repeat(2, 1), torch.zeros(2, dtype=torch.long)).bytes_sent)
    algo.finalize()
    for p, o in enumerate([0, 2, 4, 6]):
        sends = [s for f, s, _ in algo.sync_log if f == p]
        assert sends == list(range(o or H, steps + 1, H)), (p, sends)
        assert all(a == min(s + tau, steps) for f, s, a in algo.sync_log if f == p)
    sizes = [s.stop - s.start for s in algo.slices]
    assert sizes == [1, 1, 1, 1]
    assert [b // 8 for b in sent_bytes] == [1 if t % 2 == 0 else 0 for t in range(1, steps + 1)]  # one float64 fragment every 2 steps
    assert algo.outer_steps == len(algo.sync_log) + 1  # + finalize's step on the whole vector


def test_ddp_evaluates_the_replicas_mean_only_with_post_local_sgd():
    cls = get_algorithm("ddp")
    for hook, averaged in (("allreduce", False), ("fp16", False), ("powersgd", False), ("post_localsgd", True)):
        cfg = resolve("ddp", np=2, overrides={"comm_hook": hook})
        assert cls(cfg.params, Context(cfg=cfg, comm=OneRank(), device=torch.device("cpu"), build_model=Quad,
                                       make_optimizer=None)).averaged_evaluation is averaged


@pytest.mark.parametrize("algo, np, overrides, fragment", [
    ("diloco", 2, {"communication_window": 0}, "communication_window must be an integer >= 1, got 0"),
    ("diloco", 2, {"outer_lr": 0.0}, "outer_lr must be > 0, got 0.0"),
    ("diloco", 2, {"outer_momentum": 1.0}, "outer_momentum must be in [0, 1), got 1.0"),
    ("diloco", 2, {"streaming": True, "stream_fragments": 9}, "stream_fragments must be an integer in [1, communication_window=8]"),
    ("diloco", 2, {"streaming": True, "stream_fragments": 0}, "stream_fragments must be an integer in [1, communication_window=8]"),
    ("diloco", 2, {"streaming": True, "stream_overlap": 8}, "stream_overlap must be an integer in [0, communication_window=8)"),
    ("diloco", 2, {"streaming": True, "stream_mixing": 1.5}, "stream_mixing must be in [0, 1], got 1.5"),
    ("diloco", 2, {"inner_optimizer": "lion"}, "lion"),
    ("slowmo", 2, {"communication_window": -1}, "communication_window must be an integer >= 1, got -1"),
    ("slowmo", 2, {"slow_momentum": 1.0}, "slow_momentum must be in [0, 1), got 1.0"),
    ("slowmo", 2, {"slow_lr": 0.0}, "slow_lr must be > 0, got 0.0"),
    ("slowmo", 2, {"lr": 0.0}, "the run's lr (γ, which the slow momentum divides by) must be > 0"),
    ("sync", 2, {"compression": "fp8"}, "fp8"),
    ("sync", 2, {"op": "sum"}, "sum"),
    ("sync", 2, {"op": "adasum"}, "op=adasum cannot run"),
    ("ddp", 2, {"comm_hook": "bf16"}, "bf16"),
    ("ddp", 2, {"powersgd_rank": 0}, "powersgd_rank must be an integer >= 1, got 0"),
    ("ddp", 2, {"powersgd_start_iter": 1}, "powersgd_start_iter must be an integer >= 2"),
    ("ddp", 2, {"post_localsgd_start_iter": -1}, "post_localsgd_start_iter must be an integer >= 0, got -1"),
    ("ddp", 2, {"post_localsgd_period": 0}, "post_localsgd_period must be an integer >= 1, got 0"),
])
def test_invalid_hyperparameters_name_value_and_range(algo, np, overrides, fragment):
    with pytest.raises(BenchError) as e:
        resolve(algo, np=np, profile="laptop", overrides=overrides)
    assert fragment in str(e.value)


def test_adasum_refusal_says_why_and_what_build_it_needs():
    with pytest.raises(BenchError) as e:
        resolve("sync", np=2, overrides={"op": "adasum", "compression": "fp16"})
    msg = str(e.value)
    assert "\n" not in msg
    assert "never Gloo" in msg and "No Adasum operation enabled" in msg
    assert "HOROVOD_WITH_MPI=1" in msg and "controller: mpi" in msg


def test_streaming_options_are_unchecked_without_streaming():
    # a study grid over streaming: false/true may set the fragment options for every run
    assert resolve("diloco", np=2, overrides={"stream_fragments": 99}).params.streaming is False


@pytest.mark.parametrize("algo, overrides", [("localsgd", {"communication_window": 2}),  # the base eval_theta
                                             ("diloco", {"communication_window": 2}),  # eval_theta: the outer model
                                             ("easgd", {"communication_window": 2})])  # eval_theta: the centre
def test_a_snapshot_is_a_copy_that_later_steps_never_change(algo, overrides):
    a, model = one_worker(algo, 6, **overrides)
    snap = a.snapshot()
    kept = snap["theta"].clone()
    for t in range(4):  # two exchanges: the model, the outer model and the centre all move
        a.step(target(t).repeat(2, 1), torch.zeros(2, dtype=torch.long))
    assert torch.equal(snap["theta"], kept)
    now = a.snapshot()["theta"]
    assert not torch.equal(now, kept) and torch.equal(now, a.eval_theta())  # what the algorithm says it evaluates
