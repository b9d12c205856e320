"""Studies: what the DVC pipeline runs (``python -m bench study prepare|plan|run``), and publishing their results.

    python -m bench study prepare         # data/prepared/<study>.json: the study's dataset loads, with its checksum
    python -m bench study plan            # results/<study>/plan/<algo>/: every planned run's config.json
    python -m bench study calibrate       # results/<study>/calibration.json: the target accuracy, before the runs
    python -m bench study run ALGO        # papermill notebooks/run.ipynb with every planned run of ALGO
    python -m bench study publish --to D  # copy tables, figures, metrics, report, runs.csv, system.md to D

The study is params.yaml's ``study`` (``dvc exp run -S study=hermans``; ``--study`` here). A study
(params.yaml ``studies:``, fields of :class:`StudySpec`) names a training profile, algorithms,
worker counts, ``--set`` overrides, a grid of overrides (one run per point, tagged) and the hardware
profiles it runs on (several are allowed: a study is not tied to one machine; the default is
params.yaml's ``hardware``). ``plan`` resolves every run once and writes its config.json under
``results/<study>/plan/<algo>/<hardware>/<name>.json``; ``run`` copies that file into the run
directory and launches it unchanged. DVC's own ``deps``/``params`` decide what re-runs: each
``run@<algo>`` stage depends on its own plan folder and on the code it runs (dvc.yaml).
A failed benchmark run does not fail its stage: it is kept, marked failed, and shown as failed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import BenchError
from .algorithms import get_algorithm, names
from .config import LaunchConfig, RunConfig, TrainConfig
from .layout import REPO_ROOT, StudyLayout, run_name
from .resolve import load_config, load_params, params_path, resolve
from .results import write_json_atomic
from .typed import build, field_types


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
    """One entry of params.yaml's ``studies:``."""

    description: str = ""
    """What the study compares (shown in the report)."""
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
    aggregate is per cell over the repeats (median, olympic mean, 95 % bootstrap interval; bench.metrics.stats)."""
    target_accuracy: float | None = None
    """Held-out accuracy whose time-to-reach the convergence and regimes notebooks report; None: derived,
    ``target_fraction`` x the final held-out accuracy of the study's calibration run (sync, np 1:
    ``python -m bench study calibrate``, results/<study>/calibration.json)."""
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


def load_study(name: str | None = None, params_file: Path | None = None) -> Study:
    """The study ``name`` (default: params.yaml's ``study``) from params.yaml."""
    params_file = Path(params_file or params_path())
    params = load_params(params_file)
    name = name or params.get("study") or "laptop"
    studies = params.get("studies") or {}
    if name not in studies:
        raise BenchError(f"unknown study {name!r}; valid: {', '.join(sorted(studies))}")
    spec = build(StudySpec, studies[name], what=f"study {name!r} key")
    study = Study(name, spec, params_file, params.get("profile") or "laptop", params.get("hardware") or "local")
    if spec.repeats < 1:
        raise BenchError(f"study {name!r}: repeats must be >= 1, got {spec.repeats!r}")
    if not 0 < spec.target_fraction <= 1:
        raise BenchError(f"study {name!r}: target_fraction must be in (0, 1], got {spec.target_fraction!r}")
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
        if entry.repeats < 0:
            raise BenchError(f"{what}: repeats must be an integer >= 0 (0: not run), got {entry.repeats!r}")
        bad = sorted(set(entry.algorithms) - set(study.algorithms()))
        if bad:
            raise BenchError(f"{what} names {', '.join(bad)}, which the study does not run; valid: "
                             f"{', '.join(study.algorithms())}")
    for share in aimed_shares(spec):
        if not 0 < share < 1:
            raise BenchError(f"study {name!r}: link 'share{share:g}' aims at a communication share outside (0, 1); "
                             f"valid: share0.1 ... share0.9")
    return study


def worker_counts(spec: StudySpec) -> list[int]:
    """Every worker count the study runs."""
    return sorted({n for ns in [spec.np, *spec.np_by_algorithm.values()] for n in ns})


LINK_SHARE = "share"
"""A study's ``link`` value ``share<s>`` (in ``sets``, ``grid`` or ``sets_by_*``) is the link rate that gives ``sync``
a communication share of about s of its step at the study's largest worker count, chosen by the calibration
(:func:`link_rate`), e.g. ``grid: {link: ["", share0.5, share0.9]}``."""


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


def link_rate(share: float, compute_s: float, payload_bytes: float, n: int) -> float:
    """Bits per second of a link on which ``sync``'s ring allreduce takes ``share`` of a step whose compute takes
    ``compute_s``: each of n workers sends 2 (n - 1) / n of the ``payload_bytes`` a step, so the allreduce takes
    t = 2 (n - 1) / n x 8 x bytes / rate, and t / (t + compute) = share gives
    rate = 2 (n - 1) / n x 8 x bytes x (1 - share) / (share x compute). Bandwidth only (no latency, no per-message
    cost: the measured share is higher where those matter, and is reported beside the aimed one)."""
    if not (0 < share < 1 and compute_s > 0 and payload_bytes > 0 and n >= 2):
        raise BenchError(f"a link rate needs 0 < share < 1, compute > 0, bytes > 0 and n >= 2; got share={share!r}, "
                         f"compute_s={compute_s!r}, bytes={payload_bytes!r}, n={n!r}")
    return 2 * (n - 1) / n * 8 * payload_bytes * (1 - share) / (share * compute_s)


def rate_text(bits_per_s: float) -> str:
    """A tbf rate for ``bits_per_s``, in whole mbit (at least 1)."""
    return f"{max(1, round(bits_per_s / 1e6))}mbit"


def load_calibration(study: Study) -> dict:
    """results/<study>/calibration.json (:func:`calibrate`), or a clear error when it is missing."""
    path = study.layout.dir / "calibration.json"
    if not path.is_file():
        raise BenchError(f"study {study.name!r} needs its calibration ({path}) before it is planned (its target or "
                         f"its share<s> link rates): run `python -m bench study calibrate` (or `dvc repro calibrate`)")
    return json.loads(path.read_text())


def resolve_link(overrides: dict[str, Any], calibration: dict | None) -> dict[str, Any]:
    """``overrides`` with a ``share<s>`` link replaced by its calibrated rate and ``link_share_aimed`` set to s."""
    share = link_share(overrides.get("link"))
    if share is None:
        return overrides
    links = (calibration or {}).get("links") or {}
    if overrides["link"] not in links:
        raise BenchError(f"link {overrides['link']!r} has no calibrated rate (calibration.json links: "
                         f"{', '.join(links) or 'none'}): run `python -m bench study calibrate` again")
    return {**overrides, "link": links[overrides["link"]]["rate"], "link_share_aimed": share}


def repeats_of(study: Study, algorithm: str, n: int, overrides: dict[str, Any]) -> int:
    """The repeats of one planned point: ``repeats``, or the last entry of ``repeats_where`` that matches it."""
    k = study.spec.repeats
    for entry in study.spec.repeats_where:
        if entry.matches(algorithm, n, overrides):
            k = entry.repeats
    return k


def max_repeats(study: Study) -> int:
    return max([study.spec.repeats, *(e.repeats for e in study.spec.repeats_where)])


def study_analysis(name: str, target_accuracy: float | None = None, budget_s: float | None = None,
                   results_root: Path | None = None) -> tuple[float, float]:
    """The analysis settings of study ``name`` unless given: its params.yaml entry's fixed ``target_accuracy``, else
    the derived target of its calibration (results/<study>/calibration.json, :func:`calibrate`), and ``budget_s``.
    A study that is not in params.yaml (e.g. ``adhoc``) has no target (NaN: every time to target is censored)."""
    import math

    try:
        study = load_study(name)
        spec = study.spec
    except BenchError:
        study, spec = None, StudySpec()
    if target_accuracy is None:
        target_accuracy = spec.target_accuracy
    if target_accuracy is None and study is not None:
        path = StudyLayout(name, Path(results_root) if results_root else study.layout.root).dir / "calibration.json"
        if not path.is_file():
            raise BenchError(f"study {name!r} derives its target accuracy from {path}, which does not exist: run "
                             f"`python -m bench study calibrate` (or `dvc repro calibrate`) first")
        target_accuracy = float(json.loads(path.read_text())["target_accuracy"])
    return (math.nan if target_accuracy is None else target_accuracy,
            spec.budget_s if budget_s is None else budget_s)


CALIBRATION_UNSET = ("slow_ranks", "slow_factor", "slow_mode", "step_jitter_s", "link")
"""``sets`` of a study that its calibration run leaves out (a straggler needs more than one worker; the calibration
runs on the hardware profile's own link)."""


def calibrate(study: Study) -> dict:
    """Write results/<study>/calibration.json, fixed before the study's other runs are planned: its target accuracy
    and the rates of its ``share<s>`` links.

    One run of ``sync`` at np 1 on the study's profile and ``sets`` (stragglers and the link left out:
    :data:`CALIBRATION_UNSET`) on its first hardware profile (on an emulated cluster: one host, at the share of a
    core every host gets), in results/<study>/calibration/, unless the study fixes ``target_accuracy`` and has no
    ``share<s>`` link (then no run). The derived target is ``target_fraction`` x its final held-out accuracy (the
    plateau sync reaches on this workload in this budget of steps). The link rates: ``compute`` = the run's mean step
    time over its timed steps (the mean, not the median, so that a host's throttled CPU-quota periods count), ``bytes``
    = the payload its allreduce hands over a step, n = the study's largest worker count; each ``share<s>`` link gets
    :func:`link_rate`. It depends on that run only, never on the runs it judges."""
    from .launch import run as launch_run
    from .results import load_run, read_json

    layout = study.layout
    spec = study.spec
    info: dict[str, Any] = {"study": study.name, "target_fraction": spec.target_fraction}
    shares = aimed_shares(spec)
    if spec.target_accuracy is not None:
        info.update(target_accuracy=spec.target_accuracy, source="params.yaml (fixed target)")
    if spec.target_accuracy is not None and not shares:
        # the stage's output folder exists either way (DVC requires it): it says why it holds no run
        (layout.dir / "calibration").mkdir(parents=True, exist_ok=True)
        (layout.dir / "calibration" / "README.txt").write_text(
            f"No calibration run: study {study.name!r} fixes target_accuracy = {spec.target_accuracy:g} in "
            f"params.yaml and has no share<s> link.\n")
    else:
        hardware = study.hardware[0]
        sets = {k: v for k, v in study.overrides("sync", 1, hardware).items() if k not in CALIBRATION_UNSET}
        cfg = resolve("sync", np=1, profile=study.profile, hardware=hardware, overrides=sets, study=study.name,
                      tag="calibration", params_file=study.params_file)
        run_dir, rc = launch_run(cfg, layout.dir / "calibration", force=True, echo=False)
        summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
        plateau = summary.get("final_accuracy")
        if summary.get("status") != "ok" or plateau is None:
            raise BenchError(f"calibration run {run_dir} did not finish ({summary.get('status', 'incomplete')}: "
                             f"{summary.get('reason', 'no summary')}); the study's target and link rates cannot be "
                             f"derived")
        info.update(run=str(run_dir.relative_to(layout.dir)), steps=summary.get("steps_per_worker"),
                    plateau_accuracy=float(plateau), hardware=hardware)
        if spec.target_accuracy is None:
            info.update(target_accuracy=spec.target_fraction * float(plateau),
                        source=f"{spec.target_fraction:g} x the final held-out accuracy of sync np 1 (calibration run)")
        if shares:
            from .metrics.selection import timed_steps

            steps = timed_steps(load_run(run_dir).steps)
            compute_s, payload = float(steps["step_s"].mean()), float(steps["bytes_sent"].median())
            n = max(worker_counts(spec))
            info.update(compute_s_per_step=compute_s, compute_s_median=float(steps["step_s"].median()),
                        bytes_per_step=payload, link_np=n, links={
                            f"{LINK_SHARE}{s:g}": {"share": s, "bits_per_s": bps, "rate": rate_text(bps)}
                            for s in shares for bps in [link_rate(s, compute_s, payload, n)]})
    write_json_atomic(layout.dir / "calibration.json", info)
    return info


def _tag_value(v: Any) -> str:
    if v == "":
        return "none"  # e.g. link "" (unshaped): tag linknone
    return ("_".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)).replace("/", "_").replace(" ", "")


