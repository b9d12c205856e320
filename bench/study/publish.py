"""``python -m bench study publish --to D``: a study's results as published reference results (e.g.
``docs/results/<study>/``): what its analysis wrote, ``runs.csv``, ``system.md`` and a README (:mod:`.readme`).
Not a DVC stage: it runs on results DVC already made."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from .. import BenchError
from ..metrics.selection import key
from ..results import Run, load_runs
from .readme import published_readme
from .spec import Study


def runs_table(runs: list[Run]) -> pd.DataFrame:
    """runs.csv: every run's key, algorithm, hardware, status (with the reason of a failed one), wall time and commit."""
    return pd.DataFrame([{"run": key(r), "algorithm": r.label["algorithm"], "hardware": r.label["hardware"],
                          "status": r.status, "reason": r.summary.get("reason", ""), "wall_s": r.summary.get("wall_s"),
                          "git_commit": (r.system.get("git") or {}).get("commit")} for r in runs])


def system_md(study: Study, runs: list[Run]) -> str:
    """system.md: the machine, the software and the network of each hardware profile and link, from the runs'
    system.json."""
    lines = [f"# System of study `{study.name}`", "", f"{study.spec.description}", ""]
    seen: set[tuple[str, str]] = set()
    for r in runs:
        hw, link = r.label["hardware"], ((r.system or {}).get("network") or {}).get("link") or ""
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


def run_times(runs_dir: Path) -> tuple[float, float]:
    """(span, busy) in seconds: from the first run's start (its config.json written by the launcher) to the last
    run's end (its summary.json), and the time covered by at least one run (the union of the runs' start-to-end
    intervals: a pause between runs, or a run redone later, does not count). NaN without runs."""
    intervals = sorted((d.joinpath("config.json").stat().st_mtime, d.joinpath("summary.json").stat().st_mtime)
                       for d in Path(runs_dir).glob("*/*/*")
                       if d.joinpath("config.json").is_file() and d.joinpath("summary.json").is_file())
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
    runs = load_runs(layout.runs)  # every run read first: a corrupt one refuses before anything is written to dest
    dest = Path(dest)
    copies = [(f, dest / sub / f.name) for sub, pattern in (("tables", "*.csv"), ("metrics", "*.json"))
              for f in sorted((layout.dir / sub).glob(pattern))]
    copies += [(f, dest / "figures" / f.parent.name / f.name) for f in sorted(layout.dir.glob("figures/*/*.png"))]
    copies += [(layout.dir / name, dest / name) for name in ("report.html", "calibration.json")
               if (layout.dir / name).is_file()]
    written = []
    for src, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        written.append(Path(shutil.copyfile(src, dst)))
    table = runs_table(runs)
    table.to_csv(dest / "runs.csv", index=False)
    (dest / "system.md").write_text(system_md(study, runs))
    (dest / "README.md").write_text(published_readme(study, dest, table, *run_times(layout.runs)))
    return written + [dest / "runs.csv", dest / "system.md", dest / "README.md"]


def main(study: Study, args) -> None:
    if not args.to:
        raise BenchError("study publish needs a destination: python -m bench study publish --to docs/results/<study>")
    written = publish(study, Path(args.to))
    print(f"[publish] {study.name}: {len(written)} file(s) in {args.to}")
