"""sync and ddp under real horovodrun (np=2), against single-process SGD on the union batch."""

from __future__ import annotations

import time

import pytest
import torch

from bench.resolve import resolve
from bench.models import build_model
from support import run_algorithm, union_batch_state

STEPS = 6
OVERRIDES = {"max_steps": STEPS, "lr": 0.1, "eval_every": 0, "warmup_steps": 0, "epochs": 1}
SETS = tuple(f"{k}={v}" for k, v in OVERRIDES.items())


def assert_state_close(a: dict, b: dict, atol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    for k in a:
        diff = (a[k] - b[k]).abs().max().item()
        assert diff <= atol, f"{k}: max abs difference {diff:.3g} > {atol}"


def test_sync_equals_single_process_union_batch(tmp_path):
    run = run_algorithm(tmp_path, "sync", 2, *SETS)
    assert run.status == "ok"
    assert sorted(run.steps["rank"].unique()) == [0, 1]
    assert run.steps.groupby("rank")["step"].max().tolist() == [STEPS, STEPS]
    trained = torch.load(run.path / "model.pt")
    expected = union_batch_state("tiny", OVERRIDES, STEPS)
    # the check is meaningful: training moved the parameters well beyond the tolerance
    init = build_model(resolve("sync", profile="tiny").train, (1, 8, 8), 10).state_dict()
    assert max((trained[k] - init[k]).abs().max().item() for k in init) > 1e-3
    assert_state_close(trained, expected)


def test_ddp_matches_sync(tmp_path):
    sync = run_algorithm(tmp_path, "sync", 2, *SETS)
    ddp = run_algorithm(tmp_path, "ddp", 2, *SETS)
    assert ddp.status == "ok"
    assert_state_close(torch.load(ddp.path / "model.pt"), torch.load(sync.path / "model.pt"), atol=1e-5)
    # both saw the same batches: identical first-step losses on each rank
    a = sync.steps.sort_values(["rank", "step"])["loss"].to_numpy()
    b = ddp.steps.sort_values(["rank", "step"])["loss"].to_numpy()
    assert abs(a[0] - b[0]) < 1e-6
    # ddp's job started torch.distributed alone: no rank loaded Horovod (no background thread, no cycles); sync's did
    assert ddp.system["runtime"]["name"] == "torch" and len(ddp.system["runtime"]["by_rank"]) == 2
    for r in ddp.system["runtime"]["by_rank"]:
        assert r["torch_distributed"] == "gloo"
        assert not r["horovod_loaded"] and not r["horovod_initialized"] and r["horovod_library_mapped"] is False
    assert "horovod" not in {label for rank in ddp.summary["cpu_threads"] for label in rank}
    assert sync.system["runtime"]["name"] == "horovod"
    assert all(r["horovod_initialized"] and r["horovod_library_mapped"] for r in sync.system["runtime"]["by_rank"])


def test_ddp_with_adam_matches_sync_with_adam(tmp_path):
    """Adam's first update is the same whatever starts the job: broadcasting an optimizer that has not stepped must
    not step it (Horovod fills an empty state with a zero-gradient step, which advanced Adam's step count in ddp and
    every method that broadcasts its optimizer, but not in sync's DistributedOptimizer: a 0.04 difference here)."""
    sets = (*SETS, "optimizer=adam", "lr=0.01")
    sync = run_algorithm(tmp_path, "sync", 2, *sets)
    ddp = run_algorithm(tmp_path, "ddp", 2, *sets)
    assert sync.status == ddp.status == "ok"
    assert_state_close(torch.load(ddp.path / "model.pt"), torch.load(sync.path / "model.pt"), atol=1e-5)


@pytest.mark.parametrize("algorithm", ["sync", "ddp"])  # Horovod's runtime, and torch.distributed's alone
def test_killed_worker_fails_the_run_without_hanging(tmp_path, algorithm):
    t0 = time.time()
    run = run_algorithm(tmp_path, algorithm, 2, "max_steps=40", "eval_every=0", "timeout_s=240",
                        env={"BENCH_INJECT_FAULT": "1:5:kill"}, expect_ok=False)
    assert run.extra["proc"].returncode != 0
    assert run.status == "failed"
    assert run.summary["reason"]
    assert time.time() - t0 < 200, "the job should end well before its timeout"
    # what rank 0 wrote before the failure is kept
    assert (run.steps["rank"] == 0).sum() >= 4


@pytest.mark.parametrize("algorithm", ["sync", "ddp"])
def test_raising_worker_names_rank_and_reason(tmp_path, algorithm):
    run = run_algorithm(tmp_path, algorithm, 2, "max_steps=40", "eval_every=0", "timeout_s=240",
                        env={"BENCH_INJECT_FAULT": "1:3:raise"}, expect_ok=False)
    assert run.status == "failed"
    assert "rank 1" in run.summary["reason"] and "injected fault" in run.summary["reason"]
    # the failing rank's records of its three steps reached the file (buffered records are flushed on failure)
    assert sorted(run.steps.loc[run.steps["rank"] == 1, "step"]) == [1, 2, 3]


def test_hand_launched_job_writes_the_same_run_directory(tmp_path):
    """`bench run --prepare-only` + `horovodrun -np 2 python -m bench.worker --config ...`, as on a cluster."""
    import subprocess

    from bench.results import load_run
    from support import REPO, bench_cli

    out = tmp_path / "hand"
    proc = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--out", str(out), "--prepare-only",
                     "--set", "max_steps=8", "--set", "eval_every=4")
    assert proc.returncode == 0, proc.stderr
    cmd = proc.stdout.split()
    assert "-np" in cmd and cmd[cmd.index("-np") + 1] == "2" and cmd[-2:] == ["--config", str(out / "config.json")]
    assert not (out / "summary.json").exists()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    run = load_run(out)
    assert run.status == "ok" and run.steps.groupby("rank")["step"].max().tolist() == [8, 8]
    assert run.evals["step"].tolist() == [4, 8] and 0.0 <= run.summary["final_accuracy"] <= 1.0
    assert run.system["hosts_by_rank"] and run.system["horovod_build"]["available"]["PyTorch"]
    # launching again into the finished run is refused and loses nothing
    before = (out / "summary.json").read_text()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode != 0 and "already holds results" in again.stdout + again.stderr
    assert (out / "summary.json").read_text() == before