def grid_points(algorithm: str, spec: StudySpec) -> list[tuple[str, dict]]:
    """(tag, overrides) per point of the study's grid; grid keys the algorithm does not have are left out."""
    valid = set(field_types(get_algorithm(algorithm).Params)) | set(field_types(TrainConfig)) | set(field_types(LaunchConfig))
    grid = {k: v for k, v in spec.grid.items() if k in valid}
    if not grid:
        return [("", {})]
    points = []
    for values in itertools.product(*grid.values()):
        sets = dict(zip(grid, values))
        points.append(("-".join(f"{k}{_tag_value(v)}" for k, v in sets.items()), sets))
    return points


def planned_runs(study: Study, algorithm: str) -> list[RunConfig]:
    """Every run of ``algorithm`` in ``study``, resolved and validated (none if the study does not run it)."""
    if algorithm not in study.algorithms():
        return []
    nps = study.spec.np_by_algorithm.get(algorithm, study.spec.np)
    calibration = load_calibration(study) if aimed_shares(study.spec) else None
    runs, repeats = [], max_repeats(study)
    # repeat-major: every point's repeat 0, then every point's repeat 1, ... (run in this order)
    for k, hardware, n, (tag, sets) in itertools.product(range(repeats), study.hardware, nps,
                                                         grid_points(algorithm, study.spec)):
        overrides = {**study.overrides(algorithm, n, hardware), **sets}
        if k >= repeats_of(study, algorithm, n, overrides):
            continue
        cfg = resolve(algorithm, np=n, profile=study.profile, hardware=hardware,
                      overrides=resolve_link(overrides, calibration), study=study.name,
                      tag=repeat_tag(tag, k, repeats), params_file=study.params_file)
        cfg.train.seed += k  # a repeat changes the initialisation and the shard order; split_seed stays
        cfg.repeat = k
        runs.append(cfg)
    return runs


