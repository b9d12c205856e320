"""The resolver: params.yaml + a hardware profile + ``--set`` -> one validated :class:`RunConfig`.

The one place where a run's configuration is merged, typed and validated. Precedence, lowest
first: the dataclass defaults (:mod:`bench.config`, each algorithm's ``Params``), the training
profile of params.yaml, params.yaml's ``algorithms:`` section, the profile's own ``algorithms:``,
the hardware profile (``pipelines/hardware/<id>.yaml``, launch settings only), then ``--set``.
A ``--set`` key names one field of exactly one section (train, launch or the algorithm's
``Params``; the names are disjoint, which a test checks); Horovod's settings (:class:`bench.config.HorovodSettings`):
the hardware profile's ``horovod:`` block, then the training profile's (the workload's, key by key), then
``--set horovod={...}`` (the whole block) and ``--set horovod.KEY=VALUE`` (one setting). Every error is a
:class:`bench.BenchError` raised before anything is written or launched.

The checks of a configuration's values alone (:func:`bench.runconfig.check_values`) and the reading of ``config.json``
back (:func:`bench.runconfig.load_config`: never merged again, the machine not probed again) are in
:mod:`bench.runconfig`, below the worker; what a run needs of the launching machine (:func:`check_machine`) is
here: the launcher probes the machine before launch, the ranks do not.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from . import BenchError, cpu_idle, short
from .algorithms import KEYS, get_algorithm
from .cluster import check_delay_support, check_supported
from .config import DATASET_CLASSES, HorovodSettings, LaunchConfig, RunConfig, TrainConfig
from .layout import REPO_ROOT
from .placement import host_shares
from .runconfig import check_names, check_slots, check_values
from .typed import build, choices_text, field_types
from .yamlfile import load_text, read_mapping

HARDWARE_DOC_KEYS = ("description",)  # documentation keys of a hardware profile, not settings
LOCAL_PROCESSES_PER_CORE = 4  # more processes than this per core on one machine needs --oversubscribe


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set key=value`` items; values are YAML scalars or lists (``0.1``, ``true``, ``[1,2]``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--set expects key=value, got {item!r}")
        try:
            value = load_text(raw, f"--set {key.strip()}")
        except BenchError as e:
            if "YAML syntax error" not in str(e):
                raise  # a limit of bench.yamlfile (nesting, aliases, size): refused, not read as a string
            value = raw
        out[key.strip()] = value
    return out


def params_path() -> Path:
    """params.yaml: $BENCH_PARAMS, else the nearest one at or above the working directory, else the repository's."""
    env = os.environ.get("BENCH_PARAMS")
    if env:
        return Path(env)
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "params.yaml").is_file() and (d / "bench").is_dir():
            return d / "params.yaml"
    return REPO_ROOT / "params.yaml"


def _section(where: str, value, what: str) -> dict:
    """A mapping section of params.yaml (``profiles``, ``algorithms``, one profile); BenchError naming it otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BenchError(f"{where}: {what} must be a mapping, got {type(value).__name__} {value!r:.60}")
    return value


PARAMS_KEYS = ("profile", "study", "hardware", "profiles", "algorithms")
"""The top-level keys of params.yaml: the default profile, study and hardware, the training profiles, the algorithms'
hyperparameters."""


def load_params(path: Path | None = None) -> dict:
    """params.yaml (read strictly, :mod:`bench.yamlfile`); a key other than :data:`PARAMS_KEYS` is refused."""
    path = Path(path) if path else params_path()
    if not path.is_file():
        raise BenchError(f"params file {str(path)!r} " + ("is not a regular file" if path.exists() else "not found"))
    data = read_mapping(path)
    if "studies" in data:
        raise BenchError(f"{path} has a `studies:` section; a study is its own file now, "
                         f"{path.resolve().parent / 'pipelines' / 'studies'}/<name>.yaml: move each entry there")
    unknown = sorted(set(data) - set(PARAMS_KEYS), key=str)
    if unknown:
        raise BenchError(f"{path}: unknown top-level key {unknown[0]!r}; valid: {choices_text(PARAMS_KEYS)}")
    for key in ("profile", "study", "hardware"):
        if key in data and not (isinstance(data[key], str) and data[key]):
            raise BenchError(f"{path}: {key} must be a non-empty name, got {data[key]!r:.60}")
    return data


def hardware_dir(params_file: Path | None = None) -> Path:
    return (Path(params_file) if params_file else params_path()).resolve().parent / "pipelines" / "hardware"


def hardware_profiles(params_file: Path | None = None) -> list[str]:
    return sorted(p.stem for p in hardware_dir(params_file).glob("*.yaml"))


def load_hardware(name: str, params_file: Path | None = None) -> dict:
    """A hardware profile's launch settings (keys of :class:`LaunchConfig`; ``hardware`` defaults to its name)."""
    path = hardware_dir(params_file) / f"{name}.yaml"
    if not path.is_file():
        raise BenchError(f"unknown hardware profile {name!r}; valid: {', '.join(hardware_profiles(params_file)) or '(none)'}")
    data = read_mapping(path)
    for key in HARDWARE_DOC_KEYS:
        data.pop(key, None)
    data.setdefault("hardware", name)
    unknown = sorted(set(data) - set(field_types(LaunchConfig)))
    if unknown:
        raise BenchError(f"{path}: unknown key {unknown[0]!r}; valid: "
                         f"{choices_text([*field_types(LaunchConfig), *HARDWARE_DOC_KEYS])}")
    return data


