"""Calibrations per machine: the constants a host's CPU sets, measured on each machine the published cells ran on.

The model's calibration (:mod:`.calibrate`) is of one machine: the one regimes-v1's calibration run had (``machine``
in calibration.json, :func:`bench.predict.cells.study_machine`). The published studies ran on three (their
``system.md``): an Intel Xeon and an AMD EPYC under one virtual machine's kernel build (fc-v669), and an AMD EPYC
under another (fc-v782), on which an emulated host computes a LeNet-5 step of 32 samples in 14.6 ms at full speed
against 4.25 ms. A cell is predicted with the constants of the machine it ran on where a record of that machine
exists, and says so (``machine_calibrated`` in the validation); else with the default ones.

A record (``docs/results/predict/machines/<slug>.json``, written by ``python -m bench predict --measure-machine`` on
the machine, or ``--machine-from STUDY[,STUDY]`` from the calibration runs published studies made on it) holds what
the machine's calibration run measured, the same run as a study's ``calibrate`` stage makes (``sync`` at
one worker on one emulated host at the emulated hosts' share of a core, the regimes workload: no study cell), and
names the collectives micro-benchmark measured on it (``--collectives``: ``python -m bench.perf collectives
--jsonl``), whose transport fit replaces the default one. What it overrides: ``c_full_s`` (the median step, the
compute at full speed), ``eta`` (that over the mean step times the quota) and ``transport``. Every other constant
(Horovod's and the protocols' host costs, fitted on named cells of one machine) stays the default machine's; that
is a stated limit, not a measurement of the other machine.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

from .. import BenchError
from ..layout import REPO_ROOT
from . import transport

MACHINES = REPO_ROOT / "docs" / "results" / "predict" / "machines"
CALIBRATION_PROFILE = "regimes"
"""The workload the model's compute constants are of (``lenet@32``: regimes-v1's calibration run)."""


def slug(machine: str) -> str:
    """A file name for a machine: its CPU and kernel build, lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", machine.lower()).strip("-")[:120]


def this_machine() -> str:
    """This machine as the runs record it (``system.json``'s CPU and platform, :func:`bench.predict.cells.machine_of`)."""
    import platform

    from ..system import cpu_model
    from .cells import machine_of

    return machine_of(cpu_model(), platform.platform())


def constants(record: dict, cpu: float) -> dict:
    """The constants a record gives: ``c_full_s``, ``eta`` and, when it names its collectives, ``transport`` (with
    its fit table under ``transport_fit``)."""
    median, mean = float(record["compute_s_median"]), float(record["compute_s_per_step"])
    if not (median > 0 and mean > 0):
        raise BenchError(f"machine record of {record.get('machine')!r}: compute_s_median {median!r} and "
                         f"compute_s_per_step {mean!r} must be > 0 seconds")
    share = float(record.get("cpu_per_host") or cpu)  # the quota the record's run had
    out = {"c_full_s": median, "eta": median / (mean * share), "source": record.get("source", "")}
    cells_file = record.get("collectives")
    if cells_file:
        fitted = transport.fit(transport.load_cells(REPO_ROOT / cells_file))
        out["transport"] = fitted["constants"]
        out["transport_fit"] = {"source": cells_file, "cells": fitted["cells"], "table": fitted["table"]}
    return out


def load(cpu: float, folder: Path = MACHINES) -> dict:
    """Every machine record under ``folder``: {machine: :func:`constants`}."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        try:
            record = json.loads(path.read_text())
            out[record["machine"]] = constants(record, cpu)
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError(f"{path}: not a machine record ({type(e).__name__}: {e})") from None
    return out


def for_machine(calibration: dict, machine: str) -> tuple[dict, bool]:
    """The constants to predict a cell of ``machine`` with, and whether they are that machine's own: its record
    laid over the calibration, the calibration itself when it is of that machine, else the calibration (False)."""
    own = (calibration.get("machines") or {}).get(machine)
    if own:
        return {**calibration, **{k: v for k, v in own.items() if k in ("c_full_s", "eta", "transport")}}, True
    return calibration, bool(machine) and machine == calibration.get("machine")


def _write(record: dict, folder: Path) -> Path:
    """Write a machine's record as ``folder/<slug of its machine>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{slug(record['machine'])}.json"
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return out


