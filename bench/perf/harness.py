"""The harness's per-step cost taken apart: the worker's loop at np=1, one piece added at a time, each beside the
plain loop in the same run, interleaved and paired per repeat.

    python -m bench.perf harness --profile laptop --repeats 10 [--set KEY=VALUE] [--json FILE] [--quiet-below 0.3]

Every variant runs in this process as one rank, Horovod started at size 1 as a run of ``perf overhead``'s harness
reference gets it (``localsgd`` with λ beyond the run: a worker loop whose step never communicates), on a fresh model
with the run's seed, data, batch size and optimizer; each adds one piece to the variant before it:

- ``plain``: zero the gradients, forward, loss, backward, the optimizer's step (``perf overhead``'s plain loop);
- ``statistics``: the step as every algorithm takes it (:meth:`bench.algorithms.base.Algorithm.local_step`): the
  mini-batch's loss and accuracy read every step, which the step record and temporal efficiency need;
- ``algorithm``: the algorithm's own step (:meth:`step`: its counters and timing sections around ``local_step``);
- ``loop``: :meth:`bench.worker.Worker.train` without evaluation snapshots (``eval_every`` 0): the clocks, the step's
  timing and its record in ``rank0.jsonl``, the fault and straggler hooks;
- ``snapshots``: ``Worker.train`` at the profile's ``eval_every``: the copies of the model the held-out curve is
  evaluated on after training.

All are timed as the suite's throughput is (:mod:`bench.metrics.throughput`: samples after the warm-up over the wall
time from the end of the last warm-up step). Printed per variant: samples/s and µs per step (medians), the piece's
cost over the variant before it, and the variant against ``plain`` (geometric mean of the per-repeat ratios with its
95 % t-interval, :func:`bench.metrics.stats.paired_ratio`); then the share of each piece in the harness's whole cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .. import BenchError
from ..comm import open_comm
from ..metrics.stats import paired_ratio
from ..placement import runtime
from ..resolve import parse_set, resolve
from ..worker import Worker
from . import PerfParser, median, table, workload_options
from .overhead import HARNESS, horovod_env, quiet_before
from .plain import window

VARIANTS = ("plain", "statistics", "algorithm", "loop", "snapshots")
"""Each adds one piece of the worker's loop to the one before (the module's docstring)."""


def config(args):
    """The harness reference's resolved configuration (refused before anything runs)."""
    algorithm, extra = HARNESS
    return resolve(algorithm, np=1, profile=args.profile, hardware=args.hardware,
                   overrides={"save_model": False, **parse_set(args.set), **extra}, study="perf")


def worker(cfg, tmp: Path, comm, eval_every: int | None = None) -> Worker:
    """A fresh worker (model, optimizer, data) in a run directory of its own, its clock started; ``eval_every``
    instead of the profile's where given."""
    if eval_every is not None:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, eval_every=eval_every))
    run_dir = tmp / f"run-{time.monotonic_ns()}"
    run_dir.mkdir()
    w = Worker(cfg, run_dir, comm)
    w.ctx.t0 = time.time()
    return w


def bare_loop(w: Worker, kind: str) -> float:
    """samples/s of the loop ``kind`` (``plain``, ``statistics``, ``algorithm``) over ``w``'s batches."""
    model, algo, loss_fn = w.model, w.algo, w.ctx.loss_fn
    params = list(model.parameters())
    optimizer = algo.optimizer
    warm = w.cfg.train.warmup_steps
    steps, step = [], 0
    for epoch in range(w.cfg.train.epochs):
        for x, y in w.shard.batches(epoch):
            if step >= w.total_steps:
                break
            if kind == "plain":
                for p in params:
                    p.grad = None
                loss_fn(model(x), y).backward()
                optimizer.step()
            elif kind == "statistics":
                algo.local_step(x, y)
            else:
                algo.step(x, y)
            step += 1
            steps.append((0, time.time() - w.ctx.t0, len(y), step <= warm))
    return window(steps)


def measure_once(kind: str, cfg, tmp: Path, comm) -> float:
    """samples/s of one variant on a fresh worker."""
    if kind in ("loop", "snapshots"):
        w = worker(cfg, tmp, comm, eval_every=0 if kind == "loop" else None)
        return window([(0, s.t, s.samples, s.warmup) for s in w.train()])
    return bare_loop(worker(cfg, tmp, comm), kind)


