"""What a study is: its file ``pipelines/studies/<name>.yaml`` (fields of :class:`StudySpec`), loaded and checked
(:func:`load_study`), its ``share<s>`` links, the one reader of its plan (``plan/<algo>/plan.json``, :func:`read_plan`) and
the one reader of its calibration (``results/<study>/calibration.json``,
:func:`read_calibration`) with the analysis settings derived from it (:func:`study_analysis`).

Every stage module of :mod:`bench.study` imports this one; nothing here runs, plans or publishes anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import BenchError, short
from ..algorithms import names
from ..layout import StudyLayout, check_name, confined
from ..resolve import load_params, params_path
from ..results import ResultsError, check_regular, read_json_object
from ..typed import build
from ..yamlfile import read_mapping

STUDIES = Path("pipelines") / "studies"
"""The folder of the study files, beside params.yaml (one file per study: ``<name>.yaml``)."""
MAX_REPEATS = 1000
"""The most repeats of a cell (``repeats``, ``repeats_where``): each repeat is one more run of the cell, of seconds to
minutes; a thousand is beyond any study's budget, and a billion would keep ``plan`` busy for minutes before a run."""
MAX_PLANNED = 10_000
"""The most runs a study plans of one algorithm (hardware x worker counts x grid points x repeats): at a few seconds a
run at least, more is days of runs, and every planned run is resolved and written by ``plan``."""


@dataclass
class RepeatsWhere:
    """One entry of a study's ``repeats_where``: the repeats of the planned points it matches."""

    repeats: int | None = None
    """Runs of each matching point (0: not run; required)."""
    algorithms: list[str] = field(default_factory=list)
    """Algorithms it applies to (empty: every one)."""
    np: list[int] = field(default_factory=list)
    """Worker counts it applies to (empty: every one)."""
    sets: dict[str, list[Any]] = field(default_factory=dict)
    """``--set`` key -> the values it applies to (a run matches when its overrides, grid point included, give each
    key one of its values)."""

    def matches(self, algorithm: str, n: int, overrides: dict[str, Any]) -> bool:
        return ((not self.algorithms or algorithm in self.algorithms) and (not self.np or n in self.np)
                and all(overrides.get(key) in values for key, values in self.sets.items()))


