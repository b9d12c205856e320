"""The fourth sweep's reader and study cases, kept as a table (issue 48, items 3 and 4): impossible run records given to
``bench te`` (and so to every reader of a run, :func:`bench.results.load_run`), non-regular files where a results file
belongs, and ``study plan|run|analyse|register`` on corrupt or hostile inputs. Each must end like a row of
test_hostile_inputs.py (whose check this table runs): exit 2, one line naming the value or the file, nothing written,
nothing left running. Before issue 48 each row printed a number with exit 0, hung, or printed a traceback (often after
other files were written).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hostile_support import a_run, check_refused, params_copy, records, te
from support import copy_repository

STUDY = "description: the sweep's study\nprofile: tiny\nalgorithms: [sync]\nnp: [1]\ntarget_accuracy: 0.3\n"


def twice(d: Path):
    """Every record of rank0.jsonl written twice."""
    lines = (d / "rank0.jsonl").read_text().splitlines(keepends=True)
    (d / "rank0.jsonl").write_text("".join(line + line for line in lines))


def config_np(n):
    def damage(d: Path):
        cfg = json.loads((d / "config.json").read_text())
        cfg["launch"]["np"] = n
        (d / "config.json").write_text(json.dumps(cfg))
    return damage


def summary_with(**fields):
    def damage(d: Path):
        (d / "summary.json").write_text(json.dumps({**json.loads((d / "summary.json").read_text()), **fields}))
    return damage


def replaced(name: str, by: str):
    """``name`` in the run directory replaced by a FIFO or a directory."""
    def damage(d: Path):
        (d / name).unlink(missing_ok=True)
        os.mkfifo(d / name) if by == "fifo" else (d / name).mkdir()
    return damage


def a_study(t: Path, body: str = STUDY) -> Path:
    """A params.yaml copy with the study ``hostile``; returns its results folder (not created)."""
    params = params_copy(t)
    (params.parent / "pipelines" / "studies" / "hostile.yaml").write_text(body)
    return params.parent / "results" / "hostile"


def study_cmd(t: Path, *args: str):
    return ["study", *args, "--study", "hostile"], {"BENCH_PARAMS": str(t / "p" / "params.yaml")}


def planned(plan_text: str | None):
    """``study run sync`` with plan/sync/plan.json holding ``plan_text`` (None: a FIFO)."""
    def case(t: Path):
        root = a_study(t)
        (root / "plan" / "sync").mkdir(parents=True)
        path = root / "plan" / "sync" / "plan.json"
        os.mkfifo(path) if plan_text is None else path.write_text(plan_text)
        return study_cmd(t, "run", "sync")
    return case


def plan_of(body: str = STUDY, before=None):
    """``study plan`` of a study file with ``body``, after ``before(results folder)``."""
    def case(t: Path):
        root = a_study(t, body)
        if before:
            before(root)
        return study_cmd(t, "plan")
    return case


def calibration(text: str):
    def write(root: Path):
        root.mkdir(parents=True, exist_ok=True)
        (root / "calibration.json").write_text(text)
    return write


def in_copy(args: list[str], damage, body: str = STUDY):
    """``python -m bench ARGS --study hostile`` in a copy of the repository (registrations and the notebooks' results
    live beside its code) after ``damage(its results folder of the study)``."""
    def case(t: Path):
        repo = copy_repository(t / "repo")
        (repo / "pipelines" / "studies" / "hostile.yaml").write_text(body)
        damage(repo / "results" / "hostile")
        return ([*args, "--study", "hostile"],
                {"BENCH_PARAMS": str(repo / "params.yaml"), "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1"}, repo)
    return case


def analysed(before, notebook: str = "convergence", body: str = STUDY):
    """``study analyse NOTEBOOK`` after ``before(results folder)`` (the executed notebook, written, would show)."""
    return in_copy(["study", "analyse", notebook], before, body)


def one_run(damage):
    """A finished run of the study, damaged by ``damage``."""
    return lambda root: a_run(root / "runs" / "sync" / "local", damage)


def registered(damage):
    """``study register`` in a copy of the repository after ``damage(its results folder of the study)``."""
    return in_copy(["study", "register"], damage)


def registrations_file(root: Path):
    repo = root.parent.parent
    shutil.rmtree(repo / "pipelines" / "registrations", ignore_errors=True)
    (repo / "pipelines" / "registrations").write_text("not a folder\n")


def registration_as(kind: str):
    def damage(root: Path):
        repo = root.parent.parent
        (repo / "pipelines" / "registrations").mkdir(exist_ok=True)
        path = repo / "pipelines" / "registrations" / "hostile.json"
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
    return damage


CASES = [
    # te and every reader of a run: impossible records
    ("te/a device file for a run", lambda t: (["te", "/dev/null", "/dev/null"], {}), "/dev/null/config.json: none here"),
    ("te/accuracy above 1", te(records(lambda r: r.update(accuracy=5.0))), "rank0.jsonl:1: record's 'accuracy' is 5.0, not a fraction in [0, 1]"),
    ("te/negative accuracy", te(records(lambda r: r.update(accuracy=-1))), "rank0.jsonl:1: record's 'accuracy' is -1"),
    ("te/negative samples", te(records(lambda r: r.update(samples=-16))), "rank0.jsonl:1: record's 'samples' is -16, not a count"),
    ("te/step beyond int64", te(records(lambda r: r.update(step=r["step"] + 2**63))), "record's 'step' is 9223372036854775809, not a count"),
    ("te/step far beyond int64", te(records(lambda r: r.update(step=r["step"] * 2**70))), "rank0.jsonl:1: record's 'step' is"),
    ("te/negative step", te(records(lambda r: r.update(step=-r["step"]))), "rank0.jsonl:1: record's 'step' is -1, not a count"),
    ("te/fractional step", te(records(lambda r: r.update(step=r["step"] + 0.5))), "rank0.jsonl:1: record's 'step' is 1.5, not a count"),
    ("te/negative step time", te(records(lambda r: r.update(step_s=-0.1))), "rank0.jsonl:1: record's 'step_s' is -0.1, not a number of seconds"),
    ("te/every record twice", te(twice), "rank0.jsonl:2: step 1 recorded again (first on line 1)"),
    ("te/rank file beyond np", te(lambda d: shutil.copy(d / "rank0.jsonl", d / "rank5.jsonl")),
     "rank5.jsonl: no worker of this run writes it (its workers are ranks 0..0, np 1"),
    ("te/rank file named twice", te(lambda d: shutil.copy(d / "rank0.jsonl", d / "rank00.jsonl")), "rank00.jsonl: no worker of this run"),
    ("te/np -5 in config.json", te(config_np(-5)), "config.json: launch.np is -5; a run has at least 1 worker"),
    ("te/np 0 in config.json", te(config_np(0)), "config.json: launch.np is 0"),
    ("te/eval accuracy above 1", te(lambda d: (d / "eval.jsonl").write_text(json.dumps(
        {"step": 20, "epoch": 1, "t": 2.0, "samples_seen": 320, "loss": 0.5, "accuracy": 80, "final": True}) + "\n")),
     "eval.jsonl:1: record's 'accuracy' is 80, not a fraction in [0, 1]"),
    ("te/summary accuracy above 1", te(summary_with(final_accuracy=80)), "summary.json: final_accuracy is 80, not a fraction"),
    # te: non-regular files where a results file belongs (a FIFO hung the reader, a directory was IsADirectoryError)
    ("te/summary.json a FIFO", te(replaced("summary.json", "fifo")), "summary.json: not a regular file (a FIFO)"),
    ("te/system.json a FIFO", te(replaced("system.json", "fifo")), "system.json: not a regular file (a FIFO)"),
    ("te/summary.json a directory", te(replaced("summary.json", "dir")), "summary.json: not a regular file (a directory)"),
    ("te/rank0.jsonl a FIFO", te(replaced("rank0.jsonl", "fifo")), "rank0.jsonl: not a regular file (a FIFO)"),
    ("te/rank0.jsonl a directory", te(replaced("rank0.jsonl", "dir")), "rank0.jsonl: not a regular file (a directory)"),
    ("te/eval.jsonl a FIFO", te(replaced("eval.jsonl", "fifo")), "eval.jsonl: not a regular file (a FIFO)"),
    ("te/config.json a FIFO", te(replaced("config.json", "fifo")), "config.json: not a regular file (a FIFO)"),
    # study run: the plan it reads
    ("plan/plan.json garbage", planned("{{ not json"), "plan.json:1: corrupt JSON"),
    ("plan/plan.json not an object", planned("[1, 2]"), "plan.json: expected a JSON object, got list"),
    ("plan/runs not a list", planned('{"runs": {"a": 1}}'), "plan.json: 'runs' is not a list of planned runs"),
    ("plan/entry without a name", planned('{"runs": [{"hardware": "local", "config": "plan/sync/local/x.json"}]}'),
     "plan.json: runs[0] has no 'name'"),
    ("plan/entry's config outside the study", planned('{"runs": [{"name": "x", "hardware": "local", "config": "../../../etc/hostname"}]}'),
     "lies outside"),
    ("plan/plan.json a FIFO", planned(None), "plan.json: not a regular file (a FIFO)"),
    # study plan: values that plan nothing, or without bound; folders that are files
    ("plan/repeats a billion", plan_of(STUDY + "repeats: 1000000000\n"), "repeats must be in [1, 1000]"),
    ("plan/grid of an empty list", plan_of(STUDY + "grid: {lr: []}\n"), "grid 'lr' has no values"),
    ("plan/np an empty list", plan_of(STUDY.replace("np: [1]", "np: []")), "np has no worker counts"),
    ("plan/grid of a billion points", plan_of(STUDY + "grid: {lr: [" + ", ".join(["0.1"] * 1000) + "], momentum: ["
                                              + ", ".join(["0.5"] * 1000) + "]}\n"), "plans 1000000 runs of an algorithm"),
    ("plan/plan folder a file", plan_of(before=lambda root: (root.mkdir(parents=True), (root / "plan").write_text("x"))),
     "plan: a file, not a folder"),
    ("plan/garbled calibration", plan_of(STUDY.replace("target_accuracy: 0.3\n", "sets: {link: share0.5, emulated_hosts: 1}\n"),
                                         calibration("{ garbled")), "calibration.json:1: corrupt JSON"),
    ("plan/calibration without links", plan_of(STUDY.replace("target_accuracy: 0.3\n", "sets: {link: share0.5, emulated_hosts: 1}\n"),
                                               calibration('{"target_accuracy": 0.5, "links": []}')),
     "calibration.json: 'links' is not"),
    # study analyse: what the notebooks read, refused before the executed notebook is replaced
    ("analyse/garbled calibration", analysed(calibration("{ garbled"), body=STUDY.replace("target_accuracy: 0.3\n", "")),
     "calibration.json:1: corrupt JSON"),
    ("analyse/calibration target a text", analysed(calibration('{"target_accuracy": "high"}'), body=STUDY.replace("target_accuracy: 0.3\n", "")),
     "calibration.json: 'target_accuracy' is 'high', not"),
    ("analyse/text wall_s", analysed(one_run(summary_with(wall_s="long")), "speedup"), "summary.json: wall_s is 'long', not a number of seconds"),
    ("analyse/accuracy above 1", analysed(one_run(records(lambda r: r.update(accuracy=5.0))), "speedup"),
     "rank0.jsonl:1: record's 'accuracy' is 5.0"),
    # study register: where it writes, and the registration it finds
    ("register/registrations a file", registered(registrations_file), "registrations: a file, not a folder"),
    ("register/registration a FIFO", registered(registration_as("fifo")), "hostile.json: not a regular file (a FIFO)"),
    ("register/registration a directory", registered(registration_as("dir")), "hostile.json: not a regular file (a directory)"),
    ("register/garbled calibration", registered(calibration("{ garbled")),
     "calibration.json:1: corrupt JSON"),
]


@pytest.mark.parametrize("case_id, make, fragment", CASES, ids=[c[0] for c in CASES])
def test_reader_refuses_in_one_line_with_nothing_written_or_left(tmp_path, case_id, make, fragment):
    check_refused(tmp_path, make, fragment)
