"""Executing prepared runs as one horovodrun job: the command started in its own session with its output forwarded,
its time limit (the sum of its runs' ``timeout_s``) enforced, a cancelled or failed job ended whole, and every run
that did not end with an ``ok`` summary marked failed with the job's reason (the lost rank first, when horovodrun's
output names one). Which runs may share a job: :func:`same_job`, :func:`jobs`."""

from __future__ import annotations

import collections
import contextlib
import errno
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import BenchError, cpu_idle
from ..cluster import watched
from ..config import RunConfig
from ..layout import REPO_ROOT
from ..ownership import still_ours, token_of
from ..placement import cluster_held, emulated_cluster, host_shares, processes, runtime
from ..results import ResultsError, mark_failed, read_json, write_json_atomic
from .command import horovod_record, horovodrun_command, job_environment
from .health import JobFault, JobWatch
from .lock import free_reserve, tokens_env
from .lost_rank import is_exit_evidence, name_killed_rank
from .output import Tee, pump
from .terminate import Terminated, kill_job, signals_end_the_job


def execute(cfg: RunConfig, run_dir: Path, echo: bool = True, env: dict | None = None) -> int:
    """Run the job; returns 0 when it ended with an ``ok`` summary, else 1 (the run is marked failed), or 128 + the
    signal's number when a signal to the launcher cancelled the job (a shell's convention: 143 for SIGTERM)."""
    return execute_many([cfg], [run_dir], echo=echo, env=env)[0]


def same_job(a: RunConfig, b: RunConfig) -> bool:
    """True if runs ``a`` and ``b`` can share one horovodrun job (same launch settings, processes and runtime)."""
    return (a.launch == b.launch and processes(a) == processes(b) and host_shares(a) == host_shares(b)
            and runtime(a) == runtime(b))


def execute_many(cfgs: list[RunConfig], run_dirs: list[Path], echo: bool = True, env: dict | None = None) -> list[int]:
    """Run prepared runs with identical launch settings as one horovodrun job, one after the other (the start-up
    of horovodrun, Python and Horovod is paid once). Returns each run's code: 0 for an ``ok`` summary, else 1 (the
    run is marked failed; the runs of the job that finished before a failure keep their results), or 128 + the
    signal's number for a run that a signal to the launcher cancelled (SIGTERM, SIGHUP, SIGINT: what Slurm, DVC and a
    terminal send; :func:`bench.launch.run_many` then starts no later job). The job's time limit is the sum of the
    runs' ``timeout_s``."""
    if not cfgs or len(cfgs) != len(run_dirs):
        raise BenchError(f"execute_many: {len(cfgs)} configs for {len(run_dirs)} run directories")
    for c in cfgs[1:]:
        if not same_job(cfgs[0], c):
            raise BenchError(f"runs {cfgs[0].algorithm} and {c.algorithm} differ in launch settings: one job cannot run both")
    run_dirs = [Path(d).resolve() for d in run_dirs]
    with cluster_held(cfgs, run_dirs), cpu_idle.held(cfgs[0].launch.cpu_idle) as idle:
        return _execute_job(cfgs, run_dirs, echo, env, idle)


def _record(run_dirs: list[Path], fields) -> None:
    """Add ``fields(run_dir)`` to every run's system.json."""
    for d in run_dirs:
        system = read_json(d / "system.json")
        system.update(fields(d))
        write_json_atomic(d / "system.json", system)


