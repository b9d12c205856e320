"""A model with BatchNorm: the evaluated model carries real running statistics, whichever model matters
(rank 0's, the parameter server's centre, the average of gossip or local-SGD replicas)."""

from __future__ import annotations

import pytest
import torch

from bench.data import load_dataset
from bench.models import build_model
from bench.resolve import resolve
from bench.worker import evaluate
from support import run_algorithm

SETS = ("model=cnn_bn", "max_steps=30", "eval_every=10", "lr=0.1")


@pytest.mark.parametrize("algo", ["downpour", "sgp", "localsgd", "sync"])
def test_evaluated_model_has_the_running_statistics(tmp_path, algo):
    run = run_algorithm(tmp_path, algo, 2, *SETS)
    assert run.status == "ok"
    state = torch.load(run.path / "model.pt")
    means = [v for k, v in state.items() if k.endswith("running_mean")]
    variances = [v for k, v in state.items() if k.endswith("running_var")]
    counts = [int(v) for k, v in state.items() if k.endswith("num_batches_tracked")]
    assert len(means) == 2 and all(c > 0 for c in counts), counts
    # not the freshly built model's buffers (mean 0, variance 1): the workers' statistics reached the evaluation
    assert all(m.abs().max() > 1e-3 for m in means) and all((v - 1).abs().max() > 1e-3 for v in variances)
    # the recorded held-out accuracy is that of this model with these buffers, and the buffers matter
    cfg = resolve(algo, np=2, profile="tiny", overrides=dict(s.split("=") for s in SETS) | {"lr": 0.1, "max_steps": 30,
                                                                                           "eval_every": 10})
    ds = load_dataset(cfg.train)
    net = build_model(cfg.train, ds.input_shape, ds.num_classes)
    net.load_state_dict(state)
    _, acc = evaluate(net, ds.x_test, ds.y_test, "cpu")
    assert acc == pytest.approx(run.summary["final_accuracy"], abs=1e-9)
    fresh = build_model(cfg.train, ds.input_shape, ds.num_classes).state_dict()
    net.load_state_dict({k: (fresh[k] if ("running" in k or "num_batches" in k) else v) for k, v in state.items()})
    _, acc_default_buffers = evaluate(net, ds.x_test, ds.y_test, "cpu")
    assert acc != acc_default_buffers
