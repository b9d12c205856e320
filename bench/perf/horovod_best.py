"""Horovod's best run-time settings for a workload: the plain Horovod loop at each candidate setting beside the plain
DDP loop, interleaved, paired per repeat.

    python -m bench.perf horovod_best --profile lenet --set batch_size=64 --set max_steps=300 \\
        --candidate c0.1:cycle_time_ms=0.1 --candidate c0.25:cycle_time_ms=0.25 --repeats 6 --json FILE

Each ``--candidate NAME:KEY=VALUE[,KEY=VALUE]`` is a set of ``horovod:`` settings (:class:`bench.config.HorovodSettings`)
on top of the hardware profile's (and the workload's); two candidates are always measured as well: ``profile`` (the
settings a run of the profile gets) and ``defaults`` (Horovod's own: no setting). The loops are
:mod:`bench.perf.plain`'s: ``hvd.DistributedOptimizer`` and ``DistributedDataParallel`` with nothing of the suite's
harness around them, so the figures are Horovod's design at each setting against DDP's, not the suite's.

Printed per candidate: samples/s (median of the repeats), plain Horovod / plain DDP and candidate / ``profile`` (the
geometric mean of the per-repeat ratios with its 95 % t-interval, :func:`bench.metrics.stats.paired_ratio`), and
which candidate is best: the highest geometric mean against plain DDP, and whether its interval against the
``profile`` candidate lies above 1 (a setting a hardware or training profile may then choose: docs/horovod.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from .. import BenchError
from ..metrics.stats import paired_ratio
from ..resolve import parse_set, resolve
from . import PerfParser, median, table, workload_options
from .overhead import horovod_env, quiet_before
from .plain import plain_job

FIXED = {"profile": {}, "defaults": {"horovod": {}}}
"""The candidates always measured: the profile's settings, and Horovod's defaults (the whole block emptied)."""


def candidates(items: list[str]) -> dict[str, dict]:
    """``--candidate NAME:KEY=VALUE[,...]`` items as ``--set`` overrides, after :data:`FIXED`."""
    out = dict(FIXED)
    for item in items:
        name, sep, sets = item.partition(":")
        if not sep or not name.strip() or not sets.strip() or name.strip() in out:
            raise BenchError(f"--candidate {item!r}: expected NAME:KEY=VALUE[,KEY=VALUE] with a new NAME "
                             f"(taken: {', '.join(out)}), e.g. c0.25:cycle_time_ms=0.25")
        out[name.strip()] = {f"horovod.{k}": v for k, v in parse_set(sets.split(",")).items()}
    return out


def configs(args) -> dict[str, object]:
    """Every candidate's resolved configuration (``sync``'s, whose settings the plain Horovod loop runs with), and
    ``ddp``'s for the plain DDP loop: all resolved, so a bad setting is refused before anything runs."""
    base = {"eval_every": 0, "save_model": False, **parse_set(args.set)}
    out = {name: resolve("sync", np=args.np_, profile=args.profile, hardware=args.hardware,
                         overrides={**base, **sets}, study="perf")
           for name, sets in candidates(args.candidate).items()}
    out["ddp"] = resolve("ddp", np=args.np_, profile=args.profile, hardware=args.hardware, overrides=base, study="perf")
    return out


def measure(cfgs: dict[str, object], args) -> dict[str, list[dict]]:
    """Each candidate's plain Horovod loop and the plain DDP loop once per repeat, interleaved."""
    res: dict[str, list[dict]] = {name: [] for name in cfgs}
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        for i in range(args.repeats):
            for name, cfg in cfgs.items():
                quiet = quiet_before(args.quiet_below, args.quiet_max_wait)
                with horovod_env(None) as env:  # the calling shell's HOROVOD_* variables never leak in
                    out = plain_job("ddp" if name == "ddp" else "horovod", cfg, Path(tmp) / f"{name}-{time.monotonic_ns()}", env)
                res[name].append({"throughput": out["throughput"], **quiet,
                                  "settings": cfg.launch.horovod.given() if name != "ddp" else {}})
            print(f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]['throughput']:.0f}" for k, v in res.items()), flush=True)
    return res


def summary(res: dict[str, list[dict]]) -> list[dict]:
    """Per candidate: median samples/s, and the paired ratios against plain DDP and against ``profile``."""
    tp = {k: [r["throughput"] for r in v] for k, v in res.items()}
    rows = []
    for name in (k for k in res if k != "ddp"):
        vs_ddp, vs_profile = paired_ratio(tp[name], tp["ddp"]), paired_ratio(tp[name], tp["profile"])
        rows.append({"candidate": name, "settings": res[name][0]["settings"], "samples_s": median(tp[name]),
                     **{f"ddp_{k}": vs_ddp[k] for k in ("effect", "ci_low", "ci_high", "n")},
                     **{f"profile_{k}": vs_profile[k] for k in ("effect", "ci_low", "ci_high", "outcome")}})
    return rows


def report(rows: list[dict], ddp_median: float) -> None:
    cols = [("candidate", "<10s"), ("samples/s", ">10.0f"), ("/ plain DDP", ">11.3f"), ("[95 %", ">7.3f"),
            ("]", ">7.3f"), ("/ profile", ">10.3f"), ("[95 %", ">7.3f"), ("]", ">7.3f"), ("settings", "<s")]
    print("\n" + "\n".join(table(cols, [[r["candidate"], r["samples_s"], r["ddp_effect"], r["ddp_ci_low"],
                                         r["ddp_ci_high"], r["profile_effect"], r["profile_ci_low"],
                                         r["profile_ci_high"], " ".join(f"{k}={v}" for k, v in r["settings"].items())
                                         or "(none)"] for r in rows])))
    print(f"plain DDP: {ddp_median:.0f} samples/s (median)")
    best = max(rows, key=lambda r: r["ddp_effect"])
    against = ("above the profile's settings" if best["profile_outcome"] == "faster" else
               "below the profile's settings" if best["profile_outcome"] == "slower" else
               "not distinguishable from the profile's settings")
    print(f"best: {best['candidate']} (plain Horovod / plain DDP {best['ddp_effect']:.3f} [{best['ddp_ci_low']:.3f}, "
          f"{best['ddp_ci_high']:.3f}], n={best['ddp_n']}); {against} "
          f"({best['profile_effect']:.3f} [{best['profile_ci_low']:.3f}, {best['profile_ci_high']:.3f}])")


def _parser() -> argparse.ArgumentParser:
    ap = PerfParser(prog="python -m bench.perf horovod_best", description=__doc__.splitlines()[0])
    ap.add_argument("--candidate", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                    help="horovod settings to try on top of the profile's (repeatable)")
    ap.add_argument("--np", type=int, default=2, dest="np_", metavar="N", help="workers (default 2)")
    return workload_options(ap, repeats=5, each="loop")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.repeats < 1:
            raise BenchError(f"--repeats {args.repeats}: expected a positive count")
        cfgs = configs(args)  # every candidate resolved (and refused) before anything runs
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"profile {args.profile} (hardware {args.hardware}), np={args.np_}, {args.repeats} repeats; candidates: "
          + "; ".join(f"{k} {cfg.launch.horovod.given() or '(none: Horovod defaults)'}" for k, cfg in cfgs.items() if k != "ddp"))
    res = measure(cfgs, args)
    rows = summary(res)
    report(rows, median([r["throughput"] for r in res["ddp"]]))
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": args.profile, "sets": args.set, "repeats": res,
                                               "summary": rows}, indent=1))
    return 0