@dataclass
class StudySpec:
    """One study file, ``pipelines/studies/<name>.yaml``."""

    description: str = ""
    """What the study compares, on one line (shown in the report and the published README)."""
    profile: str = ""
    """Training profile of every run (empty: params.yaml's ``profile``)."""
    algorithms: list[str] | Literal["all"] = "all"
    """Registry keys the study runs, or ``all``."""
    np: list[int] = field(default_factory=lambda: [1])
    """Worker counts of every algorithm."""
    np_by_algorithm: dict[str, list[int]] = field(default_factory=dict)
    """Worker counts of particular algorithms (instead of ``np``)."""
    sets: dict[str, Any] = field(default_factory=dict)
    """``--set`` overrides of every run."""
    grid: dict[str, list[Any]] = field(default_factory=dict)
    """``--set`` key -> values: one run per point of the product, tagged ``<key><value>-...``; keys an
    algorithm does not have are left out for it."""
    sets_by_np: dict[int, dict[str, Any]] = field(default_factory=dict)
    """``--set`` overrides of the runs at particular worker counts (after ``sets``), e.g. the learning rate scaled
    with the workers (Goyal et al. 2017's linear scaling rule: ``{2: {lr: 0.1}}`` over a profile's 0.05)."""
    sets_by_algorithm: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``--set`` overrides of particular algorithms' runs (after ``sets`` and ``sets_by_np``), e.g. their
    hyperparameters."""
    sets_by_hardware: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``--set`` overrides of the runs on particular hardware profiles (after ``sets``), e.g. fewer steps on a
    slow link."""
    hardware: list[str] | str = ""
    """Hardware profile(s) the study runs on (empty: params.yaml's ``hardware``)."""
    repeats: int = 1
    """Runs of every planned point, each with its own model initialisation and shard order (``seed`` + k for repeat
    k; the train/held-out split, ``split_seed``, stays fixed). With more than one, run names end ``r<k>`` and every
    aggregate is per cell over the repeats (median, olympic mean, mean with its 95 % t-interval; bench.metrics.stats)."""
    target_accuracy: float | None = None
    """Held-out accuracy whose time-to-reach the convergence and regimes notebooks report; None: derived,
    ``target_fraction`` x the final held-out accuracy of the study's calibration run (sync, np 1:
    ``python -m bench study calibrate``, results/<study>/calibration.json)."""
    target_window: int = 1
    """Evaluations whose running mean must reach ``target_accuracy`` for a run to have reached it (1: the first
    evaluation at or above it; k: the last k's mean, so that one evaluation above the target between ones below it
    does not decide; bench.metrics.accuracy.time_to_accuracy). Registered with the metrics."""
    target_fraction: float = 0.97
    """Fraction of the calibration run's final held-out accuracy that is the derived target."""
    budget_s: float = 10.0
    """Wall-clock seconds after which the notebooks report the held-out accuracy reached."""
    repeats_where: list[RepeatsWhere] = field(default_factory=list)
    """More repeats in particular cells (those the claims test) than ``repeats`` gives every cell: entries
    ``{repeats: k, algorithms: [...], np: [...], sets: {key: [values]}}``; a run of a listed algorithm (every one
    when absent) at a listed worker count (any when absent) whose overrides, grid point included, give each ``sets``
    key one of its values (e.g. ``{link: [share0.5], slow_factor: [1.0]}``) has k repeats, 0 leaving that part of the
    grid out; of the entries that match, the last one wins."""
    order: Literal["repeat-major", "point-major"] = "repeat-major"
    """The order of a study's runs: ``repeat-major`` (every point's repeat 0, then repeat 1, ...: slow drift of the
    machine spreads over the points) or ``point-major`` (a point's repeats one after the other, so that they share one
    horovodrun job and its 10-25 s start-up: for studies of many repeats on few points)."""
    claims: list[str] | Literal["all"] = "all"
    """The seed claims the study tests, by name (``bench.metrics.claims.RULES``; ``all``: those of the first regimes
    study); ``python -m bench study register`` copies their rules into the study's registration."""
    seed_offset: int = 0
    """Added to every run's seed (repeat k runs ``seed + seed_offset + k``): a test keeps clear of the seeds its
    learning rates were tuned on (``tuned_by``)."""
    tuned_by: list[str] = field(default_factory=list)
    """Studies whose runs chose this study's hyperparameters: ``register`` refuses a study whose seeds overlap
    theirs (tuning uses seeds the test never uses)."""
    companions: list[str] = field(default_factory=list)
    """Studies of the same claims on other workloads, analysed before this one: its regimes notebook gathers their
    ``claims.csv`` beside its own (one row per claim and workload), which ``publish`` copies with their runs in
    ``runs.csv``."""
    published: Literal["", "docs", "predict"] = ""
    """Where its results are published (``python -m bench study publish --to docs/results/<name>``): empty, not
    published; ``docs``, under docs/results/<name>/ for readers; ``predict``, there too and read by the performance
    model (bench/predict/cells.py validates on its cells; the predict stage of pipelines/predict/dvc.yaml depends on
    its published tables, a declared input that no stage writes: tests/single/test_published.py ties the two)."""


