"""Cost of the pipeline's own machinery (not of training): a no-op ``dvc repro`` and the metrics of a study.

    python -m bench.perf pipeline --repo DIR [--results DIR] [--repeats 5]

``--repo``: a repository where ``dvc repro`` has run (e.g. the temporary copy of the end-to-end test);
prints the median of ``--repeats`` runs of ``dvc repro`` with nothing changed and of ``dvc status``, as
ratios against ``dvc --version`` measured in the same run (DVC's own start-up: the floor of any command).
``--results``: a study's results directory; prints the median time to load its runs and to compute every
metric of the analysis notebooks, as ratios against loading alone.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..metrics import accuracy, selection, staleness, temporal, throughput, timesplit
from ..results import load_runs
from . import PerfParser


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def dvc_figures(repo: Path, repeats: int) -> None:
    dvc = str(Path(sys.executable).parent / "dvc")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def call(*args, check_noop=False):
        p = subprocess.run([dvc, *args], cwd=repo, env=env, capture_output=True, text=True)
        if p.returncode != 0 or (check_noop and "Running stage" in p.stdout):
            raise SystemExit(f"dvc {' '.join(args)} did not run as a no-op in {repo}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")

    ref = median_time(lambda: call("--version"), repeats)
    status = median_time(lambda: call("status"), repeats)
    noop = median_time(lambda: call("repro", check_noop=True), repeats)
    stages = subprocess.run([dvc, "stage", "list"], cwd=repo, env=env, capture_output=True, text=True).stdout.count("\n")
    print(f"dvc --version (reference)   {ref:7.2f} s")
    print(f"dvc status                  {status:7.2f} s  x{status / ref:.1f}")
    print(f"dvc repro (no-op, {stages} stages) {noop:7.2f} s  x{noop / ref:.1f}   target < 10 s")


def metrics_figures(results: Path, repeats: int) -> None:
    runs_dir = results / "runs" if (results / "runs").is_dir() else results
    load = median_time(lambda: load_runs(runs_dir), repeats)
    runs = load_runs(runs_dir)
    n_steps = sum(len(r.steps) for r in runs)

    def analyse():
        throughput.speedup_table(throughput.throughput_table(runs))
        timesplit.time_split(runs)
        accuracy.convergence_table(runs, 0.8, 10.0)
        staleness.staleness_table(staleness.staleness_frame(runs))

    an = median_time(analyse, repeats)
    te = median_time(lambda: temporal.te_matrix(runs, 1.0, 0.5), repeats)
    ok = len(selection.ok_runs(runs))
    print(f"load {len(runs)} runs ({n_steps} step records) (reference) {load:7.3f} s")
    print(f"throughput/speedup/split/convergence/staleness   {an:7.3f} s  x{an / load:.2f}")
    print(f"temporal-efficiency matrix ({ok}x{ok} pairs)        {te:7.3f} s  x{te / load:.2f}")


def main(argv: list[str]) -> int:
    ap = PerfParser(prog="python -m bench.perf pipeline", description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, help="a repository where `dvc repro` has run")
    ap.add_argument("--results", type=Path, help="a study's results directory (holding runs/)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    if not args.repo and not args.results:
        ap.error("give --repo and/or --results")
    for name in ("repo", "results"):
        if getattr(args, name) and not getattr(args, name).is_dir():
            ap.error(f"--{name} {str(getattr(args, name))!r} is not a folder")
    if args.repo:
        dvc_figures(args.repo, args.repeats)
    if args.results:
        metrics_figures(args.results, args.repeats)
    return 0
