"""``python -m MODULE ARGS`` as a process forked from the test process, which has imported the suite already: the
command's own process (its exit code, its stdout and stderr file descriptors, its working folder, environment and
``sys.argv``), without the interpreter start and the imports of torch, pandas and scipy that a new Python pays for
every case (3-5 s on a 2-core machine; the hostile-input tables alone run about 170 commands).

The child is made to look like a new interpreter where the test process differs: the warning filters and the root
logger's handlers as Python starts them (not pytest's capture), default signal dispositions, the command's own
``atexit`` functions run (not the test process's), stdin from /dev/null, one intra-op thread for torch (the parent's
thread pool does not survive a fork). Where PYTHONPATH names another copy of the repository, or the command runs in
another folder, it is a new interpreter (subprocess): that copy's modules are not this one's. What a real interpreter start does that this does not (``-X`` options, ``site``
customisation, a closed stdout at start-up) is tested with real subprocesses (tests/single/test_hostile_cli.py)."""

from __future__ import annotations

import atexit
import io
import logging
import os
import runpy
import selectors
import signal
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

_FILTERS = list(warnings.filters)  # as the interpreter started them (this module is imported at collection)
_SHOW = warnings.showwarning
_OWN = Path(__file__).resolve().parent.parent


def _child(module: str, args: list[str], cwd: str, env: dict[str, str], out_w: int, err_w: int) -> int:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (null, out_w, err_w):
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start-up
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    warnings.filters[:] = _FILTERS
    warnings.showwarning = _SHOW
    warnings._filters_mutated()  # type: ignore[attr-defined]
    logging.root.handlers.clear()
    logging.root.setLevel(logging.WARNING)
    atexit._clear()  # type: ignore[attr-defined]
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    sys.argv = [module, *args]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # type: ignore[attr-defined]
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120  # what Python exits with when flushing stdout at exit fails
    return code


_WARM: set[str] = set()


def _warm(module: str) -> None:
    """Import once, in this process, what ``python -m MODULE`` imports (and PyTorch's meta-device kernels, which the
    launcher's memory check loads on its first use), so that every forked command finds them imported."""
    if module in _WARM:
        return
    _WARM.add(module)
    import importlib

    importlib.import_module(module)
    importlib.import_module("bench.__main__")  # guarded by __name__ (a package's __main__ may not be: not imported)
    from bench.models import footprint
    from bench.resolve import resolve

    footprint(resolve("sync", np=1, profile="tiny", check=False).train, (1, 8, 8), 10)


def run_module(module: str, args: list[str], cwd: Path | str, env: dict[str, str],
               timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in ``cwd`` with the environment ``env`` (all of it), forked from this process;
    the completed process with its text output. subprocess.TimeoutExpired (the child killed) past ``timeout``."""
    path = env.get("PYTHONPATH", "")
    if not path or Path(path.split(os.pathsep)[0]).resolve() != _OWN or Path(cwd).resolve() != _OWN:
        # another copy of the repository (its own modules), or another working folder: a new interpreter
        return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    _warm(module)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the command's process
        code = 1
        try:
            os.close(out_r)
            os.close(err_r)
            code = _child(module, list(args), str(cwd), dict(env), out_w, err_w)
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                for fd in chunks:
                    os.close(fd)
                raise subprocess.TimeoutExpired([module, *args], timeout)
            for key, _ in sel.select(min(left, 1.0)):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    for fd in chunks:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    text = [b"".join(chunks[fd]).decode("utf-8", errors="replace") for fd in (out_r, err_r)]
    return subprocess.CompletedProcess([sys.executable, "-m", module, *args], os.waitstatus_to_exitcode(status), *text)
