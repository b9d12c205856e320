"""DVC stage driver: plan a study, prepare its data, and run one algorithm's configurations through run.ipynb.

    python pipelines/study.py prepare           # data/prepared/<study>.json: the study's dataset loads, with its checksum
    python pipelines/study.py plan              # results/<hardware>/<study>/plan/<algo>.json for every key in dvc.yaml
    python pipelines/study.py run ALGO          # papermill notebooks/run.ipynb once per planned (np, grid point) of ALGO

The study is params.yaml's ``study`` (``dvc exp run -S study=hermans``) and the hardware profile its
``hardware``. DVC matrices are static, so ``dvc.yaml`` lists every registry key of ALGORITHMS.md; the
plan decides what each key runs in the chosen study. A plan file holds the fully resolved configuration
of each run and a hash of the algorithm's module (and of the bench modules it imports), so changing one algorithm's hyperparameter or code
changes only that algorithm's plan file, and DVC re-runs only that algorithm's ``run@`` stage. A key that
is not (yet) registered, or not part of the study, gets a plan with no runs (its stage only records that).
A failed benchmark run does not fail its stage: it is kept, marked failed, and shown as failed by the report.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import itertools
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import BenchError, run_command  # noqa: E402
from bench.algorithms import get_algorithm, names  # noqa: E402
from bench.config import field_types, load_params, resolve, TrainConfig, LaunchConfig  # noqa: E402

STUDY_KEYS = {"description", "profile", "algorithms", "np", "np_by_algorithm", "sets", "grid", "hardware"}


def universe() -> list[str]:
    """Registry keys the DVC matrix covers (``vars: registry_keys`` of dvc.yaml)."""
    with open(REPO / "dvc.yaml") as f:
        for entry in yaml.safe_load(f).get("vars", []):
            if isinstance(entry, dict) and "registry_keys" in entry:
                return list(entry["registry_keys"])
    raise BenchError("dvc.yaml has no `vars: - registry_keys: [...]` list")


def current() -> tuple[dict, str, str, dict]:
    params = load_params(REPO / "params.yaml")
    study, hardware = params.get("study", "laptop"), params.get("hardware", "local")
    studies = params.get("studies") or {}
    if study not in studies:
        raise BenchError(f"unknown study {study!r}; valid: {', '.join(sorted(studies))}")
    spec = dict(studies[study] or {})
    unknown = sorted(set(spec) - STUDY_KEYS)
    if unknown:
        raise BenchError(f"study {study!r}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(STUDY_KEYS))}")
    if spec.get("hardware", hardware) != hardware:
        raise BenchError(f"study {study!r} is meant for hardware {spec['hardware']!r} but params.yaml selects "
                         f"{hardware!r}; run `dvc exp run -S study={study} -S hardware={spec['hardware']}`")
    return params, study, hardware, spec


def study_dir(study: str, hardware: str) -> Path:
    return REPO / "results" / hardware / study


def study_algorithms(study: str, spec: dict) -> list[str]:
    algos = spec.get("algorithms", "all")
    registered = names()
    if algos == "all":
        return registered
    missing = [a for a in algos if a not in registered]
    if missing:
        raise BenchError(f"study {study!r} names algorithms that are not registered: {', '.join(missing)}; "
                         f"registered: {', '.join(registered)}")
    return list(algos)


def grid_points(algorithm: str, spec: dict) -> list[tuple[str, dict]]:
    """(tag, overrides) per point of the study's grid; grid keys the algorithm does not have are left out."""
    valid = set(field_types(get_algorithm(algorithm).Params)) | set(field_types(TrainConfig)) | set(field_types(LaunchConfig))
    grid = {k: v for k, v in (spec.get("grid") or {}).items() if k.rpartition(".")[2] in valid}
    if not grid:
        return [("", {})]
    points = []
    for values in itertools.product(*grid.values()):
        sets = dict(zip(grid, values))
        points.append(("-".join(f"{k.rpartition('.')[2]}{v}" for k, v in sets.items()), sets))
    return points