@dataclass
class Study:
    name: str
    spec: StudySpec
    params_file: Path
    default_profile: str
    default_hardware: str

    @property
    def layout(self) -> StudyLayout:
        return StudyLayout(self.name, self.params_file.resolve().parent / "results")

    @property
    def file(self) -> Path:
        """The study's file, relative to the folder of params.yaml (``pipelines/studies/<name>.yaml``)."""
        return STUDIES / f"{self.name}.yaml"

    @property
    def profile(self) -> str:
        return self.spec.profile or self.default_profile

    @property
    def hardware(self) -> list[str]:
        hw = self.spec.hardware or self.default_hardware
        return [hw] if isinstance(hw, str) else list(hw)

    def overrides(self, algorithm: str, np: int, hardware: str) -> dict[str, Any]:
        """The ``--set`` overrides of a run of ``algorithm`` at ``np`` workers on ``hardware`` (before its grid
        point's): ``sets``, then ``sets_by_np``, ``sets_by_algorithm``, ``sets_by_hardware``, later ones winning."""
        s = self.spec
        return {**s.sets, **s.sets_by_np.get(np, {}), **s.sets_by_algorithm.get(algorithm, {}),
                **s.sets_by_hardware.get(hardware, {})}

    def algorithms(self) -> list[str]:
        if self.spec.algorithms == "all":
            return names()
        missing = [a for a in self.spec.algorithms if a not in names()]
        if missing:
            raise BenchError(f"study {self.name!r} names algorithms that are not registered: {', '.join(missing)}; "
                             f"registered: {', '.join(names())}")
        return list(self.spec.algorithms)


def studies_dir(params_file: Path | None = None) -> Path:
    """``pipelines/studies/`` beside ``params_file`` (default: :func:`bench.resolve.params_path`)."""
    return Path(params_file or params_path()).resolve().parent / STUDIES


def study_names(params_file: Path | None = None) -> list[str]:
    """Every study: the names of the files in :func:`studies_dir`."""
    return sorted(p.stem for p in studies_dir(params_file).glob("*.yaml"))


def published_studies(reader: Literal["docs", "predict"] = "docs", params_file: Path | None = None) -> list[str]:
    """The studies whose file says they are published (``published``): every one (``docs``), or those the
    performance model reads (``predict``)."""
    readers = ("docs", "predict") if reader == "docs" else (reader,)
    return [n for n in study_names(params_file) if load_study(n, params_file).spec.published in readers]