def measure(cfg, args) -> dict[str, list[dict]]:
    """Every variant once per repeat, interleaved, in this process (Horovod at size 1, the profile's settings)."""
    res: dict[str, list[dict]] = {k: [] for k in VARIANTS}
    with horovod_env(cfg.launch.horovod.env()) as env, tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        os.environ.update(env)  # read by hvd.init(): the settings a run of the profile gets
        comm = open_comm(runtime(cfg), cfg.launch)
        try:
            for i in range(args.repeats):
                for kind in VARIANTS:
                    quiet = quiet_before(args.quiet_below, args.quiet_max_wait)
                    res[kind].append({"throughput": measure_once(kind, cfg, Path(tmp), comm), **quiet})
                print(f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]['throughput']:.0f}" for k, v in res.items()),
                      flush=True)
        finally:
            comm.shutdown()
            for k in env:
                os.environ.pop(k, None)
    return res


def summary(res: dict[str, list[dict]], batch: int) -> list[dict]:
    """Per variant: median samples/s and µs per step, the piece's µs over the variant before, and the paired ratio
    against ``plain``."""
    tp = {k: [r["throughput"] for r in v] for k, v in res.items()}
    rows, before = [], None
    for kind in VARIANTS:
        us = 1e6 * batch / median(tp[kind])
        vs = paired_ratio(tp[kind], tp["plain"])
        rows.append({"variant": kind, "samples_s": median(tp[kind]), "us_per_step": us,
                     "piece_us": us - before if before is not None else 0.0,
                     **{f"plain_{k}": vs[k] for k in ("effect", "ci_low", "ci_high", "n", "outcome")}})
        before = us
    return rows


def report(rows: list[dict]) -> None:
    cols = [("variant", "<11s"), ("samples/s", ">10.0f"), ("us/step", ">8.1f"), ("+ piece us", ">11.1f"),
            ("/ plain", ">8.3f"), ("[95 %", ">7.3f"), ("]", ">7.3f")]
    print("\n" + "\n".join(table(cols, [[r["variant"], r["samples_s"], r["us_per_step"], r["piece_us"],
                                         r["plain_effect"], r["plain_ci_low"], r["plain_ci_high"]] for r in rows])))
    last = rows[-1]
    whole = last["us_per_step"] - rows[0]["us_per_step"]
    against = f"snapshots / plain {last['plain_effect']:.3f} [{last['plain_ci_low']:.3f}, {last['plain_ci_high']:.3f}]"
    if last["plain_outcome"] == "slower":
        shares = ", ".join(f"{r['variant']} {r['piece_us'] / whole:.0%}" for r in rows[1:])
        print(f"the harness ({against}) costs {whole:.1f} us a step (medians): {shares}")
    else:  # the whole is inside the noise: so is every piece of it
        print(f"the harness is not distinguishable from the plain loop here ({against}: the interval reaches 1), "
              f"so neither are its pieces")


def _parser() -> argparse.ArgumentParser:
    ap = PerfParser(prog="python -m bench.perf harness", description=__doc__.splitlines()[0])
    return workload_options(ap, repeats=8, each="variant")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.repeats < 1:
            raise BenchError(f"--repeats {args.repeats}: expected a positive count")
        cfg = config(args)
        if cfg.train.warmup_steps < 1:
            raise BenchError(f"warmup_steps {cfg.train.warmup_steps}: the timed window needs at least one warm-up step")
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    train = cfg.train
    print(f"profile {args.profile} (hardware {args.hardware}): {train.dataset}, {train.model}, batch {train.batch_size}, "
          f"{train.optimizer}, threads {train.threads}, eval_every {train.eval_every}, {args.repeats} repeats; "
          f"Horovod at size 1 with {cfg.launch.horovod.given() or 'its defaults'}")
    res = measure(cfg, args)
    rows = summary(res, train.batch_size)
    report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": args.profile, "sets": args.set, "repeats": res,
                                               "summary": rows}, indent=1))
    return 0
