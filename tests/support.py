"""Shared helpers of the test modules (``from support import REPO, bench_cli, ...``): run the real CLI / horovodrun as a
user would. Fixtures live in the conftest.py of the folder that uses them; no test module imports another."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forked import run_module

REPO = Path(__file__).resolve().parent.parent


def bench_cli(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m bench ARGS`` in a process of its own (forked from this one where it runs in the repository:
    :mod:`forked`); returns the completed process (text output)."""
    full_env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0", **(env or {}))
    return run_module("bench", list(args), cwd or REPO, full_env, timeout=timeout)


def horovodrun(np: int, script: Path, *args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``horovodrun -np N --gloo python SCRIPT ARGS`` (a real multi-process job) as the suite launches its jobs:
    through ``python -m bench.launch.horovodrun``."""
    from bench.system import horovodrun_launch

    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    cmd = [*horovodrun_launch(), "-np", str(np), "-H", f"localhost:{np}", "--gloo", sys.executable, str(script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=str(REPO))


def run_algorithm(tmp_path: Path, algorithm: str, np: int, *sets: str, profile: str = "tiny", name: str | None = None,
                  env: dict | None = None, expect_ok: bool = True, study: str = "adhoc", out: Path | None = None,
                  extra: list[str] | None = None):
    """``python -m bench run ALGO --np N --profile P --set ...`` into tmp_path/name (or ``out``); returns the loaded Run."""
    from bench.results import load_run

    out = out or tmp_path / (name or f"{algorithm}-np{np}")
    args = ["run", algorithm, "--np", str(np), "--profile", profile, "--out", str(out), "--quiet", "--study", study,
            *(extra or [])]
    for s in sets:
        args += ["--set", s]
    proc = bench_cli(*args, env=env)
    if expect_ok and proc.returncode != 0:
        log = (out / "launch.log").read_text() if (out / "launch.log").exists() else ""
        pytest.fail(f"bench run {algorithm} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{log[-6000:]}")
    run = load_run(out)
    run.extra["proc"] = proc
    return run


def horovod_job(tmp_path_factory, np: int, script: Path, timeout: float = 900) -> tuple[Path, str]:
    """Run ``horovodrun -np N python SCRIPT OUT`` once (a module fixture's job); returns (OUT, stdout)."""
    out = tmp_path_factory.mktemp(script.stem)
    proc = horovodrun(np, script, str(out), timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{script.name} failed (rc {proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return out, proc.stdout


def saved_model(run_dir: Path) -> dict:
    """The evaluated model's final state (model.pt) of a run directory."""
    import torch

    return torch.load(run_dir / "model.pt")


def check_converged_run(run, steps: int, name: str) -> None:
    """A laptop-profile run of an algorithm that finished: ``steps`` steps a worker, held-out accuracy well above chance
    and not below its first evaluation, a time split that adds up on every record (compute + comm + wait = step),
    and bytes sent."""
    assert run.status == "ok"
    assert run.summary["steps_per_worker"] == steps
    assert run.summary["final_accuracy"] > 0.5, f"{name}: held-out accuracy {run.summary['final_accuracy']} (chance 0.1)"
    first = run.evals.sort_values("step")["accuracy"].iloc[0]
    assert run.summary["final_accuracy"] >= first - 0.05  # no collapse after the first evaluation
    s = run.steps
    assert ((s["compute_s"] + s["comm_s"] + s["wait_s"] - s["step_s"]).abs() < 1e-6).all()
    assert (s["bytes_sent"] > 0).any()


def union_batch_state(profile: str, sets: dict, steps: int, np: int = 2) -> dict:
    """What ``sync`` at ``np`` workers must produce (its model's state after ``steps`` steps): one process whose every
    step's batch is the union of the workers' batches, with the profile's model, data and optimizer and ``sets``."""
    import torch

    from bench.data import Shard, load_dataset
    from bench.models import build_model, make_optimizer
    from bench.resolve import resolve

    cfg = resolve("sync", np=np, profile=profile, overrides=sets)
    ds = load_dataset(cfg.train)
    model = build_model(cfg.train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(cfg.train, model.parameters())
    iters = [Shard(ds, np, k, cfg.train.batch_size, cfg.train.seed).batches(0) for k in range(np)]
    for _ in range(steps):
        xs, ys = zip(*(next(it) for it in iters))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return model.state_dict()


def max_diff(a: dict, b: dict) -> float:
    """Largest absolute difference between two state_dicts with the same keys."""
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


# -- DVC end to end in a copy of the repository (tests/notebooks/test_dvc_repro.py, tests/cluster)


def copy_repository(dst: Path) -> Path:
    """The working tree as git sees it (tracked + untracked, not ignored), without results or DVC state."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        if rel.startswith("results/") and rel.count("/") > 1 or rel == "dvc.lock" or rel.startswith("data/prepared/"):
            continue
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    return dst


def dvc(repo: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", BENCH_PROGRESS="0")
    env.pop("PYTHONPATH", None)
    env.pop("BENCH_PARAMS", None)
    return subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=timeout)


def ran(proc) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", proc.stdout)


def repro_copy(tmp_path: Path, study: str) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the repository whose params.yaml names ``study``, after its first `dvc repro` (which must pass)."""
    repo = copy_repository(tmp_path / "repo")
    assert dvc(repo, "config", "--local", "core.autostage", "false").returncode == 0
    params = repo / "params.yaml"
    params.write_text(re.sub(r"(?m)^study: laptop\b", f"study: {study}", params.read_text()))
    first = dvc(repo, "repro")
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-3000:]
    return repo, first


def noisy(rng, n, centre, sd=0.02):
    """``n`` values about ``centre``, log-normal with sd ``sd`` (synthetic repeats of a known effect)."""
    return centre * np.exp(rng.normal(0.0, sd, n))
