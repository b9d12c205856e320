"""``python -m bench predict``: predicted throughput, S(n) and time split of algorithms on a hardware, from the model.

    python -m bench predict sync,sgp,downpour,diloco --np 4 --hardware emu --set link=250mbit [--json]
    python -m bench predict sync,localsgd --np 8,64,256 --hardware dgx1 --profile dgx1
    python -m bench predict --calibrate                      # refit docs/results/predict/calibration.json
    python -m bench predict --publish docs/results/predict    # calibrate, then the notebook that publishes

Same profiles and ``--set`` keys as ``bench run``; the hardware is a launch profile the model can describe (an
emulated one, ``emu`` and ``emu-*``, with its link and CPU share; or one with ``pipelines/hardware/model/<id>.yaml``)
or a described-only id (``eth10g``, ``wan``, ``horovod-p100``). Without ``--profile``, the hardware's own workload:
the calibrated one on the emulated cluster (profile ``regimes``), the description's ``profile`` elsewhere. S(n) is over the prediction of ``sync`` at one worker
on the same hardware and profile (the suite's convention where an algorithm has no one-worker run of its own). Each
line carries the validation error of the algorithm's family (``tables/validation_summary.csv``).
"""

from __future__ import annotations

import json
import sys

from .. import BenchError, short
from ..layout import REPO_ROOT, output_path
from ..resolve import parse_set
from . import calibrate, forecast
from .query import MAX_NP, predict_many

def _ints(text: str, what: str, bound: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not 1 <= v <= bound for v in values):
        raise BenchError(f"--{what} must be integers in [1, {bound}], comma-separated (the simulator steps every "
                         f"worker: more would run for minutes); got {short(text)}")
    return values


def render(rows: list[dict]) -> str:
    head = (f"{'algorithm':<10} {'np':>4} {'samples/s':>10} {'S(n)':>7} {'step ms':>8} {'compute':>8} {'comm':>8} "
            f"{'wait':>7}  {'bound':<8} {'staleness':>9}  validation |error| of its family (median / max, cells)")
    lines = [head]
    made = next((r for r in rows if r.get("calibration_note")), None)
    for r in rows:
        stale = f"{r['staleness_mean']:.2f}" if r["staleness_mean"] is not None else "-"
        err = ("not validated" if r["family_cells"] is None else
               f"{r['family']}: {r['family_median_abs_error']:.3f} / {r['family_max_abs_error']:.3f}, {r['family_cells']}")
        if r.get("time_to_target_s") is not None:
            e = r.get("time_to_target_median_abs_error")
            err += f"; to target {r['time_to_target_s']:.1f} s" + ("" if e is None else f" (median |error| {e:.3f})")
        elif "time_to_target_s" in r:
            err += "; time to target: throughput only"
        if r.get("nearest_cells"):
            err += (f"; nearest ({r['nearest']}): {r['nearest_median_abs_error']:.3f} / "
                    f"{r['nearest_max_abs_error']:.3f}, {r['nearest_cells']}")
        lines.append(f"{r['algorithm']:<10} {r['np']:>4} {r['throughput']:>10.1f} {r['speedup']:>7.2f} "
                     f"{1e3 * r['step_s']:>8.2f} {1e3 * r['compute_s']:>8.2f} {1e3 * r['comm_s']:>8.2f} "
                     f"{1e3 * r['wait_s']:>7.2f}  {r['bound']:<8} {stale:>9}  {err}")
    if made is not None:
        lines.append(f"calibration: {made['calibration']} ({made['calibration_note']})")
    return "\n".join(lines)


def cmd_predict(args) -> int:
    publish = output_path(args.publish, "--publish", folder=True) if args.publish is not None else None
    out = output_path(args.out, "--out", folder=False) if args.out is not None else None
    if args.measure_machine or args.machine_from:
        from . import machines

        path = machines.measure(args.collectives, calibrate.CALIBRATION_CPU) if args.measure_machine else \
            machines.from_studies([s.strip() for s in args.machine_from.split(",") if s.strip()],
                                  calibrate.CALIBRATION_CPU)
        print(f"machine record -> {path.relative_to(REPO_ROOT)} (refit with --calibrate)", file=sys.stderr)
        return 0
    if args.collectives:
        raise BenchError("--collectives goes with --measure-machine")
    if args.calibrate or publish:
        k = calibrate.write()
        print(f"calibration: {len(k) - 1} constants -> docs/results/predict/calibration.json", file=sys.stderr)
        if args.publish:
            from .publish import run_notebook  # lazy: it loads matplotlib and seaborn (bench.plots)

            run_notebook(publish)
        return 0
    if args.forecast_study:
        if not out:
            raise BenchError("--forecast-study needs --out FILE.csv (e.g. docs/results/<study>/forecast.csv)")
        table = forecast.planned(args.forecast_study)
        if table.empty:
            raise BenchError(f"study {args.forecast_study!r} has no plan: run `python -m bench study plan --study "
                             f"{args.forecast_study}` first")
        out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, index=False)
        print(f"forecast: {len(table)} cells of {args.forecast_study} -> {args.out}", file=sys.stderr)
        return 0
    if not args.algorithms or not args.hardware:
        raise BenchError("give ALGO[,ALGO...] and --hardware HW (or --calibrate, --publish DIR)")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    rows = predict_many(algorithms, _ints(args.np, "np", MAX_NP), args.hardware, args.profile, parse_set(args.set or []))
    print(json.dumps(rows, indent=2, default=float) if args.json else render(rows))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("predict", help="predicted throughput, S(n) and time split from the calibrated model")
    p.add_argument("algorithms", nargs="?", help="registry keys, comma-separated (see `python -m bench list`)")
    p.add_argument("--np", default="1", help="worker counts, comma-separated (default 1)")
    p.add_argument("--hardware", help="emulated launch profile (emu, emu-*) or described hardware "
                   "(pipelines/hardware/model/<id>.yaml)")
    p.add_argument("--profile", help="training profile from params.yaml (default: its `profile`)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a setting or hyperparameter, as bench run")
    p.add_argument("--json", action="store_true", help="one JSON object per (algorithm, n)")
    p.add_argument("--calibrate", action="store_true", help="refit the constants (docs/results/predict/calibration.json)")
    p.add_argument("--measure-machine", action="store_true", help="run this machine's calibration run (a minute) and "
                   "write its record, docs/results/predict/machines/<machine>.json")
    p.add_argument("--machine-from", metavar="STUDY[,STUDY]", help="a record of the machine published studies ran "
                   "on, from their own calibration runs (docs/results/<study>/calibration.json)")
    p.add_argument("--collectives", metavar="FILE", help="--measure-machine: this machine's `python -m bench.perf "
                   "collectives --jsonl` output (a path in the repository) for its transport")
    p.add_argument("--publish", metavar="DIR", help="calibrate, then run notebooks/predict.ipynb, which writes DIR")
    p.add_argument("--forecast-study", metavar="STUDY", help="the model's throughput for every planned cell of STUDY "
                   "(before it runs), into --out")
    p.add_argument("--out", metavar="FILE", help="--forecast-study: the CSV to write")
    p.set_defaults(func=cmd_predict)
