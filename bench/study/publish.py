"""``python -m bench study publish --to D``: a study's results as published reference results (e.g.
``docs/results/<study>/``): what its analysis wrote, ``runs.csv``, ``system.md`` and a README (:mod:`.readme`).
Not a DVC stage: it runs on results DVC already made."""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import pandas as pd

from .. import BenchError, registration
from ..metrics.claims import every_workload
from ..metrics.report import read_table
from ..metrics.selection import key
from ..results import Run, load_runs
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
                     "judged": registration.judged(r.system, registered)})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)  # the columns even without runs (a companion not run yet)


REFUSED = ("run from a dirty tree", "run without a git record", "run before the registration",
           "run under another registration")
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


def publish(study: Study, dest: Path) -> list[Path]:
    """Copy what the study's analysis wrote (tables, figures, metrics, report, calibration) to ``dest`` with
    ``runs.csv``, ``system.md`` and ``README.md``; returns the files written."""
    layout = study.layout
    if not layout.tables.is_dir():
        raise BenchError(f"{layout.tables} does not exist: run the study's analysis first (dvc repro)")
    dest = Path(dest)
    runs = load_runs(layout.runs)  # every run read first: a corrupt one refuses before anything is written to dest
    tables, claims = [], []
    for s in [study, *(load_study(c) for c in study.spec.companions)]:  # this study, then its other workloads
        registered = registration.load(s.name)
        tables.append(runs_table(runs if s is study else load_runs(s.layout.runs), registered).assign(study=s.name))
        check_registered(s, tables[-1], registered)  # before anything is written
        if (s.layout.tables / "claims.csv").is_file():
            claims.append(read_table(s.layout.tables / "claims.csv"))
    table = pd.concat(tables, ignore_index=True)
    copies = [(f, dest / sub / f.name) for sub, pattern in (("tables", "*.csv"), ("metrics", "*.json"))
              for f in sorted((layout.dir / sub).glob(pattern))]
    copies += [(f, dest / "figures" / f.parent.name / f.name) for f in sorted(layout.dir.glob("figures/*/*.png"))]
    copies += [(layout.dir / name, dest / name) for name in ("report.html", "calibration.json")
               if (layout.dir / name).is_file()]
    written = []
    for src, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        written.append(Path(shutil.copyfile(src, dst)))
    if len(claims) > 1:  # one row per claim and workload, this study's and its companions'
        every_workload(claims).to_csv(dest / "tables" / "claims.csv", index=False)
    table.to_csv(dest / "runs.csv", index=False)
    (dest / "system.md").write_text(system_md(study, runs))
    (dest / "README.md").write_text(published_readme(study, dest, table, *run_times(layout.runs)))
    return written + [dest / "runs.csv", dest / "system.md", dest / "README.md"]


def main(study: Study, args) -> None:
    if not args.to:
        raise BenchError("study publish needs a destination: python -m bench study publish --to docs/results/<study>")
    if Path(args.to).exists() and not Path(args.to).is_dir():
        raise BenchError(f"--to {args.to} is a file: give a folder (created if missing), e.g. docs/results/{study.name}")
    written = publish(study, Path(args.to))
    print(f"[publish] {study.name}: {len(written)} file(s) in {args.to}")
