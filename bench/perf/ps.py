"""Parameter-server benchmark: commits per second the server sustains, and DOWNPOUR's staleness.

``python -m bench.perf ps [--sizes 1000000,10000000] [--workers 1,2,4] [--commits 40] [--repeats 3]``

1. Memory-copy bandwidth of this machine (``torch`` copy of the largest centre, median of
   repeats): the reference. One commit makes the server move at least 4N bytes through
   memory (receive the payload) and then read 8N / write 4N bytes (θ̃ += Δ), so
   bandwidth / 4N commits/s is a loose upper bound on what one server rank could do.
2. For each centre size N and worker count n: a real horovodrun job (n workers + 1 server
   rank) in which every worker sends ``--commits`` commits back to back, first commit-only,
   then commit + pull (DOWNPOUR with λ = 1: 4N bytes in, 4N out); the server times the
   applies. Median over ``--repeats`` rounds; printed with the payload bandwidth and its
   ratio to the memory-copy bandwidth.
3. Mean staleness τ of real ``downpour`` runs (profile tiny) at n = 2, 4 against the
   n − 1 expected for equal-speed workers.

``python -m bench.perf ps --fairness [--algorithms downpour,agn] [--np 4] [--profile comm-heavy] [--steps 40]``
instead runs each algorithm once (a real run in a temporary directory) and prints, per worker, the
commits the server served while every worker was active (``ps_commits_served``: up to the first DONE),
their spread (max − min) / max, and the worker's mean compute time per step and mean reply wait per
commit (``comm_s`` of its committing steps): equal reply waits with unequal counts mean a worker
computed slower, not that the server served it less.

Timings on a small shared machine are noisy: figures are medians, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ..comm import Comm, tags
from ..comm.ps import PSClient, PSServer
from ..layout import REPO_ROOT
from ..system import horovodrun_launch
from . import PerfParser, fmt_ratio, median


def copy_bandwidth(numel: int, repeats: int = 7) -> float:
    """Bytes per second of a plain tensor copy (the memory-copy reference)."""
    src, dst = torch.randn(numel), torch.empty(numel)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return numel * 4 / median(times)


def inner(args) -> int:
    """Runs under horovodrun: the last rank serves, the others commit."""
    torch.set_num_threads(1)
    comm = Comm()
    p2p, go = comm.p2p(120), torch.zeros(1)
    n_workers, server_rank = comm.size - 1, comm.size - 1
    results = []
    for numel, r, mode in [(n, r, m) for n in args.numel for r in range(args.repeats) for m in ("commit", "commit+pull")]:
        if comm.rank == server_rank:
            stamps = []

            def rule(centre, payload, tau, worker, pulled):
                centre.add_(payload)
                stamps.append(time.perf_counter())
                return True

            server = PSServer(torch.zeros(numel), list(range(n_workers)), rule)
            server.serve()
            span = stamps[-1] - stamps[0]
            results.append({"numel": numel, "mode": mode, "repeat": r, "commits": len(stamps),
                            "rate": (len(stamps) - 1) / span if span > 0 else float("nan"),
                            "tau_mean": sum(server.taus) / len(server.taus)})
            for w in range(n_workers):  # the next round starts only when this server is gone
                p2p.send(go, w, tag=tags.PERF_PS_GO)  # comm: tell worker w the next round may start
        else:
            client, buf = PSClient(comm.rank, server_rank, numel), torch.empty(numel)
            delta = torch.full((numel,), 1e-6)
            client.pull(buf)
            for _ in range(args.commits):
                client.commit(delta, into=buf if mode == "commit+pull" else None)
            client.done()
            p2p.recv(go, server_rank, tag=tags.PERF_PS_GO)  # comm: wait for the server's go
    if comm.rank == server_rank:
        Path(args.inner).write_text(json.dumps(results))
    comm.barrier()  # comm: wait until the server rank has written the results
    comm.shutdown()
    return 0


def server_rates(sizes: list[int], workers: int, commits: int, repeats: int) -> dict:
    """{(numel, mode): median commits/s} from one horovodrun job with ``workers`` workers + 1 server."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "ps.json"
        n = workers + 1
        cmd = [*horovodrun_launch(), "-np", str(n), "-H", f"localhost:{n}", "--gloo", sys.executable, "-m", "bench.perf",
               "ps", "--inner", str(out), "--numel", ",".join(map(str, sizes)), "--commits", str(commits), "--repeats", str(repeats)]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"horovodrun failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        rows = json.loads(out.read_text())
    return {(n, m): median([r["rate"] for r in rows if r["mode"] == m and r["numel"] == n])
            for n in sizes for m in ("commit", "commit+pull")}


def downpour_staleness(workers: int, steps: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "bench", "run", "downpour", "--np", str(workers), "--profile", "tiny", "--out", str(out),
               "--quiet", "--set", f"max_steps={steps}", "--set", "eval_every=0", "--set", "epochs=4"]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), BENCH_PROGRESS="0")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=900)
        summary = json.loads((out / "summary.json").read_text())
        if proc.returncode != 0 or summary.get("status") != "ok":
            raise RuntimeError(f"downpour np={workers} failed: {summary.get('reason')}")
        return summary["ps_staleness_mean"]


