"""FAST: gradient exchange with neighbours on a ring or torus, and periodic restart from the best worker.

References:
    Viviani, Drocco, Baccega, Colonnelli, Aldinucci, "Deep Learning at Scale", 27th Euromicro
    PDP 2019, pp. 124-131 (the FAST framework: workers on a 1-D ring or 2-D torus exchange
    gradients with their neighbours, no global barrier; periodic synchronisation on the best
    model).

Update rule (docs/algorithms.md, ``fast``), on worker i with neighbours N(i) (``topology``: a ring,
or the most square torus, :mod:`bench.topology`), in its step t:

    g_i^t = ∇L(θ_i; B_i^t);  send g_i^t to every j in N(i)
    θ_i ← Opt(θ_i, g_i^t)                                 (its own gradient)
    θ_i ← Opt(θ_i, g_j^{t-1}) for each j in N(i)          (the neighbours' stale gradients,
                                                            same optimizer, same state)

Updates are summed, not averaged: the paper's account of its update protocol (Viviani et al.'s
figure of two workers: w₁ᴬ + δ₁ᴮ(w₀) + δ₂ᴬ(...)) applies every received update δ as it is, so that
with complete communication the replicas stay consistent; a worker with k neighbours therefore
moves by up to k + 1 single-worker steps per step (as large-batch training with a summed gradient
would). Checked (laptop profile, np=4): averaging instead of summing changes nothing that matters
(held-out 0.63 against 0.62 with one restart per epoch; 0.87 against 0.89 with four), so the sum is
kept as the paper describes it.

Every ``sync_epochs`` epochs (every round(sync_epochs · steps_per_epoch) steps, and once at
the end) all workers evaluate, and all restart from the best worker's weights: the loss of
each worker's model on one common selection set (the first ``sync_samples`` training samples,
the same on every rank; never the held-out set), an allgather of the losses, and a broadcast of
the parameters and optimizer state from the winner (lowest loss, lowest rank on ties).

Inferred details (the paper's description is brief): the staleness of neighbours' gradients
is exactly one step here (gradients of step t are sent non-blocking and applied in step t+1),
which bounds how far a worker can run ahead of its neighbours instead of queueing unboundedly;
there is no global barrier between syncs. Gradient messages in flight are drained and applied
before each sync. The model evaluated is rank 0's (equal to the winner's after each sync).

Observed behaviour worth knowing: there is no weight averaging, only gradient sharing, so the
replicas are not pulled together between syncs. On a quadratic f = ½(θ−θ*)ᵀH(θ−θ*) the
replicas evolve as θ ← θ − η((I + A) ⊗ H)(θ − θ*), A the graph's adjacency matrix; I + A has
eigenvalue −1 on a ring of 4 (and on the 2 x 2 and 3 x 3 tori), so that disagreement mode
grows by (1 + ηλ_H) per step (n = 2: eigenvalue 0, neutral). Held-out accuracy between syncs
therefore degrades at np >= 4, and the periodic restart from the best worker is what keeps
the method on track. The paper gives no restart cadence; what matters is the number of steps the
replicas drift between restarts, not epochs: on the laptop profile at np=4 (31 steps per epoch) one
restart per epoch ends at 0.62 held-out accuracy (the replicas have drifted apart by the end of each
epoch, and the best of four drifted replicas is worse than any of them was mid-epoch), four per
epoch at 0.89, against 0.88 for ``sync``. params.yaml restarts four times per epoch (``sync_epochs``
0.25).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from .. import BenchError, vectors
from ..comm import tags
from ..topology import Ring, Torus
from .base import Algorithm, StepStats


class FAST(Algorithm):
    name = "fast"
    paper = "FAST ring/torus gradient exchange (Viviani et al., 'Deep Learning at Scale', PDP 2019)"
    family = "decentralised"

    @dataclass
    class Params:
        topology: Literal["ring", "torus"] = "ring"
        """Worker graph: 1-D ring, or 2-D torus (the most square rows x cols factorisation of np)."""
        sync_epochs: float = 1.0
        """Epochs between syncs on the best worker's weights (> 0; fractions allowed)."""
        sync_samples: int = 256
        """Training samples (the same on every rank) that rank the workers at a sync (> 0)."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        if not params.sync_epochs > 0:
            raise BenchError(f"fast sync_epochs must be > 0, got {params.sync_epochs}")
        if params.sync_samples <= 0:
            raise BenchError(f"fast sync_samples must be > 0, got {params.sync_samples}")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        n, rank = self.comm.size, self.comm.rank
        self.graph = Ring(n) if self.p.topology == "ring" else Torus(n)
        self.neighbours = self.graph.out_peers(rank) if n > 1 else []
        self.p2p = self.comm.p2p() if self.neighbours else None  # comm: open the point-to-point transport between the workers (collective)
        self.tensors = list(model.parameters())
        self.sync_every = max(1, round(self.p.sync_epochs * self.ctx.steps_per_epoch))
        ds = self.ctx.dataset
        k = min(self.p.sync_samples, len(ds.x_train))
        self.sel_x, self.sel_y = ds.x_train[:k].to(self.ctx.device), ds.y_train[:k].to(self.ctx.device)
        self.pending, self.winners, self.synced_at = None, [], -1

    def _apply(self, grad: torch.Tensor) -> None:
        vectors.assign_([p.grad for p in self.tensors], grad)
        self.optimizer.step()

    def _drain(self) -> None:
        """Wait for the neighbours' gradients of the last step and apply them."""
        if self.pending is None:
            return
        with self.ctx.timer.comm():
            received = self.pending.wait()  # comm: receive the neighbours' gradients of the last step
        for b in received:
            self._apply(b)
        self.pending = None

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y)
        g = vectors.flat(p.grad for p in self.tensors)
        exchange = None
        if self.neighbours:
            with self.ctx.timer.comm():
                exchange = self.p2p.exchange([(g, j) for j in self.neighbours],  # comm: send g_i^t to each neighbour, post the receives of theirs
                                             [(torch.empty_like(g), j) for j in self.neighbours], tag=tags.FAST_GRADIENT)
        self.optimizer.step()  # own gradient
        self._drain()  # neighbours' gradients of step t-1
        self.pending = exchange
        stats.staleness = 1.0 if self.neighbours and self.t > 1 else 0.0  # the first step (self.t = 1) received nothing
        stats.bytes_sent = len(self.neighbours) * g.numel() * g.element_size()
        if self.t % self.sync_every == 0:
            stats.bytes_sent += self.sync()
        return stats

    @torch.no_grad()
    def selection_loss(self) -> float:
        was = self.model.training
        self.model.eval()
        loss = float(self.ctx.loss_fn(self.model(self.sel_x), self.sel_y))
        self.model.train(was)
        return loss

    def sync(self) -> int:
        """All workers evaluate; all restart from the best worker's weights. Returns bytes sent."""
        self._drain()
        with self.ctx.timer.comm():
            losses = self.comm.allgather_object(self.selection_loss(), name="fast.losses")  # comm: allgather every worker's selection loss
            best = min(range(len(losses)), key=lambda r: (losses[r], r))
            self.comm.broadcast_parameters(self.model.state_dict(), root=best)  # comm: broadcast the best worker's parameters to every worker
            self.comm.broadcast_optimizer_state(self.optimizer, root=best)  # comm: broadcast the best worker's momentum / Adam moments to every worker
        self.winners.append(best)
        self.synced_at = self.t
        return self.param_bytes() if self.comm.rank == best else 0

    def finalize(self) -> None:
        self._drain()
        if self.synced_at != self.t:
            self.sync()  # the final model is the best worker's

    def stats(self) -> dict:
        return {"fast_syncs": len(self.winners), "fast_winners": self.winners}
