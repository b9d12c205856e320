"""Decentralised family (sgp, adpsgd, fast) under real horovodrun.

One np=4 job (tests/parallel/scripts/gossip_check.py) drives the algorithms step by step on real
ranks and records push-sum mass, consensus, pairwise averaging and FAST's restart; np=2 CLI runs
check convergence on the `laptop` profile and that SGP on two nodes is exactly synchronous SGD.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.resolve import resolve
from support import REPO, horovodrun, run_algorithm


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


def test_adpsgd_pairwise_averaging_is_atomic_and_asynchronous(checks):
    c = checks["adpsgd"]
    # an active stepping alone is served by a passive that is not stepping (its service thread): no pairwise barrier
    for s in c["single"]:
        assert s["partner"] in (1, 3), s  # active even ranks average with passive odd ones
        assert s["identical"], f"both partners must hold the bit-identical average: {s}"
        assert s["avg_err"] < 1e-6, s  # x_i = x_j = (x_i + x_j)/2 with lr = 0
        assert s["others_unchanged"], s
    # everyone stepping concurrently with lr = 0: pairwise averaging conserves Σ x_i and reaches consensus
    assert c["start_spread"] > 1.0
    assert c["sum_err"] < 1e-4
    assert c["end_spread"] < 1e-4
    # every averaging counted on both sides: each active initiated one per step, the passives served them all
    assert c["initiated"][0] == c["initiated"][2] == c["steps"] + 1
    assert c["initiated"][1] is None and c["initiated"][3] is None
    assert c["served"][1] + c["served"][3] == c["initiated"][0] + c["initiated"][2]
    assert min(c["served"][1], c["served"][3]) > 0  # random partners: both passives are used
    assert not any(c["thread_alive"]), "service threads must exit after every active's DONE"


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
    if algo == "adpsgd":  # the active initiates an averaging every step; the passive's service thread sends its model
        assert (run.steps[run.steps["rank"] == 0]["bytes_sent"] > 0).all()
        assert run.steps[run.steps["rank"] == 1]["bytes_sent"].sum() > 0
    else:
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


def rank0_rate(run) -> float:
    """Rank 0's steps per second over its timed window (warm-up excluded), from its per-step records: the inverse
    of the median time between consecutive step ends (the median: 4 processes share 2 cores, and a rare
    descheduling of rank 0 would otherwise dominate a window of ~50 short steps)."""
    s = run.steps[(run.steps["rank"] == 0) & ~run.steps["warmup"].astype(bool)].sort_values("step")
    return 1.0 / float(s["t"].diff().dropna().median())


# a wider MLP than the profile's, so a step's compute (what the straggler multiplies) dominates its overhead
STRAGGLER = ("epochs=2", "eval_every=0", "warmup_steps=5", "hidden=[1024,1024]")


def test_adpsgd_active_does_not_wait_for_a_straggler(tmp_path):
    # rank 3 (passive) computes 3x slower; with the old per-round pairing, rank 0 met it every other round and
    # waited for its compute (a chain of pairwise barriers). Now rank 0 only waits for rank 3's service thread.
    # interleaved pairs (the machine is shared): the ratio of the median rates over the repeats
    base_rates, slow_rates = [], []
    for i in range(2):
        base = run_algorithm(tmp_path, "adpsgd", 4, *STRAGGLER, name=f"base{i}", profile="laptop")
        slow = run_algorithm(tmp_path, "adpsgd", 4, *STRAGGLER, "slow_ranks=[3]", "slow_factor=3", name=f"slow{i}",
                             profile="laptop")
        assert base.status == slow.status == "ok"
        assert slow.steps[slow.steps["rank"] == 3]["injected_s"].sum() > 0  # the straggler really slept
        base_rates.append(rank0_rate(base))
        slow_rates.append(rank0_rate(slow))
    ratio = float(np.median(slow_rates) / np.median(base_rates))
    # the bar from the mechanism: waiting for a 3x straggler every other round steps at 2 / (1 + 3) = 0.5 of the rate
    # at most; not waiting, at about 1. 0.8 sat inside the noise: 0.77 in a fresh-clone `make test` (2026-11-29),
    # its other pytest process loading the same 2 cores. 0.65 keeps the two mechanisms apart with a margin each side.
    assert ratio >= 0.65, f"rank 0 steps at {ratio:.2f} of its rate without the straggler (waiting: 0.5 or less)"
    # every averaging counted, on both sides
    s = slow.summary
    assert s["adpsgd_initiated_rank0"] == s["adpsgd_initiated_rank2"] == len(slow.steps[slow.steps["rank"] == 0])
    assert s["adpsgd_served_rank1"] + s["adpsgd_served_rank3"] == s["adpsgd_initiated_rank0"] + s["adpsgd_initiated_rank2"]
