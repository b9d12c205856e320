"""``python -m bench study reread``: a published study's time-to-target claims recomputed from its published tables
(regimes.csv, eval.csv) with another evaluation window. Window 1 is the registered measure: it must give back the
published verdicts and effects; a wider window is labelled exploratory."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from bench.metrics.report import read_table
from bench.study import load_study
from bench.study.reread import reread
from support import REPO, bench_cli

PUBLISHED = REPO / "docs" / "results" / "regimes"


def test_the_registered_window_gives_back_every_published_verdict_and_a_wider_one_is_exploratory():
    study = load_study("regimes")
    same = reread(study, PUBLISHED, 1)  # regimes registered window 1
    published = read_table(PUBLISHED / "tables" / "claims.csv").set_index(["source", "claim", "workload"])
    assert len(same) == len(study.spec.claims) == 7  # its own rules, throughput and accuracy too
    for r in same.itertuples():
        old = published.loc[(r.source, r.claim, r.workload)]
        assert r.verdict == old["verdict"] == r.published_verdict and not r.verdict.startswith("exploratory")
        assert r.effect == pytest.approx(old["effect"], rel=1e-12) and r.ci_low == pytest.approx(old["ci_low"], rel=1e-12)
        assert r.loo_low <= r.loo_high  # n = 8: a range with one seed left out for every claim
    wider = reread(study, PUBLISHED, 3)
    assert 4 <= len(wider) < len(same)  # only the time-to-target claims: the window changes nothing else
    assert set(wider["claim"]) < set(same["claim"]) and wider["verdict"].str.startswith("exploratory: ").all()
    assert wider["evidence"].str.contains("measured with target_window 3, registered 1").all()
    before = same.set_index("claim").loc[wider["claim"], "effect"].to_numpy()
    assert (wider["effect"].to_numpy() != before).any()  # the window changes the times (one evaluation no longer decides)

    out = bench_cli("study", "reread", "--study", "regimes", "--target-window", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("| source | claim | time to target over 3 evaluations |")
    assert out.stdout.count("exploratory: ") == len(wider)
    registered = bench_cli("study", "reread", "--study", "regimes")  # no window: the registered one, every claim
    assert registered.returncode == 0, registered.stderr
    assert registered.stdout.startswith("| source | claim | as registered |")
    assert registered.stdout.count("\n| ") == len(same) and "exploratory" not in registered.stdout


def test_a_bad_window_or_an_unpublished_folder_is_one_line_and_exit_2(tmp_path):
    bad = bench_cli("study", "reread", "--study", "regimes", "--target-window", "0")
    assert bad.returncode == 2 and "--target-window must be a whole number of evaluations >= 1, got 0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    folder = tmp_path / "regimes"
    shutil.copytree(PUBLISHED, folder)
    (folder / "tables" / "eval.csv").unlink()
    missing = bench_cli("study", "reread", "--study", "regimes", "--target-window", "3", "--to", str(folder))
    assert missing.returncode == 2 and "missing" in missing.stderr and "eval.csv" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    # a run whose evaluations are not in the table is named
    ev = pd.read_csv(PUBLISHED / "tables" / "eval.csv")
    first = ev["run"].iloc[0]
    ev[ev["run"] != first].to_csv(folder / "tables" / "eval.csv", index=False)
    gone = bench_cli("study", "reread", "--study", "regimes", "--target-window", "3", "--to", str(folder))
    assert gone.returncode == 2 and f"run {first} has no held-out evaluations" in gone.stderr
