"""Every notebook executed by papermill against real run directories (fixtures: tests/notebooks/conftest.py)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from PIL import Image

from bench.layout import StudyLayout
from bench.results import load_run
from support import REPO, bench_cli
from notebook_support import NotebookFailed, execute

# the session fixture launches five real runs: on a loaded 2-core machine that alone can pass the default 600 s
pytestmark = pytest.mark.timeout(1800)


def assert_png(path, min_side=200):
    assert path.is_file(), f"missing figure {path}"
    with Image.open(path) as im:
        assert im.format == "PNG" and min(im.size) >= min_side, (path, im.size)
        assert len(im.convert("L").getcolors(256)) > 10, f"{path} looks blank"


def test_run_notebook_launches_one_benchmark_and_shows_its_curves(tmp_path):
    out = tmp_path / "sync-np2"
    nb = execute("run.ipynb", tmp_path, algorithm="sync", np=2, study="nbtest", profile="tiny",
                 overrides=["max_steps=20", "eval_every=5"], out=str(out))
    run = load_run(out)
    assert run.status == "ok" and run.config["launch"]["np"] == 2 and run.config["study"] == "nbtest"
    assert sorted(run.steps["rank"].unique()) == [0, 1] and run.steps["step"].max() == 20
    images = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 2  # held-out curves and workers' mini-batch curves


def test_speedup_tables_leave_the_failed_run_out(analysed):
    for name in ("scaling", "efficiency", "time_split"):
        assert_png(analysed / "figures" / "speedup" / f"{name}.png")
    table = pd.read_csv(analysed / "tables" / "speedup.csv")
    assert sorted(zip(table["hardware"], table["algorithm"], table["np"])) == [
        ("lab2", "sync", 2), ("local", "ddp", 2), ("local", "sync", 1), ("local", "sync", 2)]
    assert table["tag"].isna().all()  # empty tags only: the failed run (tag fault) is not aggregated
    local = table[table.hardware == "local"]
    sync2 = local[(local.algorithm == "sync") & (local.np == 2)].iloc[0]
    sync1 = local[(local.algorithm == "sync") & (local.np == 1)].iloc[0]
    assert sync2.speedup == pytest.approx(sync2.throughput / sync1.throughput)
    assert sync2.vs_sync == pytest.approx(1.0)
    ddp = local[local.algorithm == "ddp"].iloc[0]  # no ddp np=1 run: over sync's
    assert ddp.speedup == pytest.approx(ddp.throughput / sync1.throughput) and ddp.speedup_over == "sync np 1"
    assert math.isnan(table[table.hardware == "lab2"].iloc[0].speedup)  # no np=1 run on lab2
    # the throughput of a run is the one definition of bench.metrics.throughput, also in its summary.json
    run = load_run(StudyLayout("fixture", analysed.parent).run_dir("sync", "local", 2))
    assert sync2.throughput == pytest.approx(run.summary["throughput"], rel=1e-9)
    split = pd.read_csv(analysed / "tables" / "time_split.csv")
    assert ((split[["compute_share", "comm_share", "wait_share"]].sum(axis=1) - 1).abs() < 1e-9).all()
    m = json.loads((analysed / "metrics" / "speedup.json").read_text())
    assert m["ok"] == 4 and m["failed"] == 1
    assert m["runs"]["sync-np2-fault@local"] == {"status": "failed"}
    assert m["runs"]["sync-np2@local"]["throughput"] > 0 and m["runs"]["sync-np2@lab2"]["throughput"] > 0


def test_convergence_figures_and_time_to_accuracy(analysed):
    for name in ("accuracy_time", "accuracy_epoch", "staleness"):
        assert_png(analysed / "figures" / "convergence" / f"{name}.png")
    conv = pd.read_csv(analysed / "tables" / "convergence.csv")
    assert len(conv) == 4 and "fault" not in conv.to_string()
    sync1 = load_run(analysed / "runs" / "sync" / "local" / "sync-np1")
    ev = sync1.evals.sort_values("t")
    row = conv[(conv.algorithm == "sync") & (conv.np == 1)].iloc[0]
    assert len(ev) >= 4 and ev["t"].is_monotonic_increasing  # periodic snapshots (eval_every 10) and the final one
    # interpolated between the last evaluation below 0.3 and the first at or above it; censored at train_s if never
    t, acc = ev["t"].tolist(), ev["accuracy"].tolist()
    i = next((k for k, a in enumerate(acc) if a >= 0.3), None)
    expected = (sync1.summary["train_s"] if i is None else t[0] if i == 0 else
                t[i - 1] + (0.3 - acc[i - 1]) / (acc[i] - acc[i - 1]) * (t[i] - t[i - 1]))
    assert row["seconds_to_0.3"] == pytest.approx(max(expected, t[-1]) if i is None else expected)
    assert bool(row["censored"]) == (i is None)
    assert row.final_accuracy == pytest.approx(sync1.summary["final_accuracy"])
    evals = pd.read_csv(analysed / "tables" / "eval.csv")
    assert set(evals["run"]) == {"sync-np1@local", "sync-np2@local", "ddp-np2@local", "sync-np2@lab2"}


def test_temporal_efficiency_matrix_matches_the_cli(analysed):
    assert_png(analysed / "figures" / "temporal_efficiency" / "te_matrix.png")
    assert_png(analysed / "figures" / "temporal_efficiency" / "te_grid.png")
    matrix = pd.read_csv(analysed / "tables" / "te_matrix.csv", index_col=0)
    a, b = "sync-np2@local", "ddp-np2@local"
    assert sorted(matrix.index) == ["ddp-np2@local", "sync-np1@local", "sync-np2@lab2", "sync-np2@local"]
    for k in matrix.index:
        assert matrix.loc[k, k] == pytest.approx(1.0)
    assert matrix.loc[a, b] == pytest.approx(1 / matrix.loc[b, a])
    runs = analysed / "runs"
    proc = bench_cli("te", str(runs / "sync" / "local" / "sync-np2"), str(runs / "ddp" / "local" / "ddp-np2"))
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) == pytest.approx(matrix.loc[a, b], abs=5e-7)  # printed to 6 decimals
    grid = pd.read_csv(analysed / "tables" / "te_grid.csv")
    assert grid["np"].tolist() == [2] and grid["E"].iloc[0] == pytest.approx(matrix.loc[a, b])
    proc = bench_cli("te", str(runs / "sync" / "local" / "sync-np2-fault"), str(runs / "ddp" / "local" / "ddp-np2"))
    assert proc.returncode == 2 and "failed" in proc.stderr
    proc = bench_cli("te", str(runs), str(runs / "ddp" / "local" / "ddp-np2"))  # not a run directory
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "not a run directory" in proc.stderr


def test_hardware_notebook_puts_machines_side_by_side(analysed):
    assert_png(analysed / "figures" / "hardware" / "throughput.png")
    table = pd.read_csv(analysed / "tables" / "hardware.csv")
    assert set(table["hardware"]) == {"local", "lab2"}
    assert table["cpu_model"].notna().all() and (table["cpu_cores"] > 0).all()


def test_regimes_tables_compare_with_sync_in_the_same_regime(analysed):
    for name in ("speedup_heatmap", "target_heatmap", "throughput_vs_link", "time_to_target"):
        assert_png(analysed / "figures" / "regimes" / f"{name}.png")
    cells = pd.read_csv(analysed / "tables" / "regimes.csv")
    assert len(cells) == 4  # the failed run is left out
    assert set(zip(cells["hardware"], cells["link"])) == {("local", "local"), ("lab2", "lab2")}
    assert (cells["straggler"] == "none").all()
    by = cells.set_index(["algorithm", "hardware", "np"])
    # each run against sync with the same hardware and workers
    assert by.loc[("sync", "local", 2), "speedup_vs_sync"] == 1.0 and by.loc[("sync", "lab2", 2), "speedup_vs_sync"] == 1.0
    ddp = by.loc[("ddp", "local", 2)]
    assert ddp["speedup_vs_sync"] == pytest.approx(ddp["throughput"] / by.loc[("sync", "local", 2), "throughput"])
    assert set(cells["throughput_window"]) <= {"all-active", "per-worker"}
    assert by.loc[("sync", "local", 2), "target_speedup_vs_sync"] == 1.0  # sync reached the target
    assert ddp["target_speedup_vs_sync"] == pytest.approx(by.loc[("sync", "local", 2), "time_to_target_s"] / ddp["time_to_target_s"],
                                                          nan_ok=True)
    winners = pd.read_csv(analysed / "tables" / "regime_winners.csv")
    assert set(winners["regime"]) == {"local, no straggler", "lab2, no straggler"}
    claims = pd.read_csv(analysed / "tables" / "claims.csv")
    assert len(claims) == 6 and set(claims["verdict"]) == {"not testable here"}  # no gossip, PS, emulated link here
    metrics = json.loads((analysed / "metrics" / "regimes.json").read_text())
    assert metrics["target_accuracy"] == 0.3 and metrics["budget_s"] == 0.2


def test_report_lists_the_failed_run_and_gathers_the_figures(analysed, tmp_path):
    nb = execute("report.ipynb", analysed, study="fixture", results_root=analysed.parent)
    html = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--no-input", "--output-dir",
                           str(tmp_path), "--output", "report", str(analysed / "notebooks" / "report.ipynb")],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = html.read_text()
    assert "injected fault at step 3" in text          # the failed run's reason
    assert "1 failed" in text and "4 ok" in text
    images = sum(1 for c in nb["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    assert images == 15  # every figure the analysis notebooks draw
    # the answer before the figures, the run list last; tables without the pandas index or an all-empty column
    assert text.index("The answer") < text.index("Throughput and speedup") < text.index("Every run")
    assert text.index("Every run") < text.index("injected fault at step 3")
    assert 'class="dataframe"' not in text and "row_heading" not in text  # every table through report.table_html



def test_corrupt_results_file_stops_the_analysis_naming_it(results_root, tmp_path):
    src = StudyLayout("fixture", results_root).run_dir("sync", "local", 1)
    dst = StudyLayout("corrupt", tmp_path).run_dir("sync", "local", 1)
    shutil.copytree(src, dst)
    lines = (dst / "rank0.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    (dst / "rank0.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(NotebookFailed, match=r"rank0\.jsonl:3: corrupt record"):
        execute("speedup.ipynb", tmp_path / "corrupt", study="corrupt", results_root=tmp_path)
