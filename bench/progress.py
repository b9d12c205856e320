"""Rank 0's progress bar over a run's steps (tqdm): on a terminal, or in a pipe when ``BENCH_PROGRESS=1`` (the
launcher sets it; horovodrun prefixes every line, so a pipe gets one line per refresh, no carriage returns).

The bar is told of the steps at most every :data:`EVERY_S` seconds (:class:`StepProgress`): a step of 0.4 ms pays a
comparison, not tqdm's update and the formatting of its loss (2 us hot, 15-40 us a step among the training's work
on a loaded machine: docs/horovod.md, R)."""

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


EVERY_S = 0.5
"""Seconds between two updates of the bar (it redraws at most every 1 s on a terminal, 5 s in a pipe)."""


class StepProgress:
    """The bar of a run's steps, told of them at most every :data:`EVERY_S` seconds."""

    def __init__(self, bar):
        self.bar, self.next_t = bar, 0.0

    def step(self, step: int, t: float, loss: float) -> None:
        """After step ``step`` (the steps so far), ended at ``t`` seconds, with mini-batch loss ``loss``."""
        if t >= self.next_t:
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            self.next_t = t + EVERY_S

    def close(self, step: int) -> None:
        self.bar.update(step - self.bar.n)
        self.bar.close()


def step_progress(cfg, total: int, rank: int) -> StepProgress | None:
    """:class:`StepProgress` over :func:`step_bar`'s bar; None where no bar is shown."""
    bar = step_bar(cfg, total, rank)
    return None if bar is None else StepProgress(bar)


def step_bar(cfg, total: int, rank: int):
    """A progress bar of ``total`` steps for rank 0 when progress is shown; None otherwise."""
    if rank != 0 or not (sys.stderr.isatty() or os.environ.get(ENV) == "1"):
        return None
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=f"{cfg.algorithm} np={cfg.launch.np}", ascii=not tty,
                mininterval=1.0 if tty else 5.0, file=sys.stderr if tty else _LineFile())
