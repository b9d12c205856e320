"""The wiring the pipeline relies on: dvc.yaml against the registry, the run stages' dependencies against the
code a run executes, and the import graph (one process; subprocesses only to see fresh imports)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.algorithms import KEYS
from support import REPO

DVC = yaml.safe_load((REPO / "dvc.yaml").read_text())
# the suite's modules that importing the modules named on the command line loads, transitively
CLOSURE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() if n.startswith("bench") and getattr(m, "__file__", None))))
"""
ANALYSES = ("speedup", "convergence", "temporal_efficiency", "hardware", "regimes", "report")


def executed_by(action: str, algorithm: str) -> list[str]:
    """What a stage running ``python -m bench study <action>`` on ``algorithm`` executes: the study command and its
    action's module, the launcher and the worker (run.ipynb launches through bench.launch), the algorithm's module."""
    return ["bench.study.cli", f"bench.study.{action}", "bench.launch", "bench.worker", f"bench.algorithms.{algorithm}"]


def fresh_imports(code: str, *args: str) -> list[Path]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [Path(f).resolve().relative_to(REPO) for f in json.loads(proc.stdout)]


def run_stages() -> list[str]:
    """The ``run@<key>`` stages as DVC itself resolves dvc.yaml (its ``vars`` read the registry file)."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [line.split("@", 1)[1] for line in proc.stdout.split() if line.startswith("run@")]


def test_dvc_matrix_lists_exactly_the_registered_algorithms():
    assert run_stages() == list(KEYS)
    assert "bench/algorithms/registry.yaml" in DVC["vars"]  # the one list, not a copy
    for key in KEYS:  # each algorithm is the module named as its key
        assert (REPO / "bench" / "algorithms" / f"{key}.py").is_file()


@pytest.mark.parametrize("algorithm", ["sync", "adag", "eamsgd", "lasgd", "sgp", "fast", "dcasgd"])
def test_run_stage_depends_on_everything_a_run_executes(algorithm):
    deps = [d.replace("${item.algorithm}", algorithm) for d in DVC["stages"]["run"]["deps"]]
    covered = [Path(d) for d in deps if not d.startswith(("results/", "data/", "notebooks/"))]
    exempt = {Path("bench/algorithms/__init__.py")}  # the registry's list of keys (see dvc.yaml)
    missing = [f for f in fresh_imports(CLOSURE, *executed_by("run", algorithm)) if f not in exempt
               and not any(f == c or c in f.parents for c in covered)]
    assert not missing, f"run@{algorithm} executes {missing}, which dvc.yaml's run stage does not depend on"
    # and no other algorithm's module is a dependency by accident (only the ones others extend are listed)
    others = {Path(f"bench/algorithms/{k}.py") for k in KEYS} - {Path(f"bench/algorithms/{algorithm}.py")}
    assert {c for c in covered if c in others} <= {Path("bench/algorithms/agn.py"), Path("bench/algorithms/aeasgd.py")}


def test_calibrate_stage_depends_on_everything_its_sync_run_executes():
    # the calibration (before the plan: the target and the share<s> link rates) launches one run of sync
    covered = [Path(d) for d in DVC["stages"]["calibrate"]["deps"] if not d.startswith(("results/", "data/"))]
    missing = [f for f in fresh_imports(CLOSURE, *executed_by("calibrate", "sync")) if f != Path("bench/algorithms/__init__.py")
               and not any(f == c or c in f.parents for c in covered)]
    assert not missing, f"the calibrate stage executes {missing}, which dvc.yaml's calibrate stage does not depend on"
    assert "results/${study}/calibration.json" in DVC["stages"]["plan"]["deps"]  # the plan reads the link rates


def notebook_study_imports(notebook: Path) -> list[str]:
    """The modules of bench.study that a notebook's code cells import (``from bench.study[.x] import ...``)."""
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    tree = ast.parse("\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))))
    return [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("bench.study")]


@pytest.mark.parametrize("stage", ["prepare", "plan", "calibrate", "run", *ANALYSES])
def test_each_stage_depends_on_exactly_the_modules_of_bench_study_it_loads(stage):
    """A stage depends on the bench/study/ modules its command (and its notebook) loads, and on no other: a change
    to publishing or to the published README's writer re-runs no stage."""
    words = DVC["stages"][stage]["cmd"].split()
    assert words[:4] == ["python", "-m", "bench", "study"], words
    action, target = words[4], words[5] if len(words) > 5 else ""
    modules = ["bench.study.cli", f"bench.study.{action}"]
    if action == "analyse":  # the kernel of the analysis notebook loads its own
        modules += notebook_study_imports(REPO / "notebooks" / f"{target}.ipynb")
    if action == "run":
        modules += notebook_study_imports(REPO / "notebooks" / "run.ipynb")
    loaded = {f for f in fresh_imports(CLOSURE, *modules) if f.parts[:2] == ("bench", "study")}
    deps = {Path(d) for d in DVC["stages"][stage]["deps"] if d.startswith("bench/study")}
    assert deps == loaded, f"{stage}: depends on {sorted(map(str, deps - loaded))} it does not load; loads " \
                           f"{sorted(map(str, loaded - deps))} it does not depend on"
    assert not {Path("bench/study/publish.py"), Path("bench/study/readme.py")} & deps


def test_configuration_imports_no_algorithm():
    loaded = fresh_imports("import json, sys, bench.config\n"
                           "print(json.dumps([m.__file__ for n, m in sys.modules.items() if n.startswith('bench')]))")
    assert loaded == [Path("bench/__init__.py"), Path("bench/config.py")]


def test_no_sys_path_manipulation_and_one_place_names_a_run():
    sources = [*REPO.glob("bench/**/*.py"), *REPO.glob("tests/**/*.py"), *REPO.glob("scripts/*"),
               *REPO.glob("notebooks/*.ipynb")]
    assert not [p for p in sources if "sys.path.insert" in p.read_text() and p != Path(__file__)]
    namers = [p.relative_to(REPO) for p in REPO.glob("bench/**/*.py") if re.search(r"\}-np\{", p.read_text())]
    assert namers == [Path("bench/layout.py")]


def test_hardware_profiles_resolve():
    import torch

    from bench import BenchError
    from bench.resolve import hardware_profiles, resolve
    from bench.runconfig import check_values

    for hw in hardware_profiles():
        if hw.startswith("emu"):
            continue  # emulated clusters are checked where they can be brought up (tests/cluster)
        cfg = resolve("sync", np=2, hardware=hw, check=False)
        assert check_values(cfg).launch.hardware == hw
        if cfg.launch.p2p_backend == "nccl" and not torch.distributed.is_nccl_available():
            with pytest.raises(BenchError, match="p2p_backend 'nccl' needs torch.distributed built with NCCL"):
                resolve("sync", np=2, hardware=hw)  # what this build lacks is refused before launch
        else:
            assert resolve("sync", np=2, hardware=hw).launch.hardware == hw


def test_every_study_file_is_a_valid_spec_with_a_one_line_description():
    from bench.resolve import load_params
    from bench.study.spec import load_study, study_names

    assert "studies" not in load_params(REPO / "params.yaml")  # one place for studies: pipelines/studies/
    names = study_names(REPO / "params.yaml")
    assert names == sorted(p.stem for p in (REPO / "pipelines" / "studies").glob("*.yaml"))
    assert {"laptop", "smoke", "regimes", "regimes-speedup", "regimes-te", "regimes-smoke"} <= set(names)
    for name in names:  # the typed spec, its algorithms, repeats_where, share links, sets_by_* keys
        study = load_study(name, REPO / "params.yaml")
        assert study.name == name and (REPO / study.file).is_file()
        description = study.spec.description
        assert description.strip() and "\n" not in description, f"{study.file}: description must be one line (docs/architecture.md#extending)"


def test_an_unknown_study_is_refused_naming_the_study_files(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "study", "plan", "--study", "no-such"], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "unknown study 'no-such'; valid: cluster, dgx1, hermans, laptop, laptop-all, regimes," in proc.stderr
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text() + "studies:\n  old: {np: [1]}\n")
    from bench import BenchError
    from bench.study import load_study

    with pytest.raises(BenchError, match="has a `studies:` section; a study is its own file now"):
        load_study("old", tmp_path / "params.yaml")


