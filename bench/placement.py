"""Where a run's processes go: how many there are, what they start (Horovod or torch.distributed alone), which emulated hosts they occupy with which CPU share, and the
emulated cluster made ready for them and held while they run.

Below the resolver (which checks a run's hosts and shares with :func:`emulated_hosts_used` and
:func:`host_shares` before anything is written) and the launcher (which brings the cluster up with
:func:`emulated_cluster` and holds it with :func:`cluster_held`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from . import cluster
from .algorithms import get_algorithm
from .cluster.cgroups import cpu_record
from .cluster.spec import check_total
from .cluster.spec import host_shares as shares_of
from .config import RunConfig


def processes(cfg: RunConfig) -> int:
    """Processes horovodrun starts: the workers plus the algorithm's server ranks."""
    return cfg.launch.np + get_algorithm(cfg.algorithm).server_ranks(cfg.params, cfg.launch.np)


def runtime(cfg: RunConfig) -> str:
    """What the run's processes start: ``torch`` (torch.distributed alone, no ``hvd.init()``) when its algorithm
    communicates only through torch.distributed (``Algorithm.runtime``) and horovodrun's gloo rendezvous can open
    it (controller ``gloo``); else ``horovod``. Runs of one job start the same runtime (the launcher's ``same_job``)."""
    wants = get_algorithm(cfg.algorithm).runtime
    return "torch" if wants == "torch" and cfg.launch.controller == "gloo" else "horovod"


def emulated_hosts_used(cfg: RunConfig) -> int:
    """Emulated hosts the run's processes occupy: its workers' (``emulated_slots`` each), then one per server rank."""
    servers = processes(cfg) - cfg.launch.np
    return -(-cfg.launch.np // cfg.launch.emulated_slots) + servers


def host_shares(cfg: RunConfig) -> dict[int, float]:
    """Emulated host index -> its CPU share (cores) for the run: ``cpu_per_host`` for every host of the cluster, a
    ``slow_mode: cpu`` straggler's host (worker i runs on host i: one slot per host) divided by ``slow_factor``,
    then ``emulated_cpu``; {} when the run is not on an emulated cluster or sets no share. BenchError (before
    anything is written, :func:`bench.resolve.check_machine`) if the hosts the run uses need more cores than
    there are."""
    launch = cfg.launch
    if not launch.emulated_hosts:
        return {}
    used = emulated_hosts_used(cfg)
    cpu_mode = launch.slow_mode == "cpu" and cfg.train.slow_factor > 1
    slow = {r: cfg.train.slow_factor for r in cfg.train.slow_ranks} if cpu_mode else {}
    shares = shares_of(max(launch.emulated_hosts, used), launch.cpu_per_host, dict(launch.emulated_cpu), slow)
    check_total(shares, used)
    return shares


def emulated_cluster(cfg: RunConfig) -> dict | None:
    """For a run on an emulated cluster: bring it up, or reshape it (link rate, CPU shares, slots), with the hosts
    the run needs, and return its horovodrun settings (bench.cluster.launch_settings); None otherwise."""
    launch = cfg.launch
    if not launch.emulated_hosts:
        return None
    servers = processes(cfg) - launch.np
    hosts = max(launch.emulated_hosts, emulated_hosts_used(cfg))
    state = cluster.ensure(cluster.Spec(hosts, launch.emulated_slots, launch.link, host_shares(cfg), launch.link_delay))
    settings = cluster.launch_settings(state, processes(cfg), server_host=servers > 0)
    settings["cpu"] = cpu_record(state, settings["hosts"], launch)
    return settings


@contextlib.contextmanager
def cluster_held(cfgs: list[RunConfig], run_dirs: list[Path]):
    """While the block runs, the emulated cluster (if any of ``cfgs`` uses one) is recorded as used by this
    process, so that no other job reshapes, rebuilds or tears it down under it (``bench.cluster.in_use``)."""
    if not any(c.launch.emulated_hosts for c in cfgs):
        yield
        return
    more = " ..." if len(run_dirs) > 3 else ""
    with cluster.in_use(f"bench run into {', '.join(str(d) for d in run_dirs[:3])}{more}"):
        yield
