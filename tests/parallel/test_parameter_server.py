"""Parameter-server family under real horovodrun: exactness, staleness accounting, convergence, faults."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from bench.algorithms.adag import adag_update
from bench.algorithms.dcasgd import dcasgd_update
from bench.resolve import resolve
from bench.data import Shard, load_dataset
from bench.models import build_model, make_optimizer
from support import horovodrun, run_algorithm

SCRIPTS = Path(__file__).parent / "scripts"
PS_ALGOS = ("downpour", "asgd", "aeasgd", "eamsgd", "dynsgd", "agn", "adag", "sasgd", "dcasgd")


def sequential_sgd(steps: int, sets: dict) -> dict:
    cfg = resolve("downpour", np=1, profile="tiny", overrides=sets)
    ds = load_dataset(cfg.train)
    model = build_model(cfg.train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(cfg.train, model.parameters())
    batches = Shard(ds, 1, 0, cfg.train.batch_size, cfg.train.seed).batches(0)
    for _ in range(steps):
        x, y = next(batches)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model.state_dict()


def test_downpour_one_worker_equals_sequential_sgd(tmp_path):
    steps, sets = 12, {"max_steps": 12, "lr": 0.1, "eval_every": 0, "warmup_steps": 0, "n_fetch": 1, "n_push": 1}
    run = run_algorithm(tmp_path, "downpour", 1, *(f"{k}={v}" for k, v in sets.items()))
    assert run.status == "ok" and run.summary["processes"] == 2  # one worker + the server rank
    assert run.summary["ps_commits"] == steps and run.summary["ps_staleness_max"] == 0
    assert run.summary["ps_commits_served"] == [steps] and run.summary["ps_served_spread_all_active"] == 0.0
    assert run.steps["staleness"].tolist() == [0.0] * steps
    centre, expected = torch.load(run.path / "model.pt"), sequential_sgd(steps, sets)
    init = build_model(resolve("downpour", profile="tiny").train, (1, 8, 8), 10).state_dict()
    assert max((centre[k] - init[k]).abs().max().item() for k in init) > 1e-2  # training moved it
    for k in expected:  # theta~ + (theta' - theta) instead of theta': equal to float rounding
        assert (centre[k] - expected[k]).abs().max().item() < 1e-5, k
    # asgd's warm_start: every rank starts from that checkpoint (lr 0: the centre stays exactly there)
    warm = run_algorithm(tmp_path, "asgd", 2, f"warm_start={run.path / 'model.pt'}", "lr=0.0", "max_steps=2",
                         "eval_every=0", "warmup_steps=0")
    assert warm.status == "ok" and warm.summary["ps_commits"] == 4
    assert all(torch.equal(torch.load(warm.path / "model.pt")[k], centre[k]) for k in centre)


def test_staleness_schedule_server_rules_and_rejections(tmp_path):
    proc = horovodrun(3, SCRIPTS / "ps_schedule.py", str(tmp_path), timeout=300)
    server_lines = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[2]"))
    assert proc.returncode == 0, server_lines[-4000:] + "\n" + proc.stdout[-2000:] + proc.stderr[-2000:]
    w0, w1, server = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3))
    d = [torch.arange(1, 5, dtype=torch.float32) * 0.1 * k for k in range(6)]
    c0 = torch.linspace(-1, 1, 4)
    # commits arrive W0 d1 (tau 0), W0 d2 (tau 1), W1 d3 (tau 2), W1 d4 (tau 3), W1 d5 (tau 0)
    for rule in ("add", "dynsgd", "adag", "dcasgd"):
        assert w0[rule]["taus"] == [0, 1] and w1[rule]["taus"] == [2, 3, 0], rule
        assert server[rule]["taus"] == [0, 1, 2, 3, 0] and server[rule]["clock"] == 5, rule
    got = {r: torch.tensor(server[r]["centre"]) for r in ("add", "dynsgd", "adag", "dcasgd")}
    assert torch.allclose(got["add"], c0 + d[1] + d[2] + d[3] + d[4] + d[5], atol=1e-6)
    assert torch.allclose(got["dynsgd"], c0 + d[1] + d[2] / 2 + d[3] / 3 + d[4] / 4 + d[5], atol=1e-6)
    # adag / dcasgd: the pulled copies are c0 for the first four commits, then the centre after d4
    for rule, apply in (("adag", lambda c, g, p: adag_update(c, g, p, 0.5)),
                        ("dcasgd", lambda c, g, p: dcasgd_update(c, g, p, 0.1, 0.04))):
        c = c0.clone()
        for k in (1, 2, 3, 4):
            apply(c, d[k], c0)
        pulled = c.clone()
        apply(c, d[5], pulled)
        assert torch.allclose(got[rule], c, atol=1e-6), rule
        assert not torch.allclose(got[rule], got["add"], atol=1e-3)  # the rule did act
    assert server["rejected"] == "rank 1: commit of 5 elements, the centre has 4"
    assert "no message within 3 s; workers not done: rank 1 " in server["timeout"]


def test_saturated_server_serves_four_equal_workers_evenly(tmp_path):
    """Four workers that only commit (no compute) against a server slowed to 4 ms per commit: every
    worker always has a commit waiting, so an unfair server (e.g. one that prefers low ranks) would
    serve some workers far more often than others before the first one finishes."""
    proc = horovodrun(5, SCRIPTS / "ps_fairness.py", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rounds = json.loads((tmp_path / "fairness.json").read_text())
    assert [(r["numel"], r["mode"]) for r in rounds] == [(1000, "commit"), (1000, "commit+pull")]
    for r in rounds:
        n = r["commits"]
        assert r["total"] == [n] * 4, r
        assert r["centre_sum"] == pytest.approx(4 * n * 1000 * 1e-3, rel=1e-4), r  # every commit applied once
        served = r["served"]
        assert min(served) >= n // 2, r  # the all-active window covers most of the run
        assert r["spread"] == (max(served) - min(served)) / max(served) and r["spread"] <= 0.2, r


@pytest.mark.parametrize("algo", PS_ALGOS)
def test_converges_on_laptop_with_two_workers(tmp_path, algo):
    run = run_algorithm(tmp_path, algo, 2, "epochs=1", "eval_every=0", profile="laptop")
    s = run.summary
    assert run.status == "ok" and s["processes"] == 3
    assert s["final_accuracy"] > 0.8, s["final_accuracy"]  # chance is 0.1
    commits = run.steps["staleness"].notna().sum()
    assert commits > 0 and s["ps_commits"] >= commits  # flushes at the end may add a commit per worker
    assert sum(s["ps_staleness_hist"]) == s["ps_commits"]
    assert set(run.steps["rank"]) == {0, 1}
    assert (run.path / "model.pt").exists()


def test_killed_worker_fails_the_run_without_hanging(tmp_path):
    t0 = time.time()
    run = run_algorithm(tmp_path, "downpour", 2, "max_steps=400", "eval_every=0", "timeout_s=240", "recv_timeout_s=30",
                        env={"BENCH_INJECT_FAULT": "1:5:kill"}, expect_ok=False)
    assert run.extra["proc"].returncode != 0
    assert run.status == "failed"
    assert run.summary["reason"].startswith("rank 1: killed by signal 9"), run.summary["reason"]
    assert run.summary["failed_rank"] == 1
    assert time.time() - t0 < 200, "the job should end well before its timeout"
    assert (run.steps["rank"] == 0).sum() >= 1
