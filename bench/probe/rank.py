"""The ranks of ``bench probe``'s one horovodrun job: what each host computes, what each link carries.

``python -m bench.probe.rank --config CONFIG.json [--steps K] [--pings P] [--stream-s T] [--sizes B,...]`` runs as
one rank a host (launched by :mod:`bench.probe.cli`, never by hand). Every rank, in turn and between barriers so that
no measurement shares the machine with another:

1. **CPU share**: a busy loop of one second of wall time; the CPU time the process got over that second is the share of
   a core its host gives one rank (an emulated host's quota, a shared node's contention).
2. **Compute**: the run's workload (CONFIG.json's model, batch and data, as a worker builds them) trained alone for
   ``--steps`` steps after three of warm-up: forward, loss, backward and the optimizer's step, each step timed in CPU
   seconds of its thread (the step at full speed, whatever a quota's throttling adds) and in wall seconds (median and
   mean: the host's periods of throttling included).
3. **Links, pair by pair** (every pair i < j, one pair at a time): ``--pings`` one-byte TCP round trips i -> j -> i
   after three of warm-up (:func:`bench.cluster.stream.ping`, user space to user space), then one TCP stream i -> j of
   ``--stream-s`` counted seconds after a warm-up of max(1 s, 20 round trips) that is not counted (slow start): the
   goodput the receiver saw (:func:`bench.cluster.stream.recv`) and the sender's CPU share while it sent (a stream
   that used the sender's whole share is CPU-bound: the figure is the host's, not the link's).
4. **Collectives** the model uses, at the job's n (:func:`bench.perf.collectives.measure_cell`): Horovod's allreduce
   and the point-to-point transport's message at ``--sizes`` (the launcher passes sizes around the workload's
   gradient).

Each result is one ``PROBE {json}`` line (the launcher's :func:`bench.cluster.probe.run_job` format) and a ``PROGRESS``
line on stderr, which the launcher shows as it comes.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time

from ..cluster.probe import emit

PORT = 5231
"""TCP port of a pair's echo and stream (the emulated hosts' own namespaces: nothing else listens there)."""


def progress(text: str) -> None:
    print(f"PROGRESS {text}", file=sys.stderr, flush=True)


def cpu_share(seconds: float = 1.0) -> float:
    """CPU seconds a busy loop gets over ``seconds`` of wall time (one thread)."""
    c0, t0 = time.process_time(), time.perf_counter()
    x = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(2000):
            x += 1
    return (time.process_time() - c0) / (time.perf_counter() - t0)


def step_times(train, steps: int) -> tuple[list[float], list[float], int]:
    """Wall seconds and CPU seconds (this thread's) of each of ``steps`` training steps of the workload alone (after
    three of warm-up), and the model's parameter bytes. A step's CPU seconds are its cost at full speed whatever a
    quota's throttling added to its wall time."""
    import torch

    from ..data import Shard, load_dataset
    from ..models import build_model, make_optimizer

    ds = load_dataset(train)
    model = build_model(train, ds.input_shape, ds.num_classes)
    opt = make_optimizer(train, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    shard = Shard(ds, 1, 0, train.batch_size, train.seed)
    times, cpu, epoch = [], [], 0
    while len(times) < steps + 3:
        for x, y in shard.batches(epoch):
            t0, c0 = time.perf_counter(), time.thread_time()
            for p in model.parameters():
                p.grad = None
            loss_fn(model(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
            if len(times) >= steps + 3:
                break
        epoch += 1
    return times[3:], cpu[3:], sum(p.numel() * p.element_size() for p in model.parameters())


def _serve(target, *args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def body():
        try:
            out["result"] = target(*args)
        except Exception as e:  # reported by the caller after the join
            out["error"] = f"{type(e).__name__}: {e}"
    th = threading.Thread(target=body, daemon=True)
    th.start()
    return th, out


def _connect_retry(fn, *args, wait_s: float = 10.0):
    """``fn(*args)`` retried while the other end is not listening yet (its server thread starts with the barrier)."""
    end = time.perf_counter() + wait_s
    while True:
        try:
            return fn(*args)
        except ConnectionRefusedError:
            if time.perf_counter() > end:
                raise
            time.sleep(0.02)


def pair(comm, i: int, j: int, addrs: list[str], pings: int, stream_s: float) -> dict | None:
    """Round trips and goodput of the pair i -> j (both ranks call it; the record on rank i)."""
    import torch.distributed as dist

    from ..cluster import stream

    rec = None
    if comm.rank == j:
        th, out = _serve(stream.echo, addrs[j], PORT, 60)
    dist.barrier()  # comm: the echo end listens before the pings
    if comm.rank == i:
        rtts = _connect_retry(stream.ping, addrs[j], PORT, pings + 3)[3:]
        rec = {"kind": "pair", "src": i, "dst": j, "rtts_s": rtts, "rtt_s_median": statistics.median(rtts)}
    if comm.rank == j:
        th.join(60)
    rtt: list = [None] * comm.size
    dist.all_gather_object(rtt, rec["rtt_s_median"] if rec else None)  # comm: the pair's round trip to both ends
    warm = max(1.0, 20 * rtt[i])  # slow start's round trips, not counted
    if comm.rank == j:
        th, out = _serve(stream.recv, addrs[j], PORT + 1, 60, warm)
    dist.barrier()  # comm: the receiving end listens before the stream
    if comm.rank == i:
        c0, t0 = time.process_time(), time.perf_counter()
        _connect_retry(stream.send, addrs[j], PORT + 1, warm + stream_s, addrs[i])
        rec["sender_cpu_s_per_s"] = (time.process_time() - c0) / (time.perf_counter() - t0)
        rec["warmup_s"] = warm
    if comm.rank == j:
        th.join(warm + stream_s + 60)
        if "error" in out or "result" not in out:
            raise RuntimeError(f"stream {i} -> {j}: {out.get('error', 'no answer within the time')}")
        return {"recv": out["result"]}
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probe.rank")
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--pings", type=int, default=30)
    ap.add_argument("--stream-s", type=float, default=1.5)
    ap.add_argument("--sizes", default="")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    from ..comm import Comm
    from ..perf.collectives import measure_cell
    from ..runconfig import load_config

    cfg = load_config(args.config)
    torch.set_num_threads(cfg.train.threads)
    comm = Comm(network_interface=os.environ.get("HOROVOD_GLOO_IFACE", ""), p2p_backend="gloo")
    comm.init_torch_distributed()
    p2p = comm.p2p()
    rank, n = comm.rank, comm.size
    iface = os.environ.get("HOROVOD_GLOO_IFACE", "")
    addr = _address(iface)
    addrs: list = [None] * n
    dist.all_gather_object(addrs, addr)  # comm: every rank's interface address
    progress(f"rank {rank}: up on {addr}")

    dist.barrier()  # comm: every host measures its CPU at once (each its own)
    share = cpu_share()
    times, cpu, nbytes = step_times(cfg.train, args.steps)
    emit({"kind": "host", "rank": rank, "address": addr, "hostname": socket.gethostname(), "cpu_share": share,
          "step_s": times, "step_s_median": statistics.median(times), "step_s_mean": statistics.fmean(times),
          "step_cpu_s_median": statistics.median(cpu),
          "model_bytes": nbytes, "workload": f"{cfg.train.model}@{cfg.train.batch_size}"})
    progress(f"rank {rank}: cpu share {share:.3f}, step {1e3 * statistics.median(cpu):.2f} ms of CPU (median), "
             f"{1e3 * statistics.fmean(times):.2f} ms of wall time (mean)")

    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for k, (i, j) in enumerate(pairs):
        rec = pair(comm, i, j, addrs, args.pings, args.stream_s)
        got: list = [None] * n
        dist.all_gather_object(got, rec)  # comm: the pair's record to every rank (rank 0 prints it)
        if rank == 0:
            p = {**got[i], "goodput_bps": got[j]["recv"]["bps"], "counted_s": got[j]["recv"]["seconds"]}
            emit(p)
            progress(f"pair {k + 1}/{len(pairs)} {i}->{j}: round trip {1e3 * p['rtt_s_median']:.2f} ms")

    sizes = [int(s) for s in args.sizes.split(",") if s]
    for size in sizes:
        for op in ("allreduce_hvd", "sendrecv"):
            rec = measure_cell(comm, p2p, op, size, 3, 4.0)
            if rank == 0:
                emit({"kind": "collective", **rec})
                progress(f"{op} {size} B: {1e3 * rec['median_s']:.2f} ms")
    comm.shutdown()
    return 0


def _address(iface: str) -> str:
    from ..cluster.probe import _if_address

    return _if_address(iface) if iface else socket.gethostbyname(socket.gethostname())


if __name__ == "__main__":
    sys.exit(main())
