"""Harness and Horovod overhead: ``sync`` at np=1 against a plain PyTorch loop, and ``sync`` against ``ddp`` at np=2 (``--np``),
each beside plain Horovod and plain DDP loops in the same run.

    python -m bench.perf overhead [--profile laptop] [--set key=value ...] [--repeats 3]
                                  [--hardware HW] [--set horovod.KEY=VALUE ...] [--horovod-env KEY=VALUE ...] [--compare]
                                  [--algorithms delayed,layerwise,...] [--skip-plain] [--timeline DIR] [--json FILE]

The plain loop runs in this process with the same model, data, batch size and optimizer, and is timed the way
the suite's throughput is (:mod:`bench.metrics.throughput`): samples of the steps after the warm-up divided by
the wall time from the end of the last warm-up step to the end of the last step, so it pays for its own data
iteration as the worker does (the older per-step clock, which leaves the data iteration out, is printed beside
it). The suite's runs go through the real CLI path (``horovodrun``, the worker loop, records on disk). Between
the two, ``harness np=1`` is the worker loop around a plain local step with no communication at all
(``localsgd`` at np=1 with λ larger than the run): the suite's own per-step cost (the record of every step,
loss and mini-batch accuracy, progress, Horovod initialised but idle), which every Horovod-based algorithm pays
alike. So sync(np=1)/plain = harness/plain (the measurement) x sync(np=1)/harness (``sync``'s step and Horovod).

At np=2 the plain distributed loops (:mod:`bench.perf.plain`, under horovodrun with the same settings; ``--skip-plain``
leaves them out) separate what the suite adds from what the runtimes cost: ``horovod plain`` is Horovod's
DistributedOptimizer loop at the settings ``sync`` runs with, ``ddp plain`` DistributedDataParallel alone; so
sync/ddp = (sync / horovod plain) x (horovod plain / ddp plain) x (ddp plain / ddp): the harness under Horovod,
Horovod's design against DDP's, and the harness under DDP.

Horovod settings: the suite's runs use the hardware profile's ``horovod:`` block (``--hardware``, default
``local``; ``python -m bench.perf horovod_knobs`` lists every profile's) and the training profile's, with
``--set horovod.KEY=VALUE`` on top, as ``python -m bench run`` does; ``--horovod-env KEY=VALUE`` (repeatable) adds a raw ``HOROVOD_*``
variable for experiments with variables that are not settings. Tuning variables of the calling shell are
cleared for every run. With ``--compare`` every suite variant runs twice per repeat, under Horovod's defaults
(``horovod: {}``, nothing set; or, with ``--baseline-set KEY=VALUE``, under those settings: the ``reference``)
and under the settings, interleaved, and both sets of ratios come from the same run. ``ddp`` starts no Horovod
(``Algorithm.runtime``): the settings do not touch it, and its two variants measure this machine's drift.

Reported: median throughput over repeats; per-step time split from the records (mean over the timed steps
and worker ranks, median over repeats: step, compute, comm, wait, and ``loop``: the worker's time between
steps, i.e. records and data); the ratios sync(np=1)/plain (target >= 0.97), sync(np=2)/ddp(np=2)
(target >= 0.95) and the plain loops', each as the ratio of the medians, the per-repeat ratios (the two runs of a
repeat measured a minute apart), and their geometric mean with its 95 % t-interval and a verdict against the target
(:func:`bench.metrics.stats.paired_ratio`: ``above``/``below`` when the interval excludes it, else
``inconclusive``); per variant, where its ranks' CPU went (``summary.json``'s ``cpu_threads``: the training thread
on a CPU and runnable but waiting for one, Horovod's threads, the rest). ``--algorithms`` adds other algorithms at
np=2 with their split (e.g. the Horovod-based ``delayed,layerwise,localsgd,lasgd,easgd``). ``--timeline DIR`` records a Horovod timeline of every suite run
(``HOROVOD_TIMELINE``, cycles marked; it slows the runs: use it to see where time goes, not for the ratios)
and prints a summary of each variant's last one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path


from ..launch import run
from ..layout import run_name
from ..metrics.selection import timed_steps
from ..metrics.stats import paired_ratio
from ..metrics.timesplit import time_split as metrics_time_split
from ..resolve import parse_set, resolve
from ..results import load_run, read_json
from . import PerfParser, fmt_ratio, median
from .horovod_knobs import HOROVOD_TUNING_VARS, format_timeline, parse_env, summarize_timeline
from .plain import plain_job, plain_loop

SPLIT = ("step_ms", "compute_ms", "comm_ms", "wait_ms", "loop_ms")


@contextlib.contextmanager
def horovod_env(env: dict[str, str] | None):
    """Run with exactly Horovod's defaults plus ``env``: tuning variables of the calling shell are cleared."""
    saved = {k: os.environ.pop(k) for k in HOROVOD_TUNING_VARS if k in os.environ}
    try:
        yield dict(env or {})
    finally:
        os.environ.update(saved)


