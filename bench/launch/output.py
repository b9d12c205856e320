"""Forwarding a job's output: every line into each run's ``launch.log``, to the terminal (``echo``), into the tail
kept for the failure's reason, and, whole, the lines on how ranks ended (:func:`bench.launch.lost_rank.is_exit_evidence`)."""

from __future__ import annotations

import collections
import contextlib
import sys

from .lost_rank import is_exit_evidence


class Tee:
    """Write to several open files (the launch.log of every run of a job). A file that cannot be written (a full disk,
    a file system turned read-only, a deleted directory) is dropped, its first error kept in ``errors`` (file name ->
    OSError) for the launcher to end the job naming it; the job's output still reaches the others and the terminal."""

    def __init__(self, files):
        self.files = list(files)
        self.errors: dict[str, OSError] = {}

    def _each(self, op) -> None:
        for f in list(self.files):
            try:
                op(f)
            except OSError as e:
                self.errors.setdefault(f.name, e)
                self.files.remove(f)

    @classmethod
    @contextlib.contextmanager
    def opened(cls, paths):
        """A Tee of ``paths`` opened for appending, closed at the end (an error on closing is one more dropped file)."""
        tee = cls([open(p, "a") for p in paths])
        try:
            yield tee
        finally:
            for f in tee.files:
                with contextlib.suppress(OSError):
                    f.close()

    def write(self, s: str) -> None:
        self._each(lambda f: f.write(s))

    def flush(self) -> None:
        self._each(lambda f: f.flush())


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
