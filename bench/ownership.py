"""The ownership of a run directory as a rank sees it: the launcher's lock (:mod:`bench.launch.lock`) writes a token
into ``<run dir>/.lock``; the job's processes receive each run directory's token (:data:`TOKENS`) and, before writing
results, check that the lock still carries it (:func:`still_ours`, :func:`check_ours`), so that a directory deleted
or replaced under a job gets nothing more of it. Below the launcher and the worker: the ranks import this, never
the launcher."""

from __future__ import annotations

import json
import os
from pathlib import Path

LOCK_NAME = ".lock"
TOKENS = "BENCH_RUN_TOKENS"
"""Environment of a job's processes: run directory -> the token of its holder's lock (:func:`still_ours`)."""


class RunDirLost(RuntimeError):
    """The run directory was deleted, or replaced by another holder's, while its job ran: nothing more is written."""


def token_of(run_dir: Path) -> str | None:
    """The token the holder of ``run_dir``'s lock wrote into it (None: no lock file, or none readable)."""
    try:
        return json.loads((Path(run_dir) / LOCK_NAME).read_text() or "{}").get("token")
    except (OSError, ValueError, AttributeError):
        return None


def still_ours(run_dir: Path, token: str | None = None) -> bool:
    """True while ``run_dir``'s lock still carries ``token`` (default: the job's, from :data:`TOKENS`; a process
    started without it, e.g. a rank launched by hand, owns what it was given)."""
    if token is None:
        token = json.loads(os.environ.get(TOKENS) or "{}").get(str(run_dir))
        if token is None:
            return True
    return token_of(run_dir) == token


def check_ours(run_dir: Path) -> None:
    """RunDirLost unless :func:`still_ours` (before writing results whose directory may have been replaced)."""
    if not still_ours(run_dir):
        raise RunDirLost(f"run directory {str(run_dir)!r} was deleted or replaced while the job ran (its lock is no "
                         f"longer this job's): nothing more is written to it")
