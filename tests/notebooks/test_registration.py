"""Registration before results, end to end in a git repository (a copy of this one): register, commit, run, publish;
then a run from a dirty tree, and runs under an older registration, are refused by publish before it writes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from bench.metrics.report import read_table
from support import copy_repository

STUDY = """description: sync at np 1 for a few steps, 2 repeats (tests/notebooks/test_registration.py)
profile: tiny
algorithms: [sync]
np: [1]
repeats: 2
target_accuracy: 0.3
sets: {max_steps: 12, eval_every: 4}
claims: [vishnu]
"""


def sh(repo, *args, check=True):
    env = dict(os.environ, PYTHONPATH=str(repo), BENCH_PROGRESS="0")
    env.pop("BENCH_PARAMS", None)
    proc = subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert not check or proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def bench(repo, *args, check=True):
    return sh(repo, sys.executable, "-m", "bench", *args, check=check)


def commit(repo, message):
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


@pytest.mark.timeout(1200)
def test_register_commit_run_publish_and_refuse_dirty_or_foreign_runs(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    (repo / "pipelines" / "studies" / "reg.yaml").write_text(STUDY)
    commit(repo, "the code and the study")

    out = bench(repo, "study", "register", "--study", "reg").stdout
    reg_file = repo / "pipelines" / "registrations" / "reg.json"
    record = json.loads(reg_file.read_text())
    assert "commit it before the first judged run" in out
    assert [c["run"] for c in record["cells"]] == ["sync-np1-r0@local", "sync-np1-r1@local"]
    assert len(record["seeds"]) == 2 and record["seeds"][1] == record["seeds"][0] + 1
    assert record["claims"][0]["quote"] and record["metrics"]["target_accuracy"] == 0.3
    again = bench(repo, "study", "register", "--study", "reg", check=False)
    assert again.returncode == 2 and "registered already" in again.stderr and len(again.stderr.splitlines()) == 1
    commit(repo, "register reg")

    bench(repo, "study", "run", "sync", "--study", "reg")
    bench(repo, "study", "analyse", "regimes", "--study", "reg")
    dest = tmp_path / "published"
    bench(repo, "study", "publish", "--study", "reg", "--to", str(dest))
    runs = read_table(dest / "runs.csv")
    sha = hashlib.sha256(reg_file.read_bytes()).hexdigest()
    assert (runs["registration"] == sha[:12]).all() and runs["judged"].isna().all()  # every run judged: no reason
    assert set(runs["dirty"].astype(str)) == {"False"} and runs["config_hash"].str.len().eq(64).all()
    claims = read_table(dest / "tables" / "claims.csv")
    assert (claims["registration"] == sha[:12]).all()
    assert "## Registration and provenance" in (dest / "README.md").read_text()

    # a run from a dirty tree (a tracked file changed): publish refuses, naming it, and writes nothing
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nedited\n")
    bench(repo, "run", "sync", "--np", "1", "--profile", "tiny", "--study", "reg", "--tag", "extra",
          "--set", "max_steps=4", "--set", "eval_every=0")
    refused_dest = tmp_path / "refused"
    refused = bench(repo, "study", "publish", "--study", "reg", "--to", str(refused_dest), check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "sync-np1-extra@local (run from a dirty tree)" in refused.stderr
    assert not refused_dest.exists()
    sh(repo, "git", "checkout", "--", "README.md")
    sh(repo, "rm", "-r", str(repo / "results" / "reg" / "runs" / "sync" / "local" / "sync-np1-extra"))

    # a new registration: the runs made under the old one can no longer carry its verdicts
    bench(repo, "study", "register", "--study", "reg", "--force")
    commit(repo, "register reg again")
    refused = bench(repo, "study", "publish", "--study", "reg", "--to", str(refused_dest), check=False)
    assert refused.returncode == 2 and "run under another registration" in refused.stderr
    assert not refused_dest.exists()
