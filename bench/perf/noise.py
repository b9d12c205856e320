"""Run-to-run noise of a study: run some of its planned runs again and compare each with its first run.

    python -m bench.perf noise --study regimes --run sync-np4-slow_factor1.0@local \\
        --run sgp-np4-slow_factor1.0@emu-1gbit --run downpour-np4-slow_factor3.0@emu-100mbit

Each ``--run`` is a run key as the tables write it (``<algo>-np<N>[-<tag>]@<hardware>``) whose first run
(``results/<study>/runs/...``) finished ok. The repeat launches the same planned config file, unchanged, into
``results/<study>/repeat/<algo>/<hardware>/<name>/`` (replaced on every call; never mixed into the study's
runs). Printed and written to ``results/<study>/tables/noise.csv``: per run and figure (throughput, time to the
study's target accuracy, accuracy after its budget, final accuracy) the two values and their relative
difference |b − a| / mean(a, b); then the median and largest relative difference per figure.
"""

from __future__ import annotations

import math
import sys

import pandas as pd

from bench import BenchError, launch
from bench.layout import run_key
from bench.perf import PerfParser
from bench.metrics import regimes
from bench.runconfig import load_config
from bench.results import load_run
from bench.study import load_study, study_analysis

FIGURES = ["throughput", "time_to_target_s", "accuracy_at_budget", "final_accuracy"]


def parse_key(key: str) -> tuple[str, str, str]:
    """``<algo>-np<N>[-<tag>]@<hardware>`` -> (algorithm, name, hardware)."""
    name, sep, hardware = key.partition("@")
    if not sep or "-np" not in name or not hardware:
        raise BenchError(f"bad run key {key!r}: expected <algo>-np<N>[-<tag>]@<hardware>, e.g. sync-np4@local")
    return name.rsplit("-np", 1)[0], name, hardware


def compare(first, second, target: float, budget_s: float) -> pd.DataFrame:
    a = regimes.cell_table([first], target, budget_s).iloc[0]
    b = regimes.cell_table([second], target, budget_s).iloc[0]
    rows = []
    for fig in FIGURES:
        va, vb = float(a[fig]), float(b[fig])
        both = math.isfinite(va) and math.isfinite(vb)
        mean = (va + vb) / 2 if both else math.nan
        rows.append({"run": run_key(a["algorithm"], int(a["np"]), a["tag"] if isinstance(a["tag"], str) else "", a["hardware"]),
                     "figure": fig, "first": va, "repeat": vb,
                     "relative_difference": abs(vb - va) / abs(mean) if both and mean else math.nan})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf noise", description=__doc__.splitlines()[0])
    ap.add_argument("--study", required=True, help="a study of params.yaml whose runs have finished")
    ap.add_argument("--run", action="append", required=True, metavar="KEY", help="<algo>-np<N>[-<tag>]@<hardware>")
    args = ap.parse_args(argv)
    try:
        study = load_study(args.study)
        layout = study.layout
        items, firsts = [], []
        for key in args.run:
            algorithm, name, hardware = parse_key(key)
            planned = layout.algorithm_plan(algorithm) / hardware / f"{name}.json"
            if not planned.is_file():
                raise BenchError(f"{key}: no planned run {planned} (run `python -m bench study plan --study {study.name}`)")
            first = load_run(layout.algorithm_runs(algorithm) / hardware / name)
            if first.status != "ok":
                raise BenchError(f"{key}: its first run is {first.status}, not ok: nothing to compare with")
            firsts.append(first)
            items.append((load_config(planned), layout.dir / "repeat" / algorithm / hardware / name, planned))
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    target, budget_s = study_analysis(study.name)
    done = launch.run_many(items, force=True, echo=False, progress=lambda line: print(line, flush=True))
    tables = []
    for first, (run_dir, rc) in zip(firsts, done):
        second = load_run(run_dir)
        if second.status != "ok":
            print(f"[noise] repeat of {run_dir} failed: {second.summary.get('reason')}", file=sys.stderr)
            continue
        tables.append(compare(first, second, target, budget_s))
    if not tables:
        return 1
    table = pd.concat(tables, ignore_index=True)
    layout.tables.mkdir(parents=True, exist_ok=True)
    table.to_csv(layout.tables / "noise.csv", index=False)
    with pd.option_context("display.width", 160, "display.max_columns", 10):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        summary = table.groupby("figure")["relative_difference"].agg(["median", "max"])
        print("\nrelative difference between the two runs of a cell (median, largest):")
        print(summary.to_string(float_format=lambda v: f"{v:.1%}"))
    print(f"[noise] written {layout.tables / 'noise.csv'}")
    return 0 if len(tables) == len(items) else 1


if __name__ == "__main__":
    from bench import run_command

    sys.exit(run_command(main))
