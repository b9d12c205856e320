"""``python -m bench.perf harness``: the worker's loop taken apart at np=1, one piece at a time beside the plain loop
(a subprocess: it starts Horovod at size 1 in its own process)."""

from __future__ import annotations

import json
import os

import pytest

from bench.perf.harness import VARIANTS
from forked import run_module
from support import REPO


def perf(*args):
    return run_module("bench.perf", ["harness", *args], REPO, dict(os.environ, PYTHONPATH=str(REPO)), timeout=600)


def test_each_variant_is_measured_every_repeat_and_set_beside_the_plain_loop(tmp_path):
    out = tmp_path / "harness.json"
    proc = perf("--profile", "tiny", "--repeats", "3", "--set", "max_steps=40", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert list(data["repeats"]) == list(VARIANTS) and [r["variant"] for r in data["summary"]] == list(VARIANTS)
    for kind in VARIANTS:
        assert len(data["repeats"][kind]) == 3 and all(r["throughput"] > 0 for r in data["repeats"][kind])
    rows = data["summary"]
    assert rows[0]["plain_effect"] == pytest.approx(1.0) and rows[0]["piece_us"] == 0.0
    # each piece is the step's growth over the variant before it: the pieces add up to the whole harness
    assert sum(r["piece_us"] for r in rows) == pytest.approx(rows[-1]["us_per_step"] - rows[0]["us_per_step"])
    for r in rows:
        assert r["us_per_step"] == pytest.approx(1e6 * 16 / r["samples_s"])  # the tiny profile's batch of 16
        assert r["plain_n"] == 3 and r["plain_ci_low"] <= r["plain_effect"] <= r["plain_ci_high"]
    assert "snapshots / plain" in proc.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--repeats", "0"], "--repeats must be in [1, 10000] (repeats), got 0"),
    (["--set", "warmup_steps=0"], "warmup_steps 0: the timed window needs at least one warm-up step"),
    (["--set", "lr=fast"], "lr"),
    (["--profile", "nope"], "nope"),
])
def test_bad_input_is_refused_in_one_line_before_anything_runs(args, fragment):
    proc = perf("--profile", "tiny", *args) if "--profile" not in args else perf(*args)
    assert proc.returncode == 2 and fragment in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "repeat 1" not in proc.stdout