def from_studies(names: list[str], cpu: float, folder: Path = MACHINES, root: Path | None = None) -> Path:
    """A record of a machine this one is not, from the calibration runs published studies made on it (their
    ``calibration.json``: the same run as :func:`measure` makes, on that machine when the study ran); every study must
    have one and all must name the same machine (their ``system.md``). The medians over the runs; no collectives."""
    import statistics

    from .cells import RESULTS, study_machine

    root = root or RESULTS
    runs, found = [], set()
    for name in names:
        path = root / name / "calibration.json"
        if not (root / name).is_dir():
            raise BenchError(f"--machine-from: unknown study {name!r}; valid (a published calibration run): "
                             + ", ".join(sorted(p.parent.name for p in root.glob("*/calibration.json"))))
        data = json.loads(path.read_text()) if path.is_file() else {}
        if not data.get("compute_s_median") or not data.get("compute_s_per_step"):
            raise BenchError(f"{path}: no calibration run (compute_s_median and compute_s_per_step); "
                             f"a machine record needs the studies' own calibration runs")
        runs.append(data)
        found.add(study_machine(name, root))
    if len(found) != 1 or "" in found or "mixed" in found:
        raise BenchError(f"studies {','.join(names)} ran on {sorted(found)}: a machine record needs one machine")
    machine = found.pop()
    record = {"machine": machine, "cpu_per_host": cpu, "collectives": "", "steps": sum(r.get("steps") or 0 for r in runs),
              "compute_s_median": statistics.median(r["compute_s_median"] for r in runs),
              "compute_s_per_step": statistics.median(r["compute_s_per_step"] for r in runs),
              "source": "the medians of the calibration runs of " + ", ".join(
                  f"{n} (docs/results/{n}/calibration.json)" for n in names) + ", made on this machine when each "
                  "study ran (python -m bench predict --machine-from " + ",".join(names) + ")"}
    return _write(record, folder)


def _check_collectives(collectives: str) -> None:
    """Refuse, before the calibration run, a ``--collectives`` file that is missing or that the transport fit cannot
    read (the record would name a file no later forecast could use)."""
    what = "a `python -m bench.perf collectives --jsonl` output of this machine"
    path = REPO_ROOT / collectives
    if not path.is_file():
        raise BenchError(f"--collectives {collectives!r}: no such file under the repository ({what})")
    try:
        transport.fit(transport.load_cells(path))
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as e:
        raise BenchError(f"--collectives {collectives!r}: not {what} ({type(e).__name__}: {e})"[:400]) from None


FULL_SPEED_SPREAD = 1.5
"""Most a calibration run's median step may exceed its 10th percentile: past it, most steps did not run at full
speed (a host throttled by its quota more often than not: a busy machine), and the median is no full-speed step."""


def check_full_speed(step_s) -> None:
    """BenchError where the median of a calibration run's steps is not a full-speed step (:data:`FULL_SPEED_SPREAD`):
    on a throttled host the steps split into a full-speed mode and a throttled one, and a median in the second (one
    such run: 20 ms and 85 ms steps, median 85) would make this machine's compute look 4 x slower."""
    import numpy as np

    steps = np.asarray(step_s, dtype=float)
    p10, median = float(np.percentile(steps, 10)), float(np.median(steps))
    if not median <= FULL_SPEED_SPREAD * p10:
        raise BenchError(f"the calibration run's median step {1e3 * median:.1f} ms is over {FULL_SPEED_SPREAD:g} x its "
                         f"10th percentile ({1e3 * p10:.1f} ms): most steps did not run at full speed (a busy machine "
                         f"throttling its hosts); run it again with nothing else running")


def measure(collectives: str | None, cpu: float, folder: Path = MACHINES) -> Path:
    """Run this machine's calibration run (``sync`` at np 1 on one emulated host, the regimes workload) and write its
    record: the median and the mean of the timed steps, with the collectives file it names (a path from the
    repository's root, measured on this machine by ``python -m bench.perf collectives --jsonl``)."""
    from ..launch import run as launch_run
    from ..metrics.selection import timed_steps
    from ..resolve import resolve
    from ..results import load_run, read_json
    from ..study.calibrate import step_seconds
    from ..system import git_record

    if collectives:
        _check_collectives(collectives)
    cfg = resolve("sync", np=1, profile=CALIBRATION_PROFILE, hardware="emu", overrides={}, study="predict",
                  tag="machine", check=True)
    from ..cluster import down, state

    was_up = state() is not None
    try:
        run_dir, rc = launch_run(cfg, REPO_ROOT / "results" / "predict" / "machine", force=True, echo=False)
    finally:
        if not was_up:
            down()  # a one-shot measurement leaves no emulated cluster it brought up
    summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
    if rc or summary.get("status") != "ok":
        raise BenchError(f"the machine's calibration run {run_dir} did not finish ({summary.get('status', rc)})")
    steps = timed_steps(load_run(run_dir).steps)
    check_full_speed(steps["step_s"])
    machine = this_machine()
    git = git_record()
    record = {"machine": machine, **step_seconds(steps), "steps": int(len(steps)), "cpu_per_host": cpu,
              "collectives": collectives or "",
              "source": f"python -m bench predict --measure-machine at {(git.get('commit') or 'unknown')[:12]}"
                        f"{' (with uncommitted changes)' if git.get('dirty') else ''}, "
                        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC: sync np 1 on one "
                        f"emulated host ({cpu:g} of a core), profile {CALIBRATION_PROFILE}, {len(steps)} timed steps"}
    return _write(record, folder)
