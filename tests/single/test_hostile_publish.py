"""Hostile inputs to ``study publish`` (issue 48 item 4), kept as a table in the shape of test_hostile_inputs.py: each
case is a study's results or registration damaged the way a crash, a careless edit or a hostile user leaves them, and
each must end with exit code 2, one line on stderr naming the file, nothing written (publish builds in a staging
folder and moves it into place only on success).

Each row: an id, a function of a scratch folder that damages a small study ``hostile`` (beside a params.yaml copy)
and returns the ``--to`` folder, and a fragment the one line must hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.resolve import resolve
from bench.results import JsonlWriter, write_json_atomic, write_summary
from support import REPO

CLAIMS = REPO / "docs" / "results" / "regimes" / "tables" / "claims.csv"
SUMMARY = REPO / "docs" / "results" / "regimes" / "tables" / "speedup_summary.csv"


def study_root(t: Path) -> Path:
    """A params.yaml copy with the study ``hostile`` and its results: a claims and a speedup summary table the
    analysis wrote (copies of the published regimes study's) and one ok run."""
    root = t / "p"
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    shutil.copyfile(REPO / "params.yaml", root / "params.yaml")
    (root / "pipelines" / "studies" / "hostile.yaml").write_text("description: the publish sweep's study\n")
    tables = root / "results" / "hostile" / "tables"
    tables.mkdir(parents=True)
    shutil.copyfile(CLAIMS, tables / "claims.csv")
    shutil.copyfile(SUMMARY, tables / "speedup_summary.csv")
    run = root / "results" / "hostile" / "runs" / "sync" / "local" / "sync-np1"
    run.mkdir(parents=True)
    write_json_atomic(run / "config.json", resolve("sync", np=1, profile="tiny", study="hostile").to_dict())
    write_json_atomic(run / "system.json", {"git": {"commit": "0" * 40, "dirty": False}, "provenance": {}})
    w = JsonlWriter(run / "rank0.jsonl")
    w.write({"step": 1, "epoch": 0.1, "t": 0.1, "samples": 16, "loss": 1.0, "accuracy": 0.1, "step_s": 0.01,
             "compute_s": 0.008, "comm_s": 0.002, "wait_s": 0.0, "staleness": None, "bytes_sent": 100, "warmup": False})
    w.close()
    w = JsonlWriter(run / "eval.jsonl")
    w.write({"step": 1, "epoch": 0.1, "t": 0.1, "samples_seen": 16, "loss": 0.5, "accuracy": 0.8, "final": True})
    w.close()
    write_summary(run, "ok", final_accuracy=0.8, final_loss=0.5, throughput=100.0)
    return root


def damaged(write):
    """A case: the study with ``write(root)`` applied, published to a fresh folder."""
    def case(t: Path) -> Path:
        write(study_root(t))
        return t / "out"
    return case


def registration(text: bytes):
    return damaged(lambda root: (root / "pipelines" / "registrations").mkdir(exist_ok=True) or
                   (root / "pipelines" / "registrations" / "hostile.json").write_bytes(text))


def table(name: str, text: bytes):
    return damaged(lambda root: (root / "results" / "hostile" / "tables" / name).write_bytes(text))


def system(body: dict):
    return damaged(lambda root: write_json_atomic(
        root / "results" / "hostile" / "runs" / "sync" / "local" / "sync-np1" / "system.json", body))


def summary_with(edit):
    def write(root: Path):
        path = root / "results" / "hostile" / "tables" / "speedup_summary.csv"
        path.write_text(edit(path.read_text()))
    return damaged(write)


def to_own(sub: str):
    def case(t: Path) -> Path:
        return study_root(t) / "results" / "hostile" / sub
    return case


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def registration_deleted(t: Path) -> Path:
    """The registration was committed, a run ran under it from a dirty tree, then the file was deleted: publish reads
    it back from git at the run's commit and refuses the run, as it did before the file went."""
    root = study_root(t)
    reg = root / "pipelines" / "registrations" / "hostile.json"
    reg.parent.mkdir(exist_ok=True)
    reg.write_text(json.dumps({"study": "hostile", "cells": [], "claims": []}))
    git(root, "init", "-q")
    git(root, "add", "pipelines/registrations/hostile.json")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "register")
    sha = hashlib.sha256(reg.read_bytes()).hexdigest()
    write_json_atomic(root / "results" / "hostile" / "runs" / "sync" / "local" / "sync-np1" / "system.json",
                      {"git": {"commit": git(root, "rev-parse", "HEAD"), "dirty": True},
                       "provenance": {"registration": {"file": "pipelines/registrations/hostile.json", "sha256": sha,
                                                       "committed": True}}})
    reg.unlink()
    return t / "out"


CASES = [
    ("registration/truncated", registration(b'{"study": "hostile", "cel'), "hostile.json:1: corrupt JSON"),
    ("registration/binary", registration(b"\x00\xff\xfe\x89PNG"), "hostile.json: not a JSON text file"),
    ("registration/a list", registration(b"[1, 2]"), "hostile.json: expected a JSON object, got list"),
    ("registration/cells not a list", registration(b'{"cells": "all"}'), "hostile.json: not a registration"),
    ("registration/deleted after a dirty run", registration_deleted, "run from a dirty tree"),
    ("system/git a string", system({"git": "abc123", "provenance": {}}), "system.json: 'git' is a str"),
    ("system/provenance a list", system({"git": {}, "provenance": [1]}), "system.json: 'provenance' is a list"),
    ("system/registration a string", system({"git": {}, "provenance": {"registration": "x"}}),
     "system.json: 'provenance.registration' is a str"),
    ("tables/empty claims", table("claims.csv", b""), "claims.csv: not a table the analysis wrote"),
    ("tables/garbled claims", table("claims.csv", b"\x00\xff\xfe\xfa binary"), "claims.csv: not a table"),
    ("tables/claims of another shape", table("claims.csv", b"a,b\n1,2\n"), "claims.csv: no column 'source'"),
    ("tables/text np", summary_with(lambda s: s.replace(",4,", ",four,", 1)), "speedup_summary.csv: column 'np' holds 'four'"),
    ("tables/missing column", summary_with(lambda s: s.replace("ci_high", "upper", 1)),
     "speedup_summary.csv: no column 'ci_high'"),
    ("to/the study's results", to_own(""), "is the study's own results"),
    ("to/the study's tables", to_own("tables"), "is the study's own results"),
]


@pytest.mark.parametrize("case_id, make, fragment", CASES, ids=[c[0] for c in CASES])
def test_publish_refuses_in_one_line_with_nothing_written(tmp_path, case_id, make, fragment):
    dest = make(tmp_path)
    root = tmp_path / "p"
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if ".git" not in p.parts}
    proc = subprocess.run([sys.executable, "-m", "bench", "study", "publish", "--study", "hostile", "--to", str(dest)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0",
                                   BENCH_PARAMS=str(root / "params.yaml")))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) < 1000, proc.stderr[-2000:]
    assert fragment in lines[0], lines[0]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if ".git" not in p.parts} == before, "a file written"


def test_the_same_study_undamaged_publishes(tmp_path):
    """The cases' study as it is: published (so that each case fails on its damage, not on the study)."""
    root = study_root(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "bench", "study", "publish", "--study", "hostile", "--to",
                           str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0",
                                   BENCH_PARAMS=str(root / "params.yaml")))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "tables" / "claims.csv").read_bytes() == CLAIMS.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], "the staging folder left behind"
