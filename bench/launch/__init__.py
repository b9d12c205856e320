"""Build and run the horovodrun command for run directories.

``prepare`` writes ``config.json`` and ``system.json`` (refusing to replace an existing run
unless ``force``); ``execute`` runs ``horovodrun ... python -m bench.worker --config ...``,
streams its output (also kept in ``launch.log``), enforces the run's ``timeout_s``, and marks the run
failed whenever the job did not end with an ``ok`` summary. Earlier run directories are never touched.
``run_many`` / ``execute_many`` run several prepared runs with identical launch settings as one job, one
after the other (``--config`` repeated; the start-up of horovodrun, Python and Horovod, 10-25 s on a
2-core machine, is paid once per job instead of once per run); a study runs its runs that way.

Ending a job leaves nothing behind: horovodrun starts each rank in a process group of its own, so a
timeout, Ctrl-C, or SIGTERM / SIGHUP to the launcher (what Slurm and DVC send when a job is cancelled)
kills every descendant of horovodrun found at that moment, then marks the run failed with the reason; in
``run_many`` the runs of later jobs are marked failed ("not started") and none starts. A run cancelled by a signal
returns 128 + its number (143 for SIGTERM).
Should the launcher itself die without cleaning up (SIGKILL), every rank on this machine watches it
(``BENCH_LAUNCHER_PID``) and ends itself, marking the run failed.

A run directory has one owner at a time: :class:`RunLock` (an exclusive ``flock`` on ``<run dir>/.lock``,
which names the holder's pid, host and command) is held by the launcher from ``prepare`` to the end of the
job (``run``, ``run_many``); a second writer (another ``bench run``, ``--force``, a study's ``run@`` stage)
is refused with a :class:`bench.BenchError` naming the holder. ``--force`` replaces only a run directory
(one holding this suite's ``config.json``) that nobody holds; anything else is refused. While a job runs
on the emulated cluster, the cluster is recorded as in use by it (:func:`bench.placement.cluster_held`).

Modules, one job each: :mod:`.lock` (the run directory's owner), :mod:`.command` (the horovodrun command, the job's
environment and what system.json records of them), :mod:`.job` (executing a job: time limit, failure marking),
:mod:`.output` (forwarding the job's output), :mod:`.terminate` (ending every process of a job), :mod:`.lost_rank`
(which rank was lost, read from horovodrun's output). This package's own functions are the entry points:
:func:`run`, :func:`run_many`, :func:`prepare`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
from pathlib import Path

from .. import BenchError, registration
from ..cluster.slurm import check_allocation
from ..config import RunConfig
from ..layout import default_run_dir
from ..placement import cluster_held, emulated_cluster, processes
from ..resolve import check_machine
from ..results import mark_failed, write_json_atomic
from ..system import collect
from .command import horovod_environment, horovod_record, horovodrun_command, host_slots, network
from .job import execute, execute_many, jobs
from .lock import RunLock, claim, run_path

__all__ = ["check_launch", "execute", "execute_many", "prepare", "run", "run_many"]


def check_launch(cfgs: list[RunConfig]) -> None:
    """What this machine must offer the runs, checked before anything is written (the ranks never probe it again:
    they read their config.json with :func:`bench.runconfig.load_config`): for a Slurm profile an allocation holding
    every process, each run's :func:`bench.resolve.check_machine` (cores, the emulated cluster's support,
    dataset files...), and the hosts' names and slots against its processes (:func:`bench.launch.command.host_slots`:
    the hosts list or a hostfile, a Slurm job's own)."""
    check_allocation(cfgs, processes)
    for cfg in cfgs:
        check_machine(cfg)
        given = None if cfg.launch.emulated_hosts else host_slots(cfg)  # names that reach a shell: checked
        if given is not None and sum(k for _, k in given[1]) < processes(cfg) and not cfg.launch.oversubscribe:
            raise BenchError(f"{processes(cfg)} processes ({cfg.algorithm} with np={cfg.launch.np}) exceed the "
                             f"{sum(k for _, k in given[1])} slots of {given[0]}; lower --np or pass --oversubscribe")