def time_split(run) -> dict[str, float]:
    """Per-step split in ms of a run: compute / comm / wait as :func:`bench.metrics.timesplit.time_split` defines
    them (mean over timed steps and worker ranks), ``step_ms`` the recorded step time, and ``loop_ms`` the time
    between the end of one step and the start of the next (the worker's recording and data iteration)."""
    split = metrics_time_split([run]).iloc[0]
    timed = timed_steps(run.steps)
    out = {"step_ms": 1e3 * float(timed["step_s"].mean()),
           **{f"{k[:-2]}_ms": 1e3 * float(split[k]) for k in ("compute_s", "comm_s", "wait_s")}}
    loops = []
    for _, g in timed.groupby("rank"):
        g = g.sort_values("step")
        if len(g) > 1:
            loops.append(float((g["t"].diff() - g["step_s"]).iloc[1:].mean()))
    out["loop_ms"] = 1e3 * sum(loops) / len(loops) if loops else float("nan")
    return {k: out[k] for k in SPLIT}


THREADS = {"main_cpu_ms": ("main", "cpu_s"), "main_runq_ms": ("main", "runq_s"), "hvd_cpu_ms": ("horovod", "cpu_s"),
           "hvd_runq_ms": ("horovod", "runq_s"), "other_cpu_ms": ("other", "cpu_s"), "main_preempt": ("main", "involuntary")}
"""Where a step's CPU went (``summary.json``'s ``cpu_threads``, per step, mean over ranks): the training thread on a CPU
and runnable but waiting for one, the threads ``hvd.init()`` started on a CPU and waiting, the rest on a CPU (ms),
and the training thread's involuntary switches (preemptions) per step."""


def thread_cpu(summary: dict) -> dict[str, float]:
    """:data:`THREADS` of one run (empty where the summary has no thread figures)."""
    ranks = summary.get("cpu_threads") or []
    steps = summary.get("steps_per_worker") or 0
    if not ranks or not steps:
        return {}
    out = {}
    for key, (label, field) in THREADS.items():
        per_rank = [(r.get(label) or {}).get(field, 0.0) for r in ranks]
        scale = 1.0 if field == "involuntary" else 1e3
        out[key] = scale * sum(per_rank) / len(per_rank) / steps
    return out


def cpu_busy(dt: float = 1.0) -> float:
    """Busy share of all CPUs of the machine over ``dt`` seconds (/proc/stat)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    a = snap()
    time.sleep(dt)
    b = snap()
    total = b[0] - a[0]
    return 1.0 - (b[1] - a[1]) / total if total else 0.0


def wait_quiet(below: float, max_wait_s: float) -> tuple[float, float]:
    """Wait until the machine's busy share stays below ``below`` for two consecutive seconds, at most
    ``max_wait_s``; returns (last busy share, seconds waited)."""
    t0, ok, busy = time.monotonic(), 0, cpu_busy()
    while time.monotonic() - t0 < max_wait_s:
        ok = ok + 1 if busy < below else 0
        if ok >= 2:
            break
        busy = cpu_busy()
    return busy, time.monotonic() - t0


def quiet_before(below: float, max_wait_s: float) -> dict:
    """:func:`wait_quiet` before a measurement, as its record keeps it (``busy_before``, ``waited_s``); nothing
    waited and nothing recorded where ``below`` is 0."""
    if below <= 0:
        return {}
    busy, waited = wait_quiet(below, max_wait_s)
    return {"busy_before": busy, "waited_s": waited}


HARNESS = ("localsgd", {"communication_window": 10**9})
"""The harness reference: the worker loop around a local step that never communicates (λ beyond the run)."""

PLAIN = {"horovod": "sync", "ddp": "ddp"}
"""The plain distributed loops (:mod:`bench.perf.plain`) and the suite's algorithm whose settings each runs with."""


