"""Collectives on the emulated cluster: what each operation costs over n hosts, a link rate and a one-way delay.

    python -m bench.perf collectives [--rates 100mbit,1gbit] [--delays 0,1ms,5ms,25ms] [--np 2,3,4]
        [--sizes 4K,64K,1M,16M,64M] [--ops allreduce_hvd,allreduce_gloo,broadcast,allgather,sendrecv]
        [--repeats 3] [--budget-s 6] [--jsonl FILE]

For each link rate and delay (one emulated cluster of max(--np) hosts, reshaped in place between them) and each n,
one ``horovodrun`` job over n hosts (one rank a host) times, for each size:

- ``allreduce_hvd``: Horovod's allreduce (``Comm.allreduce_``: its background loop's cycle, the negotiation, then
  gloo's ring);
- ``allreduce_gloo``: ``torch.distributed.all_reduce`` on a gloo group: gloo's ring alone, no Horovod;
- ``broadcast``: Horovod's broadcast from rank 0 (``Comm.broadcast_parameters``);
- ``allgather``: Horovod's allgather, each rank giving size / n bytes (the result is ``size`` bytes);
- ``sendrecv``: the point-to-point transport (``Comm.p2p``: torch.distributed gloo send/recv, the parameter server's
  and gossip's), a ping-pong of ``size`` bytes between ranks 0 and 1: one message's time is half a round.

Horovod's operations (:data:`HOROVOD_WAITED`) are waited for as the runs on the emulated cluster wait (the ``emu``
profile's ``horovod.wait_sleep_us``, recorded in the cell; before 2026-11-30 10:30 UTC the allreduce, and before
11:40 UTC the broadcast and allgather, in Horovod's spinning wait, which the cells published before were taken with).

A measurement is ``iters`` operations back to back after a barrier and one untimed operation (:data:`LEAD_OPS`;
iters chosen so that it takes about 0.3 s, from a second warm-up operation: the first of a name is Horovod's
slowest), the slowest rank's elapsed time over iters; ``--repeats`` of them (fewer when the cell would pass
``--budget-s``), median reported. Every cell is one JSON line (``--jsonl``) and one table row: the
median seconds, the repeats, and the algorithmic bandwidth. Any cluster that is up when this starts is replaced,
and nothing is left up at the end. :mod:`bench.predict.model` fits its per-operation terms on these lines
(``docs/results/collectives/``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from .. import BenchError

OPS = ("allreduce_hvd", "allreduce_gloo", "broadcast", "allgather", "sendrecv")
HOROVOD_WAITED = ("allreduce_hvd", "broadcast", "allgather")
"""The operations Horovod carries, which ``Comm`` waits for by sleeping polls where ``wait_sleep_us`` is set."""
SIZE_FORM = "a byte count with an optional unit K, M (powers of 2), e.g. 4K, 64K, 1M, 64M"
_SIZE = re.compile(r"^\s*(\d+)\s*([KM]?)B?\s*$", re.IGNORECASE)
MAX_SIZE = 256 << 20
TARGET_S = 0.3
"""Seconds one measurement of a cell aims at (iters operations back to back)."""


def parse_size(text: str) -> int:
    m = _SIZE.match(text)
    value = int(m.group(1)) << {"": 0, "K": 10, "M": 20}[m.group(2).upper()] if m else 0
    if not 4 <= value <= MAX_SIZE:
        raise BenchError(f"bad size {text!r}: give {SIZE_FORM}, from 4 bytes to 256M")
    return value


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv):
    """The parsed options, every value checked (BenchError naming the bad one and the valid choices)."""
    from ..config import parse_delay, parse_rate

    ap = argparse.ArgumentParser(prog="python -m bench.perf collectives", description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100mbit,1gbit", help="link rates, comma-separated (unshaped: no shaper)")
    ap.add_argument("--delays", default="0,1ms,5ms,25ms", help="one-way delays, comma-separated")
    ap.add_argument("--np", default="2,3,4", help="host counts (one rank a host), comma-separated")
    ap.add_argument("--sizes", default="4K,64K,1M,16M,64M", help="message sizes, comma-separated")
    ap.add_argument("--ops", default=",".join(OPS), help="operations, comma-separated: " + ", ".join(OPS))
    ap.add_argument("--repeats", default="3", help="measurements per cell (median reported)")
    ap.add_argument("--budget-s", default="6", help="seconds a cell may take; fewer repeats past it (at least one)")
    ap.add_argument("--jsonl", help="append every cell as a JSON line to this file")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # one job's ranks, under horovodrun
    args = ap.parse_args(argv)
    args.rates = ["" if r.lower() == "unshaped" else r.lower() for r in _csv(args.rates)]
    for r in args.rates:
        parse_rate(r)
    args.delays = _csv(args.delays)
    for d in args.delays:
        parse_delay(d)
    try:
        args.np = [int(x) for x in _csv(args.np)]
    except ValueError:
        args.np = [0]
    if not args.np or any(not 2 <= n <= 8 for n in args.np):
        raise BenchError(f"bad --np {','.join(map(str, args.np))!r}: give host counts from 2 to 8, e.g. 2,3,4")
    args.sizes = [parse_size(s) for s in _csv(args.sizes)]
    args.ops = _csv(args.ops)
    bad = [o for o in args.ops if o not in OPS]
    if bad or not args.ops:
        raise BenchError(f"bad --ops {','.join(bad) or '(none)'!r}: valid: {', '.join(OPS)}")
    for name in ("repeats", "budget_s"):
        value = getattr(args, name)
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not (number >= 1 if name == "repeats" else number > 0) or number != number or number > 1e4:
            raise BenchError(f"bad --{name.replace('_', '-')} {value!r}: give a number from 1 to 10000"
                             if name == "repeats" else f"bad --budget-s {value!r}: give seconds above 0")
        setattr(args, name, int(number) if name == "repeats" else number)
    if not args.inner and not args.rates and not args.delays:
        raise BenchError("give at least one rate or delay")
    if not args.inner and args.jsonl is not None:
        from ..layout import output_path

        output_path(args.jsonl, "--jsonl", folder=False)
    return args


# -- one job's ranks -------------------------------------------------------------------------------------------------
LEAD_OPS = 1
"""Operations each measurement runs after its barrier before its timer starts. The first operation after a barrier
is not one of a back-to-back series: Horovod's loop has been running empty negotiations through the barrier, and
the operation waits for whatever part of one is left, a phase the barrier sets (the same in every repeat). At 25 ms
and n = 3 a Horovod allgather of 4 KiB took 15.1 one-way delays timed from the barrier, 14.2 timed from the end
of its first operation (2026-11-30, docs/results/collectives/README.md). Cells record it as ``lead_ops``; those
published before that day's 18:30 UTC have none (0)."""


