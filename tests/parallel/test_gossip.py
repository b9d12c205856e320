"""Decentralised family (sgp, adpsgd, fast) under real horovodrun.

One np=4 job (tests/parallel/scripts/gossip_check.py) drives the algorithms step by step on real
ranks and records push-sum mass, consensus, pairwise averaging and FAST's restart; np=2 CLI runs
check convergence on the `laptop` profile and that SGP on two nodes is exactly synchronous SGD.
"""

from __future__ import annotations

import json

import pytest
import torch

from bench import BenchError
from bench.resolve import resolve
from conftest import REPO, horovodrun, run_algorithm


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    out = tmp_path_factory.mktemp("gossip") / "checks.json"
    proc = horovodrun(4, REPO / "tests/parallel/scripts/gossip_check.py", str(out), timeout=400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("key", ["sgp", "sgp_overlap"])
def test_push_sum_conserves_mass_every_step(checks, key):
    c = checks[key]
    assert len(c["w_err"]) == 8
    assert max(c["w_err"]) < 1e-5, "Σ w_i must stay n (in-flight shares counted with overlap)"
    # Σ x_i = Σ x_0 − η Σ_steps Σ_i g_i, every step; the updates themselves are far larger than the error
    assert max(c["x_err"]) < 1e-5
    assert c["update_norm"] > 1e-2
    # after finalize (overlap: in-flight mass delivered) the nodes hold all the mass
    assert c["final_w"] == pytest.approx(4.0, abs=1e-5)
    assert c["final_x_err"] < 1e-5


@pytest.mark.parametrize("key", ["sgp_consensus", "sgp_consensus_overlap"])
def test_push_sum_with_zero_lr_converges_to_the_initial_average(checks, key):
    c = checks[key]
    assert c["start"] > 1.0  # rank-specific starting points, far apart
    assert c["end"] < 1e-5  # every z_i = x_i / w_i at the average of the starting x_i


def test_adpsgd_pairwise_averaging_is_atomic_and_conserves_the_sum(checks):
    c = checks["adpsgd"]
    assert c["pairs"] == [[0, 1], [2, 3]]  # round 0 of the rotation: active even ranks, passive odd ones
    assert c["pair_identical"], "both partners must hold the bit-identical average"
    assert c["pair_avg_err"] < 1e-6  # x_i = x_j = (x_i + x_j)/2 with lr = 0
    assert c["sum_err"] < 1e-5  # pairwise averaging is doubly stochastic
    # round 1 pairs (0,3) and (2,1): after two rounds all four hold the global average
    assert c["start_spread"] > 1.0 and c["end_spread"] < 1e-5


def test_fast_sync_restarts_every_replica_from_the_best_worker(checks):
    c = checks["fast"]
    assert c["neighbours"] == [[1, 2], [0, 3], [0, 3], [1, 2]]  # 2 x 2 torus
    assert c["winner"] == c["best"] == min(range(4), key=lambda r: c["losses"][r])
    assert c["pre_spread"] > 1e-3  # replicas had drifted apart before the sync
    assert c["post_err"] == 0.0  # all equal the winner's weights exactly
    assert c["momentum_spread"] == 0.0  # and its optimizer state


def test_fast_applies_own_gradient_and_neighbours_stale_gradients(checks):
    # ring of 4, plain SGD: θ_i ← θ_i − η g_i^t − η Σ_{j in N(i)} g_j^{t-1}, checked on every rank and step
    c = checks["fast_rule"]
    assert c["moved"] > 1e-3
    assert c["max_err"] < 1e-6


STEPS = ("max_steps=6", "lr=0.1", "eval_every=0", "warmup_steps=0", "epochs=1")


def test_sgp_on_two_nodes_is_synchronous_sgd(tmp_path):
    # n=2, one peer, p=1/2: x ← (x_0 − η g_0 + x_1 − η g_1)/2 = x − η mean(g), i.e. `sync`
    sgp = run_algorithm(tmp_path, "sgp", 2, *STEPS)
    sync = run_algorithm(tmp_path, "sync", 2, *STEPS)
    a, b = torch.load(sgp.path / "model.pt"), torch.load(sync.path / "model.pt")
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5
    assert (sgp.steps["bytes_sent"] > 0).all()


@pytest.mark.parametrize("algo,sets", [("sgp", ("overlap=true",)), ("adpsgd", ()), ("fast", ("sync_epochs=1.0",))])
def test_converges_on_laptop_profile(tmp_path, algo, sets):
    run = run_algorithm(tmp_path, algo, 2, *sets, profile="laptop")
    assert run.status == "ok"
    evals = run.evals.sort_values("step")
    assert evals["accuracy"].iloc[-1] > 0.8, f"{algo}: final held-out accuracy {evals['accuracy'].iloc[-1]:.3f}"
    assert evals["accuracy"].iloc[-1] > evals["accuracy"].iloc[0]
    assert run.summary["final_accuracy"] == pytest.approx(evals["accuracy"].iloc[-1])
    assert sorted(run.steps["rank"].unique()) == [0, 1]
    assert (run.steps["bytes_sent"] > 0).all()
    if algo == "fast":
        assert run.summary["fast_syncs"] == 2  # 2 epochs, one sync at the end of each


def test_invalid_hyperparameters_are_rejected_before_launch():
    with pytest.raises(BenchError, match=r"peers_per_step must be in \[1, 2\] for np=4, got 3"):
        resolve("sgp", np=4, profile="tiny", overrides={"peers_per_step": 3})
    with pytest.raises(BenchError, match="sync_epochs must be > 0, got 0"):
        resolve("fast", np=2, profile="tiny", overrides={"sync_epochs": 0})
    with pytest.raises(BenchError, match="valid choices: ring, torus"):
        resolve("fast", np=2, profile="tiny", overrides={"topology": "star"})
