"""Horovod's run-time knobs: what each does, the settings chosen per hardware profile, and a timeline reader.

    python -m bench.perf horovod_knobs                      # the settings table (and which are measured)
    python -m bench.perf horovod_knobs --timeline FILE ...  # where a Horovod timeline's time went
    HOROVOD_CYCLE_TIME=0.1 python -m bench.perf horovod_knobs --latency   # one allreduce's latency vs the cycle

Horovod 0.28.1 reads these environment variables once, in ``hvd.init()`` (horovod/common/operations.cc;
the strings are in ``horovod/torch/mpi_lib_v2*.so``). Each job's processes get them from the launcher
(:func:`bench.launch.execute_many`: the hardware profile's ``horovod:`` settings, ``launch.horovod``, on top of
its environment; recorded in ``system.json`` as ``horovod_settings``).

How a Horovod collective is done (0.28.1, CPU, gloo): the framework thread enqueues the tensor and returns a
handle; Horovod's background thread wakes every ``HOROVOD_CYCLE_TIME`` ms (default 1), and in each cycle all
ranks' background threads agree on which tensors are ready (with the response cache on: one small gloo
allreduce of a bit vector per cycle, *also in idle cycles*; with it off: a gather of requests to rank 0 and a
broadcast of the responses), fuse the ready tensors up to ``HOROVOD_FUSION_THRESHOLD`` bytes (memcpy into
the fusion buffer, one gloo allreduce, memcpy out, scale by 1/size), and mark the handles done. The
framework thread waits for a handle in ``horovod_torch_wait_and_clear``, which *spins* (poll, release the
GIL, ``std::this_thread::yield()``) until the background thread has finished: a waiting rank keeps a core
busy. At size 1, ``hvd.DistributedOptimizer`` registers no gradient hooks and its ``synchronize()`` issues no
allreduce (``_requires_update`` stays empty), so ``sync`` at np=1 pays no collective; the background thread
still wakes every cycle.

The settings of each hardware profile live in its ``horovod:`` block (:class:`bench.config.HorovodSettings`);
``docs/horovod.md`` has the measurements that chose them, to be repeated on the hardware with
``python -m bench.perf overhead --profile P --hardware HW --compare``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..config import HOROVOD_DEFAULTS, HorovodSettings
from ..resolve import hardware_profiles, load_hardware, load_params
from ..typed import build
from .. import BenchError
from . import PerfParser

KNOBS: dict[str, str] = dict(HorovodSettings.ENV)
"""Typed setting (``launch.horovod.<name>``, :class:`bench.config.HorovodSettings`) -> its environment variable."""

# Every variable that changes how Horovod runs a job: cleared for the benchmark's runs so that nothing set in the
# caller's shell leaks into a measurement.
HOROVOD_TUNING_VARS: tuple[str, ...] = (
    "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CACHE_CAPACITY", "HOROVOD_AUTOTUNE",
    "HOROVOD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "HOROVOD_THREAD_AFFINITY",
    "HOROVOD_DISABLE_GROUP_FUSION", "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER",
    "HOROVOD_TORUS_ALLREDUCE", "HOROVOD_TIMELINE", "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_NUM_NCCL_STREAMS",
    "HOROVOD_BATCH_D2D_MEMCOPIES", "HOROVOD_ENABLE_ASYNC_COMPLETION", "HOROVOD_STALL_CHECK_DISABLE",
)


def profile_settings() -> dict[str, HorovodSettings]:
    """Hardware profile -> its Horovod settings (the ``horovod:`` block of ``pipelines/hardware/<id>.yaml``)."""
    return {hw: build(HorovodSettings, load_hardware(hw).get("horovod") or {}, what="horovod setting")
            for hw in hardware_profiles()}


def workload_settings() -> dict[str, dict]:
    """Training profile -> its ``horovod:`` block (params.yaml), for the profiles that have one."""
    return {name: p["horovod"] for name, p in (load_params().get("profiles") or {}).items()
            if isinstance(p, dict) and p.get("horovod")}


def parse_env(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--horovod-env``) as a dict; a setting's name (``cycle_time_ms=0.5``) is mapped
    to its variable."""
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --horovod-env expects KEY=VALUE, got {item!r}")
        key = KNOBS.get(key, key)
        if not key.startswith("HOROVOD_"):
            raise SystemExit(f"error: --horovod-env {key!r} is not a Horovod variable (HOROVOD_*) or a setting "
                             f"({', '.join(KNOBS)})")
        env[key] = value
    return env


# -- timeline ----------------------------------------------------------------------------------------------

