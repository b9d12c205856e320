"""Plain training loops: the references that ``python -m bench.perf overhead`` holds the suite's runs against.

- :func:`plain_loop`: one process, the run's model, data, batch size and optimizer, nothing else.
- :func:`distributed_loop`, one rank of a plain data-parallel loop under ``horovodrun`` (:func:`plain_job` launches
  it; ``python -m bench.perf plain horovod|ddp --config CONFIG --out OUT`` is a rank's command line):

  - ``horovod``: Horovod as a careful user runs it at the run's settings (``launch.horovod``: cycle time, fusion,
    response cache, ``groups``, the adaptive wait), ``hvd.DistributedOptimizer``'s allreduces waited for, then the
    optimizer's step on the averaged gradients;
  - ``ddp``: ``DistributedDataParallel`` over torch.distributed alone (no Horovod), as ``ddp`` runs.

  Neither records anything per step beyond its end time: no loss, accuracy, clocks, records or progress. So
  ``sync`` / plain Horovod and ``ddp`` / plain DDP are what the suite's harness costs each, and plain Horovod /
  plain DDP is Horovod's own design against DDP's on this machine.

All are timed the way the suite's throughput is (:mod:`bench.metrics.throughput`): samples of the steps after the
warm-up over the wall time from the end of the last warm-up step to the end of the last step, over every rank.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from ..comm import open_comm
from ..data import Shard, load_dataset
from ..launch.command import job_environment
from ..metrics.throughput import window_throughput
from ..models import build_model, make_optimizer
from ..results import read_json, write_json_atomic
from ..runconfig import load_config
from ..system import horovodrun_launch
from . import PerfParser

KINDS = ("horovod", "ddp")
"""The plain distributed loops: Horovod's DistributedOptimizer, torch's DistributedDataParallel."""


def window(steps: list[tuple[int, float, int, bool]]) -> float:
    """Samples/s over the timed window of the steps ``(rank, end time, samples, warm-up)`` of every rank, by
    :func:`bench.metrics.throughput.window_throughput` (the one definition)."""
    if not any(not w for *_, w in steps) or all(not w for *_, w in steps):
        raise ValueError("a plain loop needs warmup_steps >= 1 and more steps than that to open its timed window")
    frame = pd.DataFrame(steps, columns=["rank", "t", "samples", "warmup"]).assign(step_s=0.0)
    return window_throughput(frame, windows=0)["throughput"]


def plain_loop(cfg) -> dict:
    """A plain single-process PyTorch loop with the run's model, data and optimizer. Returns ``throughput``
    (wall-clock timed window, as the suite measures) and ``per_step_clock`` (samples / sum of the per-step clock
    readings, the data iteration left out)."""
    train = cfg.train
    torch.set_num_threads(train.threads)
    ds = load_dataset(train)
    torch.manual_seed(train.seed)
    model = build_model(train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(train, model.parameters())
    shard = Shard(ds, 1, 0, train.batch_size, train.seed)
    total = min(shard.steps * train.epochs, train.max_steps or 10**12)
    step, seconds, counted = 0, 0.0, 0
    steps = []
    for epoch in range(train.epochs):
        for x, y in shard.batches(epoch):
            if step >= total:
                break
            t0 = time.perf_counter()
            opt.zero_grad()  # PyTorch default: gradients reset to None, as the worker does
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            t1 = time.perf_counter()
            step += 1
            steps.append((0, t1, len(y), step <= train.warmup_steps))
            if step > train.warmup_steps:
                counted += len(y)
                seconds += t1 - t0
    return {"throughput": window(steps), "per_step_clock": counted / seconds}


def distributed_loop(kind: str, cfg) -> dict | None:
    """One rank of the plain ``kind`` loop (:data:`KINDS`) with ``cfg``'s model, data, optimizer and launch settings;
    rank 0 returns the throughput of every rank's steps, the others None."""
    train = cfg.train
    torch.set_num_threads(train.threads)
    comm = open_comm("horovod" if kind == "horovod" else "torch", cfg.launch)
    ds = load_dataset(train)
    torch.manual_seed(train.seed)
    model = build_model(train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(train, model.parameters())
    if kind == "horovod":
        comm.broadcast_state(model, opt)  # comm: rank 0's parameters and optimizer state to every rank
        dist_opt = comm.distributed_optimizer(opt, model.named_parameters())  # comm: backward's hooks allreduce the gradients
        net = model
    else:
        from torch.nn.parallel import DistributedDataParallel

        comm.init_torch_distributed()  # comm: torch.distributed's default group over every rank
        net = DistributedDataParallel(model)  # comm: rank 0's parameters to every rank; backward allreduces the buckets
    shard = Shard(ds, comm.size, comm.rank, train.batch_size, train.seed)
    total = min(shard.steps * train.epochs, train.max_steps or 10**12)
    params = list(model.parameters())
    comm.barrier()  # comm: a common start
    t0 = comm.broadcast_object(time.time(), root=0)  # comm: rank 0's clock, the time origin of every rank
    step, steps = 0, []
    for epoch in range(train.epochs):
        for x, y in shard.batches(epoch):
            if step >= total:
                break
            for p in params:
                p.grad = None
            torch.nn.functional.cross_entropy(net(x), y).backward()  # ddp: comm: the gradient buckets allreduced
            if kind == "horovod":
                comm.wait_optimizer(dist_opt)  # comm: wait (the settings' adaptive wait) for the gradient allreduces
                dist_opt.synchronize()  # comm: the averaged gradients into .grad
            opt.step()
            step += 1
            steps.append((comm.rank, time.time() - t0, len(y), step <= train.warmup_steps))
    # DDP's reducer holds the process group: freed after destroy_process_group, the group's last reference went
    # with it and ~ProcessGroupGloo hung joining gloo's threads (seen once, rank 1, 2026-11-25); freed while the
    # group is alive, as the worker frees its run before comm.shutdown()
    del net
    gathered = comm.allgather_object(steps)  # comm: every rank's step times on every rank
    comm.shutdown()
    return {"throughput": window([s for rank in gathered for s in rank]), "steps": step} if comm.rank == 0 else None


def plain_job(kind: str, cfg, tmp: Path, env: dict | None = None, timeout_s: float = 600) -> dict:
    """Run the plain ``kind`` loop under horovodrun on this machine with ``cfg`` (its np, launch settings and their
    environment, as a job of the suite gets them); its figures."""
    tmp.mkdir(parents=True, exist_ok=True)
    config, out = tmp / "config.json", tmp / "plain.json"
    write_json_atomic(config, cfg.to_dict())
    n = cfg.launch.np
    cmd = [*horovodrun_launch(), "-np", str(n), "-H", f"localhost:{n}", "--gloo", sys.executable, "-m", "bench.perf",
           "plain", kind, "--config", str(config), "--out", str(out)]
    done = subprocess.run(cmd, env=job_environment(cfg, None, env), capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"plain {kind} np={n} failed (rc {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return read_json(out)


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf plain", description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("--config", required=True, help="a run's config.json: model, data, optimizer, launch settings")
    ap.add_argument("--out", required=True, help="rank 0 writes the figures here (JSON)")
    args = ap.parse_args(argv)
    result = distributed_loop(args.kind, load_config(args.config))
    if result is not None:
        Path(args.out).write_text(json.dumps(result))
    return 0
