"""Models as flat vectors, and back: what averaging, parameter servers, gossip and evaluation share.

- :func:`flat` copies tensors into one new 1-D vector; :func:`assign_` copies a vector back into
  tensors in place (so optimizers keep their parameter objects);
- :func:`snapshot` is a detached copy of a model's parameters (flat) and buffers (BatchNorm's running
  statistics), what the worker loop keeps at an evaluation point;
- :class:`EvalNet` is one extra model of the run's architecture into which a snapshot, an average of
  replicas or a parameter server's centre is loaded for evaluation, with the buffers given.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import nn


def flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """A new contiguous 1-D tensor holding ``tensors`` one after the other (detached)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


@torch.no_grad()
def assign_(tensors: Iterable[torch.Tensor], vec: torch.Tensor) -> None:
    """Copy ``vec`` into ``tensors`` in place (the inverse of :func:`flat`)."""
    tensors = list(tensors)
    if numel(tensors) != vec.numel():
        raise ValueError(f"vector of {vec.numel()} elements for tensors of {numel(tensors)}")
    i = 0
    for t in tensors:
        n = t.numel()
        t.copy_(vec[i:i + n].view_as(t))
        i += n


def split_like(vec: torch.Tensor, like: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """``vec`` cut into new tensors of the shapes and dtypes of ``like`` (the inverse of :func:`flat`)."""
    out, i = [], 0
    for t in like:
        out.append(vec[i:i + t.numel()].reshape(t.shape).to(t.dtype).clone())
        i += t.numel()
    return out


def numel(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


def nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def snapshot(model: nn.Module, theta: torch.Tensor | None = None) -> dict:
    """A copy of what evaluating ``model`` needs: its parameters as one vector (or ``theta``, e.g. a de-biased
    push-sum vector) and a copy of every buffer (BatchNorm running statistics), kept in host memory."""
    vec = flat(model.parameters()) if theta is None else theta.detach().clone()
    return {"theta": vec.cpu(), "buffers": [b.detach().cpu().clone() for b in model.buffers()]}


class EvalNet:
    """A model of the run's architecture, built once, into which vectors are loaded for evaluation."""

    def __init__(self, build_model: Callable[[], nn.Module]):
        self._build = build_model
        self._net: nn.Module | None = None

    def load(self, theta: torch.Tensor, buffers: list[torch.Tensor] | None = None) -> nn.Module:
        """The model with parameters ``theta`` (flat) and ``buffers`` (None: keep the model's own)."""
        if self._net is None:
            self._net = self._build()
        net = self._net
        device = next(net.parameters()).device
        assign_(net.parameters(), theta.to(device))
        if buffers is not None:
            with torch.no_grad():
                for b, v in zip(net.buffers(), buffers, strict=True):
                    b.copy_(v.to(device))
        return net