def repeat_tag(tag: str, repeat: int, repeats: int) -> str:
    """A run's tag: the grid point's tag, then ``r<k>`` when the study repeats its runs (``repeats`` > 1)."""
    if repeats <= 1:
        return tag
    return f"{tag}-r{repeat}" if tag else f"r{repeat}"


def plan(study: Study) -> dict[str, int]:
    """Write every registered algorithm's plan folder (an empty one when the study does not run it)."""
    import shutil

    layout = study.layout
    counts = {}
    for algorithm in names():
        runs = planned_runs(study, algorithm)
        folder = layout.algorithm_plan(algorithm)
        if folder.exists():
            shutil.rmtree(folder)
        entries = []
        for cfg in runs:
            path = layout.plan_file(algorithm, cfg.launch.hardware, cfg.launch.np, cfg.tag)
            write_json_atomic(path, cfg.to_dict())
            entries.append({"name": run_name(algorithm, cfg.launch.np, cfg.tag), "hardware": cfg.launch.hardware,
                            "config": str(path.relative_to(layout.dir))})
        write_json_atomic(folder / "plan.json", {"algorithm": algorithm, "study": study.name,
                                                 "status": "planned" if runs else "not in study", "runs": entries})
        counts[algorithm] = len(runs)
    return counts


def prepare(study: Study) -> dict:
    """Load the study's dataset once and record its sizes and checksum (data/prepared/<study>.json)."""
    from .data import load_dataset

    train = resolve("sync", profile=study.profile, hardware=study.hardware[0], params_file=study.params_file).train
    info = {"study": study.name, "profile": study.profile, "dataset": train.dataset}
    if train.dataset == "synthetic":
        info["note"] = "synthetic tensors are generated by each worker; nothing to prepare"
    else:
        ds = load_dataset(train)
        h = hashlib.sha256()
        for t in (ds.x_train, ds.y_train, ds.x_test, ds.y_test):
            h.update(t.numpy().tobytes())
        info.update(train=len(ds.x_train), test=len(ds.x_test), input_shape=list(ds.input_shape),
                    num_classes=ds.num_classes, sha256=h.hexdigest())
    write_json_atomic(study.params_file.resolve().parent / "data" / "prepared" / f"{study.name}.json", info)
    return info


