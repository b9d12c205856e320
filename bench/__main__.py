"""Command line: ``python -m bench {list,run,te,study,cluster,predict,probe,advise} ...``."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

from . import BenchError, OneLineParser, launch, run_command
from .algorithms import get_algorithm, names
from .cluster.cli import add_parser as add_cluster
from .launch.command import horovodrun_command
from .layout import default_run_dir
from .placement import processes
from .advise.cli import add_parser as add_advise
from .predict.cli import add_parser as add_predict
from .probe.cli import add_parser as add_probe
from .resolve import load_params, parse_set, resolve
from .results import read_json
from .study.cli import add_parser as add_study
from .typed import field_docs


def cmd_list(args) -> int:
    width = max(map(len, names()))
    if args.params:
        set_in_params = load_params().get("algorithms") or {}  # read once, not once per algorithm
    for name in names():
        algo = get_algorithm(name)
        print(f"{name:<{width}}  {algo.family:<10}  {algo.paper}")
        if args.params:
            _print_params(algo, set_in_params.get(name) or {})
    return 0


def _print_params(algo, set_here: dict) -> None:
    """An algorithm's hyperparameters: default, params.yaml's value where it sets one, the field's docstring."""
    docs = field_docs(algo.Params)
    for f in dataclasses.fields(algo.Params):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        value = f"{default!r}" + (f" (params.yaml: {set_here[f.name]!r})" if f.name in set_here else "")
        doc = docs[f.name].split("\n", 1)[0]
        print(f"    {f.name} = {value}" + (f"  # {doc}" if doc else ""))


def cmd_run(args) -> int:
    for name in ("out", "params"):
        if getattr(args, name) == "":
            raise BenchError(f"--{name} is empty: give a path, or leave --{name} out for the default")
    overrides = parse_set(args.set or [])
    if args.oversubscribe:
        overrides["oversubscribe"] = True
    cfg = resolve(args.algorithm, np=args.np, profile=args.profile, hardware=args.hardware,
                  overrides=overrides, study=args.study, tag=args.tag or "",
                  params_file=Path(args.params) if args.params else None)
    out = Path(args.out) if args.out else default_run_dir(cfg)
    if args.prepare_only:
        run_dir = launch.prepare(cfg, out, force=args.force)
        print(" ".join(horovodrun_command(cfg, run_dir / "config.json")))
        return 0
    launch.check_launch([cfg])  # what the launcher checks (a hostfile, a Slurm allocation) refused before a word more
    def claimed() -> None:  # printed once the run directory is ours: a refusal stays one line
        print(f"[bench] {cfg.algorithm} np={cfg.launch.np} ({processes(cfg)} processes), profile {cfg.profile} -> {out}",
              file=sys.stderr)

    run_dir, rc = launch.run(cfg, out, force=args.force, echo=not args.quiet, claimed=claimed)
    if rc == 0:
        s = read_json(run_dir / "summary.json")
        tp = s.get("throughput")  # None: no span with every worker working (bench.metrics.throughput)
        print(f"[bench] ok: {f'{tp:.1f} samples/s' if tp is not None else 'no all-workers throughput window'}, final held-out accuracy "
              f"{s.get('final_accuracy')}, wall {s.get('wall_s', 0):.1f} s ({run_dir})", file=sys.stderr)
    return rc


def cmd_te(args) -> int:
    for name in ("window", "stride"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise BenchError(f"--{name} must be a positive number of seconds, got {value!r}")
    from .metrics.temporal import temporal_efficiency_runs  # scipy.stats: 1-2 s, only this command needs it

    value = temporal_efficiency_runs(args.run_a, args.run_b, window=args.window, stride=args.stride)
    print(f"{value:.6f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m bench", description="Distributed and asynchronous SGD benchmarks on Horovod.")
    sub = ap.add_subparsers(dest="command", required=True)
    lp = sub.add_parser("list", help="registered algorithms and their papers")
    lp.add_argument("--params", action="store_true",
                    help="also each algorithm's hyperparameters: default, params.yaml's value, meaning")
    lp.set_defaults(func=cmd_list)

    r = sub.add_parser("run", help="launch one benchmark run under horovodrun and write its run directory")
    r.add_argument("algorithm", help="registry key (see `python -m bench list`)")
    r.add_argument("--np", type=int, help="number of workers (parameter servers are added on top; default 1, or "
                   "--set np=N)")
    r.add_argument("--profile", help="training profile from params.yaml (default: its `profile`)")
    r.add_argument("--hardware", help="hardware profile from pipelines/hardware/ (default: local)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting or hyperparameter (repeatable)")
    r.add_argument("--study", default="adhoc", help="study name: the run is written where the notebooks of that "
                   "study look (results/<study>/runs/<algo>/<hardware>/)")
    r.add_argument("--tag", help="suffix of the run directory name")
    r.add_argument("--out", help="run directory (default: results/<study>/runs/<algo>/<hardware>/<algo>-np<N>[-<tag>])")
    r.add_argument("--params", help="params.yaml to read (default: the repository's)")
    r.add_argument("--force", action="store_true", help="replace an existing run directory")
    r.add_argument("--oversubscribe", action="store_true",
                   help="allow more processes than the hardware holds (locally: more than 4 per core)")
    r.add_argument("--quiet", action="store_true", help="do not echo the job's output")
    r.add_argument("--prepare-only", action="store_true",
                   help="write the run directory's config.json and system.json and print the horovodrun command, "
                        "without launching (for launching by hand or from a batch script)")
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("te", help="temporal efficiency E(a, b) of run A against run B (Hermans 2017)")
    t.add_argument("run_a")
    t.add_argument("run_b")
    t.add_argument("--window", type=float, default=None,
                   help="averaging window in seconds (default: 1/20 of the shorter run's span of records)")
    t.add_argument("--stride", type=float, default=None,
                   help="window stride in seconds (default: 1/100 of the shorter run's span of records)")
    t.set_defaults(func=cmd_te)

    add_study(sub)
    add_cluster(sub)
    add_predict(sub)
    add_probe(sub)
    add_advise(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    def command() -> int:  # parsed inside the guard: --help into a closed pipe ends quietly too
        args = build_parser().parse_args(argv)
        return args.func(args)

    return run_command(command)


if __name__ == "__main__":
    sys.exit(main())
