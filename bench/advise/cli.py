"""``python -m bench advise``: the command (checks, forecasts, ranking, map, report). See :mod:`bench.advise`."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from .. import BenchError, short
from ..layout import REPO_ROOT


def _progress(text: str) -> None:
    print(f"[advise] {text}", file=sys.stderr, flush=True)


def relation_target() -> float:
    """The accuracy the time-to-target relation is measured at (its calibration study's target)."""
    from ..predict.target import CALIBRATION_STUDY
    from ..study import load_study

    return float(load_study(CALIBRATION_STUDY).spec.target_accuracy)


def check(args) -> tuple[list[str], list[int]]:
    """Every option checked before a forecast runs (one line naming the value and the valid choices)."""
    from ..predict import hardware
    from ..predict.query import MAX_NP, valid_hardware
    from . import rank

    if not (args.hardware in valid_hardware() or hardware.is_described(args.hardware)):
        raise BenchError(f"unknown hardware {short(args.hardware)}; valid: {', '.join(valid_hardware())}, or a file "
                         f"`bench probe --out` wrote (.yaml)")
    if not 1 <= args.np <= MAX_NP:
        raise BenchError(f"--np must be in [1, {MAX_NP}], got {args.np}")
    algorithms = rank.check_algorithms(args.algorithms)
    if args.target is not None and abs(args.target - relation_target()) > 1e-9:
        raise BenchError(f"--target {args.target:g}: the time-to-target relation is measured at accuracy "
                         f"{relation_target():g} only (valid: {relation_target():g}, or leave --target out)")
    try:
        nps = sorted({int(v) for v in args.map_np.split(",") if v.strip()}) if args.map_np else \
            sorted({n for n in (2, 3, 4, args.np) if n <= max(args.np, 2)})
    except ValueError:
        nps = []
    if not nps or any(not 1 <= n <= MAX_NP for n in nps):
        raise BenchError(f"--map-np must be worker counts in [1, {MAX_NP}], comma-separated; got {short(args.map_np)}")
    if not 0 <= args.confirm <= len(algorithms):
        raise BenchError(f"--confirm must be in [0, {len(algorithms)}] (the algorithms advised), got {args.confirm}")
    if not 2 <= args.repeats <= 20:
        raise BenchError(f"--repeats must be in [2, 20] (a median of two at least; an interval from three), "
                         f"got {args.repeats}")
    return algorithms, nps


def cmd_advise(args) -> int:
    from ..predict import hardware
    from ..layout import output_path
    from ..resolve import parse_set
    from . import rank, report

    algorithms, nps = check(args)
    target = relation_target()
    overrides = parse_set(args.set or [])
    hw_name = Path(args.hardware).stem if args.hardware.endswith(".yaml") else args.hardware
    out = output_path(args.out or f"results/advise/{hw_name}/np{args.np}", "--out", folder=True)
    out = out if out.is_absolute() else REPO_ROOT / out
    from ..predict.query import resolve_run

    cfg, _ = resolve_run("sync", args.np, args.hardware, args.profile, overrides)  # the profile's workload on the
    hardware.for_config(cfg, None, args.hardware)  # hardware, checked once before any forecast (one line if none)
    started = time.monotonic()
    _progress(f"forecasting {len(algorithms)} algorithms on {args.hardware} at n = {args.np}")
    ranked = rank.ranking(rank.forecasts(algorithms, args.np, args.hardware, args.profile, overrides))
    if rank.winner(ranked) is None:
        raise BenchError(f"no algorithm can run at n = {args.np} on {args.hardware}: "
                         + "; ".join(f"{r['algorithm']}: {r['note']}" for r in ranked[:3]))
    probed = hardware.described(args.hardware).probed if hardware.is_described(args.hardware) else None
    emulated = probed is not None or not hardware.is_described(args.hardware)
    top = [r["algorithm"] for r in ranked if r["rank"] is not None][:report.MAP_TOP]
    table = report.winners(top, nps, list(report.MAP_DELAYS) if emulated and "link_delay" not in overrides else [],
                           args.hardware, args.profile, overrides, _progress)
    w = rank.winner(ranked)
    title = (f"advise: {args.hardware}, n = {args.np}: forecast winner {w['algorithm']} ({w['basis']}"
             + (f", {w['time_to_target_s']:.1f} s to accuracy {target:g}" if w["time_to_target_s"] else "")
             + ")")
    text = rank.render(ranked, title)
    print(text, flush=True)
    query = {"hardware": args.hardware, "np": args.np, "profile": args.profile, "set": overrides,
             "algorithms": algorithms, "map_np": nps, "target": target,
             "command": "python -m bench advise " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["advise"] else [])}
    confirmation = None
    if args.confirm:
        from . import confirm

        plan = confirm.plan(ranked, args.confirm)
        _progress(f"confirming {', '.join(plan)}: {len(plan) * args.repeats} runs (paired seeds 1..{args.repeats})")
        rows = confirm.measure(plan, args.np, args.hardware, args.profile, overrides, args.repeats,
                               out.with_name(out.name + ".runs"), target, _progress)
        table_c = confirm.side_by_side(ranked, rows)
        won = confirm.measured_winner(rows)
        text_c = confirm.render(table_c, w["algorithm"], won)
        print(text_c, flush=True)
        confirmation = {"runs": rows, "table": table_c, "measured_winner": won["algorithm"],
                        "forecast_winner": w["algorithm"], "same": won["algorithm"] == w["algorithm"], "text": text_c}
    report.write(out, query, ranked, table, probed, text, confirmation)
    _progress(f"report: {out / 'index.html'} ({time.monotonic() - started:.0f} s)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("advise", help="rank every algorithm by its forecast on a hardware (best one bench probe wrote)")
    p.add_argument("--hardware", required=True, help="a probed description (bench probe), a described hardware or an "
                   "emulated profile")
    p.add_argument("--np", type=int, default=4, help="workers (default 4)")
    p.add_argument("--profile", help="training profile (default: the hardware's)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a setting or hyperparameter, as bench run")
    p.add_argument("--algorithms", help="registry keys, comma-separated (default: every registered one)")
    p.add_argument("--target", type=float, help="target accuracy (the relation's only: see the error)")
    p.add_argument("--map-np", help="worker counts of the map of winners (default 2,3,4 up to --np)")
    p.add_argument("--out", help="report folder (default results/advise/<hardware>/np<n>)")
    p.add_argument("--confirm", type=int, default=0, metavar="K", help="run the top K and sync on the cluster and "
                   "show forecast and measured side by side (default 0: forecast only)")
    p.add_argument("--repeats", type=int, default=3, help="--confirm: runs per algorithm, paired seeds (default 3)")
    p.set_defaults(func=cmd_advise)
