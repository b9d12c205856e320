"""distbench: reproducible benchmarks of distributed and asynchronous SGD on Horovod + PyTorch."""

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
    """Run a command-line handler: a BenchError becomes one ``error: ...`` line on stderr and exit code 2."""
    import sys

    try:
        return func(*args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
