"""The wiring the pipeline relies on: dvc.yaml against the registry, the run stages' dependencies against the
code a run executes, and the import graph (one process; subprocesses only to see fresh imports)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.algorithms import KEYS
from conftest import REPO

DVC = yaml.safe_load((REPO / "dvc.yaml").read_text())
# modules a run of ALGO executes: its module, what the worker / launcher / study driver import, transitively
CLOSURE = """
import importlib, json, sys
import bench.launch, bench.study, bench.worker
importlib.import_module("bench.algorithms." + sys.argv[1])
print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() if n.startswith("bench") and getattr(m, "__file__", None))))
"""


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
    missing = [f for f in fresh_imports(CLOSURE, algorithm) if f not in exempt
               and not any(f == c or c in f.parents for c in covered)]
    assert not missing, f"run@{algorithm} executes {missing}, which dvc.yaml's run stage does not depend on"
    # and no other algorithm's module is a dependency by accident (only the ones others extend are listed)
    others = {Path(f"bench/algorithms/{k}.py") for k in KEYS} - {Path(f"bench/algorithms/{algorithm}.py")}
    assert {c for c in covered if c in others} <= {Path("bench/algorithms/agn.py"), Path("bench/algorithms/aeasgd.py")}


def test_calibrate_stage_depends_on_everything_its_sync_run_executes():
    # the calibration (before the plan: the target and the share<s> link rates) launches one run of sync
    covered = [Path(d) for d in DVC["stages"]["calibrate"]["deps"] if not d.startswith(("results/", "data/"))]
    missing = [f for f in fresh_imports(CLOSURE, "sync") if f != Path("bench/algorithms/__init__.py")
               and not any(f == c or c in f.parents for c in covered)]
    assert not missing, f"the calibrate stage executes {missing}, which dvc.yaml's calibrate stage does not depend on"
    assert "results/${study}/calibration.json" in DVC["stages"]["plan"]["deps"]  # the plan reads the link rates


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
    from bench.resolve import hardware_profiles, resolve

    for hw in hardware_profiles():
        if hw.startswith("emu"):
            continue  # emulated clusters are checked where they can be brought up (tests/cluster)
        assert resolve("sync", np=2, hardware=hw).launch.hardware == hw


def test_every_study_of_params_yaml_is_a_valid_spec():
    from bench.resolve import load_params
    from bench.study import load_study

    names = sorted(load_params(REPO / "params.yaml")["studies"])
    assert {"laptop", "regimes", "regimes-speedup", "regimes-te", "regimes-smoke"} <= set(names)
    for name in names:  # the typed spec, its algorithms, repeats_where, share links, sets_by_* keys
        assert load_study(name, REPO / "params.yaml").name == name


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
    from bench.study import ANALYSES

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name in ANALYSES:
        assert f"python -m bench study analyse {name} " in stages[name]["cmd"], stages[name]["cmd"]
        assert (REPO / "notebooks" / f"{name}.ipynb").is_file()