def code_hash(module_file: Path) -> str:
    """SHA-256 of an algorithm's module and of every bench module it imports, transitively (relative imports),
    so a change to a shared helper (a parameter-server base, a topology) re-runs the algorithms that use it."""
    bench_root = REPO / "bench"
    registry = (bench_root / "algorithms" / "__init__.py").resolve()  # registering another algorithm changes nothing here
    seen, todo = set(), [module_file.resolve()]
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                base = f.parent
                for _ in range(node.level - 1):
                    base = base.parent
                parts = (node.module or "").split(".") if node.module else []
                target = base.joinpath(*parts)
                names_ = [a.name for a in node.names]
                for cand in [target.with_suffix(".py"), target / "__init__.py", *[target / f"{n}.py" for n in names_]]:
                    if cand.is_file() and bench_root in cand.resolve().parents and cand.resolve() != registry:
                        todo.append(cand.resolve())
    h = hashlib.sha256()
    for f in sorted(seen):
        h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def plan_algorithm(algorithm: str, study: str, hardware: str, spec: dict, chosen: list[str]) -> dict:
    plan = {"algorithm": algorithm, "study": study, "hardware": hardware, "runs": []}
    if algorithm not in names():
        return {**plan, "status": "not registered"}
    if algorithm not in chosen:
        return {**plan, "status": "not in study"}
    module = Path(sys.modules[get_algorithm(algorithm).__module__].__file__)
    plan.update(status="planned", code_sha256=code_hash(module))
    nps = (spec.get("np_by_algorithm") or {}).get(algorithm, spec.get("np", [1]))
    for n, (tag, sets) in itertools.product(nps, grid_points(algorithm, spec)):
        overrides = {**(spec.get("sets") or {}), **sets}
        cfg = resolve(algorithm, np=n, profile=spec.get("profile"), hardware=hardware, overrides=overrides,
                      study=study, tag=tag, params_file=REPO / "params.yaml")
        key = f"{algorithm}-np{n}" + (f"-{tag}" if tag else "")
        plan["runs"].append({"key": key, "np": n, "tag": tag, "profile": cfg.profile,
                             "overrides": [f"{k}={json.dumps(v)}" for k, v in overrides.items()],
                             "config": cfg.to_dict()})
    return plan


def cmd_plan(args) -> int:
    from bench.results import write_json_atomic

    _, study, hardware, spec = current()
    keys = universe()
    extra = [a for a in names() if a not in keys]
    if extra:
        raise BenchError(f"registered algorithms missing from dvc.yaml `vars: registry_keys`: {', '.join(extra)}; add them there")
    chosen = study_algorithms(study, spec)
    out = study_dir(study, hardware) / "plan"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    for algorithm in keys:
        plan = plan_algorithm(algorithm, study, hardware, spec, chosen)
        write_json_atomic(out / f"{algorithm}.json", plan)
        print(f"[plan] {study}/{algorithm}: {plan['status']}, {len(plan['runs'])} run(s)")
    return 0


def cmd_prepare(args) -> int:
    from bench.data import load_dataset
    from bench.results import write_json_atomic

    params, study, hardware, spec = current()
    profile = spec.get("profile") or params.get("profile", "laptop")
    train = resolve("sync", np=1, profile=profile, hardware=hardware, study=study,
                    params_file=REPO / "params.yaml").train
    info = {"study": study, "profile": profile, "dataset": train.dataset}
    if train.dataset == "synthetic":
        info["note"] = "synthetic tensors are generated by each worker; nothing to prepare"
    else:
        ds = load_dataset(train)
        h = hashlib.sha256()
        for t in (ds.x_train, ds.y_train, ds.x_test, ds.y_test):
            h.update(t.numpy().tobytes())
        info.update(train=len(ds.x_train), test=len(ds.x_test), input_shape=list(ds.input_shape),
                    num_classes=ds.num_classes, sha256=h.hexdigest())
    write_json_atomic(REPO / "data" / "prepared" / f"{study}.json", info)
    print(f"[prepare] {info}")
    return 0


def cmd_run(args) -> int:
    _, study, hardware, _ = current()
    sdir = study_dir(study, hardware)
    plan_file = sdir / "plan" / f"{args.algorithm}.json"
    if not plan_file.is_file():
        raise BenchError(f"no plan {plan_file}: run `dvc repro plan` (or `python pipelines/study.py plan`) first")
    plan = json.loads(plan_file.read_text())
    runs_dir = sdir / "runs" / args.algorithm
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / "plan.json").write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    if not plan["runs"]:
        print(f"[run] {args.algorithm}: {plan['status']} in study {study!r}: nothing to run")
        return 0
    import papermill

    (sdir / "notebooks").mkdir(parents=True, exist_ok=True)
    for r in plan["runs"]:
        out = runs_dir / r["key"]
        print(f"[run] {study}/{r['key']} -> {out.relative_to(REPO)}", flush=True)
        papermill.execute_notebook(
            str(REPO / "notebooks" / "run.ipynb"), str(sdir / "notebooks" / f"run-{r['key']}.ipynb"),
            parameters={"algorithm": args.algorithm, "np": r["np"], "study": study, "profile": r["profile"],
                        "hardware": hardware, "overrides": r["overrides"], "tag": r["tag"], "out": str(out)},
            cwd=str(REPO), kernel_name="python3", progress_bar=False)
        status = json.loads((out / "summary.json").read_text()).get("status") if (out / "summary.json").exists() else "incomplete"
        print(f"[run] {r['key']}: {status}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python pipelines/study.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare").set_defaults(func=cmd_prepare)
    sub.add_parser("plan").set_defaults(func=cmd_plan)
    r = sub.add_parser("run")
    r.add_argument("algorithm")
    r.set_defaults(func=cmd_run)
    args = ap.parse_args(argv)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
