"""Allreduce family: hyperparameter validation, and bench.vectors (one process, nothing launched)."""

from __future__ import annotations

import importlib

import pytest
import torch

from bench import BenchError
from bench.algorithms import get_algorithm
from bench import vectors
from bench.resolve import resolve

FAMILY = ("delayed", "layerwise", "localsgd", "lasgd", "easgd")


@pytest.mark.parametrize("algo", FAMILY)
def test_registered_with_citation_and_defaults(algo):
    cls = get_algorithm(algo)
    assert cls.name == algo and cls.family == "allreduce" and cls.paper
    assert "References:" in importlib.import_module(cls.__module__).__doc__
    resolve(algo, np=2, profile="laptop")  # the params.yaml defaults are valid


@pytest.mark.parametrize("algo, np, overrides, fragment", [
    ("delayed", 2, {"delay": -1}, "delay must be an integer >= 0, got -1"),
    ("localsgd", 2, {"communication_window": 0}, "communication_window must be an integer >= 1, got 0"),
    ("lasgd", 2, {"communication_window": -3}, "communication_window must be an integer >= 1, got -3"),
    ("easgd", 2, {"communication_window": 0}, "communication_window must be an integer >= 1"),
    ("easgd", 2, {"rho": 0.0}, "rho must be > 0, got 0.0"),
    ("easgd", 2, {"rho": 30.0}, "alpha = lr*rho = 0.05*30.0 = 1.5 must be in (0, 1); choose rho < 20"),
    ("easgd", 3, {"rho": 15.0}, "np*alpha = 3*0.75 = 2.25 must be < 2"),
    ("delayed", 2, {"delay": 1.5}, "expected an integer"),
])
def test_invalid_hyperparameters_name_value_and_range(algo, np, overrides, fragment):
    with pytest.raises(BenchError) as e:
        resolve(algo, np=np, profile="laptop", overrides=overrides)
    assert fragment in str(e.value)


def test_easgd_accepts_the_stable_range():
    assert resolve("easgd", np=2, profile="laptop", overrides={"rho": 15.0}).params.rho == 15.0  # n*alpha = 1.5


def test_flat_round_trip_keeps_parameter_objects():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    before = [id(p) for p in model.parameters()]
    vec = vectors.flat(model.parameters())
    assert vec.numel() == sum(p.numel() for p in model.parameters())
    vectors.assign_(model.parameters(), torch.arange(vec.numel(), dtype=vec.dtype))
    assert [id(p) for p in model.parameters()] == before
    assert torch.equal(vectors.flat(model.parameters()), torch.arange(vec.numel(), dtype=vec.dtype))
    vec2 = vectors.flat(model.parameters())
    vec2 += 1  # a copy: the model is unchanged
    assert torch.equal(vectors.flat(model.parameters()), torch.arange(vec.numel(), dtype=vec.dtype))
    with pytest.raises(ValueError, match="vector of 3 elements for tensors of 26"):
        vectors.assign_(model.parameters(), torch.zeros(3))


def test_snapshot_and_eval_net_carry_batchnorm_buffers():
    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))

    model = build()
    model(torch.randn(16, 3) * 5 + 2)  # training-mode forward: running statistics move
    snap = vectors.snapshot(model)
    model(torch.randn(16, 3))  # the snapshot is a copy: later steps do not change it
    net = vectors.EvalNet(build).load(snap["theta"], snap["buffers"])
    assert net is not model
    bn_snap = dict(zip(["running_mean", "running_var", "num_batches_tracked"], snap["buffers"]))
    assert torch.equal(net[1].running_mean, bn_snap["running_mean"]) and not torch.equal(net[1].running_mean, torch.zeros(4))
    assert int(net[1].num_batches_tracked) == 1
    parts = vectors.split_like(vectors.flat(snap["buffers"]).float(), snap["buffers"])
    assert [p.dtype for p in parts] == [b.dtype for b in snap["buffers"]]
    assert all(torch.equal(a, b) for a, b in zip(parts, snap["buffers"]))
