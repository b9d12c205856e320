"""A run's configuration as every rank reads it: ``config.json`` read back (:func:`load_config`, :func:`config_from_dict`)
and the checks of a configuration's values alone (:func:`check_values`: nothing of the machine probed, so that a
rank, the plan and a study's run stage can run them anywhere). Below the worker and the resolver: the resolver
(:mod:`bench.resolve`) merges and validates a new configuration with these checks and then the machine's
(:func:`bench.resolve.check_machine`); the ranks import this module and never the params.yaml merge."""

from __future__ import annotations

import math
from pathlib import Path

from . import SCHEMA_VERSION, BenchError
from .algorithms import get_algorithm
from .cluster import check_delay, parse_rate
from .cluster.spec import IFNAME
from .config import LaunchConfig, RunConfig, TrainConfig
from .layout import check_name
from .placement import emulated_hosts_used, processes
from .results import read_json
from .typed import build


def _host_slots(cfg: RunConfig) -> int | None:
    """How many processes the ``hosts`` list holds; None without one (a hostfile: horovodrun checks; an emulated
    cluster: sized to the run; this machine: :func:`check_machine`)."""
    launch = cfg.launch
    if launch.hostfile or launch.emulated_hosts or not launch.hosts:
        return None
    try:
        return sum(int(h.rpartition(":")[2] or 1) for h in launch.hosts.split(","))
    except ValueError:
        raise BenchError(f"hosts must be host:slots[,host:slots...], got {launch.hosts!r}") from None


def check_slots(cfg: RunConfig, slots: int, where: str) -> None:
    procs = processes(cfg)
    if procs > slots and not cfg.launch.oversubscribe:
        raise BenchError(f"{procs} processes ({cfg.algorithm} with np={cfg.launch.np}) exceed the {slots} that {where} "
                         f"holds; lower --np or pass --oversubscribe")


def check_values(cfg: RunConfig) -> RunConfig:
    """The checks of a configuration's values alone, wherever it is read (a rank reading its config.json included):
    each section's own, then those across sections (stragglers, processes against the ``hosts`` list, the emulated
    cluster's settings), then the algorithm's (hyperparameters in the context of the run, e.g. EASGD's n·α < 2).
    Nothing of the machine is probed."""
    check_names(cfg.study, cfg.tag, cfg.launch.hardware)
    cfg.train.validate()
    cfg.launch.validate()
    check_delay(cfg.launch)  # a valid link delay, on an emulated cluster
    np_ = cfg.launch.np
    bad = [r for r in cfg.train.slow_ranks if not 0 <= r < np_]
    if bad:
        raise BenchError(f"slow_ranks {bad} are not workers: valid worker indices are 0..{np_ - 1} for np={np_}")
    slots = _host_slots(cfg)
    if slots is not None:
        check_slots(cfg, slots, f"hosts {cfg.launch.hosts!r}")
    if cfg.launch.emulated_hosts:
        _check_emulated(cfg)
    get_algorithm(cfg.algorithm).validate(cfg.params, cfg)
    return cfg


def check_names(study: str, tag: str, hardware: str) -> None:
    """Study, tag and hardware name folders (bench.layout): plain names only, checked before anything is written."""
    check_name("study", study)
    check_name("tag", tag, empty_ok=True)
    check_name("hardware", hardware)


def _check_emulated(cfg: RunConfig) -> None:
    """An emulated cluster's settings: its link rate, the hosts its CPU shares name, its interface (set here to the
    cluster's own), the torch threads a host's share holds (one-line errors naming the value)."""
    parse_rate(cfg.launch.link)
    hosts = max(cfg.launch.emulated_hosts, emulated_hosts_used(cfg))  # named by the key the user gave
    for host, share in cfg.launch.emulated_cpu.items():
        if not 0 <= host < hosts:
            raise BenchError(f"emulated_cpu names host {host}; this run's emulated cluster has hosts 0..{hosts - 1}")
        if not 0 < share:
            raise BenchError(f"emulated_cpu share of host {host} must be > 0 cores, got {share!r}")
    if cfg.launch.network_interface not in ("", IFNAME):
        raise BenchError(f"an emulated cluster runs over its own interface {IFNAME!r}; "
                         f"network_interface {cfg.launch.network_interface!r} cannot be used with it")
    cfg.launch.network_interface = IFNAME
    if cfg.launch.cpu_per_host and cfg.train.threads > max(1, math.ceil(cfg.launch.cpu_per_host)):
        raise BenchError(f"threads {cfg.train.threads} do not fit in cpu_per_host {cfg.launch.cpu_per_host:g} cores "
                         f"(at most {max(1, math.ceil(cfg.launch.cpu_per_host))} torch thread(s) per rank)")


def config_from_dict(d: dict) -> RunConfig:
    """A :class:`RunConfig` from its ``to_dict()`` form (config.json): strictly typed, its values checked
    (:func:`check_values`; the machine is not probed)."""
    if not isinstance(d, dict) or d.get("schema_version") != SCHEMA_VERSION:
        found = d.get("schema_version") if isinstance(d, dict) else d
        raise BenchError(f"config schema_version {found!r} is not {SCHEMA_VERSION}")
    algo = get_algorithm(d.get("algorithm"))
    sections = {"params": (algo.Params, f"{algo.name} parameter"), "train": (TrainConfig, "train setting"),
                "launch": (LaunchConfig, "launch setting")}
    top = build(RunConfig, {**d, **{k: None for k in sections}}, what="config key")
    for key, (cls, what) in sections.items():
        setattr(top, key, build(cls, d.get(key), what=what))
    return check_values(top)


def load_config(path: str | Path) -> RunConfig:
    """Read a run's ``config.json`` (every rank does, and a study's run stage its planned configs): strictly typed,
    its values checked (:func:`check_values`); this machine is not probed again (:func:`check_machine` ran where the
    run was resolved and runs again in the launcher before launch)."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"config file {str(path)!r} not found")
    return config_from_dict(read_json(path))