def load_study(name: str | None = None, params_file: Path | None = None) -> Study:
    """The study ``name`` (default: params.yaml's ``study``), from its file ``pipelines/studies/<name>.yaml`` beside
    ``params_file`` (params.yaml gives the default profile and hardware)."""
    params_file = Path(params_file or params_path())
    params = load_params(params_file)
    name = check_name("study", name or params.get("study") or "laptop")
    path = studies_dir(params_file) / f"{name}.yaml"
    if not path.is_file():
        raise BenchError(f"unknown study {name!r}; valid: {', '.join(study_names(params_file)) or '(none)'}")
    spec = build(StudySpec, read_mapping(path), what=f"study {name!r} key")
    study = Study(name, spec, params_file, params.get("profile") or "laptop", params.get("hardware") or "local")
    if not 1 <= spec.repeats <= MAX_REPEATS:
        raise BenchError(f"study {name!r}: repeats must be in [1, {MAX_REPEATS}] (each repeat is one more run of every "
                         f"cell), got {spec.repeats!r}")
    empty = [f"grid {key!r} has no values" for key, values in spec.grid.items() if not values]
    empty += ["np has no worker counts"] * (not spec.np) + [
        f"np_by_algorithm {key!r} has no worker counts" for key, values in spec.np_by_algorithm.items() if not values]
    if empty:
        raise BenchError(f"study {name!r}: {'; '.join(empty)}: it would plan nothing for it without a word; give at "
                         f"least one value, or leave the key out")
    if not 0 < spec.target_fraction <= 1:
        raise BenchError(f"study {name!r}: target_fraction must be in (0, 1], got {spec.target_fraction!r}")
    if spec.target_window < 1:  # (a non-integer is refused by build, naming the key)
        raise BenchError(f"study {name!r}: target_window must be a whole number of evaluations >= 1 (1: the first "
                         f"evaluation at or above the target), got {spec.target_window!r}")
    if spec.target_accuracy is not None and not 0 < spec.target_accuracy <= 1:
        raise BenchError(f"study {name!r}: target_accuracy must be a held-out accuracy in (0, 1] (or absent: derived "
                         f"by the calibration), got {spec.target_accuracy!r}")
    if not spec.budget_s > 0:
        raise BenchError(f"study {name!r}: budget_s must be > 0 seconds, got {spec.budget_s!r}")
    for key, valid in (("sets_by_algorithm", study.algorithms()), ("sets_by_hardware", study.hardware)):
        bad = sorted(set(getattr(spec, key)) - set(valid))
        if bad:
            raise BenchError(f"study {name!r}: {key} names {', '.join(bad)}, which the study does not run; "
                             f"valid: {', '.join(valid)}")
    counts = worker_counts(spec)
    bad = sorted(set(spec.sets_by_np) - set(counts))
    if bad:
        raise BenchError(f"study {name!r}: sets_by_np names worker counts {', '.join(map(str, bad))}, which the study "
                         f"does not run; valid: {', '.join(map(str, counts))}")
    for i, entry in enumerate(spec.repeats_where):
        what = f"study {name!r}: repeats_where[{i}]"
        if entry.repeats is None:
            raise BenchError(f"{what} has no repeats; give one, an integer >= 0 (0: not run)")
        if not 0 <= entry.repeats <= MAX_REPEATS:
            raise BenchError(f"{what}: repeats must be in [0, {MAX_REPEATS}] (0: not run), got {entry.repeats!r}")
        bad = sorted(set(entry.algorithms) - set(study.algorithms()))
        if bad:
            raise BenchError(f"{what} names {', '.join(bad)}, which the study does not run; valid: "
                             f"{', '.join(study.algorithms())}")
    planned = len(study.hardware) * len(worker_counts(spec)) * math.prod(map(len, spec.grid.values())) * max(
        [spec.repeats, *(e.repeats for e in spec.repeats_where)])
    if planned > MAX_PLANNED:
        raise BenchError(f"study {name!r} plans {planned} runs of an algorithm (hardware x worker counts x grid points x "
                         f"repeats); at most {MAX_PLANNED:,}: days of runs at a few seconds each")
    for share in aimed_shares(spec):
        if not 0 < share < 1:
            raise BenchError(f"study {name!r}: link 'share{share:g}' aims at a communication share outside (0, 1); "
                             f"valid: share0.1 ... share0.9")
    for key in ("tuned_by", "companions"):
        bad = sorted(set(getattr(spec, key)) - set(study_names(params_file)) | ({name} & set(getattr(spec, key))))
        if bad:
            raise BenchError(f"study {name!r}: {key} names {', '.join(bad)}, which is no other study; valid: "
                             f"{', '.join(n for n in study_names(params_file) if n != name)}")
    return study


def worker_counts(spec: StudySpec) -> list[int]:
    """Every worker count the study runs."""
    return sorted({n for ns in [spec.np, *spec.np_by_algorithm.values()] for n in ns})


LINK_SHARE = "share"
"""A study's ``link`` value ``share<s>`` (in ``sets``, ``grid`` or ``sets_by_*``) is the link rate that gives ``sync``
a communication share of about s of its step at the study's largest worker count, chosen by the calibration
(:func:`bench.study.calibrate.link_rate`), e.g. ``grid: {link: ["", share0.5, share0.9]}``."""


def link_share(value: Any) -> float | None:
    """The communication share a ``link`` value aims at (``share0.5`` -> 0.5), None for a plain rate."""
    if not (isinstance(value, str) and value.startswith(LINK_SHARE)):
        return None
    try:
        return float(value[len(LINK_SHARE):])
    except ValueError:
        raise BenchError(f"link {value!r} is neither a rate (100mbit, 1gbit, ...) nor share<s> with s a number in "
                         f"(0, 1), e.g. share0.5") from None