def run(study: Study, algorithm: str) -> list[tuple[str, str]]:
    """Launch every planned run of ``algorithm`` through notebooks/run.ipynb (one kernel, the runs one after the
    other, the planned config files launched unchanged); returns (run key, status) pairs."""
    import logging

    import papermill

    get_algorithm(algorithm)
    layout = study.layout
    manifest_path = layout.algorithm_plan(algorithm) / "plan.json"
    if not manifest_path.is_file():
        raise BenchError(f"no plan {manifest_path}: run `python -m bench study plan` (or `dvc repro plan`) first")
    manifest = json.loads(manifest_path.read_text())
    layout.algorithm_runs(algorithm).mkdir(parents=True, exist_ok=True)
    if not manifest["runs"]:
        print(f"[study] {algorithm}: not in study {study.name!r}, nothing to run")
        return []
    configs, outs, keys = [], [], []
    for entry in manifest["runs"]:
        planned = layout.dir / entry["config"]
        cfg = load_config(planned)
        configs.append(str(planned))
        outs.append(str(layout.run_dir(algorithm, cfg.launch.hardware, cfg.launch.np, cfg.tag)))
        keys.append(f"{entry['name']}@{entry['hardware']}")
    print(f"[study] {study.name}: {algorithm}, {len(configs)} run(s): {', '.join(keys)}", flush=True)
    layout.notebooks.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # papermill streams the notebook's output
    papermill.execute_notebook(str(REPO_ROOT / "notebooks" / "run.ipynb"), str(layout.notebooks / f"run-{algorithm}.ipynb"),
                               parameters={"configs": configs, "outs": outs}, cwd=str(REPO_ROOT), kernel_name="python3",
                               progress_bar=False, log_output=True)
    results = []
    for key, out in zip(keys, outs):
        summary = Path(out) / "summary.json"
        status = json.loads(summary.read_text()).get("status", "incomplete") if summary.is_file() else "incomplete"
        print(f"[study] {key}: {status}", flush=True)
        results.append((key, status))
    return results


ANALYSES = ("speedup", "convergence", "temporal_efficiency", "hardware", "regimes", "report")
"""The analysis notebooks (``notebooks/<name>.ipynb``) a study's DVC stages execute, one stage each."""


