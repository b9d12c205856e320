"""Parameter-server family: the update rules on known tensors, the wire checks, bad hyperparameters."""

from __future__ import annotations

import pytest
import torch

from bench import BenchError
from bench.algorithms.adag import adag_update
from bench.algorithms.dcasgd import dcasgd_update
from bench.algorithms.dynsgd import dynsgd_update
from bench.algorithms.sasgd import SoftSyncBuffer
from bench.comm import ps
from bench.resolve import resolve


def t(*v):
    return torch.tensor(v, dtype=torch.float32)


def test_dynsgd_scales_a_commit_by_one_over_tau_plus_one():
    c = t(1.0, 1.0)
    dynsgd_update(c, t(2.0, 4.0), tau=0)
    assert torch.equal(c, t(3.0, 5.0))
    dynsgd_update(c, t(3.0, 6.0), tau=2)
    assert torch.allclose(c, t(4.0, 7.0))


def test_adag_element_wise_scaling():
    # drift since the pull: (0, 0.01, 0.02); squared / gamma: (0, 1, 4); scale 1/(x+1): (1, 1/2, 1/5)
    centre, pulled = t(1.0, 1.0, 1.0), t(1.0, 0.99, 0.98)
    adag_update(centre, t(0.5, 0.5, 0.5), pulled, gamma=1e-4)
    assert torch.allclose(centre, t(1.5, 1.25, 1.1), atol=1e-5)
    # no drift (tau = 0): the plain sum
    c = t(0.0, 2.0)
    adag_update(c, t(0.25, -1.0), t(0.0, 2.0), gamma=1e-4)
    assert torch.equal(c, t(0.25, 1.0))


def test_dcasgd_delay_compensation():
    # g~ = g + 0.04 g*g*(centre - backup) = (2 + 0.04*4*1, 3 + 0) = (2.16, 3); centre -= 0.1 g~
    centre = t(1.0, 2.0)
    dcasgd_update(centre, t(2.0, 3.0), t(0.0, 2.0), lr=0.1, lambda_dc=0.04)
    assert torch.allclose(centre, t(1.0 - 0.216, 2.0 - 0.3))
    # lambda_dc = 0 is plain asynchronous SGD
    c = t(1.0, 2.0)
    dcasgd_update(c, t(2.0, 3.0), t(0.0, 0.0), lr=0.1, lambda_dc=0.0)
    assert torch.allclose(c, t(0.8, 1.7))


def test_sasgd_softsync_collects_c_gradients_with_lr_over_tau():
    rule, c = SoftSyncBuffer(c=2, lr=0.1), t(1.0)
    assert rule(c, t(1.0), 2) is False and torch.equal(c, t(1.0))  # buffered, clock unchanged
    assert rule(c, t(3.0), 0) is True  # (0.1/2 * 1 + 0.1/1 * 3) / 2 = 0.175
    assert torch.allclose(c, t(1.0 - 0.175))
    assert rule(c, t(1.0), 1) is False  # a new group starts


def header(kind=ps.COMMIT, worker=1, clock=0, n=4, flags=0, magic=ps.MAGIC):
    return [magic, kind, worker, clock, n, flags]


@pytest.mark.parametrize("h, src, match", [
    (header(), 2, "not a worker"),
    (header(magic=7), 1, "bad magic"),
    (header(kind=9), 1, "unknown message kind"),
    (header(worker=0), 1, "claims worker 0"),
    (header(n=5), 1, "commit of 5 elements, the centre has 4"),
    (header(clock=6), 1, "clock 6, server clock is 5"),
    (header(flags=8), 1, "unknown flags"),
])
def test_server_rejects_malformed_headers(h, src, match):
    with pytest.raises(ps.PSProtocolError, match=match):
        ps.check_header(h, src, {0, 1}, numel=4, clock=5)


def test_server_accepts_valid_headers():
    ps.check_header(header(clock=5, flags=ps.F_PULL | ps.F_SNAPSHOT), 1, {0, 1}, numel=4, clock=5)
    ps.check_header(header(kind=ps.PULL, n=0), 1, {0, 1}, numel=4, clock=5)


@pytest.mark.parametrize("algo, key, value, match", [
    ("downpour", "n_fetch", 0, "n_fetch must be an integer >= 1, got 0"),
    ("downpour", "n_push", -1, "n_push must be an integer >= 1"),
    ("asgd", "n_sync", 0, "n_sync"),
    ("aeasgd", "rho", 50.0, r"alpha = lr \* rho"),
    ("aeasgd", "rho", 0.0, r"rho must be in \(0, inf\]"),
    ("eamsgd", "nesterov_momentum", 1.0, r"nesterov_momentum must be in \[0, 1\)"),
    ("dynsgd", "communication_window", 0, "communication_window"),
    ("agn", "communication_window", 0, "communication_window"),
    ("adag", "gamma", 0.0, "gamma must be in"),
    ("sasgd", "c", 0, "c must be an integer >= 1"),
    ("dcasgd", "lambda_dc", -0.1, "lambda_dc must be in"),
    ("downpour", "recv_timeout_s", 0.0, "recv_timeout_s"),
    ("dynsgd", "p2p_backend", "nccl", "needs p2p_backend gloo or auto"),
])
def test_invalid_hyperparameters_are_rejected_before_launch(algo, key, value, match):
    with pytest.raises(BenchError, match=match):
        resolve(algo, np=2, profile="tiny", overrides={key: value})


def test_every_ps_algorithm_launches_one_server_rank():
    from bench.algorithms import get_algorithm
    from bench.placement import processes

    for algo in ("downpour", "asgd", "aeasgd", "eamsgd", "dynsgd", "agn", "adag", "sasgd", "dcasgd"):
        cls = get_algorithm(algo)
        assert cls.family == "parameter-server"
        assert processes(resolve(algo, np=3, profile="tiny")) == 4


def test_warm_start_missing_or_incompatible_checkpoint(tmp_path):
    with pytest.raises(BenchError, match="not found"):
        resolve("asgd", np=2, profile="tiny", overrides={"warm_start": str(tmp_path / "nope.pt")})
    bad = tmp_path / "bad.pt"
    torch.save(torch.nn.Linear(3, 2).state_dict(), bad)
    with pytest.raises(BenchError, match="does not match model"):
        resolve("asgd", np=2, profile="tiny", overrides={"warm_start": str(bad)})
    # right keys, wrong shapes: a checkpoint of a wider MLP
    from bench.models import build_model

    wide = resolve("asgd", np=2, profile="tiny", overrides={"hidden": [64]})
    torch.save(build_model(wide.train, (1, 8, 8), 10).state_dict(), bad)
    with pytest.raises(BenchError, match=r"has shape \(64, 64\), model 'mlp' needs \(32, 64\)"):
        resolve("asgd", np=2, profile="tiny", overrides={"warm_start": str(bad)})
    good = tmp_path / "good.pt"
    torch.save(build_model(resolve("asgd", profile="tiny").train, (1, 8, 8), 10).state_dict(), good)
    assert resolve("asgd", np=2, profile="tiny", overrides={"warm_start": str(good)}).params.warm_start == str(good)
