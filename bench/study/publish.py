"""``python -m bench study publish --to D``: a study's results as published reference results (e.g.
``docs/results/<study>/``): what its analysis wrote, copied and never recomputed or merged (a study with companions
gathers their claims in its own ``claims.csv``: notebooks/regimes.ipynb), with ``runs.csv``, ``system.md`` and a README
(:mod:`.readme`). Not a DVC stage: it runs on results DVC already made."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from .. import BenchError, registration
from ..metrics.claims import ADDED_COLUMNS, COLUMNS as CLAIM_COLUMNS
from ..metrics.report import read_table
from ..metrics.selection import key
from ..results import ResultsError, Run, load_runs, read_json_object
from .readme import published_readme
from .spec import Study, load_study


RUN_COLUMNS = ["run", "algorithm", "hardware", "status", "reason", "wall_s", "git_commit", "dirty", "config_hash",
               "registration", "judged"]


def runs_table(runs: list[Run], registered: dict | None = None) -> pd.DataFrame:
    """runs.csv: every run's key, algorithm, hardware, status (with the reason of a failed one), wall time, and its
    provenance: the commit, whether the tree was dirty, its configuration's hash, the registration it ran under, and
    ``judged``: why a verdict may not use it under the study's registration ``registered`` (empty: it may)."""
    rows = []
    for r in runs:
        git, prov = r.system.get("git") or {}, r.system.get("provenance") or {}
        rows.append({"run": key(r), "algorithm": r.label["algorithm"], "hardware": r.label["hardware"],
                     "status": r.status, "reason": r.summary.get("reason", ""), "wall_s": r.summary.get("wall_s"),
                     "git_commit": git.get("commit"), "dirty": git.get("dirty"), "config_hash": prov.get("config_sha256"),
                     "registration": ((prov.get("registration") or {}).get("sha256") or "")[:12],
                     "judged": registration.judged(r.system, registered, r.label["algorithm"])})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)  # the columns even without runs (a companion not run yet)


REFUSED = ("run from a dirty tree", "run without a git record", "run before the registration",
           "run under another registration", "run at other code than the registration's")
"""What makes ``publish`` refuse a registered study (its runs are judged): exploratory cells are published as such."""


def check_registered(study: Study, table: pd.DataFrame, registered: dict | None) -> None:
    """A registered study is published only from runs its registration allows (or exploratory cells, marked so):
    BenchError naming the runs made from a dirty tree, before the registration, or under another one."""
    if registered is None:
        return
    bad = table[table["judged"].str.startswith(REFUSED)]
    if not bad.empty:
        listed = "; ".join(f"{r.run} ({r.judged})" for r in bad.head(5).itertuples())
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise BenchError(f"study {study.name!r} is registered ({registered['sha256'][:12]}), but {len(bad)} of its "
                         f"runs cannot carry its verdicts: {listed}{more}; run them again under the registration, or "
                         f"remove them")


def system_md(study: Study, runs: list[Run]) -> str:
    """system.md: the machine, the software and the network of each hardware profile and link, from the runs'
    system.json."""
    lines = [f"# System of study `{study.name}`", "", f"{study.spec.description}", ""]
    seen: set[tuple[str, str]] = set()
    for r in runs:
        net = (r.system or {}).get("network") or {}
        delay = net.get("link_delay") or "0ms"
        hw, link = r.label["hardware"], (net.get("link") or "") + (f" +{delay}" if delay != "0ms" else "")
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
    return "\n".join(lines)


