"""Fixture run directories made by running the suite (profile tiny, a few steps), one of them failed; helpers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, bench_cli, run_algorithm

STEPS = "max_steps=40"


@pytest.fixture(scope="session")
def results_root(tmp_path_factory) -> Path:
    """results/<hardware>/<study>/runs/<algo>/<key>/ as the pipeline lays them out:
    local/fixture: sync np1, sync np2, ddp np2 (ok) and sync np2 tagged `fault` (rank 1 raises at step 3);
    lab2/fixture: sync np2 labelled with another hardware id (the hardware notebook's second machine)."""
    root = tmp_path_factory.mktemp("results")
    runs = root / "local" / "fixture" / "runs"
    run_algorithm(runs, "sync", 1, STEPS, name="sync/sync-np1")
    run_algorithm(runs, "sync", 2, STEPS, name="sync/sync-np2")
    run_algorithm(runs, "ddp", 2, STEPS, name="ddp/ddp-np2")
    failed = runs / "sync" / "sync-np2-fault"
    proc = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--tag", "fault", "--out", str(failed), "--quiet",
                     "--set", STEPS, env={"BENCH_INJECT_FAULT": "1:3:raise"})
    assert proc.returncode != 0, "the injected fault did not fail the run"
    run_algorithm(root / "lab2" / "fixture" / "runs", "sync", 2, STEPS, "hardware=lab2", name="sync/sync-np2")
    return root


def execute(notebook: str, dest: Path, **parameters) -> dict:
    """papermill ``notebooks/<notebook>`` with ``parameters``; returns the executed notebook (JSON)."""
    out = dest / "notebooks" / notebook
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "papermill", "--no-progress-bar", str(REPO / "notebooks" / notebook), str(out)]
    for k, v in parameters.items():
        cmd += ["-p", k, str(v)] if not isinstance(v, (list, dict)) else ["-y", json.dumps({k: v})]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), timeout=600)
    if proc.returncode != 0:
        raise NotebookFailed(proc.stderr[-4000:])
    return json.loads(out.read_text())


class NotebookFailed(AssertionError):
    pass


@pytest.fixture(scope="session")
def analysed(results_root) -> Path:
    """The fixture study after the analysis notebooks ran (as the DVC stages run them)."""
    study = results_root / "local" / "fixture"
    execute("speedup.ipynb", study, results_dir=study)
    execute("convergence.ipynb", study, results_dir=study, target_accuracy=0.3, after_seconds=0.2)
    execute("temporal_efficiency.ipynb", study, results_dir=study, window=0.05, stride=0.01,
            grid_a="sync", grid_b="ddp", grid_param="communication_window")
    execute("hardware.ipynb", study, results_root=results_root, study="fixture", out_dir=study)
    return study