def suite_run(algorithm: str, np: int, profile: str, overrides: dict, tmp: Path, env: dict | None = None,
              timeline: Path | None = None, hardware: str = "local") -> dict:
    """One run through the real CLI path (its throughput and time split), or a plain distributed loop (``plain:KIND``,
    :data:`PLAIN`: its throughput) with the same settings."""
    if algorithm == "harness":
        algorithm, extra = HARNESS
        overrides = {**overrides, **extra}
    kind = algorithm.removeprefix("plain:") if algorithm.startswith("plain:") else None
    cfg = resolve(PLAIN.get(kind, algorithm), np=np, profile=profile, hardware=hardware, overrides=overrides, study="perf")
    env = dict(env or {})
    if kind is not None:
        with horovod_env(env) as job_env:
            return plain_job(kind, cfg, tmp / f"plain-{kind}-{time.monotonic_ns()}", job_env)
    if timeline is not None:
        env.update(HOROVOD_TIMELINE=str(timeline), HOROVOD_TIMELINE_MARK_CYCLES="1")
    with horovod_env(env) as job_env:
        run_dir, rc = run(cfg, tmp / run_name(algorithm, np, str(time.monotonic_ns())), echo=False, env=job_env)
    if rc != 0:
        raise SystemExit(f"{algorithm} np={np} failed: {read_json(run_dir / 'summary.json').get('reason')}")
    r = load_run(run_dir)
    return {"throughput": r.summary["throughput"], **time_split(r), **thread_cpu(r.summary),
            "horovod_env": read_json(run_dir / "system.json").get("horovod_settings", {}).get("env", {})}


def _parser() -> argparse.ArgumentParser:
    ap = PerfParser(prog="python -m bench.perf overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="laptop", metavar="P[,P...]",
                    help="training profile(s) of params.yaml, comma-separated: each is measured in turn and a summary "
                         "per profile ends the output (default laptop)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-ddp", action="store_true", help="leave out the sync / ddp comparison")
    ap.add_argument("--np", type=int, default=2, dest="np_", metavar="N",
                    help="workers of the sync / ddp comparison and of --algorithms (default 2)")
    ap.add_argument("--skip-np1", action="store_true", help="leave out the plain loop and sync at np=1")
    ap.add_argument("--skip-plain", action="store_true",
                    help="leave out the plain Horovod and DDP loops at --np workers (bench.perf.plain)")
    ap.add_argument("--hardware", default="local", help="hardware profile of the suite's runs (its horovod: settings)")
    ap.add_argument("--horovod-env", action="append", default=[], metavar="KEY=VALUE",
                    help="a raw HOROVOD_* variable for the suite's runs (repeatable; on top of the settings)")
    ap.add_argument("--compare", action="store_true", help="also run every suite variant under Horovod's defaults, interleaved")
    ap.add_argument("--baseline-set", action="append", default=[], metavar="KEY=VALUE",
                    help="with --compare: the reference variant's settings (e.g. horovod.wait_sleep_us=50) instead of "
                         "Horovod's defaults; --set then names the candidate on top of the profile")
    ap.add_argument("--algorithms", default="", metavar="A,B,...", help="more algorithms at --np workers, with their time split")
    ap.add_argument("--timeline", metavar="DIR", help="write a Horovod timeline of every suite run under DIR and summarize")
    ap.add_argument("--json", metavar="FILE", help="write every measurement (per repeat) as JSON")
    ap.add_argument("--quiet-below", type=float, default=0.0, metavar="FRAC",
                    help="before each measurement wait until the machine's CPUs are less than FRAC busy (0: do not wait)")
    ap.add_argument("--quiet-max-wait", type=float, default=120.0, metavar="S", help="longest wait for quiet (s)")
    return ap


@dataclasses.dataclass
class Plan:
    """What one profile's measurement runs: the variants' settings (``--set`` overrides, raw environment), their
    Horovod environment and wait, and the runs of a repeat ``(label, algorithm, np, variant)``."""

    profile: str
    ref: str
    setups: dict[str, tuple[dict, dict]]
    envs: dict[str, dict[str, str]]
    waits: dict[str, float | None]
    spins: dict[str, float]
    cfg: object  # the plain loop's resolved configuration
    overrides: dict
    variants: list[tuple[str, str, int, str]]


