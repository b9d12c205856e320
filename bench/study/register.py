"""``python -m bench study register``: a study's registration, written after its calibration and before its first
judged run, and committed (:mod:`bench.registration`).

    python -m bench study calibrate --study S     # the target and the link rates (one run of sync; judges nothing)
    python -m bench study register --study S      # pipelines/registrations/S.json
    git add pipelines/registrations/S.json && git commit -m "register S"
    dvc exp run -S study=S                        # the runs record the registration; publish checks it

The registration holds what the verdicts will rest on, fixed before any result is seen: the claims' rules (each with
the sentence of its paper), the metrics and the target accuracy, every cell (each planned run with the SHA-256 of its
``config.json`` and its seed), the seeds of the studies its hyperparameters were tuned on (which it must not share),
the study's file and its hash, and the commit of the code. A run whose configuration it does not list is
exploratory; registering again (``--force``) makes a new registration, under which the earlier runs carry no verdict.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

from .. import BenchError, registration
from ..layout import REPO_ROOT
from ..metrics.claims import as_record, select
from ..metrics.regimes import COMPARED_METRICS
from ..resolve import resolve
from ..results import check_regular, read_json_object, write_text_atomic
from ..system import git_record
from .plan import max_repeats, plan
from .spec import Study, load_study, read_calibration, read_plan, study_analysis


def cells(study: Study) -> list[dict]:
    """Every planned run (the plan as ``plan`` writes it): its key, config file, the file's SHA-256, seed, repeat."""
    out = []
    for algorithm in sorted(p.parent.name for p in study.layout.dir.glob("plan/*/plan.json")):
        for entry in read_plan(study.layout, algorithm):
            path = study.layout.dir / entry["config"]
            cfg = read_json_object(path)
            out.append({"run": f"{entry['name']}@{entry['hardware']}", "config": entry["config"],
                        "config_sha256": registration.sha256(path), "seed": cfg["train"]["seed"],
                        "repeat": cfg.get("repeat", 0)})
    return out


def seeds_of(study: Study) -> set[int]:
    """The seeds a study's runs use (its profile's seed + ``seed_offset`` + k for each repeat k), without planning it."""
    base = resolve("sync", profile=study.profile, hardware=study.hardware[0], params_file=study.params_file,
                   check=False).train.seed
    return {base + study.spec.seed_offset + k for k in range(max_repeats(study))}


def register(study: Study, force: bool = False) -> dict:
    """Plan the study and write its registration; BenchError where it exists (without ``force``), a claim is unknown,
    the calibration is missing, or its seeds are those of a study it was tuned on."""
    path = registration.path(study.name)
    if path.parent.exists() and not path.parent.is_dir():
        raise BenchError(f"{path.parent}: a file, not a folder: the study's registration goes there; move it away")
    check_regular(path)  # a FIFO would block the write, a directory refuse it, after the plan was rewritten
    if path.is_file() and not force:
        raise BenchError(f"study {study.name!r} is registered already ({path.relative_to(REPO_ROOT)}, "
                         f"{registration.sha256(path)[:12]}); --force writes a new registration, under which the runs "
                         f"made so far carry no verdict")
    rules = select(study.spec.claims, where=f"study {study.name!r}: claims")
    tuning = {name: sorted(seeds_of(load_study(name, study.params_file))) for name in study.spec.tuned_by}
    target, budget_s = study_analysis(study.name)  # a derived target needs the calibration: an error names it
    calibration = read_calibration(study.layout)
    plan(study)
    planned = cells(study)
    seeds = sorted({c["seed"] for c in planned})
    shared = {name: sorted(set(seeds) & set(s)) for name, s in tuning.items() if set(seeds) & set(s)}
    if shared:
        raise BenchError(f"study {study.name!r} would test on the seeds its hyperparameters were tuned on "
                         f"({'; '.join(f'{n}: {s}' for n, s in shared.items())}): set its seed_offset so that they "
                         f"differ")
    file = study.params_file.resolve().parent / study.file
    record = {
        "study": study.name, "description": study.spec.description,
        "study_file": str(study.file), "study_file_sha256": registration.sha256(file),
        "spec": dataclasses.asdict(study.spec), "claims": [as_record(r) for r in rules],
        "metrics": {"target_accuracy": target, "target_window": study.spec.target_window, "budget_s": budget_s, "compared": list(COMPARED_METRICS),
                    "calibration": calibration or False},
        "seeds": seeds, "tuned_by": tuning, "cells": planned,
        "code_commit": git_record()["commit"], "created_utc": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return {"file": str(path.relative_to(REPO_ROOT)), "sha256": registration.sha256(path), "cells": len(planned),
            "claims": len(rules), "seeds": seeds}


def main(study: Study, args) -> None:
    info = register(study, force=args.force)
    print(f"[register] {study.name}: {info['cells']} cells, {info['claims']} claims, seeds {info['seeds']} -> "
          f"{info['file']} ({info['sha256'][:12]}); commit it before the first judged run: "
          f"git add {info['file']} && git commit")