def analyse(study: Study, notebook: str, html: bool = False) -> Path:
    """Execute ``notebooks/<notebook>.ipynb`` for the study with papermill (parameter ``study``) into
    ``results/<study>/notebooks/``; with ``html``, also render it without its code as ``results/<study>/<notebook>.html``
    (nbconvert). Returns the executed notebook's path. What each DVC analysis stage runs."""
    import papermill

    if notebook not in ANALYSES:
        raise BenchError(f"unknown analysis notebook {notebook!r}; valid: {', '.join(ANALYSES)}")
    layout = study.layout
    layout.notebooks.mkdir(parents=True, exist_ok=True)
    out = layout.notebooks / f"{notebook}.ipynb"
    papermill.execute_notebook(str(REPO_ROOT / "notebooks" / f"{notebook}.ipynb"), str(out),
                               parameters={"study": study.name}, cwd=str(REPO_ROOT), kernel_name="python3",
                               progress_bar=False)
    if html:
        import nbformat
        from nbconvert import HTMLExporter

        exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        body, _ = exporter.from_notebook_node(nbformat.read(str(out), as_version=4))
        (layout.dir / f"{notebook}.html").write_text(body)
    return out


def publish(study: Study, dest: Path) -> list[Path]:
    """Copy what the study's analysis wrote (tables, figures, metrics, report) to ``dest`` with ``runs.csv`` (every
    run's status) and ``system.md`` (the machine and the network of each hardware profile, from the runs'
    system.json); returns the files written. For published reference results, e.g. ``docs/results/<study>/``."""
    import shutil

    from .results import load_runs

    layout = study.layout
    if not layout.tables.is_dir():
        raise BenchError(f"{layout.tables} does not exist: run the study's analysis first (dvc repro)")
    dest = Path(dest)
    written = []
    for sub, pattern in (("tables", "*.csv"), ("metrics", "*.json")):
        for f in sorted((layout.dir / sub).glob(pattern)):
            (dest / sub).mkdir(parents=True, exist_ok=True)
            written.append(Path(shutil.copyfile(f, dest / sub / f.name)))
    for f in sorted(layout.dir.glob("figures/*/*.png")):
        (dest / "figures" / f.parent.name).mkdir(parents=True, exist_ok=True)
        written.append(Path(shutil.copyfile(f, dest / "figures" / f.parent.name / f.name)))
    for name in ("report.html", "calibration.json"):
        if (layout.dir / name).is_file():
            written.append(Path(shutil.copyfile(layout.dir / name, dest / name)))
    runs = load_runs(layout.runs)
    import pandas as pd

    from .metrics.selection import key

    table = pd.DataFrame([{"run": key(r), "algorithm": r.label["algorithm"], "hardware": r.label["hardware"],
                           "status": r.status, "reason": r.summary.get("reason", ""), "wall_s": r.summary.get("wall_s"),
                           "git_commit": (r.system.get("git") or {}).get("commit")} for r in runs])
    table.to_csv(dest / "runs.csv", index=False)
    written.append(dest / "runs.csv")
    lines = [f"# System of study `{study.name}`", "", f"{study.spec.description}", ""]
    seen: set[tuple[str, str]] = set()
    for r in runs:
        hw, link = r.label["hardware"], ((r.system or {}).get("network") or {}).get("link") or ""
        if (hw, link) in seen or not r.system:
            continue
        seen.add((hw, link))
        sysj, net = r.system, r.system.get("network") or {}
        lines += [f"## `{hw}`" + (f", link {link}" if link else ""), "",
                  f"- machine: {sysj.get('cpu_model')} ({sysj.get('cpu_cores')} cores), {sysj.get('memory_gib')} GiB, "
                  f"{sysj.get('platform')}, GPUs: {len(sysj.get('gpus') or [])}",
                  f"- software: Python {sysj.get('python')}, torch {sysj.get('torch')}, Horovod {sysj.get('horovod')}",
                  "- network: " + (f"emulated cluster, link {net.get('link')} ({net.get('note')}); ranks on "
                                    f"{len(set(sysj.get('hosts_by_rank') or []))} hosts"
                                    if net.get("emulated") else "one machine, loopback (unshaped)"),
                  f"- code: commit {(sysj.get('git') or {}).get('commit')}"
                  f"{' (with uncommitted changes)' if (sysj.get('git') or {}).get('dirty') else ''}", ""]
    (dest / "system.md").write_text("\n".join(lines))
    written.append(dest / "system.md")
    (dest / "README.md").write_text(published_readme(study, dest, table, *run_times(layout.runs)))
    written.append(dest / "README.md")
    return written


