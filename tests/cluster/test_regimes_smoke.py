"""The regimes pipeline end to end through DVC: `regimes-smoke` (sync and localsgd on the emulated cluster x its link
unshaped / at the rate the calibration chose for sync's communication share 0.5 x no straggler / one worker 3x slower,
the straggler left out on the calibrated link) in a temporary copy of the repository.

Skipped (one line) only where an emulated cluster cannot exist: not root, or no network namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from support import ran, repro_copy
from cluster_support import skip_reason

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]


@pytest.mark.timeout(1800)
def test_regimes_smoke_study_through_dvc(tmp_path):
    repo, proc = repro_copy(tmp_path, "regimes-smoke")
    assert {"calibrate", "plan", "run@sync", "run@localsgd", "regimes", "report"} <= set(ran(proc))
    study = repo / "results" / "regimes-smoke"
    # the calibration measured sync's compute and bytes a step on one emulated host and chose the rate for share 0.5
    calibration = json.loads((study / "calibration.json").read_text())
    link = calibration["links"]["share0.5"]
    assert calibration["compute_s_per_step"] > 0 and calibration["bytes_per_step"] > 0 and calibration["link_np"] == 2
    assert link["rate"].endswith("mbit") and link["bits_per_s"] == pytest.approx(
        8 * calibration["bytes_per_step"] / calibration["compute_s_per_step"], rel=1e-6)  # n 2, share 0.5
    runs = sorted(str(p.relative_to(study / "runs")) for p in (study / "runs").glob("*/*/*") if p.is_dir())
    assert runs == [f"{a}/emu/{a}-np2-link{lk}-slow_factor{f}" for a in ("localsgd", "sync")
                    for lk, f in (("none", "1.0"), ("none", "3.0"), ("share0.5", "1.0"))], runs
    # the runs ran on two emulated hosts, the calibrated one over the link shaped at the calibrated rate
    system = json.loads((study / "runs" / "sync" / "emu" / "sync-np2-linkshare0.5-slow_factor1.0" / "system.json").read_text())
    assert system["network"]["link"] == link["rate"] and len(set(system["hosts_by_rank"])) == 2

    cells = pd.read_csv(study / "tables" / "regimes.csv")
    assert len(cells) == 6
    assert set(cells["link"]) == {"unshaped", link["rate"]} and set(cells["straggler"]) == {"none", "1x3"}
    assert set(cells["link_share_aimed"].dropna()) == {0.5}
    assert (cells.loc[cells["algorithm"] == "sync", "speedup_vs_sync"] == 1.0).all()
    assert cells["throughput"].gt(0).all() and cells["comm_share"].between(0, 1).all()
    links = pd.read_csv(study / "tables" / "links.csv")
    assert list(links["link"]) == [link["rate"], "unshaped"] and links["mean"].between(0, 1).all()
    # the straggler slows sync: every step of worker 0 waits for worker 1's injected delay (2x its compute). Read
    # from the records, not from two single runs' throughputs, which this noisy machine has put either way round
    slow = study / "runs" / "sync" / "emu" / "sync-np2-linknone-slow_factor3.0"
    steps = {r: pd.read_json(slow / f"rank{r}.jsonl", lines=True).query("not warmup") for r in (0, 1)}
    assert steps[1]["injected_s"].mean() > 0 and (steps[0]["injected_s"] == 0).all()
    assert steps[0]["step_s"].mean() >= 0.8 * steps[1]["injected_s"].mean()
    winners = pd.read_csv(study / "tables" / "regime_winners.csv")
    assert len(winners) == 3 and set(winners["highest_throughput"]) <= {"sync", "localsgd"}
    claims = pd.read_csv(study / "tables" / "claims.csv")
    assert len(claims) == 6 and claims["verdict"].notna().all()
    for name in ("speedup_heatmap", "throughput_vs_link", "time_to_target"):
        assert (study / "figures" / "regimes" / f"{name}.png").stat().st_size > 5000
    report = (study / "report.html").read_text()
    assert "Which algorithm wins where" in report and "6 ok" in report
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
    assert len(statuses) == 6 and (statuses["status"] == "ok").all()
    system = (out / "system.md").read_text()
    assert "## `emu`, link unshaped" in system and f"## `emu`, link {link['rate']}" in system
    assert "latency not emulated" in system
    # its README leads with the verdicts, then the links aimed and measured; it is generated from the published files
    readme = (out / "README.md").read_text()
    assert readme.index("## The seed papers' claims") < readme.index("## The links") < readme.index("cannot show")
    assert all(source in readme for source in claims["source"]) and f"| {link['rate']} | 0ms | 0.5 | 2 |" in readme
    assert (out / "calibration.json").read_text() == (study / "calibration.json").read_text()
    assert "`calibration.json` the calibration run" in readme and "no calibration run" not in readme
    assert "## The links (`tables/links.csv`, `calibration.json`)" in readme and "it was calibrated for" in readme