def validate(cfg: RunConfig) -> RunConfig:
    """Every check of a resolved configuration before anything is written: its values (:func:`check_values`),
    then what it needs of this machine (:func:`check_machine`)."""
    check_values(cfg)
    check_machine(cfg)
    return cfg


def check_machine(cfg: RunConfig) -> None:
    """What the run needs of the machine that launches it, probed there before anything is written (by
    :func:`resolve` and by the launcher, :func:`bench.launch.check_launch`), never by the ranks: this machine's
    cores for its local processes or its emulated hosts' CPU shares, an emulated cluster's support (root, network
    namespaces, sshd), ``cpu_idle: poll``'s device, the dataset's files, what the build and this machine support
    (:mod:`bench.supports`: controller, point-to-point backend, device, memory) and the algorithm's own files."""
    launch = cfg.launch
    cores = os.cpu_count() or 1
    if not (launch.hosts or launch.hostfile or launch.emulated_hosts):
        check_slots(cfg, LOCAL_PROCESSES_PER_CORE * cores,
                     f"this machine ({cores} cores, {LOCAL_PROCESSES_PER_CORE} processes per core)")
    if launch.emulated_hosts:
        for host, share in launch.emulated_cpu.items():
            if share > cores:
                raise BenchError(f"emulated_cpu share of host {host} must be in (0, {cores}] cores, got {share!r}")
        _cluster_supported()
        check_delay_support(launch)  # root and NFQUEUE for the delay lines
        host_shares(cfg)  # the hosts' CPU shares fit this machine's cores
    cpu_idle.check(launch.cpu_idle)
    # bench.data and bench.supports import torch (a second): not where a command only builds its parser
    from .data import check_files
    from .supports import check_batch, check_build, check_memory

    check_files(cfg.train)
    check_build(cfg)
    check_batch(cfg)
    check_memory(cfg)
    get_algorithm(cfg.algorithm).check_machine(cfg.params, cfg)


@functools.lru_cache(maxsize=1)
def _cluster_supported() -> None:
    check_supported()


def _route(algorithm: str, overrides: dict, sections: dict[str, dict], keys: dict[str, set]) -> None:
    for key, value in overrides.items():
        owner = next((s for s, names in keys.items() if key in names), None)
        if owner is None:
            valid = choices_text(set().union(*keys.values()))
            raise BenchError(f"unknown --set key {key!r} for {algorithm}; valid: {valid}")
        sections[owner][key] = value


HOROVOD_SET_PREFIX = "horovod."


def _horovod_settings(launch: dict, overrides: dict[str, Any]) -> None:
    """The ``horovod`` block of the launch settings: the hardware profile's (or ``--set horovod={...}``'s), then
    each ``--set horovod.KEY=VALUE`` on top; built here so that an unknown key is refused naming the valid ones."""
    block = launch.get("horovod")
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise BenchError(f"horovod settings must be a mapping of {choices_text(field_types(HorovodSettings))}, got {block!r}")
    launch["horovod"] = build(HorovodSettings, {**block, **overrides}, what="horovod setting")