def fairness_run(algorithm: str, workers: int, profile: str, steps: int) -> dict:
    """One real run: the server's per-worker served counts and each worker's mean compute / reply wait."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "bench", "run", algorithm, "--np", str(workers), "--profile", profile, "--out", str(out),
               "--quiet", "--set", f"max_steps={steps}", "--set", "eval_every=0", "--set", "epochs=8"]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), BENCH_PROGRESS="0")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=900, check=False)
        summary = json.loads((out / "summary.json").read_text())
        if proc.returncode != 0 or summary.get("status") != "ok":
            raise RuntimeError(f"{algorithm} np={workers} failed: {summary.get('reason')}")
        compute, wait = [], []
        for r in range(workers):
            rows = [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines() if line.strip()]
            committing = [x["comm_s"] for x in rows if x.get("staleness") is not None]
            compute.append(median([x["compute_s"] for x in rows]) if rows else float("nan"))
            wait.append(sum(committing) / len(committing) if committing else float("nan"))
    return {"served": summary["ps_commits_served"], "spread": summary["ps_served_spread_all_active"],
            "total": summary["ps_commits_by_worker"], "compute_s": compute, "reply_wait_s": wait}


def fairness(args) -> int:
    print(f"commits served per worker while all are active ({args.profile}, np={args.np}, {args.steps} steps per worker)")
    for algorithm in args.algorithms.split(","):
        r = fairness_run(algorithm, args.np, args.profile, args.steps)
        spread = "n/a" if r["spread"] is None else f"{r['spread']:.3f}"
        print(f"{algorithm}: served {r['served']} (all commits {r['total']}), spread {spread}", flush=True)
        for w in range(args.np):
            print(f"  rank {w}: served {r['served'][w]:>4}  compute {r['compute_s'][w] * 1e3:7.1f} ms/step (median)  "
                  f"reply wait {r['reply_wait_s'][w] * 1e3:7.1f} ms/commit (mean)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf ps", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="centre sizes (parameters), comma-separated")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    ap.add_argument("--commits", type=int, default=40, help="commits per worker per round")
    ap.add_argument("--repeats", type=int, default=3, help="rounds per job (the median is reported)")
    ap.add_argument("--staleness-steps", type=int, default=120, help="steps per worker of the downpour staleness runs")
    ap.add_argument("--fairness", action="store_true", help="instead: per-worker commits served in real runs (bench/perf/ps.py docstring)")
    ap.add_argument("--algorithms", default="downpour,agn", help="--fairness: algorithms, comma-separated")
    ap.add_argument("--np", type=int, default=4, help="--fairness: workers")
    ap.add_argument("--profile", default="comm-heavy", help="--fairness: training profile")
    ap.add_argument("--steps", type=int, default=40, help="--fairness: max_steps per worker")
    ap.add_argument("--inner", default="", help=argparse.SUPPRESS)
    ap.add_argument("--numel", type=lambda v: [int(x) for x in v.split(",")], default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inner:
        return inner(args)
    if args.fairness:
        return fairness(args)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    torch.set_num_threads(1)
    bw_before = copy_bandwidth(max(sizes))
    rates = {n: server_rates(sizes, n, args.commits, args.repeats) for n in workers}
    bw_after = copy_bandwidth(max(sizes))
    bw = (bw_before + bw_after) / 2  # the machine is shared: the reference is taken around the server jobs
    print(f"memory-copy bandwidth (torch copy_, {max(sizes) * 4 / 1e6:.0f} MB, median of 7): {bw_before / 1e9:.2f} GB/s "
          f"before, {bw_after / 1e9:.2f} GB/s after the server jobs; reference = mean {bw / 1e9:.2f} GB/s")
    print(f"{'params':>10} {'workers':>7} {'mode':>12} {'commits/s':>10} {'payload GB/s':>12} {'/ memcpy':>9} {'copy bound/s':>12}")
    for numel in sizes:
        for n in workers:
            for mode in ("commit", "commit+pull"):
                rate = rates[n][(numel, mode)]
                payload = rate * numel * 4 * (2 if mode == "commit+pull" else 1)
                print(f"{numel:>10} {n:>7} {mode:>12} {rate:>10.1f} {payload / 1e9:>12.2f} {fmt_ratio(payload, bw):>9} "
                      f"{bw / (numel * 4):>12.1f}", flush=True)
    print("downpour mean staleness (profile tiny, n_fetch = n_push = 1) against the expected n - 1:")
    for n in [w for w in workers if w > 1]:
        tau = downpour_staleness(n, args.staleness_steps)
        print(f"  n={n}: mean tau {tau:.3f}  expected {n - 1}  ratio {fmt_ratio(tau, n - 1)}", flush=True)
    return 0


if __name__ == "__main__":
    from bench import run_command

    sys.exit(run_command(main))
