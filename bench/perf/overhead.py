"""Harness overhead: ``sync`` at np=1 against a plain PyTorch loop, and ``sync`` against ``ddp`` at np=2.

    python -m bench.perf overhead [--profile laptop] [--set key=value ...] [--repeats 3]

The plain loop uses the same model, data, batch size, optimizer and timing protocol (per-step
clock, warm-up steps excluded) in this process; the suite's runs go through the real CLI path
(horovodrun, the worker loop, records on disk). Reported: median throughput over repeats and
the ratios sync(np=1)/plain and sync(np=2)/ddp(np=2). Target for the first ratio: >= 0.97.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from ..layout import run_name
from ..resolve import parse_set, resolve
from ..data import Shard, load_dataset
from ..models import build_model, make_optimizer
from . import fmt_ratio, median


def plain_loop(cfg) -> float:
    """Samples/s of a plain single-process PyTorch loop with the run's model, data and optimizer."""
    t = cfg.train
    torch.set_num_threads(t.threads)
    ds = load_dataset(t)
    model = build_model(t, ds.input_shape, ds.num_classes)
    opt = make_optimizer(t, model.parameters())
    shard = Shard(ds, 1, 0, t.batch_size, t.seed)
    total = min(shard.steps * t.epochs, t.max_steps or 10**12)
    step, samples, seconds = 0, 0, 0.0
    for epoch in range(t.epochs):
        for x, y in shard.batches(epoch):
            if step >= total:
                break
            t0 = time.perf_counter()
            opt.zero_grad()  # PyTorch default: gradients reset to None, as the worker does
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            dt = time.perf_counter() - t0
            step += 1
            if step > t.warmup_steps:
                samples += len(y)
                seconds += dt
    return samples / seconds


def suite_run(algorithm: str, np: int, profile: str, overrides: dict, tmp: Path) -> float:
    from ..launch import run
    from ..results import read_json

    cfg = resolve(algorithm, np=np, profile=profile, overrides=overrides, study="perf")
    run_dir, rc = run(cfg, tmp / run_name(algorithm, np, str(time.monotonic_ns())), echo=False)
    if rc != 0:
        raise SystemExit(f"{algorithm} np={np} failed: {read_json(run_dir / 'summary.json').get('reason')}")
    return read_json(run_dir / "summary.json")["throughput"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.perf overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-ddp", action="store_true")
    args = ap.parse_args(argv)
    overrides = {"eval_every": 0, "save_model": False, **parse_set(args.set)}
    cfg = resolve("sync", np=1, profile=args.profile, overrides=overrides)
    t = cfg.train
    print(f"profile {args.profile}: {t.dataset}, {t.model}, batch {t.batch_size}, {t.optimizer}, "
          f"warm-up {t.warmup_steps} steps, {args.repeats} repeats, threads/worker {t.threads}")
    res: dict[str, list[float]] = {"plain": [], "sync1": [], "sync2": [], "ddp2": []}
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        for i in range(args.repeats):  # interleave the variants so drifts in machine load hit all alike
            res["plain"].append(plain_loop(cfg))
            res["sync1"].append(suite_run("sync", 1, args.profile, overrides, Path(tmp)))
            if not args.skip_ddp:
                res["sync2"].append(suite_run("sync", 2, args.profile, overrides, Path(tmp)))
                res["ddp2"].append(suite_run("ddp", 2, args.profile, overrides, Path(tmp)))
            print(f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in res.items() if v), flush=True)
    m = {k: median(v) for k, v in res.items() if v}
    print(f"plain PyTorch loop      : {m['plain']:10.1f} samples/s (median)")
    print(f"sync np=1 (horovodrun)  : {m['sync1']:10.1f} samples/s   ratio sync/plain = {fmt_ratio(m['sync1'], m['plain'])}"
          "  (target >= 0.97)")
    if not args.skip_ddp:
        print(f"sync np=2               : {m['sync2']:10.1f} samples/s (aggregate)")
        print(f"ddp  np=2               : {m['ddp2']:10.1f} samples/s   ratio sync/ddp = {fmt_ratio(m['sync2'], m['ddp2'])}")
    return 0