def plan(args, profile: str) -> Plan:
    """The variants of ``args`` on ``profile``."""
    overrides = {"eval_every": 0, "save_model": False, **parse_set(args.set)}
    raw = parse_env(args.horovod_env)
    plain_overrides = {k: v for k, v in overrides.items() if k != "horovod" and not k.startswith("horovod.")}
    plain_overrides["horovod"] = {}  # Horovod's defaults: no setting, whatever the hardware profile chooses
    ref_overrides = {**plain_overrides, **parse_set(args.baseline_set)}  # the reference variant of --compare
    tuned_cfg = resolve("sync", np=1, profile=profile, hardware=args.hardware, overrides=overrides)
    tuned = {**tuned_cfg.launch.horovod.env(), **raw}
    # per variant: (--set overrides, raw environment)
    ref = "reference" if args.baseline_set else "default"  # the label of --compare's reference variant
    setups = {ref: (ref_overrides, {}), "tuned": (overrides, raw)}
    ref_cfg = resolve("sync", np=1, profile=profile, hardware=args.hardware, overrides=ref_overrides)
    waits = {ref: ref_cfg.launch.horovod.wait_sleep_us,  # the suite's own setting: no HOROVOD_* variable
             "tuned": tuned_cfg.launch.horovod.wait_sleep_us}
    spins = {ref: ref_cfg.launch.horovod.wait_spin_us or 0, "tuned": tuned_cfg.launch.horovod.wait_spin_us or 0}
    if not args.compare:
        setups = {"tuned": setups["tuned"]} if tuned or waits["tuned"] else {ref: setups[ref]}
    envs = {name: (ref_cfg.launch.horovod.env() if name == ref else tuned) for name in setups}
    extra = [a for a in args.algorithms.split(",") if a]
    n_ = args.np_
    variants: list[tuple[str, str, int, str]] = []  # (label, algorithm, np, env name)
    for name in envs:
        if not args.skip_np1:
            variants += [(f"harness np=1 [{name}]", "harness", 1, name), (f"sync np=1 [{name}]", "sync", 1, name)]
        if not args.skip_ddp:
            variants += [(f"sync np={n_} [{name}]", "sync", n_, name), (f"ddp np={n_} [{name}]", "ddp", n_, name)]
            if not args.skip_plain:
                variants += [(f"{k} plain np={n_} [{name}]", f"plain:{k}", n_, name) for k in PLAIN]
        variants += [(f"{a} np={n_} [{name}]", a, n_, name) for a in extra]
    variants = list({v[0]: v for v in variants}.values())  # --np 1: sync np=1 once (a label's first place kept)
    cfg = resolve("sync", np=1, profile=profile, overrides=plain_overrides)
    return Plan(profile, ref, setups, envs, waits, spins, cfg, overrides, variants)


def describe(pl: Plan, args) -> None:
    train = pl.cfg.train
    print(f"profile {pl.profile}: {train.dataset}, {train.model}, batch {train.batch_size}, {train.optimizer}, warm-up {train.warmup_steps} "
          f"steps, {args.repeats} repeats, threads/worker {train.threads}")
    for name, env in pl.envs.items():
        print(f"Horovod settings [{name}] (hardware {args.hardware}): "
              + (" ".join(f"{k}={v}" for k, v in env.items()) or "Horovod's defaults (no HOROVOD_* tuning variable set)")
              + (f"; adaptive wait: polls {pl.spins[name]:g} us, then sleeps up to {pl.waits[name]:g} us"
                 if pl.waits[name] else "; Horovod's spinning wait"))


def measure(pl: Plan, args) -> tuple[dict[str, list[dict]], dict[str, Path]]:
    """Every variant once per repeat, interleaved; per label the repeats' measurements, and the timelines."""
    res: dict[str, list[dict]] = {}
    timelines: dict[str, Path] = {}

    def quiet() -> dict:
        return quiet_before(args.quiet_below, args.quiet_max_wait)

    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        for i in range(args.repeats):  # interleave the variants so drifts in machine load hit all alike
            if not args.skip_np1:
                q = quiet()
                res.setdefault("plain loop", []).append({**plain_loop(pl.cfg), **q})
            for label, algo, n, name in pl.variants:
                tl = None
                if args.timeline:
                    Path(args.timeline).mkdir(parents=True, exist_ok=True)
                    tl = Path(args.timeline) / f"{run_name(algo, n, f'{pl.profile}-{name}-r{i}')}.json"
                    timelines[label] = tl
                sets, raw_env = pl.setups[name]
                q = quiet()
                res.setdefault(label, []).append({**suite_run(algo, n, pl.profile, sets, Path(tmp), raw_env, tl,
                                                              args.hardware), **q})
            print(f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]['throughput']:.0f}" for k, v in res.items()), flush=True)
    return res, timelines


