"""``bench probe`` on this machine (hardware ``local``: two ranks under real horovodrun, their pair over the loopback):
the file it writes is one ``bench predict`` and ``bench advise`` read, with a time to target (the relation's workload);
a probe ended by SIGTERM ends its job (no rank left), says so in one line, exits 1 and writes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import yaml

from support import REPO, bench_cli

ENV = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")


def test_a_local_probe_is_a_hardware_predict_reads(tmp_path):
    out = tmp_path / "local-probed.yaml"
    proc = bench_cli("probe", "--hardware", "local", "--np", "2", "--steps", "10", "--pings", "10", "--stream-s", "0.5",
                     "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    d = yaml.safe_load(out.read_text())
    assert "probed" not in d  # not an emulated cluster: a described hardware only
    m = d["measured"]
    assert m["np"] == 2 and len(m["pairs"]) == 1 and m["workload"] == "lenet@32" and m["step_s"] > 0
    assert d["compute"]["lenet@32"]["step_s"] == m["step_s"] and d["levels"][0]["busbw_GBps"] > 0
    proc = bench_cli("predict", "sync,localsgd", "--np", "2", "--hardware", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert all(r["time_to_target_s"] > 0 and r["compute_s"] > 0 for r in rows)


def test_a_terminated_probe_ends_its_job_and_writes_nothing(tmp_path):
    out = tmp_path / "never.yaml"
    proc = subprocess.Popen([sys.executable, "-m", "bench", "probe", "--hardware", "local", "--np", "2", "--steps",
                             "2000", "--out", str(out)], cwd=REPO, env=ENV, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # the ranks are up and timing their steps
        seen.append(line)
        if "rank 1: up" in line or "rank 0: up" in line:
            break
    time.sleep(1.0)
    ranks = [c for c in psutil.Process(proc.pid).children(recursive=True)
             if "bench.probe.rank" in " ".join(c.cmdline())]
    assert len(ranks) >= 2, [c.cmdline() for c in psutil.Process(proc.pid).children(recursive=True)]  # and shells
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, "".join(seen) + err
    assert "error: the probe received SIGTERM: its job was ended; nothing written" in err, err
    assert not out.exists()
    gone, alive = psutil.wait_procs(ranks, timeout=5)
    assert alive == [], [r.pid for r in alive]  # this job's ranks (another job's, e.g. a cluster test's, not counted)