def time_op(comm, p2p, op: str, buf, recv, iters: int, lead: int = LEAD_OPS) -> float:
    """Seconds one ``op`` takes over the job's ranks: ``iters`` of them back to back after a barrier and ``lead``
    (:data:`LEAD_OPS`) untimed ones, the slowest rank's elapsed time over iters (``sendrecv``: half a ping-pong
    between ranks 0 and 1). Every rank calls it."""
    import torch
    import torch.distributed as dist

    rank = comm.rank
    dist.barrier()  # comm: start every rank's operations together
    for i in range(lead + iters):
        if i == lead:  # the timer starts once the operations run back to back (LEAD_OPS)
            t0 = time.perf_counter()
        if op == "allreduce_hvd":
            comm.allreduce_(buf, name=f"coll.{buf.numel()}", average=False)  # comm: Horovod's allreduce over all ranks
        elif op == "allreduce_gloo":
            dist.all_reduce(buf)  # comm: gloo's ring allreduce alone (torch.distributed) over all ranks
        elif op == "broadcast":
            comm.broadcast_parameters({f"coll.{buf.numel()}": buf}, root=0)  # comm: Horovod's broadcast from rank 0
        elif op == "allgather":
            comm.allgather(buf, name=f"coll.gather.{buf.numel()}")  # comm: Horovod's allgather of every rank's slice
        elif rank == 0:
            p2p.send(buf, 1)  # comm: ping to rank 1
            p2p.recv(recv, 1)  # comm: pong from rank 1
        elif rank == 1:
            p2p.recv(recv, 0)  # comm: ping from rank 0
            p2p.send(buf, 0)  # comm: pong back to rank 0
    took = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # comm: the slowest rank's time
    return float(took) / (2 if op == "sendrecv" else 1)


