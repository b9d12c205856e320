"""Stochastic Gradient Push: push-sum gossip over a time-varying directed exponential graph.

References:
    Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed Deep Learning",
    ICML 2019 (Algorithm 1: SGP; Algorithm 2 / section 4: overlap SGP, "OSGP").
    Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate information", FOCS 2003 (push-sum).

Update rule (docs/algorithms.md, ``sgp``). Node i keeps a numerator x_i (a flat parameter vector)
and a push-sum weight w_i (w_i = 1 at the start; all x_i equal, broadcast from rank 0); the
model it computes with is the de-biased z_i = x_i / w_i. In round t:

    g   = ∇L(z_i; B_i)                               (forward/backward at z_i)
    x_i ← Opt(x_i, g)                                (the local optimizer steps the numerator)
    p   = 1 / (|out_t(i)| + 1),  out_t(i) = {(i + 2^k) mod n : k in the round's exponents}
    send (p·x_i, p·w_i) to every j in out_t(i); keep p·x_i, p·w_i; add what arrives from in_t(i)
    z_i = x_i / w_i

``peers_per_step`` exponents per round, cycling through k = 0..floor(log2(n-1))
(:class:`bench.topology.Exponential`). The mixing matrix is column-stochastic, so Σ_i w_i = n
and Σ_i x_i only changes by the local updates (mass conservation). ``overlap`` (OSGP): the
messages of round t are sent non-blocking and added to x_i, w_i in round t+1, after that
round's local update (one step of delay; mass in flight is added by :meth:`finalize`).
Each message is one tensor [p·x_i, p·w_i]; a round's sends and receives are posted together
(:meth:`bench.comm.p2p.P2P.exchange`).

The model evaluated is the average over ranks of the snapshots of z_i, formed after training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import BenchError, vectors
from ..comm import tags
from ..topology import Exponential
from .base import Algorithm, StepStats


class SGP(Algorithm):
    name = "sgp"
    paper = "Stochastic Gradient Push (Assran et al., ICML 2019)"
    family = "decentralised"
    averaged_evaluation = True

    @dataclass
    class Params:
        peers_per_step: int = 1
        """Out-peers per round on the exponential graph, 1..floor(log2(np-1))+1 (the paper uses 1)."""
        overlap: bool = False
        """OSGP: send non-blocking and add the received messages one step later."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        n = cfg.launch.np
        top = max(Exponential(n).num_exponents, 1)
        if not 1 <= params.peers_per_step <= top:
            raise BenchError(f"sgp peers_per_step must be in [1, {top}] for np={n}, got {params.peers_per_step}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        self.graph = Exponential(self.comm.size, self.p.peers_per_step)
        self.p2p = self.comm.p2p() if self.comm.size > 1 else None  # comm: open the point-to-point transport between the workers (collective)
        self.tensors = list(model.parameters())
        x = vectors.flat(self.tensors)
        self.xw = torch.cat([x, x.new_ones(1)])  # [x_i, w_i]: one message per peer
        self.pending = None  # overlap: the exchange of the last round

    def z(self) -> torch.Tensor:
        return self.xw[:-1] / self.xw[-1]

    def _load_z(self) -> None:
        vectors.assign_(self.tensors, self.z())

    def _receive_pending(self) -> None:
        if self.pending is None:
            return
        with self.ctx.timer.comm():
            received = self.pending.wait()  # comm: receive the previous round's [x_j, w_j] shares from the in-peers
        for b in received:
            self.xw += b
        self.pending = None

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y)  # g = ∇L(z_i)
        vectors.assign_(self.tensors, self.xw[:-1])  # the optimizer steps the numerator x_i
        self.optimizer.step()
        self.xw[:-1] = vectors.flat(self.tensors)
        if self.p2p is not None:
            stats.bytes_sent = self._gossip()
        self._load_z()
        return stats

    def _gossip(self) -> int:
        t = self.t - 1  # the round, counted from 0
        out, inn = self.graph.out_peers(self.comm.rank, t), self.graph.in_peers(self.comm.rank, t)
        if self.p.overlap:
            self._receive_pending()  # round t-1's messages, after this round's local update
        self.xw *= self.graph.mixing_weight(self.comm.rank, t)
        share = self.xw.clone() if self.p.overlap else self.xw  # overlap: xw changes while the send is in flight
        with self.ctx.timer.comm():
            self.pending = self.p2p.exchange([(share, dst) for dst in out],  # comm: send this round's [x_i, w_i] share to the out-peers, post the in-peers' receives
                                             [(torch.empty_like(self.xw), src) for src in inn], tag=tags.SGP_SHARE)
        if not self.p.overlap:
            self._receive_pending()
        return len(out) * share.numel() * share.element_size()

    def finalize(self) -> None:
        self._receive_pending()  # overlap: add the mass still in flight
        self._load_z()

    def eval_theta(self):
        return self.z()  # the evaluated model is the mean of the de-biased z_i

    def stats(self) -> dict:
        return {"sgp_rounds": self.t}
