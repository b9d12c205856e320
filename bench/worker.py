"""The per-rank training loop, algorithm-agnostic. Launched by horovodrun on every rank::

    horovodrun -np 2 python -m bench.worker --config RUN_DIR/config.json

Writes ``rank<r>.jsonl`` (one record per step), ``eval.jsonl`` (held-out evaluation of the
model that matters), ``model.pt`` and, on rank 0, ``summary.json``. A rank that raises marks
the run failed (first reason wins) and exits at once, so its peers' collectives fail and
horovodrun ends the job instead of hanging.

Stragglers (``slow_ranks``, ``slow_factor``, ``step_jitter_s``) are injected around every algorithm's step
alike (:mod:`bench.inject`, with the test aids that inject faults); the launcher is watched and SIGTERM recorded
(:mod:`bench.watchdog`); rank 0 shows progress (:mod:`bench.progress`).

One job may run several runs, one after the other (``--config`` repeated; ``bench.launch.run_many`` groups
runs whose launch is identical, which saves the job start-up of horovodrun, Python and Horovod per run):
each run starts from a barrier with its own model, data and algorithm, and writes only its own run
directory. When a run fails, it is marked failed with its reason and every later run of the job is marked
failed ("not run: ..."), while the runs that finished before keep their results.

Evaluation never runs between steps: at every ``eval_every`` steps a rank only keeps a snapshot
(:meth:`bench.algorithms.base.Algorithm.snapshot`, a memory copy, no communication), stamped
with the wall-clock time it was taken; the held-out evaluations of the snapshots run after the
last step, and summary.json reports how long they took (``eval_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from . import __version__
from .algorithms import get_algorithm
from .algorithms.base import Context
from .comm import CommBase, open_comm
from .data import Shard, load_dataset
from .metrics.throughput import window_throughput
from .inject import Faults, Straggler
from .models import build_model, make_optimizer
from .ownership import check_ours, still_ours
from .placement import runtime
from .progress import step_progress
from .results import JsonlWriter, StepRecord, mark_failed, read_json, write_json_atomic, write_summary
from .runconfig import load_config
from .timing import StepTimer, ThreadCpu, device_sync
from .watchdog import on_sigterm_raise, send_heartbeats, unfinished, watch_launcher


class StepTiming(NamedTuple):
    """What a worker rank keeps of each step for the run's throughput (:mod:`bench.metrics.throughput`)."""

    t: float  # seconds from the job's common start to the end of the step
    step_s: float
    samples: int
    warmup: bool


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device, batch: int = 1024) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on (x, y), over every target of ``y`` (one per sample, or one per
    position of a sequence, the model's output then (batch, classes, positions)); about ``batch`` targets a forward."""
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    per = max(1, batch // y[:1].numel())
    for i in range(0, len(x), per):
        xb, yb = x[i:i + per].to(device), y[i:i + per].to(device)
        out = model(xb)
        loss_sum += float(torch.nn.functional.cross_entropy(out, yb, reduction="sum"))
        correct += int((out.argmax(1) == yb).sum())
    model.train(was_training)
    return loss_sum / y.numel(), correct / y.numel()


def pick_device(want: str, comm: CommBase) -> torch.device:
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
        index = comm.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


class Worker:
    def __init__(self, cfg, run_dir: Path, comm: CommBase):
        self.cfg, self.run_dir, self.comm = cfg, run_dir, comm
        train = cfg.train
        torch.set_num_threads(train.threads)
        self.device = pick_device(train.device, comm)
        self.ds = load_dataset(train)
        if train.eval_samples:
            self.ds.x_test, self.ds.y_test = self.ds.x_test[:train.eval_samples], self.ds.y_test[:train.eval_samples]
        algo_cls = get_algorithm(cfg.algorithm)
        servers = algo_cls.server_ranks(cfg.params, cfg.launch.np)
        num_workers = comm.size - servers
        if num_workers != cfg.launch.np:
            raise RuntimeError(f"{cfg.algorithm} with np={cfg.launch.np} needs {cfg.launch.np + servers} processes, "
                               f"horovodrun started {comm.size}")
        self.worker_index = comm.rank if comm.rank < num_workers else -1
        self.shard = Shard(self.ds, num_workers, max(self.worker_index, 0), train.batch_size, train.seed)
        total = self.shard.steps * train.epochs
        self.total_steps = min(total, train.max_steps) if train.max_steps else total

        def new_model():
            return build_model(train, self.ds.input_shape, self.ds.num_classes).to(self.device)

        self.ctx = Context(cfg=cfg, comm=comm, device=self.device, build_model=new_model,
                           make_optimizer=lambda ps: make_optimizer(train, ps), dataset=self.ds, timer=StepTimer(),
                           worker_index=self.worker_index, num_workers=num_workers,
                           steps_per_epoch=self.shard.steps, total_steps=self.total_steps)
        self.model = new_model()
        self.algo = algo_cls(cfg.params, self.ctx)
        self.algo.setup(self.model, make_optimizer(train, self.model.parameters()))
        self.snapshots: list[tuple[dict, dict]] = []  # (record fields, snapshot) in the order taken
        self.snapshot_s = 0.0
        self.straggler = Straggler(train, self.worker_index, host_is_slower=cfg.launch.slow_mode == "cpu")
        self.faults = Faults()

    def now(self) -> float:
        return time.time() - self.ctx.t0

    def keep_snapshot(self, step: int) -> None:
        t0 = time.perf_counter()
        snap = self.algo.snapshot()
        if snap is not None:
            self.snapshots.append(({**self.ctx.progress(step), "t": self.now()}, snap))
        self.snapshot_s += time.perf_counter() - t0

    def train(self) -> list[StepTiming]:
        """The steps of a worker rank; returns the timing of every step (the throughput's input)."""
        writer = JsonlWriter(self.run_dir / f"rank{self.comm.rank}.jsonl", exclusive=True, flush_s=1.0)
        try:
            return self._steps(writer)
        finally:
            writer.close()  # also when a step fails: the records taken so far reach the file

    def _steps(self, writer: JsonlWriter) -> list[StepTiming]:
        train = self.cfg.train
        timer = self.ctx.timer
        progress = step_progress(self.cfg, self.total_steps, self.comm.rank)
        device, on_cpu = self.device, self.device.type == "cpu"  # a CPU batch is already where it must be
        timing: list[StepTiming] = []
        step = 0
        for epoch in range(train.epochs):
            for x, y in self.shard.batches(epoch):
                if step >= self.total_steps:
                    break
                self.faults.before_step(self.comm.rank, step, self.run_dir.name)
                if not on_cpu:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                timer.take()
                device_sync(device)
                t_start = time.perf_counter()
                stats = self.algo.step(x, y)
                device_sync(device)
                split = timer.take()
                injected = self.straggler.delay(time.perf_counter() - t_start - split["comm"] - split["wait"])
                step_s = time.perf_counter() - t_start
                step += 1
                warm = step <= train.warmup_steps
                end = self.now()
                timing.append(StepTiming(end, step_s, len(y), warm))
                writer.write(StepRecord(step=step, epoch=step / self.shard.steps, t=end, samples=len(y), loss=stats.loss,
                                        accuracy=stats.correct / y.numel(), step_s=step_s,
                                        compute_s=max(step_s - split["comm"] - split["wait"], 0.0),
                                        comm_s=split["comm"], wait_s=split["wait"], injected_s=injected,
                                        staleness=stats.staleness, bytes_sent=stats.bytes_sent, warmup=warm))
                if progress is not None:
                    progress.step(step, end, stats.loss)
                if train.eval_every and step % train.eval_every == 0 and step < self.total_steps:
                    self.keep_snapshot(step)
        if progress is not None:
            progress.close(step)
        return timing

    def evaluate_snapshots(self) -> dict | None:
        """Evaluate every snapshot (the final one last); write eval.jsonl and model.pt; return the final record."""
        snaps = self.snapshots + self.algo.own_snapshots()
        snaps.sort(key=lambda s: s[0]["t"])
        final = self.algo.snapshot()
        snaps.append(({**self.ctx.progress(self.total_steps), "t": self.now()}, final))
        writer, record = None, None
        for i, (meta, snap) in enumerate(snaps):
            model = self.algo.evaluation_model(snap)
            if model is None:
                continue
            self.faults.before_evaluation()
            loss, acc = evaluate(model, self.ds.x_test, self.ds.y_test, self.device)
            record = {**meta, "loss": loss, "accuracy": acc, "final": i == len(snaps) - 1, "rank": self.comm.rank}
            writer = writer or JsonlWriter(self.run_dir / "eval.jsonl")
            writer.write(record)
            if record["final"] and self.cfg.train.save_model:
                torch.save(model.state_dict(), self.run_dir / "model.pt")
        if writer is not None:
            writer.close()
        return record if record and record["final"] else None

    def run(self) -> None:
        comm = self.comm
        comm.barrier()  # comm: wait until every rank is ready: a common start
        # One clock for all ranks: rank 0's, read before this broadcast, whose latency (0.3-1.5 s on the emulated
        # hosts at 0.36 of a core) is therefore in every `t` written; load_run counts `t` from the first step's start.
        # (Each rank's own clock after the barrier would skew the ranks by up to a quota period, 64 ms.)
        self.ctx.t0 = comm.broadcast_object(time.time(), root=0)  # comm: broadcast rank 0's clock to every rank: one time origin
        wall0 = time.time()
        threads = ThreadCpu(comm.horovod_tids)
        cpu0 = threads.read()
        timing = []
        if self.algo.is_server():
            self.algo.serve()
        else:
            timing = self.train()
        self.algo.finalize()
        train_s = time.time() - wall0
        cpu = {"wall_s": round(train_s, 6), **threads.between(cpu0, threads.read())}
        check_ours(self.run_dir)  # a directory deleted or replaced under the job gets nothing more of this run
        eval0 = time.time()
        final = self.evaluate_snapshots()
        eval_s = time.time() - eval0
        mine = {"rank": comm.rank, "host": os.environ.get("HOROVOD_HOSTNAME") or os.uname().nodename,
                "worker": not self.algo.is_server(), "steps": len(timing), "timing": timing, "final": final,
                "stats": self.algo.stats(), "eval_s": eval_s, "snapshot_s": self.snapshot_s, "cpu_threads": cpu,
                "runtime": comm.record()}
        gathered = comm.allgather_object(mine)  # comm: gather every rank's figures on every rank, for rank 0's summary
        if comm.rank == 0:
            check_ours(self.run_dir)
            self.write_summary(gathered, train_s, time.time() - wall0)

    def write_summary(self, gathered: list[dict], train_s: float, wall_s: float) -> None:
        workers = [g for g in gathered if g["worker"]]
        steps = pd.DataFrame([(g["rank"], *rec) for g in workers for rec in g["timing"]],
                             columns=["rank", *StepTiming._fields])
        tp = window_throughput(steps)
        final = next((g["final"] for g in gathered if g["final"]), None)
        extra = {}
        for g in gathered:
            extra.update(g["stats"] or {})
        sys_path = self.run_dir / "system.json"
        system = read_json(sys_path) if sys_path.exists() else {}
        ranks = sorted(gathered, key=lambda g: g["rank"])
        system["hosts_by_rank"] = [g["host"] for g in ranks]
        system["runtime"] = {**ranks[0]["runtime"], "by_rank": [g["runtime"] for g in ranks]}
        write_json_atomic(sys_path, system)
        write_summary(self.run_dir, "ok", algorithm=self.cfg.algorithm, np=self.cfg.launch.np, processes=len(gathered),
                      wall_s=wall_s, train_s=train_s, eval_s=max(g["eval_s"] for g in gathered),
                      snapshot_s=max(g["snapshot_s"] for g in gathered),
                      steps_per_worker=max(g["steps"] for g in workers) if workers else 0,
                      throughput=tp["throughput"], throughput_ci=[tp["ci_low"], tp["ci_high"]],
                      throughput_window_s=tp["window_s"], throughput_window=tp["window"],
                      final_accuracy=final["accuracy"] if final else None, final_loss=final["loss"] if final else None,
                      cpu_threads=[g["cpu_threads"] for g in sorted(gathered, key=lambda g: g["rank"])],
                      bench_version=__version__, **extra)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.worker", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, action="append",
                    help="config.json of a run directory; repeated: the runs one after the other in this job")
    args = ap.parse_args(argv)
    run_dirs = [Path(c).resolve().parent for c in args.config]
    cfgs = [load_config(d / "config.json") for d in run_dirs]
    for d in run_dirs:
        existing = sorted(p.name for p in d.iterdir() if p.name == "summary.json" or p.name.endswith(".jsonl"))
        if existing:  # a re-launch into a finished (or failed) run: refuse before touching anything
            print(f"error: {d} already holds results ({', '.join(existing)}); prepare a new run directory "
                  f"(python -m bench run ALGO ... --prepare-only --out NEW_DIR)", file=sys.stderr)
            return 2
    if len({json.dumps(asdict(c.launch), sort_keys=True) for c in cfgs}) > 1:
        print("error: the runs of one job must have the same launch settings (np, hardware, hosts)", file=sys.stderr)
        return 2
    watch_launcher(run_dirs, owned=still_ours)
    goodbye = send_heartbeats()  # to the launcher, which names this rank if they stop (bench.watchdog)
    on_sigterm_raise()
    runtimes = {runtime(c) for c in cfgs}
    if len(runtimes) > 1:
        print(f"error: the runs of one job must start the same runtime, got {', '.join(sorted(runtimes))}", file=sys.stderr)
        return 2
    comm = open_comm(runtimes.pop(), cfgs[0].launch)
    if comm.wait_sleep_s and comm.rank == 0:
        print(f"[worker] collectives waited for adaptively: polling {comm.wait_spin_s * 1e6:g} us, then sleeps "
              f"doubling up to {comm.wait_sleep_s * 1e6:g} us (horovod.wait_spin_us, wait_sleep_us)", flush=True)
    for i, (cfg, run_dir) in enumerate(zip(cfgs, run_dirs)):
        if len(cfgs) > 1 and comm.rank == 0:
            print(f"[worker] run {i + 1}/{len(cfgs)} of this job: {run_dir.name}", flush=True)
        try:
            Worker(cfg, run_dir, comm).run()
        except BaseException as e:  # any failure on any rank: mark the run failed and leave at once
            reason = f"rank {comm.rank}: {type(e).__name__}: {e}"
            try:
                goodbye()
                for d, why in [(run_dir, reason)] + [(later, f"not run: {run_dir.name}, run earlier in the same job, "
                                                           f"failed") for later in unfinished(run_dirs[i + 1:])]:
                    if still_ours(d):
                        mark_failed(d, why)
            finally:
                traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
    goodbye()
    comm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
