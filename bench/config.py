"""The configuration of a run, as typed dataclasses (and nothing else).

A run is one :class:`RunConfig`: the algorithm's key and its hyperparameters (an instance of the
algorithm's own ``Params`` dataclass), the training settings (:class:`TrainConfig`) and the launch
settings (:class:`LaunchConfig`). Each field has a docstring; closed choices are ``Literal``.
``validate`` methods check what one section can check on its own.

Where the values come from (params.yaml, a hardware profile, ``--set``) and how they are merged,
type-checked and validated is the resolver's job (:mod:`bench.resolve`), which sits above this
module and the algorithm registry; this module imports neither.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from . import SCHEMA_VERSION, BenchError, short

FIRST_SLEEP_S = 5e-6
"""The sleeping wait's first sleep (``bench.comm.Comm.wait_sleeping``); later sleeps double up to
``horovod.wait_sleep_us`` (the performance model counts its polls the same way: ``bench.predict.model.wait_polls``)."""


MAX_THREADS = 256
"""Most torch threads a worker may ask for: more than any node's cores today; 100,000 starved the machine (each rank's
OpenBLAS failed to map its threads' stacks, after launch) instead of being refused before it."""
MAX_FUSION_BYTES = 1 << 32
"""Largest ``horovod.fusion_threshold_bytes`` (4 GiB): Horovod allocates a fusion buffer of this size on each rank
(and reads the variable as a 64-bit integer: 2**64 launched, then failed in every rank)."""
MAX_WEIGHT_DECAY = 1.0
"""Largest ``weight_decay``: an L2 coefficient past 1 outweighs the loss it regularises (1e-5..1e-1 in use); 1e308
passed the checks and overflowed in the ranks' optimizer after launch."""
MAX_LM_WIDTH = 1 << 16
"""Widest ``transformer`` (``width``): a block holds 12 x width**2 weights, 5e10 at this width, past any machine's memory
(2**40 ended in a RuntimeError traceback while the model was sized)."""
MAX_LM_LAYERS = 1024
"""Most ``transformer`` blocks (``layers``): each is built as Python modules, 10**6 ran for minutes before the memory
check could answer (GPT-3 has 96)."""
DATASET_CLASSES = {"mnist5k": 10, "digits": 10, "mnist": 10, "cifar10": 10, "pydoc_topics": 256}
"""Classes of the datasets whose classes are fixed (pydoc_topics: its 256-byte vocabulary); ``num_classes`` sets
those of ``synthetic`` (imagefolder counts its class folders)."""


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(kbit|mbit|gbit)\s*$", re.IGNORECASE)
_UNIT = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_rate(link: str) -> float:
    """Bits per second of a link rate such as ``100mbit``, ``1gbit``, ``10gbit``; 0 for ``""`` (unshaped)."""
    if not link:
        return 0.0
    m = _RATE.match(link)
    if not m or float(m.group(1)) <= 0:
        raise BenchError(f"bad link rate {link!r}: give e.g. 100mbit, 1gbit, 10gbit (or '' for unshaped)")
    return float(m.group(1)) * _UNIT[m.group(2).lower()]


MAX_DELAY_S = 10.0
_DELAY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(us|ms|s)\s*$", re.IGNORECASE)
_DELAY_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
DELAY_FORM = "a number with a unit us, ms or s, from 0 to 10 s (e.g. 500us, 5ms, 50ms; 0: no delay)"


def parse_delay(delay: str | float | int, what: str = "delay") -> float:
    """Seconds of a one-way link delay such as ``500us``, ``5ms``, ``50ms``; 0 for ``""`` or ``0`` (no delay).
    BenchError naming the value and the valid form for anything else: no unit, negative, NaN, over 10 s."""
    if delay in ("", 0, "0") and not isinstance(delay, bool):
        return 0.0
    m = _DELAY.match(delay) if isinstance(delay, str) else None
    value = float(m.group(1)) * _DELAY_UNIT[m.group(2).lower()] if m else math.nan
    if not math.isfinite(value) or not 0 <= value <= MAX_DELAY_S:
        raise BenchError(f"bad {what} {delay!r}: give {DELAY_FORM}")
    return value


