"""The ownership of a run directory, the launcher's side (the ranks' is :mod:`bench.ownership`): :class:`RunLock` (an exclusive ``flock`` on ``<run dir>/.lock``, which names the
holder's pid, host and command) and :func:`claim`, which takes it for a new run or, with ``force``, for replacing
an unheld run directory (one holding this suite's ``config.json`` and nothing but what a run writes), refusing
everything else with a :class:`bench.BenchError` that names the holder or the reason; :func:`run_path`, the run
directory's path checked (no symlink loop, no name over 255 bytes, not inside a ``.git`` folder) and resolved."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
from pathlib import Path

from .. import BenchError
from ..ownership import LOCK_NAME, TOKENS, token_of
from ..results import ResultsError, read_json

RESERVE_BYTES = 16384
"""The lock file is padded to this size while held: room the launcher frees (:meth:`RunLock.free_reserve`) to write
a failed run's summary on a full disk."""
RUN_FILES = re.compile(r"config\.json|system\.json|summary\.json|launch\.log|eval\.jsonl|model\.pt|rank\d+\.jsonl|"
                       r"\.lock|\.[a-z]+\.json\.[A-Za-z0-9_]+\.tmp")
"""The names of what a run writes into its directory (a ``.<name>.json.*.tmp`` is one being written): ``--force``
deletes these, and refuses a directory that holds anything else (a user's own files beside a config.json)."""
NAME_MAX = 255
"""The longest name of one path component, in bytes (Linux file systems)."""


def run_path(out: Path | str) -> Path:
    """``out`` resolved, or a BenchError naming it: a name component over :data:`NAME_MAX` bytes, a symlink loop,
    or a place inside a ``.git`` folder (git's own data: a run written there corrupts the repository or is lost)."""
    for part in Path(out).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise BenchError(f"run directory {str(out)[:60]!r}...: its name {part[:24]!r}... is {len(os.fsencode(part))} "
                             f"bytes; a file name has at most {NAME_MAX}")
    try:
        resolved = Path(out).resolve()
    except (RuntimeError, OSError) as e:  # RuntimeError: "Symlink loop from ..." (Python 3.11)
        raise BenchError(f"run directory {str(out)!r} cannot be resolved: {getattr(e, 'strerror', None) or e}") from None
    if ".git" in resolved.parts:
        raise BenchError(f"run directory {str(resolved)!r} lies inside a .git folder (git's own data); give --out "
                         f"a folder outside it")
    return resolved


def tokens_env(run_dirs: list[Path]) -> dict[str, str]:
    """:data:`TOKENS` for the job's processes: each run directory's token, as its lock says now."""
    return {TOKENS: json.dumps({str(d): token_of(d) for d in run_dirs})}


def free_reserve(run_dir: Path) -> bool:
    """Give the padding of ``run_dir``'s lock file (:data:`RESERVE_BYTES`) back to the file system, the lock kept;
    True if there was any (on a full disk, a failed run's summary then fits)."""
    try:
        with open(Path(run_dir) / LOCK_NAME, "r+b") as f:
            text = f.read()
            body = text.rstrip(b" ")
            if len(body) == len(text):
                return False
            f.truncate(len(body))
            return True
    except OSError:
        return False


def is_run_dir(path: Path) -> bool:
    """True if ``path`` holds this suite's ``config.json`` (a mapping with a ``schema_version``)."""
    try:
        config = read_json(Path(path) / "config.json")
    except (OSError, ResultsError, UnicodeDecodeError):
        return False
    return isinstance(config, dict) and "schema_version" in config


