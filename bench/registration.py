"""A study's registration: what was committed before its first judged run, and what each run records of it.

``python -m bench study register --study S`` (:mod:`bench.study.register`) writes
``pipelines/registrations/<S>.json``: the claims' rules (with the sentence of the paper each tests), the cells (every
planned run with the SHA-256 of its ``config.json`` and its seed), the seeds, the metrics and the target, and the
commit of the code. Committing that file is the registration; its SHA-256 names it.

Every run records, in ``system.json`` ``provenance`` (:func:`provenance`, written by the launcher before the job
starts): the SHA-256 of its ``config.json``, and the registration of its study as it was then (the file's SHA-256
and whether git had it committed and unmodified), beside ``git`` (the commit and whether the tracked tree was dirty).
:func:`judged` says of one run whether a verdict may use it, and why not (made before the registration, under another
one, from a dirty tree, from code other than the registration's ``code_commit``, or a cell the registration does not
list: exploratory).
"""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
from pathlib import Path

from . import short
from .layout import REPO_ROOT
from .results import ResultsError, check_regular, read_json_object
from .yamlfile import read_mapping

def path(study: str, root: Path = REPO_ROOT) -> Path:
    """Where a study's registration lives (committed, one JSON file per study)."""
    return Path(root) / "pipelines" / "registrations" / f"{study}.json"


def sha256(file: Path) -> str:
    return hashlib.sha256(Path(file).read_bytes()).hexdigest()


def _git(*args: str, root: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)


def committed(file: Path, root: Path = REPO_ROOT) -> bool:
    """Whether git tracks ``file`` and it is unchanged from HEAD (staged or not)."""
    rel = str(Path(file).resolve().relative_to(Path(root).resolve()))
    try:
        tracked = _git("ls-files", "--error-unmatch", rel, root=root).returncode == 0
        return tracked and _git("diff", "--quiet", "HEAD", "--", rel, root=root).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def load(study: str, root: Path = REPO_ROOT) -> dict | None:
    """The study's registration (with its ``sha256``), or None where it has none."""
    p = path(study, root)
    check_regular(p)
    if not p.is_file():
        return None
    record = read_json_object(p)
    cells = record.get("cells")
    if not (isinstance(cells, list) and all(isinstance(c, dict) and isinstance(c.get("config_sha256"), str)
                                            for c in cells)):
        raise ResultsError(f"{p}: 'cells' is not a list of registered runs, each with its config_sha256: "
                           f"{short(cells, 40)}")
    return {**record, "sha256": sha256(p)}


def provenance(study: str, config_path: Path, root: Path = REPO_ROOT) -> dict:
    """What ``system.json`` records of a run's provenance beside ``git``: its configuration's SHA-256 and its study's
    registration at launch (None: the study has none)."""
    p = path(study, root)
    reg = {"file": str(p.relative_to(root)), "sha256": sha256(p), "committed": committed(p, root)} if p.is_file() else None
    return {"config_sha256": sha256(config_path), "registration": reg}


def run_code(algorithm: str | None, root: Path = REPO_ROOT) -> list[str]:
    """What a run of ``algorithm`` executes, as dvc.yaml's ``run`` stage lists it (its one list, which
    tests/single/test_pipeline_spec.py checks against the modules a run imports): the files and folders under bench/
    and notebooks/ (the algorithm's own module only where ``algorithm`` is known)."""
    deps = read_mapping(Path(root) / "dvc.yaml")["stages"]["run"]["deps"]
    own = "bench/algorithms/${item.algorithm}.py"
    return [own.replace("${item.algorithm}", algorithm) if d == own else d for d in deps
            if d.startswith(("bench/", "notebooks/")) and (d != own or algorithm)]


COMMIT = re.compile(r"[0-9a-f]{7,64}")
"""A commit id as git and system.json write it (hex, abbreviated or whole)."""


@functools.lru_cache(maxsize=256)
def code_changed(since: str, at: str, algorithm: str | None, root: str = str(REPO_ROOT)) -> tuple[str, ...] | None:
    """The files of :func:`run_code` that differ between commits ``since`` and ``at`` (git diff), None where git
    here cannot compare them (a commit it does not have)."""
    try:
        p = _git("diff", "--name-only", since, at, "--", *run_code(algorithm, Path(root)), root=Path(root))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(p.stdout.split()) if p.returncode == 0 else None


def judged(system: dict, registration: dict | None, algorithm: str | None = None, root: Path = REPO_ROOT) -> str:
    """Why a run may not carry a verdict under ``registration`` (:func:`load`), or ``""`` where it may: never from a
    dirty tree, nor before the registration was committed, nor under another registration, nor from code other than
    the registration's (a file a run of ``algorithm`` executes, :func:`run_code`, changed between the registration's
    ``code_commit`` and the run's commit); a cell the registration does not list is ``exploratory``."""
    prov = system.get("provenance") or {}
    reg = prov.get("registration") or {}
    if registration is None:
        return "the study has no registration"
    if (system.get("git") or {}).get("dirty") is not False:
        return "run from a dirty tree" if (system.get("git") or {}).get("dirty") else "run without a git record"
    if not reg:
        return "run before the registration"
    if reg.get("sha256") != registration["sha256"]:
        return f"run under another registration ({str(reg.get('sha256'))[:12]})"
    if not reg.get("committed"):
        return "run before the registration was committed"
    since, at = registration.get("code_commit"), (system.get("git") or {}).get("commit")
    if since and at:  # a registration written before code_commit was recorded names no code to compare with
        bad = [str(c) for c in (since, at) if not COMMIT.fullmatch(str(c))]
        if bad:  # never handed to git as an option ("--output=...")
            return f"run at other code than the registration's: {short(bad[0], 40)} is not a commit id"
        changed = code_changed(str(since), str(at), algorithm, str(root))
        if changed is None:
            return f"run at other code than the registration's: git here cannot compare {str(at)[:12]} with {str(since)[:12]}"
        if changed:
            return (f"run at other code than the registration's: {len(changed)} file(s) a run executes changed between "
                    f"{str(since)[:12]} and {str(at)[:12]} ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})")
    if prov.get("config_sha256") not in {c["config_sha256"] for c in registration.get("cells", [])}:
        return "exploratory: a cell the registration does not list"
    return ""