def _intervals(runs_dir: Path) -> list[tuple[float, float]]:
    """Every run's (start, end) in seconds since the epoch, sorted: from its system.json's ``created`` and its
    summary's ``wall_s``, the runs laid end to end in the order they were prepared (a study's runs run one after the
    other, and the launcher prepares them before they run: a job's runs together, and ``study run`` every job of an
    algorithm at once, so a run starts when it was prepared or when the one before it ended, whichever is later);
    where either is missing, the times of its config.json and summary.json (a copy of the results that kept no file
    times gives every run the same instant)."""
    timed, untimed = [], []
    for d in sorted(Path(runs_dir).glob("*/*/*")):
        if not (d.joinpath("config.json").is_file() and d.joinpath("summary.json").is_file()):
            continue
        try:
            system = json.loads(d.joinpath("system.json").read_text())
            wall = float(json.loads(d.joinpath("summary.json").read_text())["wall_s"])
            created = datetime.datetime.strptime(system["created"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
            timed.append((created, wall))
        except (OSError, ValueError, KeyError, TypeError):
            untimed.append((d.joinpath("config.json").stat().st_mtime, d.joinpath("summary.json").stat().st_mtime))
    out, end = list(untimed), float("-inf")
    for created, wall in sorted(timed, key=lambda t: t[0]):  # stable: runs prepared in one second keep their order
        start = max(created, end)
        end = start + wall
        out.append((start, end))
    return sorted(out)


def run_times(runs_dir: Path) -> tuple[float, float]:
    """(span, busy) in seconds: from the first run's start to the last run's end (:func:`_intervals`), and the time
    covered by at least one run (the union of the runs' start-to-end intervals: a pause between runs, or a run redone
    later, does not count). NaN without runs."""
    intervals = _intervals(runs_dir)
    if not intervals:
        return float("nan"), float("nan")
    busy, (start, end) = 0.0, intervals[0]
    for a, b in intervals[1:]:
        if a > end:  # a gap: close the interval so far
            busy, start, end = busy + end - start, a, b
        else:
            end = max(end, b)
    return max(b for _, b in intervals) - intervals[0][0], busy + end - start


TABLES = {"claims.csv": ([c for c in CLAIM_COLUMNS if c not in ADDED_COLUMNS],  # a study analysed before they came in
                         ["effect", "ci_low", "ci_high", "n", "tests"]),
          "speedup_summary.csv": (["metric", "algorithm", "np", "point", "mean", "ci_low", "ci_high", "n"],
                                  ["np", "mean", "ci_low", "ci_high", "n"]),
          "regimes_summary.csv": (["metric", "mean", "ci_low", "ci_high", "n"], ["mean", "ci_low", "ci_high", "n"]),
          "te_grid.csv": (["hardware", "np", "E", "ci_low", "ci_high", "n", "winner"], ["np", "E", "ci_low", "ci_high", "n"]),
          "links.csv": (["link"], [])}
"""The tables the published README reads: the columns each must have, and those of them that must be numbers."""


def check_tables(tables: Path) -> None:
    """Every ``*.csv`` of a study's ``tables`` folder readable as a table, and those the README reads
    (:data:`TABLES`) with their columns and numbers: BenchError naming the file otherwise (an empty, binary or
    garbled file, a text ``np``, a missing column)."""
    for f in sorted(Path(tables).glob("*.csv")):
        try:
            table = read_table(f)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
            raise BenchError(f"{f}: not a table the analysis wrote ({str(e).splitlines()[0][:120] or type(e).__name__})") from None
        if f.name not in TABLES:
            continue
        columns, numbers = TABLES[f.name]
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise BenchError(f"{f}: no column {', '.join(map(repr, missing))} (has {', '.join(map(str, table.columns))[:200]})")
        for c in numbers:
            bad = table[c][pd.to_numeric(table[c], errors="coerce").isna() & table[c].notna()]
            if len(bad):
                raise BenchError(f"{f}: column {c!r} holds {str(bad.iloc[0])[:40]!r}, not a number")


def check_system(run: Run) -> None:
    """A run's system.json as runs.csv reads it: ``git``, ``provenance`` and its ``registration`` objects (or absent):
    BenchError naming the file otherwise."""
    system = run.system
    where = run.path / "system.json"
    for name, value in (("git", system.get("git")), ("provenance", system.get("provenance")),
                        ("provenance.registration", (system.get("provenance") or {}).get("registration")
                         if isinstance(system.get("provenance"), dict) else None)):
        if value is not None and not isinstance(value, dict):
            raise BenchError(f"{where}: {name!r} is a {type(value).__name__} ({json.dumps(value)[:40]}), expected an "
                             f"object")


def read_registration(study: Study, runs: list[Run]) -> dict | None:
    """The study's registration as :func:`bench.registration.load` gives it (with its ``sha256``), checked: the working
    tree's file where it exists (a new registration, ``register --force``, then refuses the runs made under the old
    one: check_registered); where it is missing, the version git has at a run's commit (``git show
    <commit>:pipelines/registrations/<study>.json``) with the SHA-256 the run recorded, so that deleting the file does
    not make runs publishable that their registration refuses. BenchError naming the file where it is unreadable, not
    an object, or named by the runs and found nowhere."""
    root = study.params_file.parent
    p = registration.path(study.name, root)
    named = {}
    for r in runs:
        reg = (r.system.get("provenance") or {}).get("registration") or {}
        if reg.get("sha256"):
            named.setdefault(str(reg["sha256"]), ((r.system.get("git") or {}).get("commit"), reg.get("file") or
                                                   str(p.relative_to(root))))
    if p.is_file():
        return {**_registration_object(p, read_json_object_checked(p)), "sha256": registration.sha256(p)}
    for sha, (commit, file) in named.items():
        shown = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{file}"], capture_output=True,
                               timeout=30) if commit else None
        if shown is not None and shown.returncode == 0 and hashlib.sha256(shown.stdout).hexdigest() == sha:
            try:
                obj = json.loads(shown.stdout.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise BenchError(f"{commit[:12]}:{file}: not a registration ({e})") from None
            return {**_registration_object(Path(f"{commit[:12]}:{file}"), obj), "sha256": sha}
    if named:
        sha, (commit, file) = next(iter(named.items()))
        raise BenchError(f"{file}: the study's runs ran under registration {sha[:12]}, which neither the working tree "
                         f"nor git at their commit {str(commit)[:12]} holds; restore the file (git checkout)")
    return None


def read_json_object_checked(p: Path) -> dict:
    try:
        return read_json_object(p)
    except ResultsError as e:
        raise BenchError(f"{e} (a registration: pipelines/registrations/<study>.json)") from None
    except RecursionError:
        raise BenchError(f"{p}: not a registration (nested too deep)") from None


def _registration_object(where: Path, obj) -> dict:
    if not isinstance(obj, dict) or not isinstance(obj.get("cells", []), list) or \
            not all(isinstance(c, dict) for c in obj.get("cells", [])):
        raise BenchError(f"{where}: not a registration (expected an object with a list of cells, got "
                         f"{type(obj).__name__} {json.dumps(obj)[:40]})")
    return obj


def check_destination(study: Study, dest: Path) -> None:
    """``--to`` neither the study's own results folder (``results/<study>/``, its tables or any folder in it) nor a
    folder that holds it: publishing copies out of it."""
    own, to = study.layout.dir.resolve(), Path(dest).resolve()
    if to == own or own in to.parents or to in own.parents:
        raise BenchError(f"--to {dest} is the study's own results ({study.layout.dir}) or holds them: publish copies "
                         f"them elsewhere, e.g. docs/results/{study.name}")


def publish(study: Study, dest: Path) -> list[Path]:
    """Copy what the study's analysis wrote (tables, figures, metrics, report, calibration) to ``dest`` with
    ``runs.csv``, ``system.md`` and ``README.md``; returns the files written."""
    layout = study.layout
    if not layout.tables.is_dir():
        raise BenchError(f"{layout.tables} does not exist: run the study's analysis first (dvc repro)")
    dest = Path(dest)
    check_destination(study, dest)
    check_tables(layout.tables)
    runs = load_runs(layout.runs)  # every run read first: a corrupt one refuses before anything is written to dest
    tables = []
    for s in [study, *(load_study(c, study.params_file) for c in study.spec.companions)]:  # then its other workloads
        its_runs = runs if s is study else load_runs(s.layout.runs)
        for r in its_runs:
            check_system(r)
        registered = read_registration(s, its_runs)
        tables.append(runs_table(its_runs, registered).assign(study=s.name))
        check_registered(s, tables[-1], registered)  # before anything is written
    table = pd.concat(tables, ignore_index=True)
    copies = [(f, Path(sub) / f.name) for sub, pattern in (("tables", "*.csv"), ("metrics", "*.json"))
              for f in sorted((layout.dir / sub).glob(pattern))]
    copies += [(f, Path("figures") / f.parent.name / f.name) for f in sorted(layout.dir.glob("figures/*/*.png"))]
    copies += [(layout.dir / name, Path(name)) for name in ("report.html", "calibration.json")
               if (layout.dir / name).is_file()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))  # moved into dest only when complete
    try:
        for src, rel in copies:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, staging / rel)
        table.to_csv(staging / "runs.csv", index=False)
        (staging / "system.md").write_text(system_md(study, runs))
        if (dest / "NOTES.md").is_file():
            shutil.copyfile(dest / "NOTES.md", staging / "NOTES.md")  # read by the README; left as it is in dest
        (staging / "README.md").write_text(published_readme(study, dest, table, *run_times(layout.runs), files=staging))
        (staging / "NOTES.md").unlink(missing_ok=True)
        written = [rel for _, rel in copies] + [Path("runs.csv"), Path("system.md"), Path("README.md")]
        for rel in written:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, dest / rel)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [dest / rel for rel in written]


def main(study: Study, args) -> None:
    if not args.to:
        raise BenchError("study publish needs a destination: python -m bench study publish --to docs/results/<study>")
    if Path(args.to).exists() and not Path(args.to).is_dir():
        raise BenchError(f"--to {args.to} is a file: give a folder (created if missing), e.g. docs/results/{study.name}")
    written = publish(study, Path(args.to))
    print(f"[publish] {study.name}: {len(written)} file(s) in {args.to}")