class RunLock:
    """The exclusive ownership of a run directory: ``flock`` on ``<dir>/.lock`` (which names the holder), taken
    without waiting; released (and the lock file removed) by :meth:`release`, or by the kernel when the holder dies."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)
        self.path = self.dir / LOCK_NAME
        self.fd: int | None = None
        self.created: Path | None = None  # the topmost folder acquire() created (None: the directory existed)
        self.discarded = False
        self.cleared = False  # what the directory holds was written since it was claimed

    def acquire(self) -> "RunLock":
        """Take the lock, or raise BenchError naming the holder. Creates the directory (and its parents)."""
        missing = [d for d in (self.dir, *self.dir.parents) if not d.exists()]
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.created = missing[-1] if missing else None
        except OSError as e:  # a parent is a file, no permission, read-only file system
            raise BenchError(f"cannot create run directory {str(self.dir)!r}: {e.strerror}") from None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self.in_use() from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder released (and removed) the file just now: lock the new one
        argv = list(sys.argv)
        if argv and argv[0].endswith(os.path.join("bench", "__main__.py")):
            argv[0] = "python -m bench"
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(argv), "since": time.time(),
              "token": secrets.token_hex(8)}
        os.ftruncate(fd, 0)
        try:
            os.write(fd, json.dumps(me).ljust(RESERVE_BYTES).encode())  # trailing blanks: room for a summary later
        except OSError:  # the disk is full already: the holder's record without the room
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(me).encode())
        self.fd = fd
        return self

    def check_free(self) -> None:
        """BenchError naming the holder if a live process holds the lock (creates nothing)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self.in_use() from None
        finally:
            os.close(fd)

    def in_use(self) -> BenchError:
        """The error of a second writer, naming the holder."""
        return BenchError(f"run directory {str(self.dir)!r} is in use by {self.holder()}; wait for it to end, "
                          f"or use --tag/--out for a new one")

    def holder(self) -> str:
        """Who holds the lock, as its file says (pid, host, command)."""
        try:
            h = json.loads(self.path.read_text() or "{}")
            return f"pid {h['pid']} on {h['host']} ({h['command']!r})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process"

    def clear(self) -> None:
        """Empty the directory (all but the lock file): what it holds from now on is this holder's."""
        for p in self.dir.iterdir():
            if p.name != LOCK_NAME:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        self.cleared = True

    def discard(self) -> None:
        """Remove what this holder wrote into the directory (if it was emptied or created when claimed), and on
        release the folders :meth:`acquire` created: a run that failed before it started leaves nothing behind."""
        if self.cleared or self.created is not None:
            self.clear()
        self.discarded = True

    def release(self) -> None:
        """Remove the lock file and let go (the file goes first, so that nobody locks a file on its way out)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):  # gone with its directory, or a read-only file system: left unheld
                self.path.unlink()
            os.close(self.fd)
            self.fd = None
            if self.discarded and self.created is not None:
                for d in (self.dir, *self.dir.parents):
                    with contextlib.suppress(OSError):
                        d.rmdir()  # only empty folders go
                    if d == self.created:
                        break

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim(out: Path, force: bool = False, clear: bool = True) -> RunLock:
    """Own run directory ``out``: refuse a file, a run directory another process holds (naming it), an existing
    directory without ``force``, and with ``force`` one that is not a run directory (no config.json of this
    suite); with ``force``, empty an unheld run directory (keeping the lock; ``clear=False``: the caller will call
    :meth:`RunLock.clear`). Returns the held :class:`RunLock`. Nothing is created in a directory that is refused."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BenchError(f"run directory {str(out)!r} is a file, not a directory; give --out a directory")

    def check(lock: RunLock | None) -> list[Path]:
        held = [p for p in out.iterdir() if p.name != LOCK_NAME] if out.is_dir() else []
        if held and lock is None:
            RunLock(out).check_free()
        if held and not force:
            raise BenchError(f"run directory {str(out)!r} already exists; pass --force to replace it, or --tag/--out "
                             f"for a new one")
        if held and not is_run_dir(out):
            raise BenchError(f"--force replaces only a run directory, and {str(out)!r} is not one (no config.json of "
                             f"this suite): refusing to delete it; give --out a new or empty directory")
        foreign = sorted(p.name for p in held if not RUN_FILES.fullmatch(p.name))
        if foreign:
            raise BenchError(f"--force replaces only a run directory, and {str(out)!r} holds {foreign[0]!r}, which no run "
                             f"writes: refusing to delete it; move it away, or give --out a new or empty directory")
        return held

    check(None)
    lock = RunLock(out).acquire()
    try:
        check(lock)
        if clear:
            lock.clear()
    except BaseException:
        lock.discarded = lock.created is not None  # folders made for a refused run go again
        lock.release()
        raise
    return lock
