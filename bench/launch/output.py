"""Forwarding a job's output: every line into each run's ``launch.log``, to the terminal (``echo``), into the tail
kept for the failure's reason, and, whole, the lines on how ranks ended (:func:`bench.launch.lost_rank.is_exit_evidence`)."""

from __future__ import annotations

import collections
import sys

from .lost_rank import is_exit_evidence


class Tee:
    """Write to several open files (the launch.log of every run of a job)."""

    def __init__(self, files):
        self.files = files

    def write(self, s: str) -> None:
        for f in self.files:
            f.write(s)

    def flush(self) -> None:
        for f in self.files:
            f.flush()


def pump(stream, log, tail: collections.deque, echo: bool, evidence: list) -> None:
    """Read the job's output to its end: each line to ``log`` (flushed), ``tail``, ``evidence`` (if it is) and,
    with ``echo``, this process's stdout."""
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        tail.append(line.rstrip("\n"))
        if is_exit_evidence(line):
            evidence.append(line.rstrip("\n"))
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()
