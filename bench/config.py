"""Typed, strict configuration.

A run is described by one :class:`RunConfig`: the algorithm and its hyperparameters
(each algorithm's own ``Params`` dataclass), the training settings (:class:`TrainConfig`)
and the launch settings (:class:`LaunchConfig`). Values come from, in increasing priority:
the dataclass defaults, ``params.yaml`` (a profile, the ``algorithms`` section, the profile's
own ``algorithms`` section), a hardware profile under ``pipelines/hardware/`` and ``--set``.

Unknown keys and wrong types are errors (:class:`bench.BenchError`) that name the bad value
and list the valid choices. Nothing is parsed from strings such as ``'True'``: only ``--set``
values, which arrive as text, are read as YAML scalars and then type-checked like the rest.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from . import SCHEMA_VERSION, BenchError

REPO_ROOT = Path(__file__).resolve().parent.parent


def choices_text(valid) -> str:
    return ", ".join(sorted(str(v) for v in valid))


@dataclass
class TrainConfig:
    """Training settings shared by every algorithm (the ``profiles`` section of params.yaml)."""

    dataset: Literal["mnist5k", "digits", "synthetic", "mnist", "cifar10", "imagefolder"] = "mnist5k"
    """Dataset: embedded ones (mnist5k, digits, synthetic) need no download; mnist (IDX),
    cifar10 (binary batches) and imagefolder are read from ``data_dir``."""
    data_dir: str = "data/raw"
    """Folder holding the local-file datasets (relative paths are taken from the repository root)."""
    test_fraction: float = 0.2
    """Held-out share of the embedded datasets (mnist/cifar10 use their own test files)."""
    synthetic_shape: list[int] = field(default_factory=lambda: [1, 28, 28])
    """Sample shape (C, H, W) or (features,) of the synthetic dataset."""
    synthetic_samples: int = 4096
    """Number of synthetic training samples (the held-out set adds ``test_fraction`` of that)."""
    num_classes: int = 10
    """Number of classes of the synthetic dataset."""
    image_size: int = 224
    """Side of the square images that imagefolder resizes to."""
    model: Literal["mlp", "hermans_mlp", "lenet", "alexnet", "googlenet", "resnet18", "resnet50"] = "mlp"
    """Model: mlp (``hidden`` layers), hermans_mlp (784-1000-2000-1000-10), lenet (CNN);
    alexnet, googlenet, resnet18, resnet50 need torchvision."""
    hidden: list[int] = field(default_factory=lambda: [128])
    """Hidden layer widths of ``mlp``."""
    batch_size: int = 32
    """Mini-batch size per worker."""
    epochs: int = 2
    """Passes over each worker's shard."""
    max_steps: int = 0
    """Stop each worker after this many steps (0: no limit, run ``epochs``)."""
    optimizer: Literal["sgd", "adam"] = "sgd"
    """Each worker's local optimizer."""
    lr: float = 0.05
    """Learning rate eta of the local optimizer."""
    momentum: float = 0.0
    """Momentum of SGD (0: plain SGD)."""
    nesterov: bool = False
    """Nesterov momentum for SGD."""
    weight_decay: float = 0.0
    """L2 weight decay of the local optimizer."""
    seed: int = 0
    """Seed of the model initialisation, data split and shuffling."""
    warmup_steps: int = 5
    """Steps per worker excluded from throughput figures (their records carry warmup=true)."""
    eval_every: int = 50
    """Held-out evaluation of the model that matters every this many steps of rank 0 (0: only at the end)."""
    eval_samples: int = 0
    """Held-out samples per evaluation (0: the whole held-out set)."""
    threads: int = 1
    """torch intra-op threads per worker (1 avoids oversubscribing small machines)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto: cuda when available (one GPU per local rank), else cpu."""
    save_model: bool = True
    """Write the evaluated model's final state to ``model.pt`` in the run directory."""
    timeout_s: float = 1800.0
    """Wall-clock limit of the whole job; past it the job is killed and marked failed."""

    def validate(self) -> None:
        positive = {"batch_size": self.batch_size, "epochs": self.epochs, "threads": self.threads,
                    "synthetic_samples": self.synthetic_samples, "num_classes": self.num_classes,
                    "image_size": self.image_size, "timeout_s": self.timeout_s}
        for name, value in positive.items():
            if value <= 0:
                raise BenchError(f"{name} must be > 0, got {value!r}")
        nonneg = {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                  "max_steps": self.max_steps, "warmup_steps": self.warmup_steps,
                  "eval_every": self.eval_every, "eval_samples": self.eval_samples}
        for name, value in nonneg.items():
            if value < 0:
                raise BenchError(f"{name} must be >= 0, got {value!r}")
        if self.nesterov and self.momentum <= 0:
            raise BenchError(f"nesterov needs momentum > 0, got momentum={self.momentum!r}")
        if not 0.0 < self.test_fraction < 1.0:
            raise BenchError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}")
        if any(h <= 0 for h in self.hidden):
            raise BenchError(f"hidden widths must be > 0, got {self.hidden!r}")
        if any(s <= 0 for s in self.synthetic_shape) or len(self.synthetic_shape) not in (1, 3):
            raise BenchError(f"synthetic_shape must be (features,) or (C, H, W) of positive sizes, got {self.synthetic_shape!r}")


