"""One source per published number (issue 49 item 2): ``study publish`` copies what the study's stages wrote (a study
with companions gathers their claims in its own analysis), the studies a study file says are published are the ones
docs/results holds and the ones the predict pipeline (pipelines/predict/dvc.yaml) and bench/predict read, and
docs/results stays small."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.predict.cells import predict_studies
from bench.study.spec import load_study, published_studies, study_names
from support import REPO

DOCS = REPO / "docs" / "results"


def publish_env(tmp: Path, studies: dict[str, str]) -> tuple[Path, dict]:
    """A params.yaml copy (tmp/p) with the study files ``studies`` (name -> body) beside the repository's."""
    root = tmp / "p"
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    shutil.copyfile(REPO / "params.yaml", root / "params.yaml")
    for name, body in studies.items():
        (root / "pipelines" / "studies" / f"{name}.yaml").write_text(body)
    return root, {"BENCH_PARAMS": str(root / "params.yaml")}


def publish(env: dict, study: str, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "study", "publish", "--study", study, "--to", str(dest)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0", **env))


def test_publish_copies_the_claims_table_of_a_study_with_companions_unchanged(tmp_path):
    """The study's claims.csv (which its regimes notebook gathered from its companions) is published byte for byte:
    publish neither recomputes nor merges the companion's own table into it."""
    root, env = publish_env(tmp_path, {"pubmain": "description: main\ncompanions: [pubside]\n",
                                       "pubside": "description: side\n"})
    own = (DOCS / "regimes" / "tables" / "claims.csv").read_bytes()  # every workload's rows, gathered by the study
    for name, source in (("pubmain", "regimes"), ("pubside", "regimes-lm")):
        (root / "results" / name / "tables").mkdir(parents=True)
        shutil.copyfile(DOCS / source / "tables" / "claims.csv", root / "results" / name / "tables" / "claims.csv")
    proc = publish(env, "pubmain", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "tables" / "claims.csv").read_bytes() == own


@pytest.mark.parametrize("study", published_studies())
def test_a_published_claims_table_is_the_studys_own_where_both_exist(study):
    """docs/results/<study>/tables/claims.csv equals results/<study>/tables/claims.csv (a checkout that has run the
    study); the published README names the command that made it."""
    readme = (DOCS / study / "README.md").read_text()
    assert f"python -m bench study publish --study {study} --to docs/results/{study}" in readme
    assert f"dvc exp run -S study={study}" in readme, "the README says how to make the runs and figures again"
    published, own = DOCS / study / "tables" / "claims.csv", REPO / "results" / study / "tables" / "claims.csv"
    if not (published.is_file() and own.is_file()):
        pytest.skip("the study has not run in this checkout")
    assert published.read_bytes() == own.read_bytes()


def test_the_studies_marked_published_are_those_docs_results_holds():
    """Every study file's ``published`` against docs/results: a folder published from a study (its README says
    ``study publish --study NAME``) is marked, and a marked study has its published tables."""
    from_docs = {p.parent.name for p in DOCS.glob("*/README.md")
                 if f"study publish --study {p.parent.name} " in p.read_text()}
    assert set(published_studies()) == from_docs
    for name in published_studies():
        assert (DOCS / name / "tables").is_dir(), name
    assert set(published_studies("predict")) <= set(published_studies())
    assert all(load_study(n).spec.published == "" for n in set(study_names()) - from_docs)


def test_the_predict_stage_depends_on_what_bench_predict_reads():
    """The predict pipeline (pipelines/predict/dvc.yaml) lists the published tables and study files of exactly the
    studies bench/predict reads (``published: predict``): a study that joins the model re-runs the stage."""
    deps = yaml.safe_load((REPO / "pipelines" / "predict" / "dvc.yaml").read_text())["stages"]["predict"]["deps"]
    studies = predict_studies()
    assert studies
    tables = {d.split("/")[2] for d in deps if d.startswith("docs/results/") and d.endswith("/tables")}
    files = {Path(d).stem for d in deps if d.startswith("pipelines/studies/")}
    assert tables == set(studies), f"pipelines/predict/dvc.yaml deps on docs/results/<study>/tables: {sorted(tables ^ set(studies))}"
    assert files == set(studies), f"pipelines/predict/dvc.yaml deps on pipelines/studies/<study>.yaml: {sorted(files ^ set(studies))}"


def test_docs_results_in_git_stays_under_15_mb():
    """Reports and figures are regenerable (not committed, but for the few figures a README shows): the tracked
    files under docs/results add up to at most 15 MB."""
    listed = subprocess.run(["git", "ls-files", "-z", "docs/results"], cwd=REPO, capture_output=True, check=True).stdout
    files = [REPO / f for f in listed.decode().split("\0") if f]
    if not files:
        pytest.skip("not a git checkout")
    size = sum(f.stat().st_size for f in files if f.is_file())
    assert size <= 15e6, f"docs/results tracks {size / 1e6:.1f} MB"
    assert not [f for f in files if f.name == "report.html"]


def test_captions_name_the_interval_the_numbers_have():
    """Every caption that names an interval (the published README's figure list, the notebooks' markdown) names the one
    the tables hold, bench.metrics.stats.CAPTION (a Student t interval of the geometric mean), never a bootstrap."""
    import json

    from bench.metrics.stats import CAPTION
    from bench.study.readme import FIGURES

    assert "Student t" in CAPTION and "geometric mean" in CAPTION
    captions = list(FIGURES.values())
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        captions += ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]
    assert not [c for c in captions if "bootstrap" in c.lower()]
    assert not [c for c in captions if "interval of the median" in " ".join(c.split())]
    assert CAPTION in FIGURES["speedup/speedup_over_n.png"]