def run_times(runs_dir: Path) -> tuple[float, float]:
    """(span, busy) in seconds: from the first run's start (its config.json written by the launcher) to the last
    run's end (its summary.json), and the time covered by at least one run (the union of the runs' start-to-end
    intervals: a pause between runs, or a run redone later, does not count). NaN without runs."""
    intervals = sorted((d.joinpath("config.json").stat().st_mtime, d.joinpath("summary.json").stat().st_mtime)
                       for d in Path(runs_dir).glob("*/*/*")
                       if d.joinpath("config.json").is_file() and d.joinpath("summary.json").is_file())
    if not intervals:
        return float("nan"), float("nan")
    busy, (start, end) = 0.0, intervals[0]
    for a, b in intervals[1:]:
        if a > end:  # a gap: close the interval so far
            busy, start, end = busy + end - start, a, b
        else:
            end = max(end, b)
    return max(b for _, b in intervals) - intervals[0][0], busy + end - start


FIGURES = {
    "speedup/speedup_over_n.png": "speedup S(n) over one worker against n with the 95 % interval of the median over "
                                  "the repeats, one panel per family and grid point, sync dashed, the ideal S(n) = n "
                                  "dotted; the legend gives S(n)/n at the largest n",
    "speedup/scaling.png": "throughput, S(n) and throughput over sync's at the same n, one row per grid point",
    "speedup/efficiency.png": "scaling efficiency S(n)/n per algorithm and n (median over the repeats)",
    "speedup/time_split.png": "milliseconds a step spends computing, communicating and waiting",
    "temporal_efficiency/te_grid.png": "E(a, b) over workers n and the swept hyperparameter (median over the seeds, "
                                       "95 % interval beneath; red: a learns sooner)",
    "temporal_efficiency/te_matrix.png": "E(row, column) for every pair of configurations (median over the seeds)",
    "regimes/target_heatmap.png": "time to the target accuracy, sync's over the algorithm's, per regime (median over "
                                  "the repeats; > 1: reaches the target sooner than sync)",
    "regimes/speedup_heatmap.png": "throughput over sync's in the same regime and repeat (median; * no span had every "
                                   "worker working: each worker's own rate)",
    "regimes/throughput_vs_link.png": "throughput against the link, one panel per family, sync dashed in each",
    "regimes/time_to_target.png": "seconds to the target per run, without and with the straggler, one panel per link "
                                  "(open triangle: never reached, drawn at its training time)",
}
"""What each published figure shows (the README's list; a figure not named here is listed without a caption)."""


def _md_table(df, columns: list[str]) -> list[str]:
    import math

    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.3g}"
        return str(v).replace("|", "/").replace("\n", " ")

    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in df[columns].itertuples(index=False)]


def _interval_text(median: float, low: float, high: float) -> str:
    import math

    if not math.isfinite(median):
        return ""
    return f"{median:.2f} [{low:.2f}, {high:.2f}]" if math.isfinite(low) and math.isfinite(high) else f"{median:.2f}"


def _speedup_lines(dest: Path) -> list[str]:
    """The README's speedup-over-n section, from ``tables/speedup_summary.csv``: S(n) per grid point, algorithm and
    worker count as median [95 % interval] over the repeats, and the scaling efficiency S(n)/n at the largest n; none
    where no run at more than one worker had a one-worker throughput to divide by."""
    import pandas as pd

    path = dest / "tables" / "speedup_summary.csv"
    if not path.is_file():
        return []
    sm = pd.read_csv(path)
    sm["point"] = sm["point"].fillna("").astype(str)
    sp = sm[sm["metric"] == "speedup"].dropna(subset=["median"])
    if not (sp["np"] > 1).any():
        return []
    ns = sorted(sp["np"].unique())
    eff = sm[sm["metric"] == "efficiency"].set_index(["point", "algorithm", "np"])
    rows = []
    for (pt, algo), g in sp.groupby(["point", "algorithm"], sort=True):
        by_n = g.set_index("np")
        row = {"grid point": pt or "(none)", "algorithm": algo, "repeats": int(g["n"].min())}
        for n in ns:
            row[f"S({n})"] = (_interval_text(by_n.at[n, "median"], by_n.at[n, "ci_low"], by_n.at[n, "ci_high"])
                              if n in by_n.index else "")
        top = int(g["np"].max())
        e = eff.loc[(pt, algo, top)] if (pt, algo, top) in eff.index else None
        row["S(n)/n at the largest n"] = (f"{_interval_text(e['median'], e['ci_low'], e['ci_high'])} (n = {top})"
                                          if e is not None else "")
        rows.append(row)
    table = pd.DataFrame(rows)
    return ["", "## Speedup over n (`tables/speedup_summary.csv`, `figures/speedup/speedup_over_n.png`)", "",
            "S(n) = throughput at n workers / throughput at one worker (the algorithm's own, else `sync`'s; paired on "
            "the repeat and the grid point), median [95 % bootstrap interval of the median] over the repeats; a "
            "method at one worker is plain SGD, so S(1) is `sync`'s. Throughput measures hardware efficiency only: "
            "what each sample is worth to the model is in the time-to-target figures.", ""] + \
        _md_table(table, list(table.columns))


