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
kills every descendant of horovodrun found at that moment, then marks the run failed with the reason.
Should the launcher itself die without cleaning up (SIGKILL), every rank on this machine watches it
(``BENCH_LAUNCHER_PID``) and ends itself, marking the run failed.

A run directory has one owner at a time: :class:`RunLock` (an exclusive ``flock`` on ``<run dir>/.lock``,
which names the holder's pid, host and command) is held by the launcher from ``prepare`` to the end of the
job (``run``, ``run_many``); a second writer (another ``bench run``, ``--force``, a study's ``run@`` stage)
is refused with a :class:`bench.BenchError` naming the holder. ``--force`` replaces only a run directory
(one holding this suite's ``config.json``) that nobody holds; anything else is refused. While a job runs
on the emulated cluster, the cluster is recorded as in use by it (:func:`cluster_held`).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import socket
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import BenchError, cpu_idle, watchdog
from .algorithms import get_algorithm
from .cluster import DelayLineDown, parse_delay, watched
from .config import RunConfig
from .layout import REPO_ROOT, default_run_dir
from .results import ResultsError, mark_failed, read_json, write_json_atomic
from .system import collect, horovodrun_path


def processes(cfg: RunConfig) -> int:
    """Processes horovodrun starts: the workers plus the algorithm's server ranks."""
    return cfg.launch.np + get_algorithm(cfg.algorithm).server_ranks(cfg.params, cfg.launch.np)


def emulated_cluster(cfg: RunConfig) -> dict | None:
    """For a run on an emulated cluster: bring it up, or reshape it (link rate, CPU shares, slots), with the hosts
    the run needs, and return its horovodrun settings (bench.cluster.launch_settings); None otherwise."""
    launch = cfg.launch
    if not launch.emulated_hosts:
        return None
    from . import cluster

    servers = processes(cfg) - launch.np
    hosts = max(launch.emulated_hosts, emulated_hosts_used(cfg))
    state = cluster.ensure(cluster.Spec(hosts, launch.emulated_slots, launch.link, host_shares(cfg), launch.link_delay))
    settings = cluster.launch_settings(state, processes(cfg), server_host=servers > 0)
    settings["cpu"] = cluster.cgroups.cpu_record(state, settings["hosts"], launch)
    return settings


def emulated_hosts_used(cfg: RunConfig) -> int:
    """Emulated hosts the run's processes occupy: its workers' (``emulated_slots`` each), then one per server rank."""
    servers = processes(cfg) - cfg.launch.np
    return -(-cfg.launch.np // cfg.launch.emulated_slots) + servers


def host_shares(cfg: RunConfig) -> dict[int, float]:
    """Emulated host index -> its CPU share (cores) for the run: ``cpu_per_host`` for every host of the cluster, a
    ``slow_mode: cpu`` straggler's host (worker i runs on host i: one slot per host) divided by ``slow_factor``,
    then ``emulated_cpu``; {} when the run is not on an emulated cluster or sets no share. BenchError (before
    anything is written, :func:`bench.resolve.validate`) if the hosts the run uses need more cores than there are."""
    from .cluster.spec import check_total
    from .cluster.spec import host_shares as shares_of

    launch = cfg.launch
    if not launch.emulated_hosts:
        return {}
    used = emulated_hosts_used(cfg)
    cpu_mode = launch.slow_mode == "cpu" and cfg.train.slow_factor > 1
    slow = {r: cfg.train.slow_factor for r in cfg.train.slow_ranks} if cpu_mode else {}
    shares = shares_of(max(launch.emulated_hosts, used), launch.cpu_per_host, dict(launch.emulated_cpu), slow)
    check_total(shares, used)
    return shares


@contextlib.contextmanager
def cluster_held(cfgs: list[RunConfig], run_dirs: list[Path]):
    """While the block runs, the emulated cluster (if any of ``cfgs`` uses one) is recorded as used by this
    process, so that no other job reshapes, rebuilds or tears it down under it (``bench.cluster.in_use``)."""
    if not any(c.launch.emulated_hosts for c in cfgs):
        yield
        return
    from . import cluster

    more = " ..." if len(run_dirs) > 3 else ""
    with cluster.in_use(f"bench run into {', '.join(str(d) for d in run_dirs[:3])}{more}"):
        yield


def horovodrun_command(cfg: RunConfig, config_path: Path | list[Path], emulated: dict | None = None) -> list[str]:
    """The horovodrun command of the run, or of a job of several runs with ``cfg``'s launch settings (a list of
    config paths; ``emulated``: the settings of :func:`emulated_cluster`)."""
    launch = cfg.launch
    n = processes(cfg)
    cmd = [horovodrun_path()]
    if emulated is not None:
        from .cluster import horovodrun_args

        cmd += horovodrun_args(emulated)
    else:
        cmd += ["-np", str(n)]
        cmd += ["--hostfile", launch.hostfile] if launch.hostfile else ["-H", launch.hosts or f"localhost:{n}"]
        if launch.network_interface:
            cmd += ["--network-interface", launch.network_interface]
        if launch.ssh_port:
            cmd += ["-p", str(launch.ssh_port)]
    paths = config_path if isinstance(config_path, list) else [config_path]
    return cmd + [f"--{launch.controller}", sys.executable, "-m", "bench.worker", *(a for p in paths for a in ("--config", str(p)))]


def network(cfg: RunConfig, emulated: dict | None) -> dict:
    """What system.json records of the interconnect between the job's hosts."""
    if emulated is None:
        return {"emulated": False, "interface": cfg.launch.network_interface or None}
    return {"emulated": True, "link": emulated["link"] or "unshaped", "latency_emulated": bool(emulated["delay"]),
            "link_delay": emulated["delay"] or "0ms", "link_delay_s": parse_delay(emulated["delay"]),
            "interface": emulated["network_interface"], "hosts_by_rank": emulated["hosts"], "cpu": emulated.get("cpu"),
            "note": "network namespaces on one machine; bandwidth shaped with tbf, " + (
                "latency: each host's ingress held link_delay by its delay line (NFQUEUE), a round trip between hosts "
                "2 x link_delay" if emulated["delay"] else "latency not emulated (link_delay 0)")}


def horovod_environment(cfg: RunConfig, base: dict | None = None) -> dict[str, str]:
    """The job's environment from ``base`` (default: this process's): the hardware profile's ``env``, then its
    Horovod settings (``cfg.launch.horovod``: they win over the same variables in the shell or ``env``)."""
    full_env = dict(os.environ if base is None else base)
    full_env.update(cfg.launch.env)
    full_env.update(cfg.launch.horovod.env())
    return full_env


def horovod_record(cfg: RunConfig, job_env: dict) -> dict:
    """What system.json records of Horovod's settings: the typed settings that were set, and every ``HOROVOD_*``
    variable the job's processes got (the effective values; a tuning variable absent keeps Horovod's default)."""
    from dataclasses import asdict

    from .config import HOROVOD_DEFAULTS

    settings = {k: v for k, v in asdict(cfg.launch.horovod).items() if v is not None}
    env = {k: v for k, v in sorted(job_env.items()) if k.startswith("HOROVOD_")}
    effective = {}
    for name, var in cfg.launch.horovod.ENV.items():
        effective[name] = env[var] if var in env else f"{HOROVOD_DEFAULTS[name]} (Horovod default)"
    wait = cfg.launch.horovod.wait_sleep_us
    effective["wait_sleep_us"] = wait if wait is not None else "none (Horovod's spinning synchronize)"
    if wait is not None:
        effective["wait_spin_us"] = cfg.launch.horovod.wait_spin_us or 0
    groups = cfg.launch.horovod.groups
    effective["groups"] = groups if groups is not None else "none (Horovod default: an allreduce per gradient)"
    return {"settings": settings, "effective": effective, "env": env}


LOCK_NAME = ".lock"


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
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(argv), "since": time.time()}
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
            with contextlib.suppress(FileNotFoundError):
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


def prepare(cfg: RunConfig, out: Path, force: bool = False, planned: Path | None = None,
            lock: RunLock | None = None) -> Path:
    """Create the run directory with config.json and system.json. ``planned``: a config file written by the
    study plan for ``cfg``, copied byte for byte (what the plan wrote is what runs). ``lock``: the directory's
    lock, already held by the caller (:func:`claim`, which applied ``force``); without it the directory is
    claimed for the time of this call."""
    out = Path(out).resolve()
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
        system["network"] = network(cfg, emulated)
        system["horovod_settings"] = horovod_record(cfg, horovod_environment(cfg))  # execute() records what the job got
        write_json_atomic(out / "system.json", system)
    except BaseException:
        lock.discard()  # no half-prepared run directory stays
        raise
    return out


def _pump(stream, log, tail: collections.deque, echo: bool, evidence: list) -> None:
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        tail.append(line.rstrip("\n"))
        if is_exit_evidence(line):
            evidence.append(line.rstrip("\n"))
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()


class _Terminated(Exception):
    """The launcher received SIGTERM, SIGHUP or SIGINT."""


@contextlib.contextmanager
def _signals_end_the_job():
    """While a job runs, SIGTERM, SIGHUP and SIGINT raise :class:`_Terminated` (in the main thread; elsewhere a
    no-op). SIGINT gets the handler too, not Python's KeyboardInterrupt: a launcher started in the background by a
    shell without job control (``cmd &``, nohup) inherits SIGINT ignored, and Python then installs no handler of its
    own, so a Ctrl-C or a ``kill -INT`` of its process group left the job running."""
    def handler(signum, frame):
        raise _Terminated(signal.Signals(signum).name)

    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread (e.g. a notebook kernel's worker thread): leave signals alone
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def execute(cfg: RunConfig, run_dir: Path, echo: bool = True, env: dict | None = None) -> int:
    """Run the job; returns 0 when it ended with an ``ok`` summary, else 1 (the run is marked failed)."""
    return execute_many([cfg], [run_dir], echo=echo, env=env)[0]


def same_job(a: RunConfig, b: RunConfig) -> bool:
    """True if runs ``a`` and ``b`` can share one horovodrun job (same launch settings and processes)."""
    return a.launch == b.launch and processes(a) == processes(b) and host_shares(a) == host_shares(b)


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
        log = _Tee(logs)
        log.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                                cwd=str(REPO_ROOT), start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc.stdout, log, tail, echo, evidence), daemon=True)
        pump.start()
        try:
            with _signals_end_the_job():
                rc = watch.wait(proc, timeout_s)
        except DelayLineDown as e:
            reason = str(e)
        except subprocess.TimeoutExpired:
            reason = f"timeout: job still running after timeout_s={timeout_s:g} s; killed"
        except KeyboardInterrupt:
            reason = "interrupted by the user (Ctrl-C)"
        except _Terminated as e:
            reason = f"the launcher received {e}: job cancelled"
        if reason is not None:
            _kill_job(proc, configs[0])
            rc = proc.wait()
        pump.join(timeout=10)
    over_ssh = emulated is not None or bool(cfg.launch.hostfile or cfg.launch.hosts)
    return _settle(run_dirs, rc, reason, tail, t0, over_ssh, evidence)


def job_environment(cfg: RunConfig, emulated: dict | None, env: dict | None) -> dict[str, str]:
    """The environment of a job's processes: this one's, the suite on PYTHONPATH, progress lines, Horovod's settings
    of the run, the emulated cluster's variables, the launcher's identity (the ranks watch it), then ``env``."""
    full_env = dict(os.environ)
    full_env.setdefault("BENCH_PROGRESS", "1")
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", "120")
    full_env = horovod_environment(cfg, full_env)
    full_env.update(emulated["env"] if emulated else {})
    full_env.update(watchdog.launcher_identity())
    full_env.update(env or {})
    return full_env


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
        _name_killed_rank(run_dir, [*evidence, *(l for l in tail if not is_exit_evidence(l))], over_ssh=over_ssh)
        print(f"[bench] run FAILED: {read_json(summary_path).get('reason')} ({run_dir})", file=sys.stderr)
        codes.append(1)
    return codes


class _Tee:
    """Write to several open files (the launch.log of every run of a job)."""

    def __init__(self, files):
        self.files = files

    def write(self, s: str) -> None:
        for f in self.files:
            f.write(s)

    def flush(self) -> None:
        for f in self.files:
            f.flush()


SSH_FAILED = 255  # ssh's own exit code: the connection or the remote side failed (not 128 + a signal)


def lost_rank_reason(code: int, over_ssh: bool) -> str | None:
    """Why a rank whose process ended with exit ``code`` (as horovodrun reports it) is gone, or None when the code
    says no more than an ordinary failure. Over ssh, 255 is ssh's own failure (the connection dropped, the host or
    its sshd went away, or the remote process was killed), never 128 + a signal; locally 129..128+NSIG is a signal."""
    if over_ssh and code == SSH_FAILED:
        return (f"lost over ssh (ssh exit code {code}: the connection to the rank's host failed or the remote process "
                f"was killed)")
    if 128 < code < 128 + signal.NSIG:
        return f"killed by signal {code - 128} (exit code {code})"
    return None


_EXIT_LINE = re.compile(r"^Process (\d+) exit with status code (-?\d+)\.")
_TERMINATING_LINE = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.")
_FIRST_EXIT = re.compile(r"first process to do so was:\s*Process name: (\d+)\s*Exit code: (\d+)")
_PEER_CLOSED = re.compile(r"\[(\d+)\]<std(?:out|err)>:.*(?:Connection closed by peer|Read error|Write error) "
                          r"\[([^\]]+)\]:\d+")  # gloo's transport, on a connection to ADDR


def is_exit_evidence(line: str) -> bool:
    """A line of horovodrun's output that :func:`lost_rank` reads (kept whole, however long the job's log)."""
    return bool(_EXIT_LINE.match(line) or _TERMINATING_LINE.match(line) or _PEER_CLOSED.search(line))


def lost_rank(lines, over_ssh: bool, hosts_by_rank: list[str] | None = None) -> tuple[int, str] | None:
    """The rank that was lost (killed, or gone over ssh) and so caused the job's failure, with how, read from
    horovodrun's output; None when nothing shows one. horovodrun prints "Process N exit with status code C." for
    every rank that ends non-zero, and "Terminating remaining workers after failure of Process K." once, when it
    starts ending the others: an exit code after that line may be horovodrun's own doing (ssh, terminated, exits
    255 too). So a rank is named when

    1. its exit code says lost or killed and it ended before horovodrun terminated anyone, or
    2. its exit code says lost or killed and a peer's transport saw its connection close ("Connection closed by
       peer [ADDR]" or a read or write error on it, ADDR the host of that rank alone): it went first, even where a peer's secondary error
       ("Horovod has been shut down") reached horovodrun before ssh reported the loss;
    3. horovodrun reported no exit for it at all (it ended the job first, before ssh reported the loss) and a
       peer's transport saw its connection close before horovodrun terminated anyone: the reason then says only
       that its connection closed first, not how it ended.

    Without per-process lines, horovodrun's "first process to do so was" is read as in case 1."""
    lines = list(lines)
    exits, peers_saw, terminating = [], [], False
    for line in lines:
        if _TERMINATING_LINE.match(line):
            terminating = True
        elif m := _EXIT_LINE.match(line):
            exits.append((int(m.group(1)), int(m.group(2)), not terminating))
        elif m := _PEER_CLOSED.search(line):
            peers_saw.append((int(m.group(1)), m.group(2), not terminating))
    if not exits and (m := _FIRST_EXIT.search("\n".join(lines))):
        exits = [(int(m.group(1)), int(m.group(2)), True)]
    for rank, code, before_termination in exits:
        why = lost_rank_reason(code, over_ssh)
        if why is not None and before_termination:
            return rank, why
    seen_by, seen_early = {}, {}
    for peer, addr, before_termination in peers_saw:
        on_host = [r for r, h in enumerate(hosts_by_rank or []) if h == addr and r != peer]
        if len(on_host) == 1:
            seen_by.setdefault(on_host[0], peer)
            if before_termination:
                seen_early.setdefault(on_host[0], peer)
    for rank, code, _ in exits:
        why = lost_rank_reason(code, over_ssh)
        if why is not None and rank in seen_by:
            return rank, f"{why}, and rank {seen_by[rank]} saw its connection close first"
    reported = {rank for rank, _, _ in exits}
    for rank, peer in seen_early.items():
        if rank not in reported and peer in reported:
            return rank, (f"its connection closed first (rank {peer} saw it close; horovodrun ended the job before "
                          f"reporting this rank's exit)")
    return None


def _name_killed_rank(run_dir: Path, lines, over_ssh: bool = False) -> None:
    """A rank killed by a signal (or lost over ssh) cannot write its own reason, and its peers then fail with
    secondary errors (e.g. "Horovod has been shut down"): when horovodrun's output shows which rank was lost
    (:func:`lost_rank`), put that rank first in the reason."""
    system = read_json(run_dir / "system.json") if (run_dir / "system.json").exists() else {}
    found = lost_rank(lines, over_ssh, (system.get("network") or {}).get("hosts_by_rank"))
    if found is None:
        return
    rank, why = found
    summary = read_json(run_dir / "summary.json")
    if not str(summary.get("reason", "")).startswith(f"rank {rank}:"):
        summary["reason"] = f"rank {rank}: {why}; then: {summary.get('reason', '')}"
        summary["failed_rank"] = rank
        write_json_atomic(run_dir / "summary.json", summary)


def _kill_job(proc: subprocess.Popen, config_path: Path, grace_s: float = 10.0) -> None:
    """SIGTERM horovodrun, every process below it (found before anything dies, since horovodrun puts each rank in
    a process group of its own) and every other process of this machine running this run's config (ranks that
    ssh started, on an emulated cluster), then SIGKILL whatever is left after ``grace_s``."""
    import psutil

    try:
        root = psutil.Process(proc.pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    procs += [p for p in _running(config_path) if p.pid not in {q.pid for q in procs}]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def _running(config_path: Path) -> list:
    """Processes of this machine whose command line names ``config_path`` (this run's ranks)."""
    import psutil

    needle, found = str(config_path), []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if p.pid != os.getpid() and needle in " ".join(p.info["cmdline"] or []):
                found.append(p)
    return found


def run(cfg: RunConfig, out: Path | None = None, force: bool = False, echo: bool = True, env: dict | None = None,
        planned: Path | None = None) -> tuple[Path, int]:
    """Prepare and execute one run, owning its directory (:class:`RunLock`) and the emulated cluster, if it uses
    one, from the first file written to the end of the job."""
    out = Path(out or default_run_dir(cfg)).resolve()
    from .cluster.slurm import check_allocation
    check_allocation([cfg], processes)  # a Slurm profile: inside an allocation holding every process, before anything is written
    with claim(out, force) as lock, contextlib.ExitStack() as held:
        try:
            held.enter_context(cluster_held([cfg], [out]))
        except BaseException:
            lock.discard()  # the cluster is in use: nothing of this run stays
            raise
        run_dir = prepare(cfg, out, planned=planned, lock=lock)
        return run_dir, execute(cfg, run_dir, echo=echo, env=env)


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


def run_many(items: list[tuple[RunConfig, Path | None, Path | None]], force: bool = False, echo: bool = True,
             env: dict | None = None, max_runs_per_job: int = 0, progress=print) -> list[tuple[Path, int]]:
    """Prepare and run ``items`` (cfg, run directory or None, planned config or None), consecutive runs with the same
    launch settings as one job (:func:`execute_many`); returns (run directory, code) per item, in order."""
    cfgs = [c for c, _, _ in items]
    from .cluster.slurm import check_allocation
    check_allocation(cfgs, processes)  # a Slurm profile: inside an allocation holding every process, before anything is written
    outs = [Path(out or default_run_dir(c)).resolve() for c, out, _ in items]
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
        return list(zip(dirs, codes))
