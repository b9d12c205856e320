"""Executing prepared runs as one horovodrun job: the command started in its own session with its output forwarded,
its time limit (the sum of its runs' ``timeout_s``) enforced, a cancelled or failed job ended whole, and every run
that did not end with an ``ok`` summary marked failed with the job's reason (the lost rank first, when horovodrun's
output names one). Which runs may share a job: :func:`same_job`, :func:`jobs`."""

from __future__ import annotations

import collections
import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import BenchError, cpu_idle
from ..cluster import DelayLineDown, watched
from ..config import RunConfig
from ..layout import REPO_ROOT
from ..placement import cluster_held, emulated_cluster, host_shares, processes, runtime
from ..results import mark_failed, read_json, write_json_atomic
from .command import horovod_record, horovodrun_command, job_environment
from .lost_rank import is_exit_evidence, name_killed_rank
from .output import Tee, pump
from .terminate import Terminated, kill_job, signals_end_the_job


def execute(cfg: RunConfig, run_dir: Path, echo: bool = True, env: dict | None = None) -> int:
    """Run the job; returns 0 when it ended with an ``ok`` summary, else 1 (the run is marked failed)."""
    return execute_many([cfg], [run_dir], echo=echo, env=env)[0]


def same_job(a: RunConfig, b: RunConfig) -> bool:
    """True if runs ``a`` and ``b`` can share one horovodrun job (same launch settings, processes and runtime)."""
    return (a.launch == b.launch and processes(a) == processes(b) and host_shares(a) == host_shares(b)
            and runtime(a) == runtime(b))


def execute_many(cfgs: list[RunConfig], run_dirs: list[Path], echo: bool = True, env: dict | None = None) -> list[int]:
    """Run prepared runs with identical launch settings as one horovodrun job, one after the other (the start-up
    of horovodrun, Python and Horovod is paid once). Returns each run's code: 0 for an ``ok`` summary, else 1 (the
    run is marked failed; the runs of the job that finished before a failure keep their results). The job's
    time limit is the sum of the runs' ``timeout_s``."""
    if not cfgs or len(cfgs) != len(run_dirs):
        raise BenchError(f"execute_many: {len(cfgs)} configs for {len(run_dirs)} run directories")
    for c in cfgs[1:]:
        if not same_job(cfgs[0], c):
            raise BenchError(f"runs {cfgs[0].algorithm} and {c.algorithm} differ in launch settings: one job cannot run both")
    run_dirs = [Path(d).resolve() for d in run_dirs]
    with cluster_held(cfgs, run_dirs), cpu_idle.held(cfgs[0].launch.cpu_idle) as idle:
        for d in run_dirs:
            system = read_json(d / "system.json")
            system["cpu_idle"] = idle
            write_json_atomic(d / "system.json", system)
        return _execute_job(cfgs, run_dirs, echo, env)


def _execute_job(cfgs: list[RunConfig], run_dirs: list[Path], echo: bool, env: dict | None) -> list[int]:
    """:func:`execute_many` once its arguments are checked (and the emulated cluster, if any, is held)."""
    cfg = cfgs[0]
    configs = [d / "config.json" for d in run_dirs]
    emulated = emulated_cluster(cfg)
    cmd = horovodrun_command(cfg, configs, emulated)
    if len(run_dirs) > 1:  # system.json says which job ran the run, and its place in it
        for k, d in enumerate(run_dirs):
            system = read_json(d / "system.json")
            system.update(launch_command=cmd, job_runs=len(run_dirs), job_position=k)
            write_json_atomic(d / "system.json", system)
    full_env = job_environment(cfg, emulated, env)
    record = horovod_record(cfg, full_env)
    for d in run_dirs:  # the Horovod settings the job's processes actually got
        system = read_json(d / "system.json")
        if system.get("horovod_settings") != record:
            system["horovod_settings"] = record
            write_json_atomic(d / "system.json", system)
    timeout_s = sum(c.train.timeout_s for c in cfgs)
    tail: collections.deque = collections.deque(maxlen=60)
    evidence: list[str] = []  # horovodrun's lines on how each rank ended, all of them
    t0 = time.time()
    reason = None
    with contextlib.ExitStack() as stack:
        watch = stack.enter_context(watched(emulated, run_dirs))  # the delay lines, if any, checked while it runs
        logs = [stack.enter_context(open(d / "launch.log", "a")) for d in run_dirs]
        log = Tee(logs)
        log.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                                cwd=str(REPO_ROOT), start_new_session=True)
        reader = threading.Thread(target=pump, args=(proc.stdout, log, tail, echo, evidence), daemon=True)
        reader.start()
        try:
            with signals_end_the_job():
                rc = watch.wait(proc, timeout_s)
        except DelayLineDown as e:
            reason = str(e)
        except subprocess.TimeoutExpired:
            reason = f"timeout: job still running after timeout_s={timeout_s:g} s; killed"
        except KeyboardInterrupt:
            reason = "interrupted by the user (Ctrl-C)"
        except Terminated as e:
            reason = f"the launcher received {e}: job cancelled"
        if reason is not None:
            kill_job(proc, configs[0])
            rc = proc.wait()
        reader.join(timeout=10)
    over_ssh = emulated is not None or bool(cfg.launch.hostfile or cfg.launch.hosts)
    return _settle(run_dirs, rc, reason, tail, t0, over_ssh, evidence)


def _settle(run_dirs: list[Path], rc: int, reason: str | None, tail, t0: float, over_ssh: bool,
            evidence=()) -> list[int]:
    """After the job: each run's code (0: an ``ok`` summary, kept as it is); every other run is marked failed with
    the job's reason (cancelled, timed out, horovodrun's exit code and last error line, or no summary)."""
    cancelled = reason is not None
    codes = []
    for run_dir in run_dirs:
        summary_path = run_dir / "summary.json"
        summary = read_json(summary_path) if summary_path.exists() else {}
        if summary.get("status") == "ok":
            codes.append(0)  # finished before whatever ended the job: kept as it is
            continue
        why = reason
        if why is None and rc != 0:
            errors = [l for l in tail if "Error" in l or "error" in l or "Exception" in l]
            why = f"horovodrun exited with code {rc}" + (f"; {errors[-1].strip()}" if errors else "")
        if why is None:
            why = "job ended without an ok summary"
        mark_failed(run_dir, why, root_cause=cancelled, exit_code=rc, wall_s=time.time() - t0)
        name_killed_rank(run_dir, [*evidence, *(l for l in tail if not is_exit_evidence(l))], over_ssh=over_ssh)
        print(f"[bench] run FAILED: {read_json(summary_path).get('reason')} ({run_dir})", file=sys.stderr)
        codes.append(1)
    return codes


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
