"""distbench: reproducible benchmarks of distributed and asynchronous SGD on Horovod + PyTorch."""

import argparse

__version__ = "0.1.0"

#: Version of the run-directory schema (config.json, rank<r>.jsonl, eval.jsonl, summary.json).
SCHEMA_VERSION = 1


def short(value, width: int = 80) -> str:
    """``repr(value)`` cut to ``width`` characters (``...`` marking the cut), for error messages: a value of a million
    elements prints as its start."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


class BenchError(Exception):
    """A user error: bad configuration or input. The CLI prints it on one line and exits 2."""


def run_command(func, *args) -> int:
    """Run a command-line handler: the one guard of every entry point (``python -m bench ...``, ``python -m
    bench.perf ...``). A BenchError becomes one ``error: ...`` line on stderr and exit code 2; a closed stdout
    (``... | head -1``) ends quietly with the code of a process SIGPIPE ends (141), no traceback and no "Exception
    ignored" line at exit; a stdout that cannot be written (``> /dev/full``) is one line and exit 1. What the handler
    printed is flushed here, inside the guard, not by the interpreter at exit."""
    import errno
    import os
    import sys

    try:
        rc = func(*args)
        sys.stdout.flush()
        return rc
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if e.errno not in (errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        # what is left in stdout's buffer is dropped: the interpreter's flush at exit would fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        if e.errno == errno.EPIPE:
            return 141
        print(f"error: cannot write {e.filename or 'the output'}: {e.strerror}", file=sys.stderr)
        return 1


class OneLineParser(argparse.ArgumentParser):
    """argparse with a usage error in one line (``error: ...``, exit 2), not the usage block and the error: the
    suite's rule for bad input. Subcommands' parsers are of this class too (``add_subparsers`` uses the parent's);
    every command line of the suite (``bench``, ``bench.perf ...``, ``bench cluster``) parses with it."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
