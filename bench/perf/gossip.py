"""Decentralised family against ``sync``: throughput, bytes per step, accuracy after a common wall-clock budget.

    python -m bench.perf gossip [--np 4] [--profile laptop] [--repeats 3] [--set key=value ...]

Variants: sync (reference), sgp, sgp with overlap (OSGP), adpsgd, fast (ring). Each runs through
the real CLI path (horovodrun, the worker loop, records on disk); the variants are interleaved
within each repeat so that drifts in machine load hit all of them alike. Reported, as medians
over repeats: throughput (samples/s, all workers, warm-up excluded, :func:`bench.metrics.throughput`),
bytes sent per worker per step, the communication share of a step, and held-out accuracy after
the same wall-clock budget (the shortest training time among all runs of the repeat, so every run
has reached it; :func:`bench.metrics.accuracy_after_time`), each with its ratio to ``sync``.
On a machine with fewer cores than ``--np`` the workers are oversubscribed: the figures then
show relative communication cost, not scaling.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from ..launch import run
from ..layout import run_name
from ..metrics.accuracy import accuracy_after_time
from ..metrics.throughput import throughput
from ..resolve import parse_set, resolve
from ..results import load_run, read_json
from . import PerfParser, fmt_ratio, medians, table

VARIANTS = {  # label -> (algorithm, overrides)
    "sync": ("sync", {}),
    "sgp": ("sgp", {"overlap": False}),
    "sgp+overlap": ("sgp", {"overlap": True}),
    "adpsgd": ("adpsgd", {}),
    "fast": ("fast", {"topology": "ring"}),
}


def one_run(label: str, np: int, profile: str, overrides: dict, tmp: Path):
    algorithm, extra = VARIANTS[label]
    cfg = resolve(algorithm, np=np, profile=profile, overrides={**overrides, **extra}, study="perf")
    run_dir, rc = run(cfg, tmp / run_name(label, np, str(time.monotonic_ns())), echo=False)
    if rc != 0:
        raise SystemExit(f"{label} np={np} failed: {read_json(run_dir / 'summary.json').get('reason')}")
    return load_run(run_dir)


def figures(run) -> dict:
    steps = run.steps[~run.steps["warmup"].astype(bool)]
    step_s = steps["compute_s"] + steps["comm_s"] + steps["wait_s"]
    return {"throughput": throughput(run)["throughput"], "bytes": float(steps["bytes_sent"].mean()),
            "comm_share": float((steps["comm_s"] + steps["wait_s"]).sum() / step_s.sum()),
            "train_s": float(run.evals["t"].max())}


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf gossip", description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {', '.join(VARIANTS)}")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    labels = [v for v in args.variants.split(",") if v]
    unknown = [v for v in labels if v not in VARIANTS]
    if unknown or "sync" not in labels:
        ap.error(f"variants must include sync and be among {', '.join(VARIANTS)}; got {args.variants!r}")
    overrides = {"eval_every": 5, "save_model": False, **parse_set(args.set)}
    train = resolve("sync", np=args.np, profile=args.profile, overrides=overrides).train
    cores = os.cpu_count() or 1
    print(f"np={args.np} on {cores} cores{' (oversubscribed)' if args.np > cores else ''}; profile {args.profile}: "
          f"{train.dataset}, {train.model} {train.hidden}, batch {train.batch_size}/worker, {train.epochs} epochs, {train.optimizer} lr {train.lr}, "
          f"eval every {train.eval_every} steps; {args.repeats} repeats")
    res: dict[str, dict[str, list[float]]] = {v: {} for v in labels}
    with tempfile.TemporaryDirectory(prefix="bench-perf-gossip-") as tmp:
        for i in range(args.repeats):
            runs = {v: one_run(v, args.np, args.profile, overrides, Path(tmp)) for v in labels}
            figs = {v: figures(r) for v, r in runs.items()}
            budget = min(f["train_s"] for f in figs.values())
            for v, r in runs.items():
                figs[v]["budget_s"] = budget
                figs[v]["acc_at_budget"] = accuracy_after_time(r.evals, budget)
                for k, x in figs[v].items():
                    res[v].setdefault(k, []).append(x)
            print(f"  repeat {i + 1} (budget {budget:.2f} s): " + ", ".join(
                f"{v} {f['throughput']:.0f}/s acc {f['acc_at_budget']:.3f}" for v, f in figs.items()), flush=True)
    m = medians(res)
    ref = m["sync"]
    print(f"\nmedians over {args.repeats} repeats (ratios against sync measured in the same repeats); "
          f"wall-clock budget {ref['budget_s']:.2f} s")
    columns = [("variant", "<12"), ("samples/s", ">10.1f"), ("x sync", ">7"), ("bytes/step", ">11.0f"), ("x sync", ">7"),
               ("comm+wait", ">9.1%"), ("acc@budget", ">10.3f"), ("sync acc", ">8.3f")]
    print("\n".join(table(columns, [
        [v, m[v]["throughput"], fmt_ratio(m[v]["throughput"], ref["throughput"]), m[v]["bytes"],
         fmt_ratio(m[v]["bytes"], ref["bytes"]), m[v]["comm_share"], m[v]["acc_at_budget"], ref["acc_at_budget"]]
        for v in labels])))
    return 0
