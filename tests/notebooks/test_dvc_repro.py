"""End to end: `dvc repro` of the tiny `smoke` study in a temporary copy of the repository."""

from __future__ import annotations

import json
import time

import pytest

from conftest import dvc, ran, repro_copy


@pytest.mark.timeout(2400)
def test_dvc_repro_smoke_study_then_noop_then_one_algorithm(tmp_path):
    repo, first = repro_copy(tmp_path, "smoke")
    params = repo / "params.yaml"
    stages = ran(first)
    assert {"prepare", "plan", "run@sync", "run@ddp", "speedup", "convergence", "temporal_efficiency", "hardware",
            "report"} <= set(stages)
    study = repo / "results" / "smoke"
    assert sorted(p.name for p in (study / "runs").glob("*/local/*") if p.is_dir()) == ["ddp-np2", "sync-np1", "sync-np2"]
    speed = json.loads((study / "metrics" / "speedup.json").read_text())
    assert speed["ok"] == 3 and speed["failed"] == 0
    assert json.loads((study / "plan" / "localsgd" / "plan.json").read_text())["status"] == "not in study"
    # what the plan wrote is what ran: the run's config.json is the planned file, byte for byte
    planned = study / "plan" / "sync" / "local" / "sync-np2.json"
    assert planned.read_bytes() == (study / "runs" / "sync" / "local" / "sync-np2" / "config.json").read_bytes()
    report = (study / "report.html").read_text()
    assert "3 ok" in report and report.count("<img") >= 10
    shown = dvc(repo, "metrics", "show", "--json")
    assert shown.returncode == 0 and "sync-np2@local" in shown.stdout

    t0 = time.time()
    second = dvc(repo, "repro")
    noop_s = time.time() - t0
    assert second.returncode == 0 and ran(second) == [], second.stdout[-3000:]
    print(f"no-op dvc repro: {noop_s:.1f} s")

    # one algorithm's configuration changes (sync: np 1 dropped): only run@sync and the analysis run again
    text = params.read_text()
    assert text.count("np_by_algorithm: {sync: [1, 2]}") >= 2  # laptop's, then smoke's
    head, _, tail = text.partition("  smoke:")
    params.write_text(head + "  smoke:" + tail.replace("np_by_algorithm: {sync: [1, 2]}", "np_by_algorithm: {sync: [2]}", 1))
    third = dvc(repo, "repro")
    assert third.returncode == 0, third.stdout[-5000:]
    assert "run@sync" in ran(third) and "run@ddp" not in ran(third) and "report" in ran(third)
    assert sorted(p.name for p in (study / "runs").glob("*/local/*") if p.is_dir()) == ["ddp-np2", "sync-np2"]
