"""Allreduce family: throughput of ``delayed``, ``layerwise``, ``lasgd`` against ``sync`` at np=2.

    python -m bench.perf allreduce [--profile comm-heavy] [--repeats 3] [--np 2] [--set key=value ...]

The configuration is communication-heavy (profile ``comm-heavy``: hermans_mlp, 4.8M parameters,
batch 16) so that one allreduce of the gradients costs about as much as a step's compute. All
runs happen in ONE horovodrun job (the real worker loop, records on disk, one run directory per
run), the algorithms interleaved within each repeat so that drifts in machine load hit all
alike; there is no per-run horovodrun start to amortise. The same job also measures the two
ingredients directly: a blocking allreduce of a gradient-sized buffer, and one forward+backward.

Reported per algorithm: median aggregate throughput over repeats, the ratio against ``sync``
from the same job, and the per-step split (mean over timed steps and ranks, median over
repeats) into compute, communication (``comm_s``) and waiting (``wait_s``) as each module
defines them (see their docstrings). Overlap can only pay when there is an idle resource to
overlap on: with one intra-op thread per worker, two workers and Horovod's gloo threads share
the machine's cores, so "hidden" communication still competes with compute for CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ..comm import Comm
from ..data import load_dataset
from ..models import build_model
from ..resolve import parse_set, resolve
from ..results import load_run, read_json, write_json_atomic
from ..system import horovodrun_launch
from ..worker import Worker
from . import PerfParser, fmt_ratio, median, medians, table

ALGOS = ("sync", "delayed", "layerwise", "lasgd")


def _inner(out: Path, profile: str, overrides: dict, repeats: int, np: int) -> int:
    """Runs under horovodrun: the interleaved runs, then the two micro-measurements."""
    comm = Comm()
    for r in range(repeats):
        for algo in ALGOS:
            cfg = resolve(algo, np=np, profile=profile, overrides=overrides, study="perf", tag=f"r{r}")
            run_dir = out / f"{algo}-r{r}"
            if comm.rank == 0:
                run_dir.mkdir(parents=True)
                write_json_atomic(run_dir / "config.json", cfg.to_dict())
            comm.barrier()  # comm: wait until rank 0 has written the run's config
            Worker(cfg, run_dir, comm).run()
    train = resolve("sync", np=np, profile=profile, overrides=overrides).train
    torch.set_num_threads(train.threads)
    ds = load_dataset(train)
    model = build_model(train, ds.input_shape, ds.num_classes)
    buf = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    x, y = ds.x_train[:train.batch_size], ds.y_train[:train.batch_size]
    ar, fb = [], []
    for i in range(12):
        comm.barrier()  # comm: start every rank's timed allreduce together
        t0 = time.perf_counter()
        comm.allreduce_(buf, name="perf.allreduce")  # comm: allreduce one gradient-sized vector over all ranks
        ar.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        fb.append(time.perf_counter() - t0)
    if comm.rank == 0:
        write_json_atomic(out / "micro.json", {"allreduce_s": statistics.median(ar[2:]), "fwd_bwd_s": statistics.median(fb[2:]),
                                               "numel": buf.numel(), "bytes": buf.numel() * buf.element_size()})
    comm.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf allreduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="comm-heavy")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--inner", help=argparse.SUPPRESS)  # set when running under horovodrun
    args = ap.parse_args(argv)
    overrides = {"eval_every": 0, "save_model": False, **parse_set(args.set)}
    if args.inner:
        return _inner(Path(args.inner), args.profile, overrides, args.repeats, args.np)

    train = resolve("sync", np=args.np, profile=args.profile, overrides=overrides).train
    print(f"profile {args.profile}: {train.dataset}, {train.model}, batch {train.batch_size}/worker, np={args.np}, {train.max_steps} steps/run, "
          f"warm-up {train.warmup_steps}, {args.repeats} repeats, threads/worker {train.threads}; one horovodrun job")
    with tempfile.TemporaryDirectory(prefix="bench-perf-allreduce-") as tmp:
        cmd = [*horovodrun_launch(), "-np", str(args.np), "-H", f"localhost:{args.np}", "--gloo", sys.executable, "-m", "bench.perf",
               "allreduce", "--inner", tmp, "--profile", args.profile, "--repeats", str(args.repeats), "--np", str(args.np)]
        for s in args.set:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
            print(f"error: the benchmark job failed (rc {proc.returncode})", file=sys.stderr)
            return 1
        rows: dict[str, dict[str, list[float]]] = {a: {} for a in ALGOS}
        extra: dict[str, dict[str, list[float]]] = {a: {} for a in ALGOS}
        for algo in ALGOS:
            for r in range(args.repeats):
                run = load_run(Path(tmp) / f"{algo}-r{r}")
                if run.status != "ok":
                    print(f"error: {algo} repeat {r}: {run.summary.get('reason')}", file=sys.stderr)
                    return 1
                timed = run.steps[~run.steps["warmup"]]
                vals = {"throughput": run.summary["throughput"], "step_ms": 1e3 * timed["step_s"].mean(),
                        "compute_ms": 1e3 * timed["compute_s"].mean(), "comm_ms": 1e3 * timed["comm_s"].mean(),
                        "wait_ms": 1e3 * timed["wait_s"].mean()}
                for k, v in vals.items():
                    rows[algo].setdefault(k, []).append(v)
                for k in ("applied_in_backward_share", "averagings_waited_for", "averagings"):
                    if k in run.summary:
                        extra[algo].setdefault(k, []).append(run.summary[k])
        micro = read_json(Path(tmp) / "micro.json")
    m = medians({a: rows[a] for a in ALGOS})
    columns = [("algorithm", "10s"), ("samples/s", ">10.1f"), ("vs sync", ">8s"), ("step ms", ">8.1f"),
               ("compute", ">8.1f"), ("comm", ">8.1f"), ("wait", ">8.1f"),
               ("  (medians over repeats; ms per step, mean over timed steps and ranks)", "s")]
    print("\n" + "\n".join(table(columns, [
        [a, m[a]["throughput"], fmt_ratio(m[a]["throughput"], m["sync"]["throughput"]), m[a]["step_ms"], m[a]["compute_ms"],
         m[a]["comm_ms"], m[a]["wait_ms"], "  " + " ".join(f"{k}={median(v):.3g}" for k, v in extra[a].items())]
        for a in ALGOS])))
    print("\nper-repeat throughput: " + "; ".join(f"{a} " + ", ".join(f"{v:.0f}" for v in rows[a]["throughput"]) for a in ALGOS))
    print(f"ingredients (same job, medians of 10): blocking allreduce of {micro['numel'] / 1e6:.2f}M fp32 parameters "
          f"({micro['bytes'] / 2**20:.1f} MiB) = {1e3 * micro['allreduce_s']:.1f} ms; one forward+backward at batch "
          f"{train.batch_size} = {1e3 * micro['fwd_bwd_s']:.1f} ms; ratio allreduce/compute = {fmt_ratio(micro['allreduce_s'], micro['fwd_bwd_s'])}")
    return 0