def normalize_delay(delay: str) -> str:
    """Canonical spelling of a delay (``5MS``, ``5000us`` -> ``5ms``; none -> ``""``), so that two spellings compare
    equal: the largest of s, ms, us in which it is a whole number (or the microseconds, rounded to 0.001)."""
    seconds = parse_delay(delay)
    if seconds == 0:
        return ""
    for unit in ("s", "ms", "us"):
        v = seconds / _DELAY_UNIT[unit]
        if v >= 1 and abs(v - round(v)) < 1e-6:
            return f"{round(v)}{unit}"
    return f"{round(seconds * 1e6, 3):g}us"


def normalize_rate(link: str) -> str:
    """Canonical spelling (``1GBit`` -> ``1gbit``), so that two spellings of one rate compare equal."""
    if not link:
        return ""
    bps = parse_rate(link)
    for unit in ("gbit", "mbit", "kbit"):
        v = bps / _UNIT[unit]
        if v >= 1 and abs(v - round(v)) < 1e-9:
            return f"{round(v)}{unit}"
    return f"{bps / 1e3:g}kbit"


MAX_SEED = 2 ** 63 - 1
"""Largest seed (``torch.manual_seed`` takes a signed 64-bit integer; numpy's generators any integer >= 0)."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable's name: a shell identifier (horovodrun writes names unquoted into the ranks' command)."""
ENV_VALUE = re.compile(r"[\x20-\x7e]*")
"""An environment variable's value: printable ASCII (horovodrun quotes values; control characters are refused)."""
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A host name or IPv4 address of ``hosts`` (horovodrun writes it unquoted into the ssh command and the ranks'
environment)."""
INTERFACE = re.compile(r"[A-Za-z0-9_.:-]{1,15}(,[A-Za-z0-9_.:-]{1,15})*")
"""``network_interface``: one or more interface names (Linux allows at most 15 characters), comma-separated
(horovodrun writes it unquoted into the ranks' environment)."""
MAX_PORT = 65535
JOB_IDENTITY = re.compile(r"HOROVOD_(RANK|SIZE|LOCAL_RANK|LOCAL_SIZE|CROSS_RANK|CROSS_SIZE|HOSTNAME|CONTROLLER|"
                          r"CPU_OPERATIONS|GLOO_RENDEZVOUS_ADDR|GLOO_RENDEZVOUS_PORT|GLOO_IFACE|ELASTIC)|"
                          r"RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|"
                          r"ROLE_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_[A-Z_]+|OMPI_COMM_WORLD_[A-Z_]+|"
                          r"PMI_RANK|PMI_SIZE")
"""Variables that tell a process which rank of which job it is (Horovod's, torch.distributed's, MPI's): the launcher
gives each rank its own, so none is inherited from the user's shell (``HOROVOD_RANK=5 HOROVOD_SIZE=9`` hung an np 2
run and left its processes behind) nor set by a hardware profile's ``env``."""


@dataclass
class TrainConfig:
    """Training settings shared by every algorithm (the ``profiles`` section of params.yaml)."""

    dataset: Literal["mnist5k", "digits", "synthetic", "pydoc_topics", "mnist", "cifar10", "imagefolder"] = "mnist5k"
    """Dataset: embedded ones (mnist5k, digits, synthetic; pydoc_topics, the text of CPython's documentation topics
    as bytes, for ``transformer``) need no download; mnist (IDX), cifar10 (binary batches) and imagefolder are read
    from ``data_dir``."""
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
    model: Literal["mlp", "hermans_mlp", "lenet", "cnn_bn", "transformer", "alexnet", "googlenet", "resnet18",
                   "resnet50"] = "mlp"
    """Model: mlp (``hidden`` layers), hermans_mlp (784-1000-2000-1000-10), lenet (CNN), cnn_bn (CNN with BatchNorm),
    transformer (a byte-level causal language model for pydoc_topics: ``layers``, ``width``, ``heads``, ``seq_len``);
    alexnet, googlenet, resnet18, resnet50 need torchvision."""
    hidden: list[int] = field(default_factory=lambda: [128])
    """Hidden layer widths of ``mlp``."""
    seq_len: int = 128
    """Bytes of one pydoc_topics sample (a window of text; its targets are the next byte at every position), and
    the context length of ``transformer`` (its learned position embeddings)."""
    layers: int = 2
    """Blocks (causal self-attention and MLP) of ``transformer``."""
    width: int = 64
    """Embedding width of ``transformer`` (its MLP is 4x wider); a multiple of ``heads``."""
    heads: int = 4
    """Attention heads of ``transformer``."""
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
    """Seed of the model initialisation, the shard order and the per-epoch shuffling (a study's repeat k runs with
    ``seed + k``: :class:`bench.study.StudySpec` ``repeats``)."""
    split_seed: int = 0
    """Seed of the train/held-out split (and of synthetic data): the same for every repeat of a study, so repeats
    differ in initialisation and shard order, never in the data they are scored on."""
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
    slow_ranks: list[int] = field(default_factory=list)
    """Stragglers: worker indices (0..np-1) whose compute takes ``slow_factor`` times as long."""
    slow_factor: float = 1.0
    """>= 1: a straggler's compute is stretched to this many times the compute measured in each of its steps
    (the loop sleeps (slow_factor - 1) x that compute right after the step), for every algorithm alike; with the
    launch setting ``slow_mode: cpu`` its emulated host gets 1/slow_factor of the others' CPU share instead."""
    step_jitter_s: float = 0.0
    """Mean (seconds) of a seeded exponential delay added after every step of every worker (0: none)."""

    def validate(self) -> None:
        positive = {"batch_size": self.batch_size, "epochs": self.epochs, "threads": self.threads,
                    "synthetic_samples": self.synthetic_samples, "num_classes": self.num_classes,
                    "image_size": self.image_size, "timeout_s": self.timeout_s, "seq_len": self.seq_len,
                    "layers": self.layers, "width": self.width, "heads": self.heads}
        for name, value in positive.items():
            if value <= 0:
                raise BenchError(f"{name} must be > 0, got {value!r}")
        nonneg = {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                  "max_steps": self.max_steps, "warmup_steps": self.warmup_steps,
                  "eval_every": self.eval_every, "eval_samples": self.eval_samples, "step_jitter_s": self.step_jitter_s}
        for name, value in nonneg.items():
            if value < 0:
                raise BenchError(f"{name} must be >= 0, got {value!r}")
        if self.momentum >= 1:
            raise BenchError(f"momentum must be in [0, 1) (heavy-ball SGD's velocity grows without bound at 1 and "
                             f"above), got {short(self.momentum)}")
        if self.nesterov and self.momentum <= 0:
            raise BenchError(f"nesterov needs momentum > 0, got momentum={short(self.momentum)}")
        if self.threads > MAX_THREADS:
            raise BenchError(f"threads must be in [1, {MAX_THREADS}] (torch threads a worker), got {self.threads!r}")
        if not 0.0 < self.test_fraction < 1.0:
            raise BenchError(f"test_fraction must be in (0, 1), got {short(self.test_fraction)}")
        if any(h <= 0 for h in self.hidden):
            raise BenchError(f"hidden widths must be > 0, got {short(self.hidden)}")
        if any(s <= 0 for s in self.synthetic_shape) or len(self.synthetic_shape) not in (1, 3):
            raise BenchError(f"synthetic_shape must be (features,) or (C, H, W) of positive sizes, got {short(self.synthetic_shape)}")
        if (self.model == "transformer") != (self.dataset == "pydoc_topics"):
            raise BenchError(f"model 'transformer' and dataset 'pydoc_topics' go together (byte sequences in, next-byte "
                             f"logits out), got model {short(self.model)} with dataset {short(self.dataset)}")
        if self.width % self.heads:
            raise BenchError(f"width must be a multiple of heads, got width={self.width} and heads={self.heads}")
        if self.width > MAX_LM_WIDTH or self.layers > MAX_LM_LAYERS:
            raise BenchError(f"transformer width must be in [1, {MAX_LM_WIDTH}] and layers in [1, {MAX_LM_LAYERS}] "
                             f"(12 x width**2 weights a block, each block built in Python), got width={self.width} and "
                             f"layers={self.layers}")
        if self.weight_decay > MAX_WEIGHT_DECAY:
            raise BenchError(f"weight_decay must be in [0, {MAX_WEIGHT_DECAY:g}] (an L2 coefficient past 1 outweighs the "
                             f"loss), got {short(self.weight_decay)}")
        if self.slow_factor < 1.0:
            raise BenchError(f"slow_factor must be >= 1 (1: no straggler), got {short(self.slow_factor)}")
        for name in ("seed", "split_seed"):
            if not 0 <= getattr(self, name) <= MAX_SEED:
                raise BenchError(f"{name} must be in [0, {MAX_SEED}] (torch and numpy take 64-bit seeds), got "
                                 f"{getattr(self, name)!r}")
        if len(set(self.slow_ranks)) != len(self.slow_ranks):
            raise BenchError(f"slow_ranks must not repeat a worker, got {short(self.slow_ranks)}")


HOROVOD_DEFAULTS = {"cycle_time_ms": 1.0, "fusion_threshold_bytes": 128 * 1024 * 1024, "cache_capacity": 1024,
                    "autotune": False, "thread_affinity": "", "disable_group_fusion": False}
"""Horovod 0.28.1's own values of the settings of :class:`HorovodSettings` (what ``None`` leaves in force)."""


@dataclass
class HorovodSettings:
    """Horovod's run-time settings of a job (a hardware profile's ``horovod:`` block; ``--set horovod.KEY=VALUE``).

    Each (but ``wait_sleep_us`` and ``wait_spin_us``, the suite's own way of waiting, and ``groups``, an argument of
    Horovod's optimizer) becomes one ``HOROVOD_*`` environment variable of
    the job's processes, read once by ``hvd.init()``;
    ``None`` sets nothing (Horovod's default, :data:`HOROVOD_DEFAULTS`, or whatever the launching shell sets).
    The values each hardware profile uses and the measurements that chose them: ``docs/horovod.md``; the job's
    effective ``HOROVOD_*`` variables are recorded in ``system.json`` (``horovod``)."""

    cycle_time_ms: float | None = None
    """``HOROVOD_CYCLE_TIME``: ms between the cycles of Horovod's background thread (each cycle negotiates the ready
    tensors across ranks and runs their fused allreduce; a tensor waits for the next cycle). Horovod: 1."""
    fusion_threshold_bytes: int | None = None
    """``HOROVOD_FUSION_THRESHOLD``: bytes of the tensor-fusion buffer (0: no fusion). Horovod: 128 MiB."""
    cache_capacity: int | None = None
    """``HOROVOD_CACHE_CAPACITY``: entries of the response cache (0: full negotiation of every tensor every step).
    Horovod: 1024."""
    autotune: bool | None = None
    """``HOROVOD_AUTOTUNE``: Bayesian tuning of cycle time, fusion and cache during the run. Horovod: false."""
    thread_affinity: str | None = None
    """``HOROVOD_THREAD_AFFINITY``: comma-separated core of the background thread per local rank (``"0,1"``).
    Horovod: not pinned."""
    disable_group_fusion: bool | None = None
    """``HOROVOD_DISABLE_GROUP_FUSION``: fuse grouped allreduces only within their group. Horovod: false."""
    wait_sleep_us: float | None = None
    """How the training thread waits for a collective (the suite's, not a Horovod variable): ``None`` waits in
    Horovod's ``synchronize``, which spins (poll, release the GIL, ``sched_yield``) and keeps a core busy;
    a number waits adaptively (``bench.comm.Comm.wait_sleeping``): polls without sleeping for ``wait_spin_us``,
    then sleeps between polls, the first sleep short and each one twice the last up to this many microseconds,
    leaving the core to Horovod's background thread and the other ranks (``docs/horovod.md``)."""
    groups: int | None = None
    """``hvd.DistributedOptimizer(groups=N)`` (an argument the suite passes, not a variable): the gradients are split
    into N groups in parameter order, and a group's grouped allreduce is enqueued once the backward hooks of all its
    gradients have fired (1: one allreduce per step, after backward). ``None``: Horovod's default, an allreduce
    enqueued from each gradient's hook, the gradients ready in one cycle fused together."""
    wait_spin_us: float | None = None
    """With ``wait_sleep_us``: microseconds a wait polls (yielding the core between polls, never sleeping) before
    it starts to sleep, so that a collective that is nearly done costs no sleep. ``None``: 0 (the first sleep at
    once)."""

    ENV = {"cycle_time_ms": "HOROVOD_CYCLE_TIME", "fusion_threshold_bytes": "HOROVOD_FUSION_THRESHOLD",
           "cache_capacity": "HOROVOD_CACHE_CAPACITY", "autotune": "HOROVOD_AUTOTUNE",
           "thread_affinity": "HOROVOD_THREAD_AFFINITY", "disable_group_fusion": "HOROVOD_DISABLE_GROUP_FUSION"}
    """Setting -> its environment variable."""

    def given(self) -> dict[str, Any]:
        """The settings that are set (the others are Horovod's defaults), as system.json records them."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def env(self) -> dict[str, str]:
        """The environment variables of the settings that are set (booleans as 0/1)."""
        out = {}
        for name, var in self.ENV.items():
            value = getattr(self, name)
            if value is None:
                continue
            out[var] = str(int(value)) if isinstance(value, bool) else (f"{value:g}" if isinstance(value, float) else str(value))
        return out

    def validate(self) -> None:
        if self.cycle_time_ms is not None and self.cycle_time_ms <= 0:
            raise BenchError(f"horovod.cycle_time_ms must be > 0, got {short(self.cycle_time_ms)}")
        for name in ("fusion_threshold_bytes", "cache_capacity"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise BenchError(f"horovod.{name} must be >= 0, got {value!r}")
        if self.fusion_threshold_bytes is not None and self.fusion_threshold_bytes > MAX_FUSION_BYTES:
            raise BenchError(f"horovod.fusion_threshold_bytes must be in [0, {MAX_FUSION_BYTES}] (4 GiB: each rank "
                             f"allocates a fusion buffer of this size), got {short(self.fusion_threshold_bytes)}")
        if self.wait_sleep_us is not None and not 0 < self.wait_sleep_us <= 10_000:
            raise BenchError(f"horovod.wait_sleep_us must be in (0, 10000] microseconds, got {short(self.wait_sleep_us)}")
        if self.wait_spin_us is not None and not 0 <= self.wait_spin_us <= 10_000:
            raise BenchError(f"horovod.wait_spin_us must be in [0, 10000] microseconds, got {short(self.wait_spin_us)}")
        if self.wait_spin_us and self.wait_sleep_us is None:
            raise BenchError(f"horovod.wait_spin_us={short(self.wait_spin_us)} is the first phase of the sleeping wait: "
                             f"set horovod.wait_sleep_us too (or leave both unset for Horovod's spinning wait)")
        if self.groups is not None and self.groups < 1:
            raise BenchError(f"horovod.groups must be >= 1 (or unset: Horovod's per-gradient allreduces), got {short(self.groups)}")
        if self.thread_affinity and not all(c.strip().isdigit() for c in self.thread_affinity.split(",")):
            raise BenchError(f"horovod.thread_affinity must be comma-separated core numbers (one per local rank), "
                             f"got {short(self.thread_affinity)}")


@dataclass
class LaunchConfig:
    """How the job is launched (hardware profiles under ``pipelines/hardware/``)."""

    np: int = 1
    """Number of workers (parameter-server algorithms add their server ranks on top)."""
    hardware: str = "local"
    """Hardware id (the profile's name): names the runs' folder ``results/<study>/runs/<algo>/<hardware>/`` and labels them."""
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
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables of the job's processes (e.g. ``NCCL_IB_HCA``), recorded in config.json."""
    oversubscribe: bool = False
    """Allow more processes than the hardware holds (locally: more than 4 per core; ``--oversubscribe``)."""
    emulated_hosts: int = 0
    """> 0: run on an emulated cluster of hosts on this machine (network namespaces with shaped links and an sshd
    each; ``python -m bench cluster``; root). It is brought up, or reshaped, with at least this many hosts, more
    when the run needs them (a parameter server gets a host of its own), and the job is launched over ssh
    through its hostfile and interface, as on a real cluster."""
    emulated_slots: int = 1
    """Processes per emulated host."""
    link: str = ""
    """Rate of every emulated host's link, both directions (``100mbit``, ``1gbit``, ``10gbit``; "": unshaped).
    Its latency is ``link_delay``."""
    link_delay: str | int = ""
    """One-way delay between any two emulated hosts (``500us``, ``5ms``, ``50ms``; "", 0 or ``0ms``: none): a round trip
    takes 2x it (each host's ingress is held by its delay line, ``bench.cluster.delay``). Recorded in system.json
    (``network.link_delay``, ``network.link_delay_s``)."""
    link_share_aimed: float = 0.0
    """> 0: the communication share of ``sync`` this link's rate was calibrated for (a study's ``share<s>`` link,
    :func:`bench.study.calibrate`); a record for the analysis, which shows it beside the share measured."""
    emulated_cpu: dict[int, float] = field(default_factory=dict)
    """Emulated host index -> its share of one core (cgroup cpu quota), to make a host slower; wins over
    ``cpu_per_host`` for the hosts it names."""
    cpu_per_host: float = 0.0
    """> 0: every emulated host the run uses, the parameter server's included, runs inside this many cores (a cgroup
    v1 ``cpu`` quota on everything its sshd starts: the rank, Horovod's background thread, gloo's threads), so that
    hosts do not take CPU from each other; 0: unlimited. The same share for every run of a profile, whatever its host
    count (so that algorithms with and without a server host are compared on the same devices): a run whose hosts
    together would need more cores than the machine has is refused. Recorded in system.json (``network.cpu``)."""
    slow_mode: Literal["sleep", "cpu"] = "sleep"
    """How a straggler (``slow_ranks``, ``slow_factor``) is made: ``sleep``: its loop sleeps (slow_factor - 1) x the
    compute of each step (any hardware); ``cpu``: its emulated host gets ``cpu_per_host / slow_factor`` cores, a slower
    device whose slowness also applies to its communication threads (an emulated cluster with ``cpu_per_host`` > 0
    and one rank per host)."""
    cpu_idle: Literal["default", "poll"] = "default"
    """What an idle CPU does while the job runs: ``default``: the kernel's idle states (on a virtual machine the
    vCPU halts and is woken later, at a cost); ``poll``: the launcher holds ``/dev/cpu_dma_latency`` at 0 us for
    the job (root), so idle CPUs poll and a rank or emulated host that was idle resumes at once (``bench.cpu_idle``;
    an emulated host inside a CPU quota is idle most of each period). Recorded in system.json (``cpu_idle``)."""
    horovod: HorovodSettings = field(default_factory=HorovodSettings)
    """Horovod's run-time settings (cycle time, fusion, response cache, ...; :class:`HorovodSettings`): the hardware
    profile's ``horovod:`` block, one key overridden by ``--set horovod.cycle_time_ms=0.5``. Unset keys keep
    Horovod's defaults."""

    def validate(self) -> None:
        self.horovod.validate()
        if self.np < 1:
            raise BenchError(f"--np must be >= 1, got {self.np}")
        self.validate_shell_words()
        if self.emulated_hosts < 0 or self.emulated_slots < 1:
            raise BenchError(f"emulated_hosts must be >= 0 and emulated_slots >= 1, got {self.emulated_hosts} and "
                             f"{self.emulated_slots}")
        if self.emulated_hosts and (self.hosts or self.hostfile):
            raise BenchError("an emulated cluster (emulated_hosts > 0) makes its own hostfile: leave hosts and hostfile empty")
        if not self.emulated_hosts and (self.link or self.emulated_cpu or self.cpu_per_host):
            raise BenchError(f"link, emulated_cpu and cpu_per_host describe an emulated cluster: set emulated_hosts > 0 "
                             f"(link={short(self.link)}, emulated_cpu={short(self.emulated_cpu)}, cpu_per_host={short(self.cpu_per_host)})")
        if not 0 <= self.link_share_aimed < 1 or (self.link_share_aimed and not self.link):
            raise BenchError(f"link_share_aimed must be in [0, 1) and describes a shaped link (link set), got "
                             f"link_share_aimed={short(self.link_share_aimed)}, link={short(self.link)}")
        cores = os.cpu_count() or 1
        if not 0 <= self.cpu_per_host <= cores:
            raise BenchError(f"cpu_per_host must be in [0, {cores}] cores (0: unlimited), got {short(self.cpu_per_host)}")
        if self.slow_mode == "cpu" and not (self.emulated_hosts and self.cpu_per_host > 0 and self.emulated_slots == 1):
            raise BenchError(f"slow_mode 'cpu' makes a straggler's emulated host slower: it needs emulated_hosts > 0, "
                             f"cpu_per_host > 0 and emulated_slots 1 (got emulated_hosts={self.emulated_hosts}, "
                             f"cpu_per_host={short(self.cpu_per_host)}, emulated_slots={self.emulated_slots}); valid "
                             f"slow_mode: cpu (on such a cluster), sleep")


    def validate_shell_words(self) -> None:
        """What horovodrun writes into a shell command (the ranks' command line, the ssh command) is inert there:
        environment names are identifiers and values printable text (horovodrun quotes values, never names), host
        names and interfaces are plain names, the ssh port a port."""
        for key, value in self.env.items():
            if not ENV_NAME.fullmatch(key):
                raise BenchError(f"env name {short(key)} is not an environment variable's name: letters, digits and _, "
                                 f"not starting with a digit")
            if JOB_IDENTITY.fullmatch(key):
                raise BenchError(f"env {key}: a rank's identity is the launcher's to give (each rank gets its own), "
                                 f"not a setting")
            if not ENV_VALUE.fullmatch(value):
                raise BenchError(f"env {key}={short(value)}: a value must be printable ASCII text (no control "
                                 f"characters or newlines)")
        for entry in filter(None, self.hosts.split(",")):
            host, _, slots = entry.strip().partition(":")
            if not HOST_NAME.fullmatch(host) or (slots and not slots.isdigit()):
                raise BenchError(f"hosts entry {short(entry)} is not host[:slots] (a host name or IPv4 address: "
                                 f"letters, digits, '.', '-', '_'; slots a number)")
        if self.network_interface and not INTERFACE.fullmatch(self.network_interface):
            raise BenchError(f"network_interface {short(self.network_interface)} is not an interface name (at most 15 "
                             f"letters, digits, '.', ':', '-', '_'; several separated by commas)")
        if not 0 <= self.ssh_port <= MAX_PORT:
            raise BenchError(f"ssh_port must be in [0, {MAX_PORT}] (0: ssh's default), got {self.ssh_port!r}")
        if "\n" in self.hostfile or "\0" in self.hostfile:
            raise BenchError(f"hostfile {short(self.hostfile)} is not a file name")


@dataclass
class RunConfig:
    """Everything one run needs; written as ``config.json`` in the run directory."""

    algorithm: str
    """Registry key of the algorithm (``python -m bench list``)."""
    params: Any
    """The algorithm's hyperparameters: an instance of its ``Params`` dataclass."""
    train: TrainConfig
    launch: LaunchConfig
    profile: str = "laptop"
    """Training profile of params.yaml the values came from."""
    study: str = "adhoc"
    """Study the run belongs to (names ``results/<study>/``)."""
    tag: str = ""
    """Suffix of the run's name (a study's grid point, then ``r<k>`` for repeat k when the study repeats its runs)."""
    repeat: int = 0
    """Repeat index of the run in its study (0..repeats-1; :class:`bench.study.StudySpec` ``repeats``)."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
