"""The measured cells of the published studies, each with the configuration its runs had.

A cell is one algorithm at one worker count and grid point of a published study (``docs/results/<study>/``): its
measured throughput is the median over the repeats of ``tables/regimes.csv`` (samples a second, all workers), its
time split the medians of ``tables/time_split.csv``, its staleness the median of the runs' mean. Its configuration is
rebuilt the way the study planned it (params.yaml's study: ``sets``, ``sets_by_algorithm``, the grid point), with the
link the runs really had (the ``link`` column: a share aimed at becomes the rate the study's calibration gave it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import BenchError
from ..layout import REPO_ROOT, run_name
from ..resolve import resolve
from ..study import load_study
from ..study.spec import published_studies
from ..study.plan import grid_points

RESULTS = REPO_ROOT / "docs" / "results"


def read_published(path: Path, columns, remedy: str) -> pd.DataFrame:
    """A published table the model reads (under :data:`RESULTS`): BenchError naming the file where it is missing, not a
    table, or lacks one of ``columns``, with ``remedy`` (how to get it back)."""
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise BenchError(f"{path}: not found; {remedy}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise BenchError(f"{path}: not a table ({str(e).splitlines()[0] if str(e) else type(e).__name__}); {remedy}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise BenchError(f"{path}: no column {missing[0]!r}; {remedy}")
    return df
def predict_studies() -> tuple[str, ...]:
    """The published studies whose cells the model predicts: those whose file says ``published: predict`` (all run on
    the same emulated cluster with the same workload). Read when asked, not at import: every ``bench`` command imports
    this module, and a study file that does not load must fail only the commands that read it."""
    return tuple(published_studies("predict"))


@dataclass
class Cell:
    study: str
    algorithm: str
    np: int
    point: str
    link: str
    straggler: str
    repeats: int
    throughput: float
    compute_s: float
    comm_s: float
    wait_s: float
    staleness: float
    cfg: object
    machine: str = ""
    """The machine its study's runs had (:func:`study_machine`): calibrations are per machine."""

    @property
    def key(self) -> str:
        return run_name(self.algorithm, self.np, self.point)


def _overrides(study, algorithm: str, np: int, point: str, link: str) -> dict:
    base = study.overrides(algorithm, np, study.hardware[0])
    sets = next((s for tag, s in grid_points(algorithm, study.spec) if tag == point), None)
    if sets is None:
        raise LookupError(f"{study.name}: no grid point {point!r} for {algorithm}")
    out = {**base, **sets}
    out["link"] = "" if link == "unshaped" else link
    return out


def machine_of(cpu_model: str, platform: str) -> str:
    """A machine as the model's calibrations name it: the CPU and the platform (kernel build included) its runs
    recorded (``system.json``'s ``cpu_model`` and ``platform``), e.g. ``AMD EPYC, Linux-6.18.44-fc-v782-x86_64-...``:
    the same CPU name under another virtual machine's kernel computed this workload 3.4 x slower (docs/results/predict/
    NOTES.md, 2026-11-30)."""
    return f"{cpu_model}, {platform}"


def study_machine(name: str, root: Path = RESULTS) -> str:
    """The machine a published study ran on, read from its ``system.md`` (one ``- machine:`` line per hardware and
    link, written by ``study publish`` from the runs' ``system.json``); ``"mixed"`` if they differ, ``""`` if none."""
    path = root / name / "system.md"
    if not path.is_file():
        return ""
    found = set()
    for line in path.read_text().splitlines():
        m = re.match(r"- machine: (.+?) \(\d+ cores\), [^,]+ GiB, ([^,]+), GPUs", line)
        if m:
            found.add(machine_of(m.group(1), m.group(2)))
    return found.pop() if len(found) == 1 else ("mixed" if found else "")


def study_cells(name: str, root: Path = RESULTS) -> list[Cell]:
    """Every cell of a published study with at least one run that has a throughput; [] if it is not published."""
    tables = root / name / "tables"
    if not (tables / "regimes.csv").is_file():
        return []
    runs = pd.read_csv(tables / "regimes.csv")
    split = pd.read_csv(tables / "time_split.csv")
    runs = runs.merge(split[["algorithm", "np", "tag", "compute_s", "comm_s", "wait_s"]], on=["algorithm", "np", "tag"],
                      how="left")
    runs["point"] = runs["point"].fillna("")
    study = load_study(name)
    cells = []
    machine = study_machine(name, root)
    keys = ["algorithm", "np", "point", "link", "straggler"]
    for (algo, np_, point, link, straggler), g in runs.groupby(keys, sort=True):
        g = g[g["throughput"].notna()]
        if g.empty:
            continue
        cfg = resolve(algo, np=int(np_), profile=study.profile, hardware=study.hardware[0],
                      overrides=_overrides(study, algo, int(np_), point, link), study=name, check=False)
        cells.append(Cell(name, algo, int(np_), point, link, straggler, len(g), float(g["throughput"].median()),
                          float(g["compute_s"].median()), float(g["comm_s"].median()), float(g["wait_s"].median()),
                          float(g["mean_staleness"].median()), cfg, machine))
    return cells


def all_cells(studies=None, root: Path = RESULTS) -> list[Cell]:
    return [c for s in (predict_studies() if studies is None else studies) for c in study_cells(s, root)]


def find(cells: list[Cell], study: str, algorithm: str, np: int, point: str) -> Cell:
    for c in cells:
        if (c.study, c.algorithm, c.np, c.point) == (study, algorithm, np, point):
            return c
    raise LookupError(f"no measured cell {study}/{run_name(algorithm, np, point)}")
