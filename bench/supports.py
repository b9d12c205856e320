"""What the software build and the launching machine support, checked before anything is written
(:func:`bench.resolve.check_machine` calls :func:`check_build` and :func:`check_memory`), so that a value the build or
the machine lacks is one line and exit 2, never a job that starts and fails on its ranks.

- the Horovod controller (``gloo`` | ``mpi``) must be built into Horovod (``horovodrun --check-build``);
- ``p2p_backend: nccl`` needs torch.distributed built with NCCL; ``device: cuda`` needs a CUDA build of torch and,
  where the ranks run on this machine, a GPU here;
- a worker's shard holds at least one batch;
- the model must build here (a torchvision model needs torchvision);
- the ranks that run on this machine must fit its memory: each holds the dataset, the model's weights and gradients,
  and one mini-batch's activations at least (:func:`rank_bytes`; measured by one sample's forward pass, on the CPU
  for a model of up to 16 M parameters, on PyTorch's meta device, nothing allocated, for a larger one). This is a
  lower bound: a run it admits may still need more (optimizer state, an algorithm's copies, the framework's own
  memory), one it refuses cannot fit.
"""

from __future__ import annotations

import psutil
import torch

from . import BenchError
from .config import DATASET_CLASSES, RunConfig
from .data import footprint as data_footprint
from .data import steps_per_epoch
from .models import footprint as model_footprint
from .placement import processes
from .system import horovod_build

FLOAT_BYTES = 4


def ranks_here(cfg: RunConfig) -> int:
    """Processes of the run on this machine: all of them locally and on the emulated cluster, none with hosts or a
    hostfile (other machines)."""
    launch = cfg.launch
    return 0 if (launch.hosts or launch.hostfile) and not launch.emulated_hosts else processes(cfg)


def check_build(cfg: RunConfig) -> None:
    """The controller, point-to-point backend and device of ``cfg`` against this build (and, for the device, this
    machine when ranks run here)."""
    available = horovod_build().get("available") or {}
    controller = {"gloo": "Gloo", "mpi": "MPI"}[cfg.launch.controller]
    if available and not available.get(controller):
        built = [c for c, name in (("gloo", "Gloo"), ("mpi", "MPI")) if available.get(name)]
        raise BenchError(f"controller {cfg.launch.controller!r} is not built into this Horovod "
                         f"(horovodrun --check-build); valid here: {', '.join(built) or '(none)'}")
    if cfg.launch.p2p_backend == "nccl" and not torch.distributed.is_nccl_available():
        raise BenchError("p2p_backend 'nccl' needs torch.distributed built with NCCL, which this torch is not; "
                         "valid here: auto, gloo")
    if cfg.train.device == "cuda":
        if not torch.backends.cuda.is_built():
            raise BenchError(f"device 'cuda' needs a CUDA build of torch; this one is {torch.__version__} (CPU only); "
                             f"valid here: auto, cpu")
        if ranks_here(cfg) and not torch.cuda.is_available():
            raise BenchError("device 'cuda' needs a GPU on this machine, and torch.cuda.is_available() is False; "
                             "valid here: auto, cpu")


def rank_bytes(cfg: RunConfig) -> tuple[int, dict]:
    """A lower bound of one rank's memory in bytes (module docstring) and its parts."""
    shape, data_bytes, _ = data_footprint(cfg.train)
    classes = DATASET_CLASSES.get(cfg.train.dataset, cfg.train.num_classes)
    params, activations = model_footprint(cfg.train, shape, classes)
    parts = {"dataset": data_bytes, "weights and gradients": 2 * FLOAT_BYTES * params,
             "activations": FLOAT_BYTES * activations * cfg.train.batch_size}
    return sum(parts.values()), parts


def check_batch(cfg: RunConfig) -> None:
    """A worker's shard of the training set holds at least one batch (the dataset's size from the configuration)."""
    steps_per_epoch(data_footprint(cfg.train)[2], cfg.launch.np, cfg.train.batch_size)


def check_memory(cfg: RunConfig) -> None:
    """The run's ranks on this machine fit its memory (:func:`rank_bytes`, a lower bound)."""
    here = ranks_here(cfg)
    if not here:
        return
    need, parts = rank_bytes(cfg)
    total = psutil.virtual_memory().total
    if need * here > total:
        what = ", ".join(f"{k} {v / 2**30:.3g}" for k, v in parts.items())
        raise BenchError(f"{here} process(es) of at least {need / 2**30:.3g} GiB each ({what} GiB) do not fit this "
                         f"machine's {total / 2**30:.3g} GiB of memory: lower batch_size, the model's size or the "
                         f"dataset's, or --np")
