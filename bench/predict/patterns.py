"""What each registered algorithm sends, to whom and how often: the communication pattern the step model costs.

One entry of :data:`PATTERNS` per registry key (``tests/single/test_predict.py`` checks that every key has one), a
function of the run's resolved configuration (``cfg.params`` are the algorithm's hyperparameters) and the workload's
parameter-tensor count. It restates, in the model's terms, the rule each module's docstring gives
(docs/algorithms.md): the algorithm modules are not touched, so that adding an algorithm means adding its row here.

``workload`` is :class:`bench.predict.hardware.Workload` (``params``: parameter count, ``tensors``: parameter tensors).
A pattern is a list of :class:`Exchange` (a collective, a point-to-point round, a parameter-server visit, a pairwise
swap, a broadcast), each with how often it happens (every ``every`` local steps), what fraction of the model's
bytes it carries and how it overlaps the compute (``none``: the step blocks on it; ``backward``: it starts during the
backward pass; ``behind``: it runs behind the next ``every`` steps of compute, as delayed allreduce, LASGD's averaging
or overlapped SGP do), plus the local passes over the model a step makes outside communication (the parameter-server
workers' accumulated change Δ: two flat copies, a difference and a sum).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Literal

from ..topology import Exponential, Ring, Torus

Kind = Literal["allreduce", "p2p", "ps", "pairwise", "broadcast"]
Overlap = Literal["none", "backward", "behind"]


@dataclass(frozen=True)
class Exchange:
    """One communication of a worker, every ``every`` local steps."""

    kind: Kind
    every: float = 1.0
    """Local steps between two of these (1: every step)."""
    fraction: float = 1.0
    """Bytes carried, as a fraction of the model's parameter bytes (0.5: float16; 1/P: one of P fragments)."""
    overlap: Overlap = "none"
    peers: int = 1
    """p2p: messages sent (and received) per round; broadcast: operations per broadcast."""
    ops: int = 1
    """Separate collective operations (``layerwise``: one per parameter tensor; fused ones count 1)."""
    push: float = 1.0
    """ps: model-sized payload the worker sends to the server (0: a pull request)."""
    pull: float = 1.0
    """ps: model-sized payload the server sends back (0: only the small reply)."""
    lag: int = 0
    """behind: steps between starting it and waiting for it (0: ``every``; delayed allreduce: its delay d)."""


@dataclass(frozen=True)
class Pattern:
    family: str
    exchanges: tuple[Exchange, ...]
    local_passes: float = 0.0
    """Passes over the model per step outside communication (parameter-server workers' Δ)."""
    server: bool = False
    """A parameter server: one more host that serves every worker's visits (a FIFO queue)."""
    barrier: bool = True
    """Workers wait for one another (a collective, or SGP's in-peers): the slowest sets the pace."""
    note: str = ""
    runtime: str = "horovod"
    """What carries its collectives: ``horovod`` (a cycle and a negotiation before each) or ``torch`` (gloo's own,
    torch.distributed; ``ddp``)."""
    extra: dict = field(default_factory=dict)
    """Settings of one pattern only: SGP's exponents cycle, FAST's restart cadence."""


DDP_BUCKET_BYTES = 25 * 2 ** 20  # DistributedDataParallel's default bucket_cap_mb


def _allreduce_family(every: float, overlap: Overlap = "none", fraction: float = 1.0, ops: int = 1,
                      note: str = "", lag: int = 0) -> Pattern:
    return Pattern("allreduce", (Exchange("allreduce", every=every, fraction=fraction, overlap=overlap, ops=ops,
                                          lag=lag),), note=note)


def _sync(cfg, workload) -> Pattern:
    p = cfg.params
    grouped = cfg.launch.horovod.groups == 1
    fraction = 0.5 if p.compression == "fp16" else 1.0
    return _allreduce_family(1, "none" if grouped else "backward", fraction, ops=1 if grouped else workload.tensors,
                             note="one grouped allreduce after backward" if grouped else
                             "an allreduce per gradient from its hook, overlapping backward (fused per cycle)")


def _ddp(cfg, workload) -> Pattern:
    return dataclasses.replace(_ddp_exchanges(cfg, workload), runtime="torch")


def _ddp_exchanges(cfg, workload) -> Pattern:
    p = cfg.params
    if p.comm_hook == "post_localsgd":
        return _allreduce_family(p.post_localsgd_period, note="post-local SGD: parameters averaged every period "
                                 "(warm-up steps of gradient allreduce not modelled)")
    if p.comm_hook == "powersgd":
        # rank-r factors P, Q of a gradient matrix taken as square, m = params / tensors elements: 2·r·sqrt(m) of m
        m = workload.params / workload.tensors
        return _allreduce_family(1, "backward", fraction=min(1.0, 2 * p.powersgd_rank * math.sqrt(m) / m), ops=2,
                                 note="PowerSGD: two allreduces of rank-r factors (matrices taken as square)")
    return _allreduce_family(1, "backward", 0.5 if p.comm_hook == "fp16" else 1.0,
                             ops=max(1, math.ceil(workload.nbytes / DDP_BUCKET_BYTES)),
                             note="bucketed allreduce inside backward (one bucket per 25 MB)")