def _execute_job(cfgs: list[RunConfig], run_dirs: list[Path], echo: bool, env: dict | None, idle) -> list[int]:
    """:func:`execute_many` once its arguments are checked (and the emulated cluster, if any, is held)."""
    cfg = cfgs[0]
    configs = [d / "config.json" for d in run_dirs]
    emulated = emulated_cluster(cfg)
    cmd = horovodrun_command(cfg, configs, emulated)
    full_env = {**job_environment(cfg, emulated, env), **tokens_env(run_dirs)}
    record = horovod_record(cfg, full_env)
    timeout_s = sum(c.train.timeout_s for c in cfgs)
    tail: collections.deque = collections.deque(maxlen=60)
    evidence: list[str] = []  # horovodrun's lines on how each rank ended, all of them
    t0 = time.time()
    reason, rc, signalled = None, 1, 0
    tokens = {d: token_of(d) for d in run_dirs}  # the job's locks: a directory whose lock changes is no longer its
    with contextlib.ExitStack() as stack:
        try:
            job = {"launch_command": cmd, "job_runs": len(run_dirs)} if len(run_dirs) > 1 else {}
            _record(run_dirs, lambda d: {"cpu_idle": idle, "horovod_settings": record,  # what the job's processes got
                                         **(job and {**job, "job_position": run_dirs.index(d)})})
            log = stack.enter_context(Tee.opened([d / "launch.log" for d in run_dirs]))
        except OSError as e:  # the run directory cannot be written (full, read-only, gone): nothing is started
            return _settle(run_dirs, 1, f"cannot write the run directory: {e.strerror or e} ({e.filename})", tail, t0,
                           False, tokens=tokens)
        delay = stack.enter_context(watched(emulated, run_dirs))  # the delay lines, if any, checked while it runs
        watch = JobWatch(cfg, emulated, tokens, delay, log)
        stack.callback(watch.close)
        log.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**full_env, **watch.heartbeats.env()}, cwd=str(REPO_ROOT), start_new_session=True)
        reader = threading.Thread(target=pump, args=(proc.stdout, log, tail, echo, evidence), daemon=True)
        reader.start()
        try:
            with signals_end_the_job():
                rc = watch.wait(proc, timeout_s)
        except JobFault as e:
            reason = str(e)
        except subprocess.TimeoutExpired:
            reason = f"timeout: job still running after timeout_s={timeout_s:g} s; killed"
        except KeyboardInterrupt:
            reason, signalled = "interrupted by the user (Ctrl-C)", signal.SIGINT
        except Terminated as e:
            reason, signalled = f"the launcher received {e}: job cancelled", e.signum
        if reason is None and rc < 0:  # horovodrun itself was killed: its ranks, in process groups of their own, live on
            reason = f"horovodrun (pid {proc.pid}) was killed by {signal.Signals(-rc).name}; its ranks were ended"
        if reason is not None:
            kill_job(proc, configs[0])
            rc = proc.wait()
        reader.join(timeout=10)
    over_ssh = emulated is not None or bool(cfg.launch.hostfile or cfg.launch.hosts)
    return _settle(run_dirs, rc, reason, tail, t0, over_ssh, evidence, tokens, 128 + signalled if signalled else 1)


def _settle(run_dirs: list[Path], rc: int, reason: str | None, tail, t0: float, over_ssh: bool,
            evidence=(), tokens: dict | None = None, failed_code: int = 1) -> list[int]:
    """After the job: each run's code (0: an ``ok`` summary, kept as it is); every other run is marked failed with
    the job's reason (cancelled, timed out, horovodrun's exit code and last error line, or no summary). A run
    directory that is no longer the job's (its lock's token not in ``tokens``) is left alone; one that cannot be
    written is said so, in one line."""
    cancelled = reason is not None
    codes = []
    for run_dir in run_dirs:
        summary_path = run_dir / "summary.json"
        why = reason
        if why is None and rc != 0:
            errors = [l for l in tail if "Error" in l or "error" in l or "Exception" in l]
            why = f"horovodrun exited with code {rc}" + (f"; {errors[-1].strip()}" if errors else "")
        if tokens is not None and not still_ours(run_dir, tokens[run_dir]):
            print(f"[bench] run FAILED: {why or 'job ended'}; nothing written to {str(run_dir)!r} (gone, or another "
                  f"run's now)", file=sys.stderr)
            codes.append(failed_code)
            continue
        try:
            summary = read_json(summary_path) if summary_path.exists() else {}
        except ResultsError:
            summary = {}
        if summary.get("status") == "ok":
            codes.append(0)  # finished before whatever ended the job: kept as it is
            continue
        why = why or "job ended without an ok summary"
        try:
            _mark(run_dir, why, cancelled, rc, t0, evidence, tail, over_ssh)
            why = read_json(summary_path).get("reason")
        except OSError as e:
            why = f"{why}; its summary.json could not be written ({e.strerror or e})"
        print(f"[bench] run FAILED: {why} ({run_dir})", file=sys.stderr)
        codes.append(failed_code)
    return codes


def _mark(run_dir: Path, why: str, cancelled: bool, rc: int, t0: float, evidence, tail, over_ssh: bool) -> None:
    """Mark the run failed (naming the lost rank first when horovodrun's output shows one); on a full disk, once more
    with the room its lock file kept (:func:`bench.launch.lock.free_reserve`)."""
    for attempt in (0, 1):
        try:
            mark_failed(run_dir, why, root_cause=cancelled, exit_code=rc, wall_s=time.time() - t0)
            name_killed_rank(run_dir, [*evidence, *(l for l in tail if not is_exit_evidence(l))], over_ssh=over_ssh)
            return
        except OSError as e:
            if attempt or e.errno != errno.ENOSPC or not free_reserve(run_dir):
                raise


def jobs(cfgs: list[RunConfig], max_runs: int = 0) -> list[list[int]]:
    """Indices of ``cfgs`` grouped into jobs: consecutive runs that :func:`same_job` allows, at most ``max_runs``
    a job (0: no limit)."""
    groups: list[list[int]] = []
    for i, c in enumerate(cfgs):
        g = groups[-1] if groups else None
        if g and same_job(cfgs[g[0]], c) and (not max_runs or len(g) < max_runs):
            g.append(i)
        else:
            groups.append([i])
    return groups