def paired(res: dict[str, list[dict]], a: str, b: str) -> list[float]:
    """Per-repeat ratios a/b (the two measured minutes apart, so less exposed to drifts in load)."""
    return [x["throughput"] / y["throughput"] for x, y in zip(res[a], res[b])]


SYNC_DDP_TARGET = 0.95
"""sync / ddp at np=2, on every profile: the reference every algorithm is compared with is not slower than PyTorch's own."""


def verdict(res: dict[str, list[dict]], a: str, b: str, target: float) -> dict:
    """The paired ratio a/b over the repeats with its 95 % interval, and whether it is above ``target``."""
    r = paired_ratio([x["throughput"] for x in res[a]], [y["throughput"] for y in res[b]], threshold=target)
    r["verdict"] = {"faster": "above", "slower": "below"}.get(r["outcome"], "inconclusive")
    return r


def _verdict_text(res: dict[str, list[dict]], a: str, b: str, target: float) -> str:
    """``median M; geometric mean G [low, high] n=N: verdict T`` of the per-repeat ratios a/b."""
    v = verdict(res, a, b, target)
    return (f"median {median(paired(res, a, b)):.3f}; geometric mean {v['effect']:.3f} [{v['ci_low']:.3f}, "
            f"{v['ci_high']:.3f}] n={v['n']}: {v['verdict']} {target:g}")


def _paired_text(res: dict[str, list[dict]], a: str, b: str, target: float = 1.0) -> str:
    return f"per repeat {', '.join(f'{r:.3f}' for r in paired(res, a, b))}; {_verdict_text(res, a, b, target)}"


def report(pl: Plan, args, res: dict[str, list[dict]], timelines: dict[str, Path]) -> dict[str, dict]:
    """Print the medians, time splits and ratios of one profile; returns the medians per label."""
    m = {k: {f: median([r[f] for r in v]) for f in v[0] if f != "horovod_env"} for k, v in res.items()}
    n_, ref = args.np_, pl.ref
    width = max(len(k) for k in m)
    print(f"\n{'':{width}s} {'samples/s':>10s}  {'step':>7s} {'compute':>7s} {'comm':>7s} {'wait':>7s} {'loop':>7s}"
          f"   (medians of {args.repeats}; ms per step, mean over timed steps and ranks)")
    for k, r in m.items():
        split = " ".join(f"{r[f]:7.3f}" for f in SPLIT) if "step_ms" in r else \
            f"(per-step clock: {r['per_step_clock']:.0f} samples/s)" if "per_step_clock" in r else ""
        busy = f"  (machine busy before: {r['busy_before']:.0%})" if "busy_before" in r else ""
        print(f"{k:{width}s} {r['throughput']:10.1f}  {split}{busy}")
    print()
    for name in pl.envs:
        if not args.skip_np1:
            s1, h1 = m[f"sync np=1 [{name}]"]["throughput"], m[f"harness np=1 [{name}]"]["throughput"]
            plain = m["plain loop"]["throughput"]
            print(f"[{name}] sync np=1 / plain loop   = {fmt_ratio(s1, plain)}  (target >= 0.97)  "
                  f"= harness/plain {fmt_ratio(h1, plain)} x sync/harness {fmt_ratio(s1, h1)}  "
                  f"({_paired_text(res, f'sync np=1 [{name}]', 'plain loop')})")
        if not args.skip_ddp:
            for a, b, target in plain_ratios(n_, name, args):
                print(f"[{name}] {a[:-len(name) - 3]} / {b[:-len(name) - 3]} = {fmt_ratio(m[a]['throughput'], m[b]['throughput'])}  "
                      f"({_paired_text(res, a, b, target)})")
    if args.compare and not args.skip_ddp:  # ddp starts no Horovod: its two variants differ by the machine's drift only
        for a, b in (("tuned", ref), (ref, "tuned")):
            sa, db = f"sync np={n_} [{a}]", f"ddp np={n_} [{b}]"
            print(f"{sa} / {db} = {fmt_ratio(m[sa]['throughput'], m[db]['throughput'])}  ({_paired_text(res, sa, db)})")
    if args.compare:
        for label, algo, n, name in pl.variants:
            if name == "tuned":
                base = label.replace("[tuned]", f"[{ref}]")
                print(f"tuned / {ref}, {label[:-8]:16s}: {fmt_ratio(m[label]['throughput'], m[base]['throughput'])}  "
                      f"({_paired_text(res, label, base)})")
    threads = {k: r for k, r in m.items() if "main_cpu_ms" in r}
    if threads:
        print(f"\n{'':{width}s} " + " ".join(f"{k[:-3] if k.endswith('_ms') else k:>12s}" for k in THREADS)
              + "   (per step, mean over ranks: ms; main_preempt: involuntary switches)")
        for k, r in threads.items():
            print(f"{k:{width}s} " + " ".join(f"{r[f]:12.3f}" for f in THREADS))
    for name in pl.envs:  # what the jobs' processes got, as their system.json records it
        got = {k: v for r in res.values() for x in r if "horovod_env" in x for k, v in x["horovod_env"].items()
               if k in HOROVOD_TUNING_VARS} if name == "tuned" or len(pl.envs) == 1 else None
        if got is not None:
            print(f"HOROVOD_* tuning variables the jobs got (system.json): {got or '(none)'}")
    for label, path in timelines.items():
        if path.exists():
            print(f"\ntimeline of {label} (last repeat):\n" + format_timeline(summarize_timeline(path, skip_s=1.0)))
    return m