def _delayed(cfg, workload) -> Pattern:
    d = cfg.params.delay
    return _allreduce_family(1, "behind" if d > 0 else "none", note=f"reduction of step t applied at t+{d}", lag=d)


def _windowed(cfg, workload) -> Pattern:
    return _allreduce_family(cfg.params.communication_window)


def _lasgd(cfg, workload) -> Pattern:
    return _allreduce_family(cfg.params.communication_window, "behind",
                             note="non-blocking averaging behind the next window's steps")


def _diloco(cfg, workload) -> Pattern:
    p = cfg.params
    if not p.streaming:
        return _allreduce_family(p.communication_window)
    frags = p.stream_fragments
    return _allreduce_family(p.communication_window / frags, "behind" if p.stream_overlap else "none",
                             fraction=1.0 / frags, note=f"streaming: 1/{frags} of the model every "
                             f"{p.communication_window / frags:g} steps")


# -- parameter server: visits to the server per cycle of local steps ---------------------------------------------
PS_PASSES = 4.0  # θ before the step, θ after it, their difference, Δ += it: four passes over the model a step


def _ps(visits: list[Exchange], passes: float = PS_PASSES, note: str = "") -> Pattern:
    return Pattern("parameter-server", tuple(visits), local_passes=passes, server=True, barrier=False, note=note)


def _downpour(fetch: int, push: int) -> Pattern:
    """Per cycle of lcm(fetch, push) steps: one commit that also pulls, the other commits alone, the other pulls alone."""
    if fetch == push:
        return _ps([Exchange("ps", every=push)], note=f"commit Δ and pull every {push} steps (one round trip)")
    cycle = math.lcm(fetch, push)
    visits = [Exchange("ps", every=cycle)]
    if cycle // push > 1:
        visits.append(Exchange("ps", every=cycle / (cycle // push - 1), pull=0.0))
    if cycle // fetch > 1:
        visits.append(Exchange("ps", every=cycle / (cycle // fetch - 1), push=0.0))
    return _ps(visits, note=f"pull every {fetch}, commit every {push} steps")


def _window_ps(cfg, workload) -> Pattern:
    lam = cfg.params.communication_window
    return _ps([Exchange("ps", every=lam)], note=f"commit and pull every {lam} steps (one round trip)")


def _elastic_ps(cfg, workload) -> Pattern:
    lam = cfg.params.communication_window
    return _ps([Exchange("ps", every=lam, push=0.0), Exchange("ps", every=lam, pull=0.0)], passes=0.0,
               note=f"every {lam} steps: pull θ̃, then commit the elastic difference (two round trips)")


def _gradient_ps(cfg, workload) -> Pattern:
    return _ps([Exchange("ps", every=1)], passes=1.0, note="commit the gradient and get θ̃ back, every step")


# -- decentralised ----------------------------------------------------------------------------------------------
def _sgp(cfg, workload) -> Pattern:
    p = cfg.params
    n = cfg.launch.np
    peers = p.peers_per_step if n > 1 else 0
    return Pattern("decentralised", (Exchange("p2p", peers=peers, overlap="behind" if p.overlap else "none"),),
                   note=f"push-sum to {peers} out-peer(s) of the exponential graph a round",
                   extra={"exponents": Exponential(n, 1).num_exponents})


def _adpsgd(cfg, workload) -> Pattern:
    return Pattern("decentralised", (Exchange("pairwise"),), barrier=False,
                   note="actives (even ranks) swap models with a random passive's service thread every step")


def _fast(cfg, workload) -> Pattern:
    p = cfg.params
    n = cfg.launch.np
    neighbours = len((Ring(n) if p.topology == "ring" else Torus(n)).out_peers(0)) if n > 1 else 0
    return Pattern("decentralised", (Exchange("p2p", peers=neighbours, overlap="behind"),
                                     Exchange("broadcast", every=0.0, peers=workload.tensors + 1)),
                   note="gradients to the ring/torus neighbours every step; a restart (allgather of losses, "
                        "broadcast of the winner's tensors) every sync_epochs",
                   extra={"sync_epochs": p.sync_epochs})


PATTERNS: dict[str, Callable] = {
    "sync": _sync,
    "ddp": _ddp,
    "delayed": _delayed,
    "layerwise": lambda cfg, workload: _allreduce_family(1, "backward", ops=workload.tensors,
                                                        note="one allreduce per parameter tensor, from its hook"),
    "localsgd": _windowed,
    "lasgd": _lasgd,
    "easgd": _windowed,
    "downpour": lambda cfg, workload: _downpour(cfg.params.n_fetch, cfg.params.n_push),
    "asgd": lambda cfg, workload: _downpour(cfg.params.n_sync, cfg.params.n_sync),
    "aeasgd": _elastic_ps,
    "eamsgd": _elastic_ps,
    "dynsgd": _window_ps,
    "agn": _window_ps,
    "adag": _window_ps,
    "sasgd": _gradient_ps,
    "dcasgd": _gradient_ps,
    "sgp": _sgp,
    "adpsgd": _adpsgd,
    "fast": _fast,
    "diloco": _diloco,
    "slowmo": _windowed,
}
"""Registry key -> pattern(cfg, workload); ``tests/single/test_predict.py`` checks it covers the registry."""


def pattern(cfg, workload) -> Pattern:
    return PATTERNS[cfg.algorithm](cfg, workload)