def _te_lines(dest: Path) -> list[str]:
    """The README's temporal-efficiency section, from ``tables/te_grid.csv`` and ``metrics/temporal_efficiency.json``:
    E(a, b) per hardware, workers and hyperparameter value, median [95 % interval] over the seeds and the winner; none
    where no configuration ran both algorithms."""
    import json

    import pandas as pd

    grid_csv, metrics = dest / "tables" / "te_grid.csv", dest / "metrics" / "temporal_efficiency.json"
    if not grid_csv.is_file() or not metrics.is_file():
        return []
    grid = pd.read_csv(grid_csv)
    if grid.empty or grid["E"].isna().all():
        return []
    ab = json.loads(metrics.read_text()).get("grid") or {}
    a, b = ab.get("a", "a"), ab.get("b", "b")
    param = grid.columns[2]
    grid["E [95 % interval]"] = [_interval_text(e, lo, hi) for e, lo, hi in zip(grid["E"], grid["ci_low"], grid["ci_high"])]
    return ["", f"## Temporal efficiency E({a}, {b}) (`tables/te_grid.csv`, `figures/temporal_efficiency/te_grid.png`)",
            "", f"E = the area under {a}'s training-accuracy curve over wall-clock time / {b}'s, up to the shorter run's "
                f"end (Hermans 2017; > 1: {a} learns sooner), per seed, then the median over the seeds with its 95 % "
                f"bootstrap interval; the winner is named only where the interval excludes 1.", ""] + \
        _md_table(grid, ["hardware", "np", param, "E [95 % interval]", "n", "winner"])