def resolve(algorithm: str, *, np: int | None = None, profile: str | None = None, hardware: str | None = None,
            overrides: dict[str, Any] | None = None, study: str = "adhoc", tag: str = "",
            params_file: Path | None = None, check: bool = True) -> RunConfig:
    """A run's configuration from params.yaml, the hardware profile and ``overrides`` (``--set``), validated (``check``
    False: merged and typed only, for a run that will not be launched here, e.g. one ``bench predict`` models)."""
    algo = get_algorithm(algorithm)
    for what, value in (("profile", profile), ("hardware", hardware)):
        if value is not None and not (isinstance(value, str) and value):
            raise BenchError(f"--{what} is empty: give a {what} name, or leave --{what} out for the default")
    check_names(study, tag, hardware or "local")
    params = load_params(params_file)
    where = str(Path(params_file) if params_file else params_path())
    profiles = _section(where, params.get("profiles"), "profiles")
    profile = profile or params.get("profile") or "laptop"
    if not isinstance(profile, str) or profile not in profiles:
        raise BenchError(f"unknown profile {profile!r}; valid: {choices_text(profiles) or '(none)'}")
    train_values = dict(_section(where, profiles[profile], f"profile {profile!r}"))
    profile_algos = _section(where, train_values.pop("algorithms", None), f"profile {profile!r}'s algorithms")
    all_algos = _section(where, params.get("algorithms"), "algorithms")
    for section, keys in (("algorithms", all_algos), (f"profile {profile!r}'s algorithms", profile_algos)):
        unknown = [k for k in keys if k not in KEYS]
        if unknown:  # a misspelt algorithm's settings would be ignored without a word
            raise BenchError(f"{where}: {section} has {unknown[0]!r}, which is no algorithm; valid: {', '.join(KEYS)}")
    algo_values = dict(_section(where, all_algos.get(algorithm), f"algorithms.{algorithm}"))
    algo_values.update(_section(where, profile_algos.get(algorithm), f"profile {profile!r}'s algorithms.{algorithm}"))
    workload_horovod = _section(where, train_values.pop("horovod", None), f"profile {profile!r}'s horovod")
    sections = {"train": train_values, "launch": load_hardware(hardware or "local", params_file), "params": algo_values}
    hw_horovod = sections["launch"].get("horovod")
    if workload_horovod and isinstance(hw_horovod, dict | None):  # the workload's on top of the hardware's, under --set
        sections["launch"]["horovod"] = {**(hw_horovod or {}), **workload_horovod}
    keys = {"train": set(field_types(TrainConfig)), "launch": set(field_types(LaunchConfig)),
            "params": set(field_types(algo.Params))}
    overrides = dict(overrides or {})
    np_set = overrides.get("np")
    if np is not None and "np" in overrides and (type(np_set) is not int or np_set != np):
        # one would be dropped without a word (True == 1 too: a bool is left to the typed reader, which refuses it)
        if type(np_set) is int:
            raise BenchError(f"np given twice: --np {np} and --set np={np_set!r}; give one of them")
        np = None
    horovod_sets = {k[len(HOROVOD_SET_PREFIX):]: overrides.pop(k) for k in list(overrides) if k.startswith(HOROVOD_SET_PREFIX)}
    _route(algorithm, overrides, sections, keys)
    _horovod_settings(sections["launch"], horovod_sets)
    if np is not None:
        sections["launch"]["np"] = np
    cfg = RunConfig(algorithm=algorithm, params=build(algo.Params, sections["params"], what=f"{algorithm} parameter"),
                    train=build(TrainConfig, sections["train"], what="train setting"),
                    launch=build(LaunchConfig, sections["launch"], what="launch setting"),
                    profile=profile, study=study, tag=tag)
    _check_given_classes(cfg.train, sections["train"])
    return validate(cfg) if check else cfg


def _check_given_classes(train: TrainConfig, given: dict) -> None:
    """A ``num_classes`` given (params.yaml's profile or ``--set``) for a dataset whose classes are fixed must be
    theirs: the model is built with the dataset's own, so another value would be ignored without a word (the
    language model with num_classes 10 trained on its 256 bytes and reported ok)."""
    fixed = DATASET_CLASSES.get(train.dataset)
    if "num_classes" in given and fixed is not None and train.num_classes != fixed:
        raise BenchError(f"num_classes {short(train.num_classes)}: dataset {train.dataset!r} has {fixed} classes, which "
                         f"the model is built with (num_classes sets the synthetic dataset's); leave it out or give {fixed}")