def prepare(cfg: RunConfig, out: Path, force: bool = False, planned: Path | None = None,
            lock: RunLock | None = None) -> Path:
    """Create the run directory with config.json and system.json. ``planned``: a config file written by the
    study plan for ``cfg``, copied byte for byte (what the plan wrote is what runs). ``lock``: the directory's
    lock, already held by the caller (:func:`claim`, which applied ``force``); without it the directory is
    claimed for the time of this call."""
    out = run_path(out)
    if lock is None:
        with claim(out, force) as own:
            return prepare(cfg, out, force, planned, own)
    config_path = out / "config.json"
    try:
        emulated = emulated_cluster(cfg)
        if planned is not None:
            shutil.copyfile(planned, config_path)
        else:
            write_json_atomic(config_path, cfg.to_dict())
        system = collect(horovodrun_command(cfg, config_path, emulated))
        if planned is not None:
            system["planned"] = str(Path(planned).resolve())  # a study's stage knows its runs by it (bench.study.run)
        system["network"] = network(cfg, emulated)
        system["provenance"] = registration.provenance(cfg.study, config_path)  # config hash, the study's registration
        system["horovod_settings"] = horovod_record(cfg, horovod_environment(cfg))  # execute() records what the job got
        write_json_atomic(out / "system.json", system)
    except BaseException:
        lock.discard()  # no half-prepared run directory stays
        raise
    return out


def run(cfg: RunConfig, out: Path | None = None, force: bool = False, echo: bool = True, env: dict | None = None,
        planned: Path | None = None, claimed=None) -> tuple[Path, int]:
    """Prepare and execute one run, owning its directory (:class:`RunLock`) and the emulated cluster, if it uses
    one, from the first file written to the end of the job; ``claimed()``, if given, is called once both are held
    (so that what it prints never precedes a refusal to run)."""
    out = run_path(out or default_run_dir(cfg))
    check_launch([cfg])
    with claim(out, force) as lock, contextlib.ExitStack() as held:
        try:
            held.enter_context(cluster_held([cfg], [out]))
        except BaseException:
            lock.discard()  # the cluster is in use: nothing of this run stays
            raise
        if claimed is not None:
            claimed()
        run_dir = prepare(cfg, out, planned=planned, lock=lock)
        return run_dir, execute(cfg, run_dir, echo=echo, env=env)


def run_many(items: list[tuple[RunConfig, Path | None, Path | None]], force: bool = False, echo: bool = True,
             env: dict | None = None, max_runs_per_job: int = 0, progress=print) -> list[tuple[Path, int]]:
    """Prepare and run ``items`` (cfg, run directory or None, planned config or None), consecutive runs with the same
    launch settings as one job (:func:`execute_many`); returns (run directory, code) per item, in order. A job
    cancelled by a signal to the launcher ends the batch: the runs of later jobs are marked failed, not started, with
    the signal's code."""
    cfgs = [c for c, _, _ in items]
    check_launch(cfgs)
    outs = [run_path(out or default_run_dir(c)) for c, out, _ in items]
    twice = sorted({str(d) for d in outs if outs.count(d) > 1})
    if twice:
        raise BenchError(f"run directory {twice[0]!r} is given to more than one run")
    with contextlib.ExitStack() as held:  # every directory is owned before any is written, until the last job ends
        locks: list[RunLock] = []
        try:
            for d in outs:
                locks.append(held.enter_context(claim(d, force, clear=False)))
            for lock in locks:
                lock.clear()
            held.enter_context(cluster_held(cfgs, outs))
            dirs = [prepare(c, d, planned=planned, lock=lock) for (c, _, planned), d, lock in zip(items, outs, locks)]
        except BaseException:
            for lock in locks:  # nothing prepared stays when one of the runs cannot be
                lock.discard()
            raise
        codes: list[int] = [1] * len(items)
        groups = jobs(cfgs, max_runs_per_job)
        for k, g in enumerate(groups, start=1):
            if progress:
                names = ", ".join(f"{cfgs[i].algorithm}/{dirs[i].name}" for i in g)
                progress(f"[bench] job {k}/{len(groups)} ({len(g)} run(s) on {cfgs[g[0]].launch.hardware}): {names}")
            for i, code in zip(g, execute_many([cfgs[i] for i in g], [dirs[i] for i in g], echo=echo, env=env)):
                codes[i] = code
            signalled = max(codes[i] for i in g)
            if signalled > 128:  # a signal to the launcher cancelled this job: cancel the whole batch, start no other
                name = signal.Signals(signalled - 128).name
                for later in groups[k:]:
                    for i in later:
                        mark_failed(dirs[i], f"not started: the launcher received {name} during job {k} of "
                                    f"{len(groups)}; cancelled", root_cause=True, exit_code=signalled)
                        codes[i] = signalled
                print(f"[bench] {name}: {sum(len(x) for x in groups[k:])} run(s) of later jobs not started",
                      file=sys.stderr)
                break
        return list(zip(dirs, codes))