def aimed_shares(spec: StudySpec) -> list[float]:
    """The communication shares the study's ``share<s>`` links aim at (sorted, each once)."""
    values = [spec.sets.get("link"), *spec.grid.get("link", []),
              *(d.get("link") for d in [*spec.sets_by_np.values(), *spec.sets_by_algorithm.values(),
                                        *spec.sets_by_hardware.values()])]
    return sorted({s for s in map(link_share, values) if s is not None})


def read_calibration(layout: StudyLayout, needed_for: str = "") -> dict | None:
    """``results/<study>/calibration.json`` (written by :func:`bench.study.calibrate.calibrate`): the one reader.
    Missing: None, or, where ``needed_for`` says what needs it, a one-line error naming the command that writes it."""
    path = layout.dir / "calibration.json"
    check_regular(path)
    if path.is_file():
        calibration = read_json_object(path)
        target = calibration.get("target_accuracy")
        if target is not None and not (isinstance(target, (int, float)) and not isinstance(target, bool)
                                       and 0 < target <= 1):
            raise ResultsError(f"{path}: 'target_accuracy' is {short(target, 40)}, not a held-out accuracy in (0, 1]")
        links = calibration.get("links", {})
        if not (isinstance(links, dict) and all(isinstance(v, dict) and isinstance(v.get("rate"), str)
                                                for v in links.values())):
            raise ResultsError(f"{path}: 'links' is not share<s> -> {{rate: ...}} (a mapping of the calibrated "
                               f"link rates): {short(links, 40)}")
        return calibration
    if needed_for:
        raise BenchError(f"study {layout.study!r} needs its calibration ({path}) {needed_for}: run "
                         f"`python -m bench study calibrate` (or `dvc repro calibrate`)")
    return None


def read_plan(layout: StudyLayout, algorithm: str) -> list[dict] | None:
    """The planned runs of ``algorithm`` (``plan/<algo>/plan.json``, written by :func:`bench.study.plan.plan`): the one
    reader. Each entry's ``name``, ``hardware`` and ``config`` (its config file, under the study's folder) checked;
    None where there is no plan; ResultsError naming the file and the entry otherwise."""
    path = layout.algorithm_plan(algorithm) / "plan.json"
    check_regular(path)
    if not path.is_file():
        return None
    runs = read_json_object(path).get("runs")
    if not isinstance(runs, list):
        raise ResultsError(f"{path}: 'runs' is not a list of planned runs: {short(runs, 40)}")
    for i, entry in enumerate(runs):
        bad = [key for key in ("name", "hardware", "config")
               if not (isinstance(entry, dict) and isinstance(entry.get(key), str) and entry[key])]
        if bad:
            raise ResultsError(f"{path}: runs[{i}] has no {bad[0]!r} (a planned run has a name, a hardware and a "
                               f"config file): {short(entry, 60)}")
        confined(layout.dir / entry["config"], layout.dir, f"{path}: runs[{i}]'s config")
    return runs


def spec_of(name: str) -> StudySpec:
    """The spec of study ``name``, or the defaults for a study without a file (e.g. ``adhoc``, a test's)."""
    try:
        return load_study(name).spec
    except BenchError:
        return StudySpec()


def study_analysis(name: str, target_accuracy: float | None = None, budget_s: float | None = None,
                   results_root: Path | None = None) -> tuple[float, float]:
    """The analysis settings of study ``name`` unless given: its file's fixed ``target_accuracy``, else the derived
    target of its calibration (:func:`read_calibration`), and ``budget_s``. A study without a file (e.g. ``adhoc``)
    has no target (NaN: every time to target is censored)."""
    try:
        study = load_study(name)
        spec = study.spec
    except BenchError:
        study, spec = None, StudySpec()
    if target_accuracy is None:
        target_accuracy = spec.target_accuracy
    if target_accuracy is None and study is not None:
        layout = StudyLayout(name, Path(results_root) if results_root else study.layout.root)
        target_accuracy = float(read_calibration(layout, "for its derived target accuracy")["target_accuracy"])
    return (math.nan if target_accuracy is None else target_accuracy,
            spec.budget_s if budget_s is None else budget_s)
