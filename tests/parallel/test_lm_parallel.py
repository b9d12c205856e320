"""The language-model workload (profile tiny-lm: a one-block byte-level transformer on pydoc_topics) under real
horovodrun: sync is single-process Adam on the union batch, and one algorithm of each kind of communication
(ddp's buckets, model averaging, gossip, a parameter server, DiLoCo's outer step) trains it."""

from __future__ import annotations

import math

import pytest
import torch

from support import max_diff, run_algorithm, union_batch_state

STEPS = 12


def check_lm_run(run) -> None:
    """Finished, every worker's step accuracy a share of its batch's targets, and held-out next-byte figures that
    show training: accuracy above 0.05 (a fresh model: about 1/256) and cross-entropy below ln 256 (uniform)."""
    assert run.status == "ok"
    assert run.steps["accuracy"].between(0, 1).all() and run.evals["accuracy"].between(0, 1).all()
    acc, loss = run.summary["final_accuracy"], run.summary["final_loss"]
    assert math.isfinite(loss) and acc > 0.05 and loss < math.log(256) - 0.5, (acc, loss)


def test_sync_trains_the_lm_as_one_process_on_the_union_batch(tmp_path):
    run = run_algorithm(tmp_path, "sync", 2, f"max_steps={STEPS}", profile="tiny-lm")
    check_lm_run(run)
    assert run.steps.groupby("rank")["step"].max().tolist() == [STEPS, STEPS]
    assert max_diff(torch.load(run.path / "model.pt"), union_batch_state("tiny-lm", {"max_steps": STEPS}, STEPS)) < 1e-5


@pytest.mark.parametrize("algo", ["ddp", "localsgd", "sgp", "downpour", "diloco"])
def test_algorithms_train_the_lm(tmp_path, algo):
    check_lm_run(run_algorithm(tmp_path, algo, 2, profile="tiny-lm"))