def read_timeline(path: str | Path) -> list[dict]:
    """Events of a Horovod timeline (Chrome trace JSON; Horovod may leave the array unterminated); a file that is not
    one is refused naming it."""
    if not Path(path).is_file():
        raise BenchError(f"timeline {str(path)!r}: not a file")
    try:
        text = Path(path).read_text().strip()
        if text.endswith(","):
            text = text[:-1]
        if not text.endswith("]"):
            text += "]"
        events = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BenchError(f"timeline {str(path)!r}: not a Horovod timeline (a JSON array of events): {e}") from None
    if not (isinstance(events, list) and all(isinstance(e, dict) for e in events)):
        raise BenchError(f"timeline {str(path)!r}: not a Horovod timeline (a JSON array of events)")
    return events


def _merge(intervals: list[tuple[float, float]]) -> tuple[float, int]:
    """(covered time, number of disjoint groups) of possibly overlapping intervals."""
    total, count, start, end = 0.0, 0, None, float("-inf")
    for a, b in sorted(intervals):
        if start is None or a > end:
            if start is not None:
                total += end - start
            start, end, count = a, b, count + 1
        else:
            end = max(end, b)
    if start is not None:
        total += end - start
    return total, count


def summarize_timeline(path: str | Path, skip_s: float = 0.0) -> dict:
    """Where the background thread's time went: per activity (NEGOTIATE_ALLREDUCE, MEMCPY_IN_FUSION_BUFFER,
    GLOO_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER, ...) the wall time covered (overlaps across tensors merged, so a
    fused operation counts once), the number of operations, and the background-thread cycles (count, median
    gap, share with work), and the names of the tensors (``allreduce.<parameter>`` for one gradient's,
    ``grouped_allreduce.<first parameter>_<k>of<n>`` for the k-th of a group of n). ``skip_s``: leave out the first
    seconds (start-up, broadcasts)."""
    events = read_timeline(path)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
             and "name" in e.get("args", {})}
    t0 = min((e["ts"] for e in events if "ts" in e), default=0)
    skip_us = skip_s * 1e6
    stacks: dict[int, list[tuple[str, float]]] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    for e in sorted((e for e in events if e.get("ph") in ("B", "E") and "ts" in e), key=lambda e: e["ts"]):
        st = stacks.setdefault(e.get("pid", 0), [])
        if e["ph"] == "B":
            st.append((e["name"], e["ts"]))
        elif st:
            name, ts = st.pop()
            if ts - t0 >= skip_us:
                spans.setdefault(name, []).append((ts, e["ts"]))
    cycles = sorted(e["ts"] for e in events if e.get("ph") == "i" and e.get("name") == "CYCLE_START" and e["ts"] - t0 >= skip_us)
    gaps = sorted(b - a for a, b in zip(cycles, cycles[1:]))
    merged = {name: _merge(iv) for name, iv in spans.items()}
    busy = {name: m[0] / 1e6 for name, m in merged.items()}
    ops = {name: m[1] for name, m in merged.items()}
    work = sorted({a for a, _ in spans.get("ALLREDUCE", [])})
    active = 0
    if cycles and work:
        import bisect

        active = len({bisect.bisect_right(cycles, w) for w in work})
    first = cycles[0] if cycles else t0
    last = max((b for iv in spans.values() for _, b in iv), default=first)
    return {"path": str(path), "tensors": len(names), "tensor_names": sorted(set(names.values())),
            "span_s": (last - first) / 1e6, "busy_s": busy, "ops": ops,
            "cycles": len(cycles), "cycle_gap_median_ms": gaps[len(gaps) // 2] / 1e3 if gaps else None,
            "cycle_gap_p90_ms": gaps[int(len(gaps) * 0.9)] / 1e3 if gaps else None, "cycles_with_allreduce": active}


def format_timeline(s: dict) -> str:
    n = max(s["ops"].get("ALLREDUCE", 0), 1)
    lines = [f"{s['path']}: {s['span_s']:.2f} s, {s['tensors']} tensors, {s['ops'].get('ALLREDUCE', 0)} fused allreduces, "
             f"{s['cycles']} cycles (median gap {s['cycle_gap_median_ms'] or 0:.2f} ms, p90 {s['cycle_gap_p90_ms'] or 0:.2f} ms; "
             f"{s['cycles_with_allreduce']} with an allreduce)"]
    for name in ("NEGOTIATE_ALLREDUCE", "ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER", "GLOO_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"):
        if name in s["busy_s"]:
            lines.append(f"  {name:26s} {1e3 * s['busy_s'][name]:9.1f} ms total  {1e3 * s['busy_s'][name] / n:8.3f} ms per allreduce"
                         f"  ({s['ops'][name]} ops)")
    for name in sorted(set(s["busy_s"]) - {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER", "GLOO_ALLREDUCE",
                                           "MEMCPY_OUT_FUSION_BUFFER"}):
        lines.append(f"  {name:26s} {1e3 * s['busy_s'][name]:9.1f} ms total  ({s['ops'][name]} ops)")
    return "\n".join(lines)


def latency_probe(repeats: int = 300, numel: int = 1000, idle_s: float = 3.0) -> dict[str, float]:
    """Median ms of one ``allreduce_async_`` + wait, back to back, in this process's Horovod (size 1, or the job's
    size under horovodrun): waited in ``hvd.synchronize`` (Horovod's wait) and in a poll + 50 us sleep loop. The
    tensor is enqueued just after a cycle ran, so the figure is about one ``HOROVOD_CYCLE_TIME`` plus the
    operation itself: the fixed cost a step with one collective pays. ``idle_cores``: CPU time of this process
    over ``idle_s`` seconds with nothing to communicate, per second (the cycles' own cost). Under horovodrun the
    figures are averaged over the ranks."""
    import statistics
    import time

    import horovod.torch as hvd
    import torch

    hvd.init()
    t = torch.zeros(numel)
    hvd.synchronize(hvd.allreduce_async_(t, name="probe.warm"))
    c0, w0 = time.process_time(), time.perf_counter()
    time.sleep(idle_s)  # nothing enqueued: what the background thread's cycles cost by themselves
    out = {"idle_cores": (time.process_time() - c0) / (time.perf_counter() - w0)}
    for mode in ("synchronize", "poll+sleep"):
        ds = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            h = hvd.allreduce_async_(t, name=f"probe.{mode}")
            if mode == "poll+sleep":
                while not hvd.poll(h):
                    time.sleep(50e-6)
            hvd.synchronize(h)
            ds.append(time.perf_counter() - t0)
        out[mode] = 1e3 * statistics.median(ds)
    if hvd.size() > 1:
        keys = sorted(out)
        avg = hvd.allreduce(torch.tensor([out[k] for k in keys], dtype=torch.float64), name="probe.result")
        out = dict(zip(keys, avg.tolist()))
    out["size"] = hvd.size()
    out["rank"] = hvd.rank()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = PerfParser(prog="python -m bench.perf horovod_knobs", description=__doc__.splitlines()[0])
    ap.add_argument("--timeline", nargs="+", default=[], metavar="FILE", help="summarize Horovod timeline files")
    ap.add_argument("--skip", type=float, default=0.0, metavar="S", help="leave out the first S seconds of each timeline")
    ap.add_argument("--latency", action="store_true",
                    help="median latency of one allreduce + wait in this process (HOROVOD_CYCLE_TIME=... to compare)")
    args = ap.parse_args(argv)
    if args.latency:
        import os

        r = latency_probe()
        if r["rank"] != 0:
            return 0
        print(f"HOROVOD_CYCLE_TIME={os.environ.get('HOROVOD_CYCLE_TIME', '(unset: 1)')} size {r['size']}: one allreduce + "
              f"wait {r['synchronize']:.3f} ms (hvd.synchronize), {r['poll+sleep']:.3f} ms (poll + 50 us sleeps); "
              f"idle: {r['idle_cores']:.3f} cores per rank")
        return 0
    if args.timeline:
        summaries = [summarize_timeline(f, args.skip) for f in args.timeline]  # every file read before a line
        for summary in summaries:
            print(format_timeline(summary))
        return 0
    print("Horovod settings per hardware profile (pipelines/hardware/<id>.yaml, horovod:; docs/horovod.md has the "
          "measurements)")
    for hw, st in profile_settings().items():
        own = {k: v for k, v in dataclasses.asdict(st).items() if v is not None and k not in st.ENV}
        print(f"{hw:12s} " + (" ".join(f"{k}={v}" for k, v in [*st.env().items(), *own.items()]) or "Horovod's defaults"))
    print("per workload, on top of the hardware profile's (params.yaml profiles: <name>: horovod:; --set wins over both)")
    for name, block in workload_settings().items():
        print(f"{name:12s} " + " ".join(f"{k}={v}" for k, v in block.items()))
    print("Horovod's defaults: " + ", ".join(f"{k}={v!r}" for k, v in HOROVOD_DEFAULTS.items()))
    return 0
