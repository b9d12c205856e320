"""Allreduce family: hyperparameter validation and the flat-parameter helpers (one process, nothing launched)."""

from __future__ import annotations

import importlib

import pytest
import torch

from bench import BenchError
from bench.algorithms import get_algorithm
from bench.algorithms.localsgd import flat_params, load_flat_
from bench.config import resolve

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
    assert resolve("easgd", np=2, profile="laptop", overrides={"rho": 15.0}).params["rho"] == 15.0  # n*alpha = 1.5


def test_flat_params_round_trip_keeps_parameter_objects():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    before = [id(p) for p in model.parameters()]
    vec = flat_params(model)
    assert vec.numel() == sum(p.numel() for p in model.parameters())
    load_flat_(model, torch.arange(vec.numel(), dtype=vec.dtype))
    assert [id(p) for p in model.parameters()] == before
    assert torch.equal(flat_params(model), torch.arange(vec.numel(), dtype=vec.dtype))
    vec2 = flat_params(model)
    vec2 += 1  # a copy: the model is unchanged
    assert torch.equal(flat_params(model), torch.arange(vec.numel(), dtype=vec.dtype))
