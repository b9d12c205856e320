"""The regimes pipeline end to end through DVC: `regimes-smoke` (sync and localsgd x local and an emulated 100 Mbit
cluster x no straggler / one worker 3x slower) in a temporary copy of the repository.

Skipped (one line) only where an emulated cluster cannot exist: not root, or no network namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import REPO, ran, repro_copy
from test_cluster import _skip_reason, cluster

pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


@pytest.fixture(scope="module", autouse=True)
def cluster_ready():
    subprocess.run(["bash", str(REPO / "scripts" / "setup-cluster.sh")], check=True, timeout=900)
    yield
    cluster("down", check=False)


@pytest.mark.timeout(1800)
def test_regimes_smoke_study_through_dvc(tmp_path):
    repo, proc = repro_copy(tmp_path, "regimes-smoke")
    assert {"plan", "run@sync", "run@localsgd", "regimes", "report"} <= set(ran(proc))
    study = repo / "results" / "regimes-smoke"
    runs = sorted(str(p.relative_to(study / "runs")) for p in (study / "runs").glob("*/*/*") if p.is_dir())
    assert runs == [f"{a}/{hw}/{a}-np2-slow_factor{f}" for a in ("localsgd", "sync") for hw in ("emu-100mbit", "local")
                    for f in ("1.0", "3.0")], runs
    # the emulated runs ran on two emulated hosts over the shaped link, two runs to a job
    system = json.loads((study / "runs" / "sync" / "emu-100mbit" / "sync-np2-slow_factor3.0" / "system.json").read_text())
    assert system["network"]["link"] == "100mbit" and len(set(system["hosts_by_rank"])) == 2
    assert system["job_runs"] == 2 and system["job_position"] == 1

    cells = pd.read_csv(study / "tables" / "regimes.csv")
    assert len(cells) == 8
    assert set(cells["link"]) == {"local", "100mbit"} and set(cells["straggler"]) == {"none", "1x3"}
    assert (cells.loc[cells["algorithm"] == "sync", "speedup_vs_sync"] == 1.0).all()
    assert cells["throughput"].gt(0).all() and cells["comm_share"].between(0, 1).all()
    # the straggler slows sync: every step of worker 0 waits for worker 1's injected delay (2x its compute). Read
    # from the records, not from two single runs' throughputs, which this noisy machine has put either way round
    slow = study / "runs" / "sync" / "local" / "sync-np2-slow_factor3.0"
    steps = {r: pd.read_json(slow / f"rank{r}.jsonl", lines=True).query("not warmup") for r in (0, 1)}
    assert steps[1]["injected_s"].mean() > 0 and (steps[0]["injected_s"] == 0).all()
    assert steps[0]["step_s"].mean() >= 0.8 * steps[1]["injected_s"].mean()
    winners = pd.read_csv(study / "tables" / "regime_winners.csv")
    assert len(winners) == 4 and set(winners["highest_throughput"]) <= {"sync", "localsgd"}
    claims = pd.read_csv(study / "tables" / "claims.csv")
    assert len(claims) == 6 and claims["verdict"].notna().all()
    for name in ("speedup_heatmap", "throughput_vs_link", "time_to_target"):
        assert (study / "figures" / "regimes" / f"{name}.png").stat().st_size > 5000
    report = (study / "report.html").read_text()
    assert "Which algorithm wins where" in report and "8 ok" in report
    metrics = json.loads((study / "metrics" / "regimes.json").read_text())
    assert metrics["target_accuracy"] == 0.3 and len(metrics["claims"]) == 6

    # published as reference results are: tables, figures, metrics, report, every run's status, the system
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pub = subprocess.run([sys.executable, "-m", "bench", "study", "publish", "--study", "regimes-smoke", "--to",
                          str(tmp_path / "published")], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert pub.returncode == 0, pub.stderr[-3000:]
    out = tmp_path / "published"
    assert (out / "tables" / "regimes.csv").read_text() == (study / "tables" / "regimes.csv").read_text()
    assert (out / "figures" / "regimes" / "speedup_heatmap.png").is_file() and (out / "report.html").is_file()
    statuses = pd.read_csv(out / "runs.csv")
    assert len(statuses) == 8 and (statuses["status"] == "ok").all()
    system = (out / "system.md").read_text()
    assert "## `emu-100mbit`" in system and "link 100mbit" in system and "latency not emulated" in system
