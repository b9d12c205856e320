"""Shared helpers: run the real CLI / horovodrun as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def bench_cli(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m bench ARGS`` in a subprocess; returns the completed process (text output)."""
    full_env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0", **(env or {}))
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=str(cwd or REPO))


def horovodrun(np: int, script: Path, *args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``horovodrun -np N --gloo python SCRIPT ARGS`` (a real multi-process job)."""
    from bench.system import horovodrun_path

    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    cmd = [horovodrun_path(), "-np", str(np), "-H", f"localhost:{np}", "--gloo", sys.executable, str(script), *args]
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


@pytest.fixture
def bench():
    return bench_cli


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


def max_diff(a: dict, b: dict) -> float:
    """Largest absolute difference between two state_dicts with the same keys."""
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)
