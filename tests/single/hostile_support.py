"""The check every row of the hostile-input tables runs (tests/single/test_hostile_*.py), and the cases' shared
makers: a params.yaml copy, a small finished run directory damaged on purpose, ``bench te`` of it."""

from __future__ import annotations

import json
import os
import uuid
import shutil
from pathlib import Path

import psutil

from forked import run_module
from support import REPO

RUN = ["run", "sync", "--np", "1", "--profile", "tiny", "--quiet"]
MARKER = Path("/tmp") / f"issue40-{uuid.uuid4().hex}"
"""The file a case's shell command would create (a name of this session's own: a marker left by another never counts)."""


def params_copy(tmp: Path, extra: str = "", replace: tuple[str, str] | None = None) -> Path:
    """A params.yaml beside the repository's pipelines/ (hardware profiles, studies), with ``extra`` appended."""
    (tmp / "p").mkdir(exist_ok=True)
    text = (REPO / "params.yaml").read_text()
    if replace:
        text = text.replace(*replace)
    (tmp / "p" / "params.yaml").write_text(text + extra)
    shutil.copytree(REPO / "pipelines", tmp / "p" / "pipelines", dirs_exist_ok=True)
    return tmp / "p" / "params.yaml"


def a_run(t: Path, damage=None) -> Path:
    """A small finished run directory (written by the suite's own writers), damaged by ``damage(dir)``."""
    from bench.resolve import resolve
    from bench.results import JsonlWriter, StepRecord, write_json_atomic, write_summary

    d = t / "run"
    d.mkdir(parents=True)
    write_json_atomic(d / "config.json", resolve("sync", np=1, profile="tiny", check=False).to_dict())
    w = JsonlWriter(d / "rank0.jsonl")
    for s in range(1, 21):
        w.write(StepRecord(step=s, epoch=s / 20, t=0.1 * s, samples=16, loss=1 / s, accuracy=0.04 * s, step_s=0.1,
                           compute_s=0.1, comm_s=0.0, wait_s=0.0, injected_s=0.0, staleness=None, bytes_sent=0,
                           warmup=s <= 2).line())
    w.close()
    (d / "eval.jsonl").write_text(json.dumps({"step": 20, "epoch": 1, "t": 2.0, "samples_seen": 320, "loss": 0.5,
                                              "accuracy": 0.8, "final": True}) + "\n")
    write_summary(d, "ok", final_accuracy=0.8)
    if damage:
        damage(d)
    return d


def records(edit):
    """``damage`` rewriting rank0.jsonl's records with ``edit(record)``."""
    def damage(d: Path):
        recs = [json.loads(line) for line in (d / "rank0.jsonl").read_text().splitlines()]
        for r in recs:
            edit(r)
        (d / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return damage


def te(damage=None, *extra: str):
    def case(t: Path):
        good = a_run(t / "b")
        return ["te", str(a_run(t / "a", damage)), str(good), *extra], {}
    return case


def jobs_of(folder: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if str(folder) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid():
                found.append(p)
        except psutil.Error:
            pass
    return found


def check_refused(tmp_path: Path, make, fragment: str) -> None:
    """``make(tmp_path)``'s command ends with exit 2, one line holding ``fragment``, nothing written, nothing left."""
    args, env, *where = make(tmp_path)  # where: the folder to run in, if not the repository (a copy of it)
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    proc = run_module("bench", args, where[0] if where else REPO, {**os.environ, "PYTHONPATH": str(REPO),
                                                                   "BENCH_PROGRESS": "0", **env})
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) < 1000, proc.stderr[-2000:]
    assert fragment in lines[0], lines[0]
    assert proc.stdout == ""
    assert not (tmp_path / "out").exists(), "written under the output folder"
    assert {p.relative_to(tmp_path) for p in tmp_path.rglob("*")} == before, "a file written"
    assert not MARKER.exists(), f"{MARKER} created: the configuration ran a command"
    assert not jobs_of(tmp_path), "a process of the case left running"
