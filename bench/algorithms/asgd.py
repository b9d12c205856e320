"""GPU A-SGD: asynchronous SGD with a parameter server and an optional warm start.

References:
    Paine, Jin, Yang, Lin, Huang, "GPU Asynchronous Stochastic Gradient Descent to Speed Up
    Neural Network Training", arXiv:1312.6186, 2013.

Update rule (docs/algorithms.md, ``asgd``): DOWNPOUR with n_fetch = n_push = ``n_sync``: every
n_sync local Opt steps a worker commits Δ (its accumulated change) and pulls θ̃ in the same
round trip; the server applies θ̃ ← θ̃ + Δ on arrival. ``warm_start``: every rank starts from
a checkpoint (a ``model.pt`` state_dict, e.g. of a one-worker run), the paper's cure for the
slow cold start of many asynchronous clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .. import BenchError
from ..data import load_dataset
from ..layout import REPO_ROOT
from ..models import build_model
from .ps_base import WindowAlgorithm, check_positive_int


def load_checkpoint(path: str, want: dict, model_name: str) -> dict:
    """The state_dict at ``path``, checked against ``want`` (the run's model's state_dict); BenchError if missing
    or incompatible."""
    p = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
    if not p.is_file():
        raise BenchError(f"warm_start checkpoint {path!r} not found")
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:
        raise BenchError(f"warm_start checkpoint {path!r} is not a readable state_dict: {e}") from e
    if not isinstance(state, dict) or set(state) != set(want):
        raise BenchError(f"warm_start checkpoint {path!r} does not match model {model_name!r}: "
                         f"keys {sorted(state) if isinstance(state, dict) else type(state).__name__} vs {sorted(want)}")
    for k, v in want.items():
        if tuple(state[k].shape) != tuple(v.shape):
            raise BenchError(f"warm_start checkpoint {path!r}: {k} has shape {tuple(state[k].shape)}, "
                             f"model {model_name!r} needs {tuple(v.shape)}")
    return state


class ASGD(WindowAlgorithm):
    name = "asgd"
    paper = "GPU A-SGD: async SGD with a parameter server, warm start (Paine et al. 2013)"

    @dataclass
    class Params(WindowAlgorithm.Params):
        n_sync: int = 1
        """Commit the accumulated change and pull the centre every this many local steps."""
        warm_start: str = ""
        """Path of a model.pt state_dict every rank starts from (empty: the usual initialisation)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_positive_int(params, "n_sync")

    @classmethod
    def check_machine(cls, params, cfg) -> None:
        if params.warm_start:  # before launch: the checkpoint against the run's model, built from the dataset's shape
            ds = load_dataset(cfg.train)
            load_checkpoint(params.warm_start, build_model(cfg.train, ds.input_shape, ds.num_classes).state_dict(),
                            cfg.train.model)

    def setup(self, model, optimizer):
        if self.p.warm_start and self.comm.rank == 0:  # rank 0's parameters are broadcast to all ranks
            model.load_state_dict(load_checkpoint(self.p.warm_start, model.state_dict(), self.ctx.cfg.train.model))
        super().setup(model, optimizer)

    def fetch_push(self):
        return self.p.n_sync, self.p.n_sync, 1.0
