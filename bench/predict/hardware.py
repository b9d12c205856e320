"""What the model needs of a machine and a workload: links, latency, topology, compute time a step.

Two kinds of hardware:

- **emulated** (a launch profile with ``emulated_hosts``, e.g. ``emu``): one worker a host, every host inside a CPU
  quota (``cpu_per_host``) and behind one shaped link (``link``; ``--set link=250mbit`` changes it). Its constants
  (compute a step, host CPU per byte and per message, latency a hop) are the calibrated ones,
  ``docs/results/predict/calibration.json`` (:mod:`bench.predict.calibrate`), measured on this machine.
- **described** (``pipelines/hardware/model/<id>.yaml``): levels of links, innermost first (NVLink inside a node,
  InfiniBand between nodes, a WAN between regions), each with its allreduce bus bandwidth, latency a hop and workers a
  group, and the compute time a step of named workloads (``<model>@<batch>``), each value with its source. The
  resolver's launch profiles know nothing of these files (they live in a folder of their own).

The workload (parameters, tensors, samples) comes from ``pipelines/hardware/model/workloads.yaml``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .. import BenchError
from ..cluster import parse_rate
from ..config import parse_delay
from ..layout import REPO_ROOT
from ..yamlfile import read_mapping
from .nccl import CPUS, GPUS, LINKS, MAX_CHANNELS, Tuning

MODEL_DIR = REPO_ROOT / "pipelines" / "hardware" / "model"
WORKLOADS = MODEL_DIR / "workloads.yaml"
CALIBRATION = REPO_ROOT / "docs" / "results" / "predict" / "calibration.json"
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Level:
    """Links one level of the topology: workers in groups of ``size`` (None: one group of every worker; ``half``: two)."""

    name: str
    size: int | str | None
    bytes_per_s: float
    latency_s: float
    source: str = ""
    delay_s: float = 0.0
    """One-way delay of the link (the emulated cluster's delay lines), costed by the transport's own terms
    (:mod:`bench.predict.transport`): how many delays an operation waits depends on the operation, not a hop."""

    def group(self, n: int) -> int:
        if self.size is None:
            return n
        if self.size == "half":
            return max(1, math.ceil(n / 2))
        return int(self.size)


@dataclass(frozen=True)
class Workload:
    model: str
    batch: int
    params: int
    tensors: int
    compute_s: float
    """One step's forward, backward and update on one worker, at full speed (no quota, no straggler)."""
    samples: int
    """Training samples of the dataset (steps an epoch: samples / (n x batch))."""
    source: str

    @property
    def nbytes(self) -> int:
        return self.params * FLOAT_BYTES


@dataclass(frozen=True)
class Hardware:
    id: str
    description: str
    emulated: bool
    levels: tuple[Level, ...]
    host_cores: float | None
    """CPU a worker's host gives the compute and the communication's work (emulated: the quota); None: a GPU computes
    and the host's CPU is not the bottleneck."""
    op_overhead_s: float
    ps_kappa: float
    compute: dict
    anchors: dict
    launch_profile: str
    profile: str
    """The training profile a prediction uses when none is given: one whose workload has a compute time here."""
    sources: dict
    probed: dict | None = None
    """A file ``bench probe`` wrote for an emulated cluster: the launch settings it measured (``link``, ``link_delay``,
    ``cpu_per_host``, and ``emulated_cpu`` for a straggler's host), which a forecast takes in place of the profile's, and the workload's step (``compute_s``),
    which takes the calibration's place (:func:`probed_calibration`)."""
    nccl: Tuning | None = None
    """``collectives: nccl``: allreduce priced by NCCL's own tuning model with these inputs (:mod:`.nccl`); None: the
    ring of :func:`bench.predict.model.ring_cost` (gloo's, the default)."""


PROBED_SETTINGS = ("link", "link_delay", "cpu_per_host")
"""The launch settings a probed description gives a forecast (the user's ``--set`` still wins)."""


def load_yaml(path: Path) -> dict:
    """A hardware model's file, read strictly (:func:`bench.yamlfile.read_mapping`)."""
    return read_mapping(path)


CALIBRATION_KEYS = ("workload", "c_full_s", "hop_s", "wire_efficiency", "ps_kappa", "compute_source")
"""What a calibration.json must hold (the constants the emulated hardware is built from)."""


def load_calibration(path: Path = CALIBRATION) -> dict:
    """calibration.json, refused in one line naming the file (and the key) when it is not what the model reads."""
    if not path.is_file():
        raise BenchError(f"no calibration at {path}; run `python -m bench predict --calibrate` first")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BenchError(f"{path}: corrupt JSON ({e}); run `python -m bench predict --calibrate` again") from None
    if not isinstance(data, dict):
        raise BenchError(f"{path}: not a calibration (a JSON object); run `python -m bench predict --calibrate` again")
    for key in CALIBRATION_KEYS:
        if key not in data:
            raise BenchError(f"{path}: no key {key!r}; run `python -m bench predict --calibrate` again")
    for key in ("c_full_s", "hop_s", "wire_efficiency", "ps_kappa"):
        if not _number(data[key]) or (key in ("c_full_s", "wire_efficiency") and not data[key] > 0) or data[key] < 0:
            raise BenchError(f"{path}: {key} is {data[key]!r:.60}, not a finite number "
                             f"{'> 0' if key in ('c_full_s', 'wire_efficiency') else '>= 0'}")
    return data


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(path: Path, where: str, value, zero: bool = False) -> float:
    """A number of a described hardware file: finite and > 0 (>= 0 with ``zero``), else one line naming the key."""
    if not _number(value) or value < 0 or (value == 0 and not zero):
        raise BenchError(f"{path}: {where} is {value!r:.60}, not a finite number {'>= 0' if zero else '> 0'}")
    return float(value)


def described_ids() -> list[str]:
    return sorted(p.stem for p in MODEL_DIR.glob("*.yaml") if p.name != WORKLOADS.name)


def model_path(hw_id: str) -> Path:
    """The description of ``hw_id``: ``pipelines/hardware/model/<hw_id>.yaml``, or ``hw_id`` itself where it names a
    ``.yaml`` file (one ``bench probe --out`` wrote elsewhere)."""
    return Path(hw_id) if hw_id.endswith(".yaml") else MODEL_DIR / f"{hw_id}.yaml"


def is_described(hw_id: str) -> bool:
    return hw_id in described_ids() or (hw_id.endswith(".yaml") and Path(hw_id).is_file())


def described(hw_id: str) -> Hardware:
    """A hardware described in ``pipelines/hardware/model/<hw_id>.yaml`` (or the file ``hw_id``)."""
    path = model_path(hw_id)
    d = load_yaml(path)
    levels = []
    if not isinstance(d.get("levels") or [], list):
        raise BenchError(f"{path}: levels must be a list of links, got {d['levels']!r:.60}")
    for i, lv in enumerate(d.get("levels") or []):
        if not (isinstance(lv, dict) and {"name", "busbw_GBps", "latency_us"} <= set(lv)):
            raise BenchError(f"{path}: level {i} needs name, busbw_GBps and latency_us")
        size = lv.get("size")
        if not (size is None or size == "half" or (isinstance(size, int) and not isinstance(size, bool) and size >= 1)):
            raise BenchError(f"{path}: levels[{i}].size is {size!r:.60}: give workers a group (>= 1), half, or leave it out")
        levels.append(Level(str(lv["name"]), size, _positive(path, f"levels[{i}].busbw_GBps", lv["busbw_GBps"]) * 1e9,
                            _positive(path, f"levels[{i}].latency_us", lv["latency_us"], zero=True) * 1e-6,
                            str(lv.get("source", ""))))
    if not levels:
        raise BenchError(f"{path}: no levels (links); the model needs at least one")
    host_cores = d.get("host_cores")
    if host_cores is not None:
        _positive(path, "host_cores", host_cores)
    compute = d.get("compute") or {}
    if not isinstance(compute, dict):
        raise BenchError(f"{path}: compute must map <model>@<batch> to a step time, got {compute!r:.60}")
    for key, entry in compute.items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: compute.{key} must be a mapping (step_s or samples_per_s, source)")
        for name in ("step_s", "samples_per_s"):
            if name in entry:
                _positive(path, f"compute.{key}.{name}", entry[name])
    probed = d.get("probed")
    if probed is not None:
        if not isinstance(probed, dict) or not {*PROBED_SETTINGS, "compute_s"} <= set(probed):
            raise BenchError(f"{path}: probed must map {', '.join(PROBED_SETTINGS)} and compute_s (bench probe writes "
                             f"them); run `python -m bench probe` again")
        _positive(path, "probed.compute_s", probed["compute_s"])
        _positive(path, "probed.cpu_per_host", probed["cpu_per_host"])
    return Hardware(hw_id, str(d.get("description", "")), False, tuple(levels), host_cores,
                    _positive(path, "op_overhead_s", d.get("op_overhead_s", 0.0), zero=True),
                    _positive(path, "ps_kappa", d.get("ps_kappa", 0.0), zero=True), dict(compute),
                    dict(d.get("anchors") or {}), str(d.get("launch_profile", "")), str(d.get("profile", "")),
                    {k: v for k, v in d.items() if k.endswith("_source")}, dict(probed) if probed else None,
                    _collectives(path, d, levels))


COLLECTIVES = ("nccl", "ring")
"""How a described hardware's allreduce is priced: ``ring`` (the default: gloo's ring, :func:`.model.ring_cost`) or
``nccl`` (NCCL's tuning model, :mod:`.nccl`, with the inputs of the file's ``nccl`` mapping)."""
NCCL_KEYS = {"gpu": GPUS, "cpu": CPUS, "intra": LINKS}


def _choice(path: Path, where: str, value, valid) -> str:
    if value not in valid:
        raise BenchError(f"{path}: {where} is {value!r:.60}; valid: {', '.join(valid)}")
    return value


def _collectives(path: Path, d: dict, levels: list[Level]) -> Tuning | None:
    """``collectives:`` and, for ``nccl``, its ``nccl`` mapping (the tuner's inputs) and a node's link then at most one
    network (NCCL's two kinds of step), the node's GPUs given as the first level's ``size``."""
    if _choice(path, "collectives", d.get("collectives", "ring"), COLLECTIVES) == "ring":
        return None
    t = d.get("nccl")
    if not isinstance(t, dict) or not {*NCCL_KEYS, "channels"} <= set(t):
        raise BenchError(f"{path}: collectives: nccl needs an nccl mapping with {', '.join(NCCL_KEYS)} and channels "
                         f"(the tuner's inputs), got {t!r:.60}")
    channels = t["channels"]
    if not (isinstance(channels, int) and not isinstance(channels, bool) and 1 <= channels <= MAX_CHANNELS):
        raise BenchError(f"{path}: nccl.channels is {channels!r:.60}, not an integer in [1, {MAX_CHANNELS}] "
                         f"(NCCL's MAXCHANNELS)")
    if len(levels) > 2 or (len(levels) == 2 and not isinstance(levels[0].size, int)):
        raise BenchError(f"{path}: collectives: nccl prices a node's link and one network: give one level, or two "
                         f"with the GPUs a node as the first one's size")
    return Tuning(*(_choice(path, f"nccl.{k}", t[k], valid) for k, valid in NCCL_KEYS.items()), channels,
                  str(t.get("source", "")))


def probed_calibration(calibration: dict, hw: Hardware) -> dict:
    """The calibration a forecast on a probed emulated cluster uses: the probe's step in place of the calibration's
    compute (the other constants, the transport's included, stay the calibration's)."""
    if not hw.probed:
        return calibration
    return {**calibration, "c_full_s": float(hw.probed["compute_s"]),
            "compute_source": str(hw.probed.get("compute_source", "bench probe"))}


def emulated(cfg, calibration: dict) -> Hardware:
    """The emulated cluster of ``cfg.launch``: one shaped link a host (unshaped: no bandwidth limit), its quota; a
    hop's latency is the fitted one; the link's one-way delay (``link_delay``: each host's delay line holds what
    arrives for that long) is the level's ``delay_s``, which each operation pays as its transport does."""
    bits = parse_rate(cfg.launch.link) if cfg.launch.link else None
    level = Level("link " + (cfg.launch.link or "unshaped") + (f" +{cfg.launch.link_delay}" if cfg.launch.link_delay else ""),
                  None, bits / 8 * calibration["wire_efficiency"] if bits else math.inf,
                  calibration["hop_s"],
                  "the configured rate x the TCP goodput bench.perf link measured; the latency a hop fitted; the "
                  "link's one-way delay as the transport pays it (bench.predict.transport)",
                  parse_delay(cfg.launch.link_delay))
    return Hardware(cfg.launch.hardware, "emulated cluster on this machine", True, (level,),
                    cfg.launch.cpu_per_host or 1.0, 0.0, calibration["ps_kappa"],
                    {calibration["workload"]: {"calibration": True, "source": calibration["compute_source"]}},
                    {}, cfg.launch.hardware, calibration.get("profile", ""), {})


def workload(cfg, hw: Hardware, calibration: dict | None) -> Workload:
    """The run's model and batch on ``hw``: parameters from workloads.yaml, compute time from the hardware."""
    table = load_yaml(WORKLOADS)
    model, batch = cfg.train.model, cfg.train.batch_size
    key = f"{model}@{batch}"
    entry = hw.compute.get(key)
    if entry is None:
        raise BenchError(f"hardware {hw.id!r} has no compute time for {key} (profile model@batch); known: "
                         f"{', '.join(sorted(hw.compute)) or '(none)'}")
    known = table.get("models") or {}
    if model not in known:
        raise BenchError(f"the model knows no parameter count for model {model!r}; known: {', '.join(sorted(known))} "
                         f"({WORKLOADS.relative_to(REPO_ROOT)})")
    if entry.get("calibration"):
        if calibration is None or calibration.get("workload") != key:
            raise BenchError(f"{key} on {hw.id!r} needs the calibration of that workload; calibration.json has "
                             f"{(calibration or {}).get('workload')!r}")
        compute = calibration["c_full_s"]
    elif "samples_per_s" in entry:
        compute = batch / float(entry["samples_per_s"])
    else:
        compute = float(entry["step_s"])
    datasets = table.get("datasets") or {}
    if cfg.train.dataset == "synthetic":
        samples = cfg.train.synthetic_samples
    else:
        total = (datasets.get(cfg.train.dataset) or {}).get("samples", 0)
        samples = int(round(total * (1 - cfg.train.test_fraction)))
    m = known[model]
    return Workload(model, batch, int(m["params"]), int(m["tensors"]), compute, samples, str(entry.get("source", "")))


def for_config(cfg, calibration: dict | None = None, hw_id: str | None = None) -> tuple[Hardware, Workload]:
    """The hardware and workload of a resolved run: emulated when its launch settings say so, else the described
    ``hw_id`` (default: the run's hardware name)."""
    if cfg.launch.emulated_hosts:
        if calibration is None:
            calibration = load_calibration()
        hw = emulated(cfg, calibration)
    else:
        name = hw_id or cfg.launch.hardware
        if not model_path(name).is_file():
            raise BenchError(f"hardware {name!r} has no model description (pipelines/hardware/model/{name}.yaml); "
                             f"described: {', '.join(described_ids())}; or an emulated profile (emu, emu-*)")
        hw = described(name)
        if any(e.get("calibration") for e in hw.compute.values()) and calibration is None:
            calibration = load_calibration()
    return hw, workload(cfg, hw, calibration)