def test_list_params_prints_every_hyperparameter_with_its_default_and_the_value_params_yaml_sets():
    proc = subprocess.run([sys.executable, "-m", "bench", "list", "--params"], cwd=str(REPO), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "    sync_epochs = 1.0 (params.yaml: 0.25)  # " in out  # fast's override, beside its default
    assert "    rho = 5.0  # " in out and "    delay = 1  # " in out  # defaults with their meaning


def test_study_analyse_refuses_an_unknown_notebook_naming_the_valid_ones():
    proc = subprocess.run([sys.executable, "-m", "bench", "study", "analyse", "speedups"], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "'speedups'" in proc.stderr and "speedup, convergence, temporal_efficiency" in proc.stderr


def test_every_analysis_stage_runs_its_notebook_through_bench_study_analyse():
    from bench.study.analyse import ANALYSES as analyses

    assert analyses == ANALYSES
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name in ANALYSES:
        assert f"python -m bench study analyse {name} " in stages[name]["cmd"], stages[name]["cmd"]
        assert (REPO / "notebooks" / f"{name}.ipynb").is_file()


def pipeline_picture() -> list[str]:
    """The pipelines as the docs draw them: dvc.yaml's stages (the study's) in the order their deps and outs make (a
    stage after every stage whose outputs it reads; stages of one step joined by commas), then the stages of
    pipelines/predict/dvc.yaml, which reads only the published studies and which a plain ``dvc repro`` leaves alone."""
    def paths(items) -> list[str]:
        return [(next(iter(i)) if isinstance(i, dict) else i).rstrip("/") for i in items or []]

    stages = {}
    for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        key = f"{name}@<algo>" if "matrix" in stage or "foreach" in stage else name
        stage = stage.get("do", stage)
        stages[key] = (paths(stage.get("deps")), paths(stage.get("outs")) + paths(stage.get("metrics")))

    def feeds(a: str, b: str) -> bool:
        return a != b and any(d == o or d.startswith(o + "/") or o.startswith(d + "/")
                             for o in stages[a][1] for d in stages[b][0])

    step: dict[str, int] = {}
    for _ in stages:  # longest path from a stage without inputs
        for s in stages:
            step[s] = max([step.get(a, 0) + 1 for a in stages if feeds(a, s)], default=0)
    alone = [s for s in stages if not any(feeds(a, s) or feeds(s, a) for a in stages)]
    assert not alone, f"dvc.yaml stages that neither read nor feed another: {alone} (a pipeline of their own?)"
    chain = [[s for s in stages if step[s] == k] for k in range(max(step.values()) + 1)]
    apart = yaml.safe_load((REPO / "pipelines" / "predict" / "dvc.yaml").read_text())["stages"]
    return [" -> ".join(", ".join(group) for group in chain if group),
            ", ".join(apart) + " (its own pipeline, the published studies: dvc repro pipelines/predict/dvc.yaml)"]


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md", "pipelines/README.md", "docs/guide.md"])
def test_the_docs_draw_the_pipeline_as_dvc_yaml_orders_it(doc):
    picture = pipeline_picture()
    assert picture[0].startswith("prepare, calibrate -> plan -> run@<algo> -> ") and picture[0].endswith("-> report")
    assert picture[1].startswith("predict")
    text = (REPO / doc).read_text()
    block = "```\n" + "\n".join(picture) + "\n```"
    assert block in text, f"{doc} must draw the pipeline as dvc.yaml orders it (docs/architecture.md#the-pipeline):\n{block}"
