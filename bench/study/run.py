"""``python -m bench study run ALGO``: the ``run@<algo>`` stage. Every planned run of ALGO launched through
notebooks/run.ipynb (papermill; one kernel, the runs one after the other, the planned config files unchanged).
A failed benchmark run does not fail the stage: it is kept, marked failed, and shown as failed."""

from __future__ import annotations

import logging
from pathlib import Path

from .. import BenchError
from ..algorithms import check_name, get_algorithm
from ..launch.lock import RunLock, claim
from ..layout import REPO_ROOT
from ..results import ResultsError, read_json
from ..runconfig import load_config
from .spec import Study, read_plan


def clear_stale(runs: Path, plan: Path, planned: list[str]) -> list[Path]:
    """The stage's folder ``runs`` (``runs/<algo>/``, kept by DVC between runs: ``persist``) before the stage runs:
    refuse while any run directory in it is held (naming the holder); then remove the run directories an earlier run
    of this stage made from ``plan`` that the plan no longer has (``planned``: this plan's run directories), so that
    no stale run is analysed with the new ones. Whatever else is there (a ``bench run --study`` into the study) stays.
    Returns what was removed."""
    dirs = sorted(p for p in runs.glob("*/*") if p.is_dir())
    for d in dirs:
        RunLock(d).check_free()
    keep, removed = {str(Path(p).resolve()) for p in planned}, []
    for d in dirs:
        try:
            origin = read_json(d / "system.json").get("planned", "")
        except (OSError, ResultsError):
            continue
        if str(d.resolve()) not in keep and Path(origin).parent.parent == plan.resolve():
            with claim(d, force=True):
                pass
            d.rmdir()
            removed.append(d)
            print(f"[study] removed {d}: an earlier run of this stage that the plan no longer has", flush=True)
    return removed


def run(study: Study, algorithm: str) -> list[tuple[str, str]]:
    """Launch every planned run of ``algorithm`` through notebooks/run.ipynb (one kernel, the runs one after the
    other, the planned config files launched unchanged); returns (run key, status) pairs."""
    check_name(algorithm)  # the module (and torch) imported only where there are runs
    layout = study.layout
    entries = read_plan(layout, algorithm)
    if entries is None:
        raise BenchError(f"no plan {layout.algorithm_plan(algorithm) / 'plan.json'}: run `python -m bench study plan` "
                         f"(or `dvc repro plan`) first")
    configs, outs, keys = [], [], []
    for entry in entries:  # every planned config read and checked before anything is written
        planned = layout.dir / entry["config"]
        cfg = load_config(planned)
        configs.append(str(planned))
        outs.append(str(layout.run_dir(algorithm, cfg.launch.hardware, cfg.launch.np, cfg.tag)))
        keys.append(f"{entry['name']}@{entry['hardware']}")
    layout.algorithm_runs(algorithm).mkdir(parents=True, exist_ok=True)
    if not entries:  # before papermill (and torch) are imported: a stage of an algorithm not in the study is quick
        print(f"[study] {algorithm}: not in study {study.name!r}, nothing to run")
        return []
    import papermill  # 3-8 s on 2 cores (nbformat's validator compiles jsonschema's format grammars)

    get_algorithm(algorithm)
    print(f"[study] {study.name}: {algorithm}, {len(configs)} run(s): {', '.join(keys)}", flush=True)
    clear_stale(layout.algorithm_runs(algorithm), layout.algorithm_plan(algorithm), outs)
    layout.notebooks.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # papermill streams the notebook's output
    papermill.execute_notebook(str(REPO_ROOT / "notebooks" / "run.ipynb"), str(layout.notebooks / f"run-{algorithm}.ipynb"),
                               parameters={"configs": configs, "outs": outs}, cwd=str(REPO_ROOT), kernel_name="python3",
                               progress_bar=False, log_output=True)
    results = []
    for key, out in zip(keys, outs):
        summary = Path(out) / "summary.json"
        status = read_json(summary).get("status", "incomplete") if summary.is_file() else "incomplete"
        print(f"[study] {key}: {status}", flush=True)
        results.append((key, status))
    return results


def main(study: Study, args) -> None:
    if not args.algorithm:
        raise BenchError("study run needs an algorithm: python -m bench study run ALGO")
    run(study, args.algorithm)
