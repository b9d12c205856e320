"""AD-PSGD: asynchronous decentralised parallel SGD with pairwise model averaging.

References:
    Lian, Zhang, Zhang, Liu, "Asynchronous Decentralized Parallel Stochastic Gradient Descent",
    ICML 2018 (Algorithm 1; section 5: the bipartite active/passive graph that avoids deadlock).

Update rule (docs/algorithms.md, ``adpsgd``), on worker i in its round t:

    x̂   = x_i                                  (the model read for the gradient)
    g   = ∇L(x̂; B_i)
    j   = partner of i in round t              (bipartite graph, :class:`bench.topology.Bipartite`)
    x_i, x_j ← (x_i + x_j) / 2                 (atomic pairwise averaging)
    x_i ← x_i − η g   (or the local optimizer's step with g)

So the gradient is applied to the averaged model, not to the x̂ it was computed at, as in the
paper. How "atomic" is realised here (inferred; the paper uses a lock per worker and an
RPC-style exchange): active nodes (even ranks) initiate, passive nodes (odd ranks) serve, and
no two active nodes are ever paired. The pairing follows a per-round rotation schedule (round
t: the j-th active node meets passive node (j + t) mod #active), so each passive node knows
which request to serve in its round t and every round is a matching. The two partners
exchange their whole models in one message each (receive posted first, then send, then wait
both: no deadlock), and each computes (x_i + x_j)/2 from the same two operands, so both hold
the bit-identical average before applying their own gradient; neither model changes between
being sent and being averaged (one thread per worker), which is the atomicity the rule needs.
There is no global barrier: a worker waits only for its partner of the round (with an odd
number of workers one active node sits each round out and just applies its gradient).

The model evaluated is the average of the replicas' snapshots, formed after training.
"""

from __future__ import annotations

from .. import vectors
from ..topology import Bipartite
from .base import Algorithm, StepStats

TAG = 52


class ADPSGD(Algorithm):
    name = "adpsgd"
    paper = "AD-PSGD, asynchronous decentralized parallel SGD (Lian et al., ICML 2018)"
    family = "decentralised"
    averaged_evaluation = True

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: common start (parameters and optimizer state)
        self.graph = Bipartite(self.comm.size)
        self.p2p = self.comm.p2p() if self.comm.size > 1 else None  # comm: point-to-point transport
        self.params = list(model.parameters())
        self.t = 0
        self.averagings = 0

    def average_with(self, partner: int) -> int:
        """x_i, x_j ← (x_i + x_j)/2 with ``partner`` (who runs the same call); returns bytes sent."""
        mine = vectors.flat(self.params)
        with self.ctx.timer.comm():
            (theirs,) = self.p2p.exchange([(mine, partner)], [(mine.new_empty(mine.shape), partner)], tag=TAG).wait()  # comm:
        vectors.assign_(self.params, (mine + theirs) / 2)
        self.averagings += 1
        return mine.numel() * mine.element_size()

    def step(self, x, y) -> StepStats:
        stats = self.forward_backward(x, y)  # g at x̂ = x_i
        partner = self.graph.partner(self.comm.rank, self.t) if self.p2p is not None else None
        if partner is not None:
            stats.bytes_sent = self.average_with(partner)
        self.optimizer.step()  # x_i ← x_i − η g on the averaged model
        self.t += 1
        return stats

    def stats(self) -> dict:
        return {f"adpsgd_averagings_rank{self.comm.rank}": self.averagings}
