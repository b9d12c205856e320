"""Fixtures of the notebook tests: run directories made by running the suite (profile tiny, a few steps), one of them
failed, and the fixture study analysed; the helpers are in notebook_support.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.layout import StudyLayout
from notebook_support import execute
from support import bench_cli, run_algorithm

STEPS = "max_steps=40"


@pytest.fixture(scope="session")
def results_root(tmp_path_factory) -> Path:
    """A results root holding study `fixture` as the pipeline lays it out (results/fixture/runs/<algo>/<hardware>/):
    on hardware `local` sync np1, sync np2, ddp np2 (ok) and sync np2 tagged `fault` (rank 1 raises at step 3);
    on hardware `lab2` (a label: another machine, for the hardware notebook) sync np2."""
    root = tmp_path_factory.mktemp("results")
    layout = StudyLayout("fixture", root)
    for algo, np_, hw in (("sync", 1, "local"), ("sync", 2, "local"), ("ddp", 2, "local"), ("sync", 2, "lab2")):
        run_algorithm(root, algo, np_, STEPS, f"hardware={hw}", study="fixture", out=layout.run_dir(algo, hw, np_))
    failed = layout.run_dir("sync", "local", 2, "fault")
    proc = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--tag", "fault", "--study", "fixture", "--out",
                     str(failed), "--quiet", "--set", STEPS, env={"BENCH_INJECT_FAULT": "1:3:raise"})
    assert proc.returncode != 0, "the injected fault did not fail the run"
    return root


@pytest.fixture(scope="session")
def analysed(results_root) -> Path:
    """The fixture study's folder after the analysis notebooks ran (as the DVC stages run them)."""
    study = StudyLayout("fixture", results_root).dir
    common = {"study": "fixture", "results_root": results_root}
    execute("speedup.ipynb", study, **common)
    execute("convergence.ipynb", study, **common, target_accuracy=0.3, after_seconds=0.2)
    # the default window (1/20 of the shorter run's span): a fixed one is longer than a fast 40-step run can span
    # (sync np1's 40 steps take about 10 ms here), which left E(run, run) undefined
    execute("temporal_efficiency.ipynb", study, **common, grid_a="sync", grid_b="ddp", grid_param="communication_window")
    execute("hardware.ipynb", study, **common)
    execute("regimes.ipynb", study, **common, target_accuracy=0.3, budget_s=0.2)
    return study
