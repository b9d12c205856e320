"""bench.study.publish: a study's run time, runs laid end to end, companions without runs."""

from __future__ import annotations

import json
import math

import pytest



def test_a_studys_run_time_is_its_span_and_the_time_covered_by_its_runs(tmp_path):
    """run_times: a pause between runs (or a run redone later) is in the span, not in the busy time."""
    import os

    from bench.study.publish import run_times

    assert all(math.isnan(v) for v in run_times(tmp_path))
    for name, start, end in [("a-r0", 0, 100), ("a-r1", 50, 120), ("b-r0", 1000, 1030), ("c-r0", 1010, 1020)]:
        d = tmp_path / name.split("-")[0] / "emu" / name
        d.mkdir(parents=True)
        for f, t in (("config.json", start), ("summary.json", end)):
            (d / f).write_text("{}")
            os.utime(d / f, (t, t))
    (tmp_path / "d" / "emu" / "d-r0").mkdir(parents=True)  # planned, never ended: not a run yet
    (tmp_path / "d" / "emu" / "d-r0" / "config.json").write_text("{}")
    assert run_times(tmp_path) == (1030, 120 + 30)


def test_runs_prepared_together_are_laid_end_to_end_though_their_records_differ_by_seconds(tmp_path):
    """``study run`` prepares every run of an algorithm before the first runs, a second or so apart (regimes-latency:
    16 runs of sync prepared within 6 s ran for 17 min): each starts when the one before it ended, so the busy time is
    the sum of their wall times, and a later study run starts at its own preparation."""
    import json
    import time as _time

    from bench.study.publish import run_times

    def made(name, created, wall):
        d = tmp_path / name.split("-")[0] / "emu" / name
        d.mkdir(parents=True)
        stamp = _time.strftime("%Y-%m-%dT%H:%M:%S+0000", _time.gmtime(created))
        (d / "config.json").write_text("{}")
        (d / "system.json").write_text(json.dumps({"created": stamp}))
        (d / "summary.json").write_text(json.dumps({"wall_s": wall}))

    t0 = 1_790_000_000
    for k in range(3):
        made(f"a-r{k}", t0 + k, 100.0)  # prepared 1 s apart, each ran 100 s after the one before it
    made("b-r0", t0 + 1000, 50.0)  # the next algorithm's study run, after a pause
    span, busy = run_times(tmp_path)
    assert busy == pytest.approx(300 + 50)
    assert span == pytest.approx(1050)


def test_a_registered_companion_without_runs_yet_publishes_nothing_of_it_and_refuses_nothing():
    """``publish`` of a study whose registered companion has not run (regimes v2 beside regimes-lm): its runs table is
    empty but has the provenance columns, and the registration check passes on it (it raised KeyError)."""
    from bench.study.publish import RUN_COLUMNS, check_registered, runs_table
    from bench.study.spec import load_study

    table = runs_table([], {"sha256": "0" * 64})
    assert list(table.columns) == RUN_COLUMNS and table.empty
    check_registered(load_study("regimes-lm"), table, {"sha256": "0" * 64})


def test_a_run_at_code_other_than_its_registrations_is_refused_naming_the_changed_files(tmp_path):
    """A registered study runs at its registration's code (issue 50: regimes-latency's runs ran 36-37 changed run files
    after its code_commit). judged() compares the files a run executes (dvc.yaml's run stage) between the
    registration's code_commit and the run's commit: a change elsewhere (a README, publishing) is allowed, a change to
    a run module is refused and publish refuses the study; a commit git does not have is refused too."""
    import shutil
    import subprocess

    import pandas as pd

    from bench import BenchError
    from bench.registration import judged
    from bench.study.publish import check_registered
    from bench.study.spec import load_study
    from support import REPO

    root = tmp_path / "repo"
    (root / "bench" / "algorithms").mkdir(parents=True)
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    for f in ("bench/worker.py", "bench/algorithms/sync.py", "bench/algorithms/ddp.py", "README.md"):
        (root / f).write_text("v1\n")

    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)

    def commit(change: str | None = None) -> str:
        if change:
            (root / change).write_text((root / change).read_text() + "v2\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", change or "code"], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    registered, readme, other_algorithm, worker = commit(), commit("README.md"), commit("bench/algorithms/ddp.py"), \
        commit("bench/worker.py")
    reg = {"sha256": "a" * 64, "code_commit": registered, "cells": [{"config_sha256": "c" * 64}]}

    def why(commit_: str, algorithm: str = "sync") -> str:
        system = {"git": {"commit": commit_, "dirty": False},
                  "provenance": {"config_sha256": "c" * 64, "registration": {"sha256": "a" * 64, "committed": True}}}
        return judged(system, reg, algorithm, root)  # this repository's dvc.yaml and git

    assert why(registered) == "" and why(readme) == ""  # the README is not run code
    assert why(other_algorithm) == ""  # another algorithm's module: not what a sync run executes
    assert why(other_algorithm, "ddp").startswith("run at other code than the registration's: 1 file(s)")
    refused = why(worker)
    assert "bench/worker.py" in refused and "1 file(s)" in refused
    assert "cannot compare" in why("f" * 40)
    assert why("--output=" + str(tmp_path / "written")).endswith("is not a commit id")  # never a git option
    assert not (tmp_path / "written").exists()
    with pytest.raises(BenchError, match="run at other code than the registration's"):
        check_registered(load_study("regimes-lm"), pd.DataFrame({"run": ["r"], "judged": [refused]}), reg)
