"""``python -m bench study plan``: every planned run of the study resolved once and written as its config.json,
``results/<study>/plan/<algo>/<hardware>/<name>.json`` with a ``plan.json`` per algorithm (:func:`plan`); the
``run@<algo>`` stage launches those files unchanged. Repeats are planned repeat-major (``repeats_where`` per cell)."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .. import BenchError
from ..algorithms import get_algorithm, names
from ..config import LaunchConfig, RunConfig, TrainConfig
from ..layout import run_name
from ..resolve import resolve
from ..results import replace_folder, write_json_atomic
from ..typed import field_types
from .spec import Study, StudySpec, aimed_shares, link_share, read_calibration


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


def _tag_value(v: Any) -> str:
    if v == "":
        return "none"  # e.g. link "" (unshaped): tag linknone
    return ("_".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)).replace("/", "_").replace(" ", "")


BLOCKS = frozenset(name for name, t in field_types(LaunchConfig).items() if dataclasses.is_dataclass(t))
"""Launch settings that are blocks of settings (``horovod``): a grid key ``<block>.<setting>`` sets one of them."""


def grid_points(algorithm: str, spec: StudySpec) -> list[tuple[str, dict]]:
    """(tag, overrides) per point of the study's grid; grid keys the algorithm does not have are left out. A key of a
    settings block (``horovod.cycle_time_ms``) sets that one setting, on top of the block the profiles give."""
    valid = set(field_types(get_algorithm(algorithm).Params)) | set(field_types(TrainConfig)) | set(field_types(LaunchConfig))
    grid = {k: v for k, v in spec.grid.items() if k in valid or k.partition(".")[0] in BLOCKS}
    if not grid:
        return [("", {})]
    points = []
    for values in itertools.product(*grid.values()):
        sets = dict(zip(grid, values))
        points.append(("-".join(f"{k}{_tag_value(v)}" for k, v in sets.items()), sets))
    return points


def repeat_tag(tag: str, repeat: int, repeats: int) -> str:
    """A run's tag: the grid point's tag, then ``r<k>`` when the study repeats its runs (``repeats`` > 1); its grid
    point again is :func:`bench.metrics.selection.point`."""
    if repeats <= 1:
        return tag
    return f"{tag}-r{repeat}" if tag else f"r{repeat}"


def planned_runs(study: Study, algorithm: str) -> list[RunConfig]:
    """Every run of ``algorithm`` in ``study``, resolved and validated (none if the study does not run it)."""
    if algorithm not in study.algorithms():
        return []
    nps = study.spec.np_by_algorithm.get(algorithm, study.spec.np)
    calibration = (read_calibration(study.layout, "before it is planned (its target or its share<s> link rates)")
                   if aimed_shares(study.spec) else None)
    runs, repeats = [], max_repeats(study)
    # repeat-major: every point's repeat 0, then every point's repeat 1, ...; point-major: a point's repeats together
    points = list(itertools.product(study.hardware, nps, grid_points(algorithm, study.spec)))
    order = (((k, *p) for k in range(repeats) for p in points) if study.spec.order == "repeat-major"
             else ((k, *p) for p in points for k in range(repeats)))
    for k, hardware, n, (tag, sets) in order:
        overrides = {**study.overrides(algorithm, n, hardware), **sets}
        if k >= repeats_of(study, algorithm, n, overrides):
            continue
        cfg = resolve(algorithm, np=n, profile=study.profile, hardware=hardware,
                      overrides=resolve_link(overrides, calibration), study=study.name,
                      tag=repeat_tag(tag, k, repeats), params_file=study.params_file)
        cfg.train.seed += study.spec.seed_offset + k  # a repeat changes the initialisation and the shard order; split_seed stays
        cfg.repeat = k
        runs.append(cfg)
    return runs


def plan(study: Study) -> dict[str, int]:
    """Write the study's plan folder, every registered algorithm's (an empty one when the study does not run it): every
    run resolved first, then the files written into a staged folder that replaces the plan whole, so that a refused
    run or a failed write leaves the plan as it was."""
    layout = study.layout
    for folder in (layout.dir, layout.plan):
        if folder.exists() and not folder.is_dir():
            raise BenchError(f"{folder}: a file, not a folder: the study's plan goes there; move it away")
    planned = {algorithm: planned_runs(study, algorithm) for algorithm in names()}
    layout.dir.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=layout.dir, prefix=".plan."))
    try:
        for algorithm, runs in planned.items():
            entries = []
            for cfg in runs:
                path = layout.plan_file(algorithm, cfg.launch.hardware, cfg.launch.np, cfg.tag)
                write_json_atomic(staged / path.relative_to(layout.plan), cfg.to_dict())
                entries.append({"name": run_name(algorithm, cfg.launch.np, cfg.tag), "hardware": cfg.launch.hardware,
                                "config": str(path.relative_to(layout.dir))})
            write_json_atomic(staged / algorithm / "plan.json", {
                "algorithm": algorithm, "study": study.name, "status": "planned" if runs else "not in study",
                "runs": entries})
        replace_folder(staged, layout.plan)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return {algorithm: len(runs) for algorithm, runs in planned.items()}


def main(study: Study, args) -> None:
    for algorithm, n in plan(study).items():
        print(f"[plan] {study.name}/{algorithm}: {n} run(s)")
