"""The sleeping wait's cost: host CPU a waiting rank's training thread spends a wake-up (the model's ``wake_s``).

    python -m bench.perf wakeup [--np 2] [--waits-ms 0,1,2,5,10,20,50,100] [--repeats 15] [--wait-sleep-us 250]
                                [--emulated 0.36] [--json FILE]

On a host whose CPU is rationed (the emulated cluster's 0.36 of a core), a rank that waits for a collective is not
idle: the suite's sleeping wait (``bench.comm.Comm.wait_sleeping``, the hardware profiles' ``horovod.wait_sleep_us``)
wakes up every few hundred microseconds to poll the operation, and every wake-up (the timer, the switch back in, the
poll through Horovod's handle table under the GIL) is CPU taken from the quota the next step computes with. The runs'
own thread records show it: 260 wake-ups a step and 6 ms of CPU above the compute in sync at 1 ms one way, 2,700 and
54 ms at 25 ms (docs/results/predict/NOTES.md).

One horovodrun job of ``--np`` ranks, on this machine as it is or (``--emulated SHARE``, root) one rank on each of
``--np`` emulated hosts of SHARE of a core (the condition the model applies it in: a quota'd host). Each round, rank 0 sleeps W ms and then starts its allreduce of
a small tensor; the other ranks start theirs at once and wait for it as the suite's collectives do (``Comm.synchronize``
with ``wait_sleep_us``), each recording its training thread's CPU over the wait (``time.thread_time``) and the polls
the wait made (their instants, recorded around ``Comm.poll``). The rounds go through the waits in an interleaved order, ``--repeats``
times. Printed per W: the median wall of the wait, its polls, the median time between two of its polls (a sleep
with its overshoot: a loaded machine oversleeps, and the wait polls less) and its CPU; then the least-squares line
CPU = a + wake_s x polls over every round (wake_s: CPU a wake-up costs; a: what a wait costs besides, its start and
its end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .. import BenchError
from ..cluster.spec import MIN_SHARE
from . import PerfParser, table

DEFAULT_WAITS_MS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def _inner(waits_ms: list[float], repeats: int, wait_sleep_us: float) -> int:
    """Runs under horovodrun: the rounds; every rank but 0 prints its records (``PROBE`` lines, as
    :func:`bench.cluster.probe.run_job` reads them)."""
    import torch

    from ..cluster.probe import emit
    from ..comm import Comm

    comm = Comm(wait_sleep_us=wait_sleep_us)
    times: list[float] = []  # the instants of the wait's polls
    plain_poll = comm.poll

    def counted(handle) -> bool:
        times.append(time.perf_counter())
        return plain_poll(handle)

    comm.poll = counted
    buf = torch.zeros(16)
    records = []
    order = [w for _ in range(repeats) for w in waits_ms]
    for i, w in enumerate([waits_ms[0]] * 3 + order):  # three warm-up rounds (the operation's first negotiations)
        comm.barrier()  # comm: every rank starts the round together
        if comm.rank == 0:
            time.sleep(w / 1e3)
            comm.allreduce_(buf, name="perf.wakeup")  # comm: the late rank's allreduce, which the others wait for
            continue
        times.clear()
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        comm.allreduce_(buf, name="perf.wakeup")  # comm: start the allreduce and wait for it by sleeping polls
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
        if i >= 3:
            gaps = [b - a for a, b in zip(times, times[1:])]
            records.append({"wait_ms": w, "wall_s": wall, "cpu_s": cpu, "polls": len(times), "rank": comm.rank,
                            "poll_gap_s": statistics.median(gaps) if gaps else None})
    for rec in records:
        emit(rec)
    comm.shutdown()
    return 0


def fit(records: list[dict]) -> dict:
    """CPU = a + wake_s x polls by least squares over every round of every waiting rank."""
    import numpy as np

    polls = np.array([r["polls"] for r in records], dtype=float)
    cpu = np.array([r["cpu_s"] for r in records], dtype=float)
    if len(set(polls)) < 2:
        raise BenchError("the rounds' waits all made the same number of polls: give waits of different lengths")
    slope, intercept = np.polyfit(polls, cpu, 1)
    resid = cpu - (intercept + slope * polls)
    return {"wake_s": float(slope), "a_s": float(intercept), "rounds": len(records),
            "residual_median_abs_s": float(np.median(np.abs(resid)))}


def summary(records: list[dict], waits_ms: list[float]) -> list[dict]:
    rows = []
    for w in waits_ms:
        rs = [r for r in records if r["wait_ms"] == w]
        rows.append({"wait_ms": w, "rounds": len(rs), "wall_ms": 1e3 * statistics.median(r["wall_s"] for r in rs),
                     "polls": statistics.median(r["polls"] for r in rs),
                     "cpu_ms": 1e3 * statistics.median(r["cpu_s"] for r in rs),
                     "poll_gap_us": _median_gap_us(rs)})
    return rows


def _median_gap_us(records: list[dict]) -> float | None:
    """Median over rounds of each round's median time between two polls (what a sleep took, its overshoot
    included: on a loaded machine a 250 us sleep takes longer, and the wait makes fewer polls)."""
    gaps = [r["poll_gap_s"] for r in records if r.get("poll_gap_s") is not None]
    return 1e6 * statistics.median(gaps) if gaps else None


def _waits(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if len(out) < 2 or any(not 0 <= x <= 10_000 for x in out):
        raise BenchError(f"--waits-ms {text!r}: give at least two waits in ms, each in [0, 10000] (e.g. 0,10,50)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf wakeup", description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--waits-ms", default=",".join(f"{w:g}" for w in DEFAULT_WAITS_MS))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--wait-sleep-us", type=float, default=250.0)
    ap.add_argument("--json", metavar="FILE", help="write every round and the fit as JSON")
    ap.add_argument("--emulated", type=float, metavar="SHARE", default=0.0,
                    help="run each rank on an emulated host of SHARE of a core (root; 0: on this machine as it is)")
    ap.add_argument("--inner", help=argparse.SUPPRESS)  # set when running under horovodrun
    args = ap.parse_args(argv)
    waits = _waits(args.waits_ms)
    if not 2 <= args.np <= 64:
        raise BenchError(f"--np must be in [2, 64], got {args.np}")
    if not 1 <= args.repeats <= 10_000:
        raise BenchError(f"--repeats must be in [1, 10000], got {args.repeats}")
    if not 1 <= args.wait_sleep_us <= 1e6:
        raise BenchError(f"--wait-sleep-us must be in [1, 1000000], got {args.wait_sleep_us:g}")
    if args.emulated and not MIN_SHARE <= args.emulated <= 1:
        raise BenchError(f"--emulated must be a share of a core in [{MIN_SHARE:g}, 1], got {args.emulated:g}")
    inner = ["--inner", "1", "--np", str(args.np), "--waits-ms", args.waits_ms, "--repeats", str(args.repeats),
             "--wait-sleep-us", str(args.wait_sleep_us)]
    if args.inner:
        return _inner(waits, args.repeats, args.wait_sleep_us)

    from ..cluster.probe import read_records
    from ..system import cpu_model, horovodrun_launch

    where = (f"{args.np} emulated hosts of {args.emulated:g} of a core" if args.emulated
             else "this machine as it is")
    print(f"np {args.np} on {where} ({cpu_model()}); waits {','.join(f'{w:g}' for w in waits)} ms, "
          f"{args.repeats} rounds each, polls sleeping up to {args.wait_sleep_us:g} us; one horovodrun job", flush=True)
    if args.emulated:
        from ..cluster import Spec, check_supported, down, ensure
        from ..cluster.probe import run_job

        check_supported()
        try:
            st = ensure(Spec(hosts=args.np, cpu={h: args.emulated for h in range(args.np)}))
            records, _ = run_job(st, args.np, inner, timeout=1800, module="bench.perf.wakeup")
        finally:
            down()
    else:
        cmd = [*horovodrun_launch(), "-np", str(args.np), "-H", f"localhost:{args.np}", "--gloo", sys.executable, "-m",
               "bench.perf.wakeup", *inner]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
            raise BenchError(f"the benchmark job failed (rc {proc.returncode})")
        records = read_records(proc.stdout)
    if not records:
        raise BenchError("the benchmark job printed no round")
    rows = summary(records, waits)
    result = fit(records)
    print("\n".join(table([("wait ms", ">8s"), ("rounds", ">7d"), ("wall ms", ">9.2f"), ("polls", ">7.0f"),
                           ("poll gap us", ">12s"), ("CPU ms", ">8.3f"), ("CPU/poll us", ">12s")],
                          [[f"{r['wait_ms']:g}", r["rounds"], r["wall_ms"], r["polls"],
                            f"{r['poll_gap_us']:.0f}" if r["poll_gap_us"] is not None else "-", r["cpu_ms"],
                            f"{1e3 * r['cpu_ms'] / r['polls']:.1f}" if r["polls"] else "-"] for r in rows])))
    print(f"\nCPU = a + wake_s x polls over {result['rounds']} rounds: wake_s = {1e6 * result['wake_s']:.1f} us a "
          f"wake-up, a = {1e6 * result['a_s']:.0f} us a wait (median |residual| "
          f"{1e6 * result['residual_median_abs_s']:.0f} us)")
    if args.json:
        from ..system import git_record

        git = git_record()
        Path(args.json).write_text(json.dumps({
            "command": "python -m bench.perf wakeup " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": cpu_model(), "commit": git.get("commit"), "dirty": git.get("dirty"),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "np": args.np,
            "wait_sleep_us": args.wait_sleep_us, "emulated_share": args.emulated or None, "summary": rows, "fit": result, "rounds": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
