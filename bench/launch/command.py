"""The horovodrun command of a job and its processes' environment, and what system.json records of them (the
interconnect, Horovod's settings)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import watchdog
from ..cluster import horovodrun_args, parse_delay
from ..cluster.hostfile import check_hostfile
from ..cluster.slurm import job_hostfile, uses_allocation
from ..config import HOROVOD_DEFAULTS, JOB_IDENTITY, RunConfig
from ..layout import REPO_ROOT
from ..placement import processes
from ..system import horovodrun_launch


def horovodrun_command(cfg: RunConfig, config_path: Path | list[Path], emulated: dict | None = None) -> list[str]:
    """The horovodrun command of the run, or of a job of several runs with ``cfg``'s launch settings (a list of
    config paths; ``emulated``: the settings of :func:`bench.placement.emulated_cluster`)."""
    launch = cfg.launch
    n = processes(cfg)
    cmd = horovodrun_launch()
    if emulated is not None:
        cmd += horovodrun_args(emulated)
    else:
        cmd += ["-np", str(n), "-H", host_list(cfg)]
        if launch.network_interface:
            cmd += ["--network-interface", launch.network_interface]
        if launch.ssh_port:
            cmd += ["-p", str(launch.ssh_port)]
    paths = config_path if isinstance(config_path, list) else [config_path]
    return cmd + [f"--{launch.controller}", sys.executable, "-m", "bench.worker", *(a for p in paths for a in ("--config", str(p)))]


def host_slots(cfg: RunConfig) -> tuple[str, list[tuple[str, int]]] | None:
    """The hosts a run that is not on the emulated cluster is given, with their slots, and where they come from
    (``"hostfile 'F'"``, ``"hosts 'H'"``): the ``hosts`` list, or the hostfile (read and checked,
    :func:`bench.cluster.hostfile.check_hostfile`), on a Slurm profile the job's own
    (:func:`bench.cluster.slurm.job_hostfile`: read when the job's launcher asks, after ``bench.sbatch`` wrote it).
    None for a run on this machine alone."""
    launch = cfg.launch
    hostfile = job_hostfile(cfg) if uses_allocation(cfg) else launch.hostfile
    if hostfile:
        return f"hostfile {hostfile!r}", check_hostfile(REPO_ROOT / hostfile)
    if launch.hosts:
        entries = (e.strip().partition(":") for e in launch.hosts.split(",") if e.strip())
        return f"hosts {launch.hosts!r}", [(h, int(k or 1)) for h, _, k in entries]
    return None


def host_list(cfg: RunConfig) -> str:
    """horovodrun's ``-H`` for a run that is not on the emulated cluster: this machine, or :func:`host_slots` cut to
    the run's processes, hosts in order. horovodrun's gloo launcher starts a rank on every slot it is given, whatever
    ``-np`` says: an allocation of 16 tasks would start 16 ranks for a run of 2. With ``oversubscribe``, the
    processes past the slots go to the last host (:func:`bench.launch.check_launch` refuses them otherwise)."""
    n, given = processes(cfg), host_slots(cfg)
    if given is None:
        return f"localhost:{n}"
    taken, left = [], n
    for host, k in given[1]:
        if left <= 0:
            break
        taken.append([host, min(k, left)])
        left -= taken[-1][1]
    if left > 0:
        taken[-1][1] += left
    return ",".join(f"{host}:{k}" for host, k in taken)


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


def inherited_environment() -> dict[str, str]:
    """This process's environment without a rank's identity (:data:`bench.config.JOB_IDENTITY`): what a job inherits
    from the user's shell."""
    return {k: v for k, v in os.environ.items() if not JOB_IDENTITY.fullmatch(k)}


def horovod_environment(cfg: RunConfig, base: dict | None = None) -> dict[str, str]:
    """The job's environment from ``base`` (default: :func:`inherited_environment`): the hardware profile's ``env``,
    then its Horovod settings (``cfg.launch.horovod``: they win over the same variables in the shell or ``env``)."""
    full_env = dict(inherited_environment() if base is None else base)
    full_env.update(cfg.launch.env)
    full_env.update(cfg.launch.horovod.env())
    return full_env


def horovod_record(cfg: RunConfig, job_env: dict) -> dict:
    """What system.json records of Horovod's settings: the typed settings that were set, and every ``HOROVOD_*``
    variable the job's processes got (the effective values; a tuning variable absent keeps Horovod's default)."""
    settings = cfg.launch.horovod.given()
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


def job_environment(cfg: RunConfig, emulated: dict | None, env: dict | None) -> dict[str, str]:
    """The environment of a job's processes: this one's, the suite on PYTHONPATH, progress lines, Horovod's settings
    of the run, the emulated cluster's variables, the launcher's identity (the ranks watch it), then ``env``."""
    full_env = inherited_environment()
    full_env.setdefault("BENCH_PROGRESS", "1")
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", "120")
    full_env = horovod_environment(cfg, full_env)
    full_env.update(emulated["env"] if emulated else {})
    full_env.update(watchdog.launcher_identity())
    full_env.update(env or {})
    return full_env
