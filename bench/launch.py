"""Build and run the horovodrun command for one run directory.

``prepare`` writes ``config.json`` and ``system.json`` (refusing to replace an existing run
unless ``force``); ``execute`` runs ``horovodrun ... python -m bench.worker --config ...``,
streams its output (also kept in ``launch.log``), enforces the run's ``timeout_s`` by killing
the whole process group, and marks the run failed whenever the job did not end with an ``ok``
summary. Earlier run directories are never touched.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import BenchError
from .algorithms import get_algorithm
from .config import RunConfig
from .layout import REPO_ROOT, default_run_dir
from .results import mark_failed, read_json, write_json_atomic
from .system import collect, horovodrun_path


def processes(cfg: RunConfig) -> int:
    """Processes horovodrun starts: the workers plus the algorithm's server ranks."""
    return cfg.launch.np + get_algorithm(cfg.algorithm).server_ranks(cfg.params, cfg.launch.np)


def horovodrun_command(cfg: RunConfig, config_path: Path) -> list[str]:
    launch = cfg.launch
    n = processes(cfg)
    cmd = [horovodrun_path(), "-np", str(n), f"--{launch.controller}"]
    if launch.hostfile:
        cmd += ["--hostfile", launch.hostfile]
    else:
        cmd += ["-H", launch.hosts or f"localhost:{n}"]
    if launch.network_interface:
        cmd += ["--network-interface", launch.network_interface]
    if launch.ssh_port:
        cmd += ["-p", str(launch.ssh_port)]
    return cmd + [sys.executable, "-m", "bench.worker", "--config", str(config_path)]


def prepare(cfg: RunConfig, out: Path, force: bool = False, planned: Path | None = None) -> Path:
    """Create the run directory with config.json and system.json. ``planned``: a config file written by the
    study plan for ``cfg``, copied byte for byte (what the plan wrote is what runs)."""
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        if not force:
            raise BenchError(f"run directory {str(out)!r} already exists; pass --force to replace it, or --tag/--out for a new one")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    if planned is not None:
        shutil.copyfile(planned, config_path)
    else:
        write_json_atomic(config_path, cfg.to_dict())
    write_json_atomic(out / "system.json", collect(horovodrun_command(cfg, config_path)))
    return out


def _pump(stream, log, tail: collections.deque, echo: bool) -> None:
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        tail.append(line.rstrip("\n"))
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()


def execute(cfg: RunConfig, run_dir: Path, echo: bool = True, env: dict | None = None) -> int:
    """Run the job; returns 0 when it ended with an ``ok`` summary, else 1 (the run is marked failed)."""
    run_dir = Path(run_dir).resolve()
    cmd = horovodrun_command(cfg, run_dir / "config.json")
    full_env = dict(os.environ)
    full_env.setdefault("BENCH_PROGRESS", "1")
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", "120")
    full_env.update(cfg.launch.env)
    full_env.update(env or {})
    tail: collections.deque = collections.deque(maxlen=60)
    t0 = time.time()
    reason = None
    with open(run_dir / "launch.log", "a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                                cwd=str(REPO_ROOT), start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc.stdout, log, tail, echo), daemon=True)
        pump.start()
        try:
            rc = proc.wait(timeout=cfg.train.timeout_s)
        except subprocess.TimeoutExpired:
            reason = f"timeout: job still running after timeout_s={cfg.train.timeout_s:g} s; killed"
            _kill(proc)
            rc = proc.wait()
        except KeyboardInterrupt:
            reason = "interrupted by the user (Ctrl-C)"
            _kill(proc)
            rc = proc.wait()
        pump.join(timeout=10)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {}
    if reason is None and rc != 0:
        errors = [l for l in tail if "Error" in l or "error" in l or "Exception" in l]
        reason = f"horovodrun exited with code {rc}" + (f"; {errors[-1].strip()}" if errors else "")
    if reason is None and summary.get("status") != "ok":
        reason = "job ended without an ok summary"
    if reason is not None:
        mark_failed(run_dir, reason, exit_code=rc, wall_s=time.time() - t0)
        _name_killed_rank(run_dir, tail)
        print(f"[bench] run FAILED: {read_json(summary_path).get('reason')} ({run_dir})", file=sys.stderr)
        return 1
    return 0


def _name_killed_rank(run_dir: Path, tail) -> None:
    """A rank killed by a signal cannot write its own reason, and its peers then fail with
    secondary errors (e.g. "Horovod has been shut down"): when horovodrun reports that the first
    process to fail was killed, put that rank first in the reason."""
    text = "\n".join(tail)
    m = re.search(r"first process to do so was:\s*Process name: (\d+)\s*Exit code: (\d+)", text)
    if not m or int(m.group(2)) <= 128:
        return
    rank, code = int(m.group(1)), int(m.group(2))
    summary = read_json(run_dir / "summary.json")
    if not str(summary.get("reason", "")).startswith(f"rank {rank}:"):
        summary["reason"] = f"rank {rank}: killed by signal {code - 128} (exit code {code}); then: {summary.get('reason', '')}"
        summary["failed_rank"] = rank
        write_json_atomic(run_dir / "summary.json", summary)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run(cfg: RunConfig, out: Path | None = None, force: bool = False, echo: bool = True, env: dict | None = None,
        planned: Path | None = None) -> tuple[Path, int]:
    run_dir = prepare(cfg, out or default_run_dir(cfg), force=force, planned=planned)
    return run_dir, execute(cfg, run_dir, echo=echo, env=env)
