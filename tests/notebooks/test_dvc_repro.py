"""End to end: `dvc repro` of the tiny `smoke` study (3 repeats) in a temporary copy of the repository."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from support import dvc, ran, repro_copy


def names(study) -> list[str]:
    return sorted(p.name for p in (study / "runs").glob("*/local/*") if p.is_dir())


@pytest.mark.timeout(2400)
def test_dvc_repro_smoke_study_then_noop_then_one_algorithm(tmp_path):
    repo, first = repro_copy(tmp_path, "smoke")
    stages = ran(first)
    assert {"prepare", "plan", "calibrate", "run@sync", "run@ddp", "speedup", "convergence", "temporal_efficiency",
            "hardware", "regimes", "report"} <= set(stages)
    study = repo / "results" / "smoke"
    assert names(study) == sorted(f"{a}-r{k}" for a in ("ddp-np2", "sync-np1", "sync-np2") for k in range(3))
    speed = json.loads((study / "metrics" / "speedup.json").read_text())
    assert speed["ok"] == 9 and speed["failed"] == 0
    assert json.loads((study / "plan" / "localsgd" / "plan.json").read_text())["status"] == "not in study"
    # what the plan wrote is what ran: the run's config.json is the planned file, byte for byte
    planned = study / "plan" / "sync" / "local" / "sync-np2-r1.json"
    assert planned.read_bytes() == (study / "runs" / "sync" / "local" / "sync-np2-r1" / "config.json").read_bytes()
    # repeat-major: the plan (and the stage) runs every point's repeat 0 before any repeat 1
    order = [e["name"] for e in json.loads((study / "plan" / "sync" / "plan.json").read_text())["runs"]]
    assert order == ["sync-np1-r0", "sync-np2-r0", "sync-np1-r1", "sync-np2-r1", "sync-np1-r2", "sync-np2-r2"]
    report = (study / "report.html").read_text()
    assert "9 ok" in report and report.count("<img") >= 10
    shown = dvc(repo, "metrics", "show", "--json")
    assert shown.returncode == 0 and "sync-np2-r0@local" in shown.stdout

    # the target: 0.97 x the final held-out accuracy of the calibration run (sync, np 1), read by the analysis
    cal = json.loads((study / "calibration.json").read_text())
    assert cal["target_accuracy"] == pytest.approx(0.97 * cal["plateau_accuracy"])
    assert json.loads((study / "metrics" / "regimes.json").read_text())["target_accuracy"] == cal["target_accuracy"]
    # per run: its repeat; a time to target reached or censored, never dropped
    cells = pd.read_csv(study / "tables" / "regimes.csv")
    assert sorted(cells["repeat"]) == [0] * 3 + [1] * 3 + [2] * 3 and cells["time_to_target_s"].notna().all()
    assert cells["censored"].isin([True, False]).all()
    # per cell over the repeats: median, olympic mean, 95 % interval, n
    per_cell = pd.read_csv(study / "tables" / "regimes_summary.csv")
    tp = per_cell[per_cell["metric"] == "throughput"]
    assert len(tp) == 3 and (tp["n"] == 3).all() and {"median", "olympic_mean"} <= set(per_cell.columns)
    assert ((tp["ci_low"] <= tp["median"]) & (tp["median"] <= tp["ci_high"])).all()
    paired = pd.read_csv(study / "tables" / "vs_sync.csv")  # ddp against sync at np 2, paired by repeat
    assert set(paired["algorithm"]) == {"ddp"}
    tp_pair = paired[paired["metric"] == "throughput"]
    assert len(tp_pair) == 1 and (tp_pair["n"] == 3).all() and tp_pair["ci_low"].notna().all()
    # a time to target: pairs where both runs never reached the target are left out (they say nothing)
    at2 = cells[cells["np"] == 2].pivot_table(index="repeat", columns="algorithm", values="censored", aggfunc="max")
    informative = int((~(at2["ddp"].astype(bool) & at2["sync"].astype(bool))).sum())
    ttt = paired[paired["metric"] == "time_to_target_s"]
    assert len(ttt) == 1 and int(ttt["n"].iloc[0]) <= informative
    assert set(paired["outcome"]) <= {"faster", "slower", "inconclusive"}
    claims = pd.read_csv(study / "tables" / "claims.csv")
    assert list(claims.columns[1:12]) == ["claim", "quote", "workload", "effect", "ci_low", "ci_high", "interval_method",
                                          "n", "rule", "registration", "verdict"]
    assert set(claims["verdict"]) == {"not testable here"}  # sync and ddp only: no claim has its cells here
    speedup = pd.read_csv(study / "tables" / "speedup_summary.csv")
    assert {"ci_low", "ci_high", "n"} <= set(speedup.columns)
    assert (speedup.loc[speedup["metric"] == "throughput", "n"] == 3).all()

    t0 = time.time()
    second = dvc(repo, "repro")
    noop_s = time.time() - t0
    assert second.returncode == 0 and ran(second) == [], second.stdout[-3000:]
    print(f"no-op dvc repro: {noop_s:.1f} s")

    # what no stage runs (the published README's writer) and another study's file leave every stage up to date
    readme, laptop = repo / "bench" / "study" / "readme.py", repo / "pipelines" / "studies" / "laptop.yaml"
    readme.write_text(readme.read_text().replace("## What these results cannot show", "## What these cannot show"))
    laptop.write_text(laptop.read_text().replace("repeats: 3", "repeats: 4"))
    status = dvc(repo, "status", "dvc.yaml")  # the study's pipeline (pipelines/predict/dvc.yaml never ran here)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout[-3000:]

    # one algorithm's configuration changes in the study's file (sync: np 1 dropped): once the plan is made again,
    # run@sync is out of date and run@ddp is not (its planned files are byte for byte the same). What run@sync then
    # does (its stale runs removed, the others kept) is tests/notebooks/test_dvc_run_ownership.py's
    smoke = repo / "pipelines" / "studies" / "smoke.yaml"
    assert "np_by_algorithm: {sync: [1, 2]}" in smoke.read_text()
    smoke.write_text(smoke.read_text().replace("np_by_algorithm: {sync: [1, 2]}", "np_by_algorithm: {sync: [2]}"))
    third = dvc(repo, "repro", "plan")
    assert third.returncode == 0 and "plan" in ran(third), third.stdout[-5000:]
    status = dvc(repo, "status", "--json")
    assert status.returncode == 0, status.stderr[-3000:]
    stale = set(json.loads(status.stdout))
    assert "run@sync" in stale and "run@ddp" not in stale, status.stdout[-3000:]
