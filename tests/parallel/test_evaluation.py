"""Evaluation is off the critical path: a slow held-out evaluation inflates no rank's step and synchronises nothing."""

from __future__ import annotations

import pytest

from support import run_algorithm

DELAY = 0.3  # seconds each evaluation takes (BENCH_EVAL_DELAY_S, a test aid of bench.worker)


@pytest.mark.parametrize("algo", ["sync", "localsgd", "adpsgd"])
def test_slow_evaluation_costs_no_step_time(tmp_path, algo):
    run = run_algorithm(tmp_path, algo, 2, "max_steps=24", "eval_every=4", "warmup_steps=0",
                        env={"BENCH_EVAL_DELAY_S": str(DELAY)})
    assert run.status == "ok"
    evals = run.evals.sort_values("step")
    assert evals["step"].tolist() == [4, 8, 12, 16, 20, 24]  # five snapshots during training and the final model
    # before: rank 0 evaluated between its steps (and local SGD / AD-PSGD averaged the replicas for it), so every
    # rank's next step absorbed the evaluation; now no step comes close to one evaluation's time
    steps = run.steps
    assert steps["step_s"].max() < DELAY / 2, steps.sort_values("step_s").tail(3).to_string()
    # the evaluations happened after training, and summary.json says how long they took
    assert run.summary["eval_s"] >= 6 * DELAY * 0.9
    assert run.summary["train_s"] < run.summary["wall_s"] - 6 * DELAY * 0.9
    assert evals["t"].is_monotonic_increasing and evals["t"].iloc[-2] <= run.summary["train_s"] + 0.5