def published_readme(study: Study, dest: Path, runs, span_s: float, busy_s: float = float("nan")) -> str:
    """The README of a published study: what ran and for how long, the claims' verdicts first, the links (aimed
    and measured communication shares), the run-to-run noise of the repeated cells, what each figure shows, and
    what an emulated study cannot show. Generated from the published files, so that it never disagrees with them;
    notes of one's own go in ``NOTES.md`` beside it, which publish leaves alone."""
    import math

    import pandas as pd

    dest = Path(dest)
    commits = sorted({c for c in runs.get("git_commit", pd.Series(dtype=str)).dropna()})
    ok = int((runs["status"] == "ok").sum()) if len(runs) else 0
    calibrated = (dest / "calibration.json").is_file()  # a study whose links are calibrated (share<s>)
    lines = [f"# Reference results: study `{study.name}`", "", study.spec.description, "",
             f"Generated by `python -m bench study publish --study {study.name} --to {dest}` from the study's runs "
             f"(commit{'s' if len(commits) > 1 else ''} {', '.join(f'`{c[:7]}`' for c in commits) or 'unknown'}): "
             f"{len(runs)} runs, {ok} ok (`runs.csv`); the runs took "
             + (f"**{busy_s / 60:.0f} min** (the time covered by at least one run; {span_s / 60:.0f} min from the "
                f"first start to the last end)" if math.isfinite(busy_s) and busy_s < span_s - 60
                else f"**{span_s / 60:.0f} min** from the first start to the last end" if math.isfinite(span_s)
                else "an unknown time")
             + ". `report.html` gathers the tables and figures, `system.md` describes the machine and each link"
             + (", `calibration.json` the calibration run." if calibrated
                else "; the study has no calibration run (its links and target are fixed in params.yaml).")]
    if (dest / "NOTES.md").is_file():
        lines += ["", "What surprised us, and why: [NOTES.md](NOTES.md)."]
    claims_csv = dest / "tables" / "claims.csv"
    c = pd.read_csv(claims_csv) if claims_csv.is_file() else pd.DataFrame()
    if not c.empty and (c["verdict"] == "not testable here").all():
        lines += ["", "## The seed papers' claims (`tables/claims.csv`)", "",
                  "This study has none of the cells the claims' rules test with 3 or more repeats, so every claim is "
                  f"`not testable here` ({' / '.join(dict.fromkeys(c['source']))}). The regimes study tests them "
                  "(`docs/results/regimes/`)."]
    elif not c.empty:
        c["effect [95 % interval]"] = [("x" + text) if (text := _interval_text(e, lo, hi)) else ""
                                       for e, lo, hi in zip(c["effect"], c["ci_low"], c["ci_high"])]
        lines += ["", "## The seed papers' claims (`tables/claims.csv`)", "",
                  "Each claim is a rule declared before the runs (`bench/metrics/claims.py`): a paired ratio over the "
                  "repeats (> 1 favours the claim), judged on the cells with 3 or more repeats, Holm-corrected "
                  "across its tests. The evidence column of the table gives every test.", ""]
        lines += _md_table(c, ["source", "claim", "verdict", "effect [95 % interval]", "n", "rule"])
    links_csv = dest / "tables" / "links.csv"
    lk = pd.read_csv(links_csv) if links_csv.is_file() else pd.DataFrame()
    if not lk.empty:
        lines += ["", f"## The links (`tables/links.csv`{', `calibration.json`' if calibrated else ''})", "",
                  "Each link's rate, "
                  + ("the communication share of `sync`'s step it was calibrated for (from the calibration run's "
                     "compute and bytes a step, bandwidth only) " if calibrated else
                     "the share aimed for (none: the rates are fixed in params.yaml) ")
                  + "and the share measured in `sync`'s runs without a straggler ((communication + wait) / step "
                  "over the timed steps).", ""]
        lines += _md_table(lk, ["link", "share_aimed", "np", "median", "ci_low", "ci_high", "n"])
    summary_csv = dest / "tables" / "regimes_summary.csv"
    if summary_csv.is_file():
        sm = pd.read_csv(summary_csv)
        tp = sm[(sm["metric"] == "throughput") & (sm["n"] >= 3)]
        width = ((tp["ci_high"] - tp["ci_low"]) / tp["median"]).dropna()
        if len(width):
            lines += ["", "## Run-to-run noise", "",
                      f"Over the {len(width)} cells with 3 or more repeats, the 95 % interval of the median throughput "
                      f"spans {100 * width.median():.0f} % of the median (median over the cells; largest "
                      f"{100 * width.max():.0f} %). A difference between single runs smaller than that is noise; the "
                      f"verdicts above use the repeats."]
    lines += _speedup_lines(dest)
    lines += _te_lines(dest)
    figures = sorted(str(p.relative_to(dest / "figures")) for p in (dest / "figures").glob("*/*.png"))
    if figures:
        lines += ["", "## Figures", ""]
        lines += [f"- `figures/{f}`" + (f": {FIGURES[f]}" if f in FIGURES else "") for f in figures]
    lines += ["", "## What these results cannot show", "",
              "- **Latency is not emulated**, only bandwidth (token-bucket shaping; this kernel has no netem): methods "
              "that send many small messages (gossip, parameter servers) would lose ground on a real high-latency "
              "network.",
              "- **Scaled-down hosts**: every emulated host (the parameter server's included) runs inside a fixed share "
              "of one core of a 2-core VM, its communication threads included; real hosts have whole machines, so the "
              "compute and the per-message costs here are not a cluster's, and the communication share of the "
              "fastest link has a floor set by those threads (`tables/links.csv`).",
              "- **One workload**: what wins here wins for this model, batch and dataset; another communication-to-"
              "compute ratio moves the regimes, which is why the links are calibrated by the share they give `sync`.",
              "- Cells with one run carry no interval and no verdict: the heatmaps show them as medians of one.", ""]
    return "\n".join(lines)


def main(args) -> int:
    study = load_study(args.study)
    if args.action == "plan":
        for algorithm, n in plan(study).items():
            print(f"[plan] {study.name}/{algorithm}: {n} run(s)")
    elif args.action == "prepare":
        print(f"[prepare] {prepare(study)}")
    elif args.action == "calibrate":
        print(f"[calibrate] {calibrate(study)}")
    elif args.action == "analyse":
        if not args.algorithm:
            raise BenchError(f"study analyse needs a notebook: python -m bench study analyse NAME (valid: "
                             f"{', '.join(ANALYSES)})")
        print(f"[analyse] {analyse(study, args.algorithm, html=args.html)}")
    elif args.action == "publish":
        if not args.to:
            raise BenchError("study publish needs a destination: python -m bench study publish --to docs/results/<study>")
        written = publish(study, Path(args.to))
        print(f"[publish] {study.name}: {len(written)} file(s) in {args.to}")
    else:
        if not args.algorithm:
            raise BenchError("study run needs an algorithm: python -m bench study run ALGO")
        run(study, args.algorithm)
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("study", help="plan, prepare or run a study of params.yaml (the DVC stages call these)")
    s.add_argument("action", choices=["plan", "prepare", "calibrate", "run", "analyse", "publish"])
    s.add_argument("algorithm", nargs="?", metavar="ALGO|NOTEBOOK",
                   help="registry key (study run) or analysis notebook (study analyse)")
    s.add_argument("--html", action="store_true", help="analyse: also render the notebook as <study>/<notebook>.html")
    s.add_argument("--study", help="study of params.yaml (default: its `study`)")
    s.add_argument("--to", help="publish: the folder to copy the study's tables, figures and system description to")
    s.set_defaults(func=main)

