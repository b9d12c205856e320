"""``bench probe`` and ``bench advise`` on the emulated cluster, under real horovodrun (about 2 minutes): the probe
recovers a 100 Mbit link with a 5 ms one-way delay and the hosts' CPU share from the hosts alone; ``bench predict``
and ``bench advise`` read the file it wrote; ``advise --confirm`` runs the plan through the normal run path and
puts forecast and measurement side by side."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
import yaml

from cluster_support import ENV, REPO, skip_reason

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
              pytest.mark.usefixtures("cluster_ready")]

RATE, DELAY, SHARE = 100e6, 0.005, 0.36  # the cluster the probe is pointed at (emu's cpu_per_host: 0.36)


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO), env=dict(ENV, BENCH_PROGRESS="0"))


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "emu-probed.yaml"
    proc = bench("probe", "--hardware", "emu", "--np", "2", "--set", "link=100mbit", "--set", "link_delay=5ms",
                 "--steps", "20", "--pings", "20", "--stream-s", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[probe " in proc.stderr and "pair 1/1 0->1" in proc.stderr  # progress as it came
    return out, yaml.safe_load(out.read_text()), proc


def test_probe_recovers_the_link_the_delay_and_the_hosts(probed):
    _, d, proc = probed
    m, p = d["measured"], d["probed"]
    assert abs(m["rate_bps"] / RATE - 1) <= 0.10, m["rate_bps"]
    assert abs(m["one_way_s"] - DELAY) <= max(0.10 * DELAY, 2e-4), m["one_way_s"]
    assert abs(m["cpu_share"] / SHARE - 1) <= 0.15, m["cpu_share"]  # the share of a loaded machine's core
    assert p["link"].endswith("mbit") and p["link_delay"].endswith("ms") and p["cluster_set"] == {
        "link": "100mbit", "link_delay": "5ms"}
    assert [(h["rank"], h["steps"]) for h in m["hosts"]] == [(0, 20), (1, 20)]
    assert m["step_s"] > 0 and m["workload"] == "lenet@32"  # the calibrated workload (profile regimes)
    assert {(c["op"], c["np"]) for c in m["collectives"]} == {("allreduce_hvd", 2), ("sendrecv", 2)}
    assert all(c["model_s"] > 0 and c["median_s"] > 0 for c in m["collectives"])
    assert "measured by bench probe at" in d["levels"][0]["source"] and "written:" in proc.stdout


def test_predict_and_advise_read_the_probed_file(probed, tmp_path):
    path, d, _ = probed
    proc = bench("predict", "sync,localsgd", "--np", "2", "--hardware", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["compute_s"] for r in rows][0] == pytest.approx(d["probed"]["compute_s"])  # the probe's step
    assert all("by bench probe" in r["calibration"] for r in rows)
    out = tmp_path / "advice"
    proc = bench("advise", "--hardware", str(path), "--np", "2", "--algorithms", "sync,localsgd,downpour,easgd",
                 "--map-np", "2", "--confirm", "1", "--repeats", "2", "--set", "max_steps=40", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ranked = list(csv.DictReader((out / "ranking.csv").open()))
    timed = [float(r["time_to_target_s"]) for r in ranked if r["basis"] == "time to target"]
    assert timed == sorted(timed) and len(timed) == 3  # easgd: throughput only (no measured relation)
    assert [r["algorithm"] for r in ranked if r["basis"] == "throughput only"] == ["easgd"]
    winners = list(csv.DictReader((out / "winners.csv").open()))
    assert [w["delay"] for w in winners] == ["0", "1ms", "5ms", "25ms"]
    advice = json.loads((out / "advice.json").read_text())
    conf = advice["confirmation"]
    plan = {ranked[0]["algorithm"], "sync"}
    assert {r["algorithm"] for r in conf["runs"]} == plan and all(r["repeats"] == 2 for r in conf["runs"])
    assert conf["forecast_winner"] == ranked[0]["algorithm"] and conf["measured_winner"] in plan
    runs = sorted(p.name for p in (out.parent / "advice.runs" / "runs").iterdir())
    assert len(runs) == 2 * len(plan) and all((out.parent / "advice.runs" / "runs" / r / "summary.json").is_file()
                                              for r in runs)
    assert "measured winner:" in proc.stdout and (out / "index.html").read_text().count("<table") == 2