@dataclass
class LaunchConfig:
    """How the job is launched (hardware profiles under ``pipelines/hardware/``)."""

    np: int = 1
    """Number of workers (parameter-server algorithms add their server ranks on top)."""
    hardware: str = "local"
    """Hardware id: names ``results/<hardware>/`` and labels the runs in the hardware notebook."""
    hosts: str = ""
    """horovodrun ``-H`` host list (``host1:2,host2:2``); empty: ``localhost:<processes>``."""
    hostfile: str = ""
    """horovodrun ``--hostfile`` (takes precedence over ``hosts``)."""
    controller: Literal["gloo", "mpi"] = "gloo"
    """Horovod controller: gloo (built here) or mpi (cluster builds with MPI)."""
    network_interface: str = ""
    """Network interface for Horovod and the point-to-point transport (e.g. ib0); empty: default."""
    p2p_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend of the point-to-point transport (auto: nccl on GPU, gloo on CPU)."""
    ssh_port: int = 0
    """horovodrun ``-p`` (0: default)."""

    def validate(self) -> None:
        if self.np < 1:
            raise BenchError(f"--np must be >= 1, got {self.np}")


@dataclass
class NoParams:
    """This algorithm has no hyperparameters."""


@dataclass
class RunConfig:
    """Everything one run needs; written as ``config.json`` in the run directory."""

    algorithm: str
    params: dict[str, Any]
    train: TrainConfig
    launch: LaunchConfig
    profile: str = "laptop"
    study: str = "adhoc"
    tag: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        from .algorithms import get_algorithm

        d = dict(d)
        if d.get("schema_version") != SCHEMA_VERSION:
            raise BenchError(f"config schema_version {d.get('schema_version')!r} is not {SCHEMA_VERSION}")
        algo = get_algorithm(d["algorithm"])
        params = build(algo.Params, d.get("params", {}), what=f"{d['algorithm']} parameter")
        cfg = cls(algorithm=d["algorithm"], params=dataclasses.asdict(params),
                  train=build(TrainConfig, d.get("train", {}), what="train setting"),
                  launch=build(LaunchConfig, d.get("launch", {}), what="launch setting"),
                  profile=d.get("profile", "laptop"), study=d.get("study", "adhoc"), tag=d.get("tag", ""))
        cfg.validate()
        return cfg

    def algo_params(self):
        from .algorithms import get_algorithm

        return build(get_algorithm(self.algorithm).Params, self.params, what=f"{self.algorithm} parameter")

    def validate(self) -> None:
        from .algorithms import get_algorithm

        self.train.validate()
        self.launch.validate()
        get_algorithm(self.algorithm).validate(self.algo_params(), self)


# ----------------------------------------------------------------------------- typing


def _check(value: Any, tp: Any, name: str) -> Any:
    """Return ``value`` converted to ``tp`` if it already is of that type (int -> float allowed)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise BenchError(f"invalid {name} {value!r}; valid choices: {choices_text(allowed)}")
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _check(value, arg, name)
            except BenchError:
                pass
        raise BenchError(f"invalid {name} {value!r}: expected {tp}")
    if tp is type(None):
        if value is not None:
            raise BenchError(f"invalid {name} {value!r}: expected null")
        return None
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise BenchError(f"invalid {name} {value!r}: expected a list")
        return [_check(v, item_tp, name) for v in value]
    if tp is bool:
        if not isinstance(value, bool):
            raise BenchError(f"invalid {name} {value!r}: expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BenchError(f"invalid {name} {value!r}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BenchError(f"invalid {name} {value!r}: expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise BenchError(f"invalid {name} {value!r}: expected a string")
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported config type {tp}")


def field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def build(cls, values: dict | None, what: str = "key"):
    """Build dataclass ``cls`` from ``values``; unknown keys and wrong types are errors."""
    values = dict(values or {})
    types_ = field_types(cls)
    unknown = sorted(set(values) - set(types_))
    if unknown:
        valid = choices_text(types_) if types_ else "(none)"
        raise BenchError(f"unknown {what} {unknown[0]!r}; valid: {valid}")
    return cls(**{k: _check(v, types_[k], f"{what} {k!r}") for k, v in values.items()})


def parse_set(items: list[str]) -> dict[str, Any]:
    """Parse ``--set key=value`` items; values are YAML scalars or lists (``0.1``, ``true``, ``[1,2]``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--set expects key=value, got {item!r}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        out[key.strip()] = value
    return out


# ----------------------------------------------------------------------------- params.yaml


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


def load_params(path: Path | None = None) -> dict:
    path = Path(path) if path else params_path()
    if not path.is_file():
        raise BenchError(f"params file {str(path)!r} not found")
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise BenchError(f"{path}: expected a mapping at the top level")
    return data


def hardware_dir(params_file: Path | None = None) -> Path:
    root = (Path(params_file) if params_file else params_path()).resolve().parent
    return root / "pipelines" / "hardware"


def load_hardware(name: str, params_file: Path | None = None) -> dict:
    d = hardware_dir(params_file)
    path = d / f"{name}.yaml"
    if not path.is_file():
        valid = sorted(p.stem for p in d.glob("*.yaml"))
        raise BenchError(f"unknown hardware profile {name!r}; valid: {', '.join(valid) or '(none)'}")
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    data.setdefault("hardware", name)
    data.pop("description", None)
    data.pop("env", None)
    return data


def resolve(algorithm: str, *, np: int | None = None, profile: str | None = None, hardware: str | None = None,
            overrides: dict[str, Any] | None = None, study: str = "adhoc", tag: str = "",
            params_file: Path | None = None) -> RunConfig:
    """Resolve a run's configuration; every error is a :class:`BenchError` raised before anything runs."""
    from .algorithms import get_algorithm

    algo = get_algorithm(algorithm)
    params = load_params(params_file)
    profiles = params.get("profiles", {}) or {}
    profile = profile or params.get("profile") or "laptop"
    if profile not in profiles:
        raise BenchError(f"unknown profile {profile!r}; valid: {choices_text(profiles) or '(none)'}")
    prof = dict(profiles[profile] or {})
    prof_algos = prof.pop("algorithms", {}) or {}
    algo_values = dict((params.get("algorithms", {}) or {}).get(algorithm, {}) or {})
    algo_values.update(prof_algos.get(algorithm, {}) or {})
    train_values = dict(prof)
    launch_values = load_hardware(hardware or "local", params_file)

    train_keys, launch_keys, algo_keys = set(field_types(TrainConfig)), set(field_types(LaunchConfig)), set(field_types(algo.Params))
    for key, value in (overrides or {}).items():
        section, _, name = key.rpartition(".")
        owners = [s for s, keys in (("train", train_keys), ("algo", algo_keys), ("launch", launch_keys)) if name in keys]
        if not section and len(owners) > 1:
            raise BenchError(f"ambiguous --set key {key!r} for {algorithm}: it names both "
                             f"{' and '.join(f'{o}.{name}' for o in owners)}; write one of those")
        if section in ("", "train") and name in train_keys:
            train_values[name] = value
        elif section in ("", "algo", "params") and name in algo_keys:
            algo_values[name] = value
        elif section in ("", "launch") and name in launch_keys:
            launch_values[name] = value
        else:
            valid = choices_text(train_keys | algo_keys | launch_keys)
            raise BenchError(f"unknown --set key {key!r} for {algorithm}; valid: {valid}")
    if np is not None:
        launch_values["np"] = np
    cfg = RunConfig(
        algorithm=algorithm,
        params=dataclasses.asdict(build(algo.Params, algo_values, what=f"{algorithm} parameter")),
        train=build(TrainConfig, train_values, what="train setting"),
        launch=build(LaunchConfig, launch_values, what="launch setting"),
        profile=profile, study=study, tag=tag,
    )
    cfg.validate()
    return cfg