def plain_ratios(n_: int, name: str, args) -> list[tuple[str, str, float]]:
    """The np=``n_`` ratios of variant ``name`` (numerator, denominator, target): sync / ddp, and with the plain loops
    Horovod's own design (plain Horovod / plain DDP) and what the harness costs each (sync / plain Horovod, ddp /
    plain DDP)."""
    sync, ddp = f"sync np={n_} [{name}]", f"ddp np={n_} [{name}]"
    out = [(sync, ddp, SYNC_DDP_TARGET)]
    if not args.skip_plain:
        hp, dp = f"horovod plain np={n_} [{name}]", f"ddp plain np={n_} [{name}]"
        out += [(hp, dp, SYNC_DDP_TARGET), (sync, hp, 1.0), (ddp, dp, 1.0)]
    return out


def summary_rows(pl: Plan, args, res: dict[str, list[dict]]) -> list[str]:
    """One line per variant of the profile: sync/ddp (median of the per-repeat ratios) and, with --compare, the
    tuned variant's sync over the reference's."""
    n_, rows = args.np_, []
    if args.skip_ddp:
        return rows

    def row(what: str, a: str, b: str, target: float) -> str:
        return f"{pl.profile:>14s}  {what:40s} {_verdict_text(res, a, b, target)}"

    for name in pl.envs:
        for a, b, target in plain_ratios(n_, name, args):
            rows.append(row(f"{a.split(' np=')[0]}/{b.split(' np=')[0]} np={n_} [{name}]", a, b, target))
    if args.compare:
        rows.append(row(f"sync np={n_} [tuned] / [{pl.ref}]", f"sync np={n_} [tuned]", f"sync np={n_} [{pl.ref}]", 1.0))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.baseline_set and not args.compare:
        raise SystemExit("error: --baseline-set names the reference variant of --compare; add --compare")
    profiles = [p for p in args.profile.split(",") if p]
    plans = [plan(args, p) for p in profiles]  # every profile resolved (and refused) before anything runs
    out, rows = {}, []
    for pl in plans:
        describe(pl, args)
        res, timelines = measure(pl, args)
        m = report(pl, args, res, timelines)
        rows += summary_rows(pl, args, res)
        out[pl.profile] = {"profile": pl.profile, "overrides": pl.overrides, "envs": pl.envs, "repeats": res,
                           "medians": m}
        if len(plans) > 1:
            print()
    if rows:
        print("per profile, the per-repeat ratios: median, geometric mean with its 95 % interval, verdict against the "
              "target:\n" + "\n".join(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(out[profiles[0]] if len(profiles) == 1 else out, indent=1))
    return 0
