"""Rank 0's progress bar over a run's steps (tqdm): on a terminal, or in a pipe when ``BENCH_PROGRESS=1`` (the
launcher sets it; horovodrun prefixes every line, so a pipe gets one line per refresh, no carriage returns)."""

from __future__ import annotations

import os
import sys

ENV = "BENCH_PROGRESS"


class _LineFile:
    """tqdm target for pipes: one progress line per refresh."""

    def write(self, s: str) -> None:
        s = s.replace("\r", "").strip()
        if s:
            sys.stderr.write(s + "\n")

    def flush(self) -> None:
        sys.stderr.flush()


def step_bar(cfg, total: int, rank: int):
    """A progress bar of ``total`` steps for rank 0 when progress is shown; None otherwise."""
    if rank != 0 or not (sys.stderr.isatty() or os.environ.get(ENV) == "1"):
        return None
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=f"{cfg.algorithm} np={cfg.launch.np}", ascii=not tty,
                mininterval=1.0 if tty else 5.0, file=sys.stderr if tty else _LineFile())
