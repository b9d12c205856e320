"""Benchmarks: scripts that print figures and ratios against a reference measured in the same run.

``python -m bench.perf NAME [options]`` runs ``bench/perf/NAME.py``'s ``main(argv)``:

- ``overhead``  — ``sync`` at np=1 against a plain PyTorch loop; ``sync`` against ``ddp`` at np=2.
- ``harness`` — the worker's loop at np=1 taken apart, piece by piece, beside a plain loop.
- ``horovod_best`` — the plain Horovod loop at candidate settings beside plain DDP: Horovod's best for a workload.
- one module per algorithm family (see each module's docstring).

They are not tests: the machine is small and noisy, so they report medians of repeats and
ratios, never pass/fail on time.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics

from .. import BenchError, OneLineParser, short


def median(values) -> float:
    return statistics.median(values)


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def medians(repeats: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Variant -> figure -> the median of its values over the repeats."""
    return {variant: {k: median(values) for k, values in figures.items()} for variant, figures in repeats.items()}


def table(columns: list[tuple[str, str]], rows: list[list]) -> list[str]:
    """A fixed-width table's lines: the titles, then one line per row. ``columns``: (title, format spec of the
    column's cells, e.g. ``">10.1f"``); a title takes its spec's alignment and width."""
    titles = []
    for title, spec in columns:
        align, width = re.match(r"([<>^]?)(\d*)", spec).groups()
        titles.append(f"{title:{align}{width}}")
    return [" ".join(titles), *(" ".join(format(cell, spec) for cell, (_, spec) in zip(row, columns)) for row in rows)]


def workload_options(ap: argparse.ArgumentParser, repeats: int, each: str) -> argparse.ArgumentParser:
    """The options of a benchmark of one workload: ``--profile``, ``--hardware``, ``--set``, ``--repeats``, ``--json``,
    and ``--quiet-below`` / ``--quiet-max-wait`` (waited for before each ``each``: a loop, a variant)."""
    ap.add_argument("--profile", default="laptop", help="training profile of params.yaml (default laptop)")
    ap.add_argument("--hardware", default="local", help="hardware profile (its horovod: settings; default local)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="the workload's overrides")
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--json", metavar="FILE", help="write every measurement (per repeat) and the summary as JSON")
    ap.add_argument("--quiet-below", type=float, default=0.0, metavar="FRAC",
                    help=f"before each {each} wait until the machine's CPUs are less than FRAC busy (0: do not wait)")
    ap.add_argument("--quiet-max-wait", type=float, default=120.0, metavar="S", help="longest wait for quiet (s)")
    return ap


COUNTS = {"np": "workers", "np_": "workers", "repeats": "repeats", "trials": "trials", "iters": "timed allreduces",
          "pings": "round trips", "steps": "steps", "run_steps": "steps", "commits": "commits"}
"""The integer options of the benchmarks that count something: each >= 1 and at most :data:`MAX_COUNT`."""
MAX_COUNT = 10_000
"""A benchmark repeats, launches or steps at most this many times: more would run for hours on the machines the
suite measures on."""
NUMBER_LISTS = {"hosts": ("host counts", MAX_COUNT), "workers": ("worker counts", MAX_COUNT),
                "sizes": ("tensor sizes in elements (at most 4 GiB of fp32 each: the machine's memory)", 2**30)}
"""Comma-separated integer options (``1e6`` is an integer too): each in [1, its bound]."""


def _integer_in(text: str, bound: int) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return value.is_integer() and 1 <= value <= bound


class PerfParser(OneLineParser):
    """The benchmarks' parser: its options checked once parsed, before anything runs or prints (a count >= 1, a
    fraction in [0, 1], every profile, hardware and algorithm named known, ``--set`` valid on each profile); a bad
    value is one line and exit 2."""

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        try:
            check_options(parsed)
        except BenchError as e:
            self.error(str(e))
        return parsed


def check_options(args: argparse.Namespace) -> None:
    from ..algorithms import names
    from ..layout import output_path
    from ..resolve import check_values, hardware_profiles, parse_set, resolve

    given = vars(args)
    if given.get("inner"):  # the benchmark's own job under horovodrun: its launcher checked the options
        return
    for dest, what in COUNTS.items():
        value = given.get(dest)
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise BenchError(f"--{dest.rstrip('_').replace('_', '-')} must be in [1, {MAX_COUNT}] ({what}), got {value}")
    for dest, (what, bound) in NUMBER_LISTS.items():
        text = given.get(dest)
        if isinstance(text, str) and not all(_integer_in(v, bound) for v in text.split(",")):
            raise BenchError(f"--{dest} must be {what}: integers in [1, {bound}], comma-separated; got {short(text)}")
    if "quiet_below" in given and not (math.isfinite(args.quiet_below) and 0 <= args.quiet_below <= 1):
        raise BenchError(f"--quiet-below must be a fraction of the CPUs in [0, 1] (0: do not wait), got {args.quiet_below}")
    if "quiet_max_wait" in given and not (math.isfinite(args.quiet_max_wait) and 0 <= args.quiet_max_wait <= 3600):
        raise BenchError(f"--quiet-max-wait must be seconds in [0, 3600], got {args.quiet_max_wait}")
    for dest in ("seconds", "skip", "budget"):
        value = given.get(dest)
        if value is not None and not (math.isfinite(value) and 0 <= value <= 3600 and (value > 0 or dest == "skip")):
            raise BenchError(f"--{dest} must be seconds in (0, 3600], got {value}")
    for dest in ("json", "jsonl"):  # where a benchmark writes its measurements: checked before it measures
        if given.get(dest) is not None:
            output_path(given[dest], f"--{dest}", folder=False)
    hardware = given.get("hardware")
    if hardware is not None and hardware not in hardware_profiles():
        raise BenchError(f"unknown hardware profile {hardware!r}; valid: {', '.join(hardware_profiles())}")
    algorithms = given.get("algorithms")
    if isinstance(algorithms, str):
        unknown = [a for a in algorithms.split(",") if a and a not in names()]
        if unknown:
            raise BenchError(f"--algorithms has {unknown[0]!r}, which is no algorithm; valid: {', '.join(names())}")
    profiles = given.get("profile")
    if isinstance(profiles, str):
        if not all(profiles.split(",")):
            raise BenchError(f"--profile {profiles!r} has an empty name: give profile names of params.yaml, comma-separated")
        overrides = parse_set(given.get("set") or [])
        for profile in profiles.split(","):  # each profile with the --set values, as the benchmark's runs take them
            check_values(resolve("sync", np=1, profile=profile, hardware=hardware, overrides=overrides, check=False))