def measure_cell(comm, p2p, op: str, size: int, repeats: int, budget_s: float) -> dict:
    """One cell: a warm-up operation, then ``repeats`` measurements (fewer past ``budget_s``) of about
    :data:`TARGET_S` each; the record rank 0 prints."""
    import torch

    numel = max(1, (size // comm.size if op == "allgather" else size) // 4)
    buf, recv = torch.ones(numel), torch.empty(numel)
    # the first operation of a name is not the steady one: Horovod negotiates it without its response cache and
    # allocates its buffers (up to ~0.3 s, which made iters 1 where one operation takes a millisecond)
    first = time_op(comm, p2p, op, buf, recv, 1, lead=0)
    warm = time_op(comm, p2p, op, buf, recv, 1)
    iters = max(1, min(50, round(TARGET_S / max(warm, 1e-6))))
    repeats = max(1, min(repeats, int(budget_s / max(warm * iters, 1e-6))))
    times = [time_op(comm, p2p, op, buf, recv, iters) for _ in range(repeats)]
    return {"op": op, "bytes": size, "np": comm.size, "iters": iters, "times_s": times,
            "median_s": statistics.median(times), "warmup_s": warm, "first_s": first, "lead_ops": LEAD_OPS}


def _inner(args) -> int:
    import torch

    from ..cluster.probe import emit
    from ..comm import Comm
    from ..resolve import load_hardware

    torch.set_num_threads(1)
    # a blocking Horovod operation waits as the runs on the emulated cluster wait for theirs (the emu profile's
    # horovod.wait_sleep_us: sleeping polls); Horovod's own spinning wait, three ranks on two cores, starved the
    # background threads and stalled small operations 5-20 x (2026-11-30: 4 KiB at n = 3, 58.9 ms against 3.2)
    wait_sleep_us = (load_hardware("emu").get("horovod") or {}).get("wait_sleep_us")
    comm = Comm(network_interface=os.environ.get("HOROVOD_GLOO_IFACE", ""), p2p_backend="gloo",
                wait_sleep_us=wait_sleep_us)
    comm.init_torch_distributed()
    p2p = comm.p2p()
    for size in args.sizes:
        for op in args.ops:
            rec = measure_cell(comm, p2p, op, size, args.repeats, args.budget_s)
            if op in HOROVOD_WAITED:
                rec["wait_sleep_us"] = wait_sleep_us  # how its ranks waited (None: Horovod's spinning wait)
            if comm.rank == 0:
                emit(rec)
    comm.shutdown()
    return 0


# -- the launcher ----------------------------------------------------------------------------------------------------
def _row(rec: dict) -> str:
    return (f"| {rec['link'] or 'unshaped'} | {rec['delay'] or '0'} | {rec['np']} | {rec['op']} | {rec['bytes']} "
            f"| {rec['median_s'] * 1e3:.3f} | {len(rec['times_s'])}x{rec['iters']} "
            f"| {rec['bytes'] * 8 / rec['median_s'] / 1e6:.1f} |")


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if not args.inner:
            from ..cluster import check_supported

            check_supported()
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.inner:
        return _inner(args)
    from ..cluster import Spec, down, ensure
    from ..cluster.probe import run_job
    from ..system import git_record

    started = time.time()
    print(f"collectives on {max(args.np)} emulated hosts, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}, commit {str(git_record().get('commit', ''))[:12]}; cells: median over repeats of the slowest rank's "
          f"seconds an operation (iters back to back)")
    print("| link | delay | n | op | bytes | median ms | repeats x iters | algbw Mbit/s |")
    print("|---|---|---|---|---|---|---|---|")
    inner = ["--inner", "--sizes", ",".join(map(str, args.sizes)), "--ops", ",".join(args.ops),
             "--repeats", str(args.repeats), "--budget-s", str(args.budget_s)]
    out = Path(args.jsonl) if args.jsonl else None
    try:
        for link in args.rates or [""]:
            for delay in args.delays or ["0"]:
                st = ensure(Spec(hosts=max(args.np), link=link, delay="" if delay in ("0", "") else delay))
                for n in args.np:
                    load = os.getloadavg()[0]
                    records, _ = run_job(st, n, inner, timeout=3600, module="bench.perf.collectives")
                    for rec in records:
                        rec.update(link=link, delay=delay, load=load)
                        print(_row(rec), flush=True)
                        if out:
                            with out.open("a") as f:
                                f.write(json.dumps(rec) + "\n")
    finally:
        down()
    print(f"{time.time() - started:.0f} s; load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
