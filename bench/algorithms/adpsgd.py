"""AD-PSGD: asynchronous decentralised parallel SGD with atomic pairwise model averaging.

References:
    Lian, Zhang, Zhang, Liu, "Asynchronous Decentralized Parallel Stochastic Gradient Descent",
    ICML 2018 (Algorithm 1; section 5: the bipartite active/passive graph that avoids deadlock).

Update rule (docs/algorithms.md, ``adpsgd``). Even ranks are active, odd ranks passive
(:class:`bench.topology.Bipartite`); every active node neighbours every passive node. Step of an
active worker i:

    x̂   = x_i                                  (the model read for the gradient)
    g   = ∇L(x̂; B_i)
    j   = a passive neighbour drawn uniformly at random (seeded per rank)
    x_i, x_j ← (x_i + x_j) / 2                 (atomic pairwise averaging, served by j's service thread)
    x_i ← Opt(x_i, g)                          (the local optimizer's step with g, on the averaged model)

Step of a passive worker j (its main thread; averagings requested by actives happen concurrently):

    x̂   = x_j                                  (read under j's lock into a private compute model)
    g   = ∇L(x̂; B_j)
    x_j ← Opt(x_j, g)                          (under j's lock; x_j may have been averaged since x̂)

So a gradient is applied to the current model, not to the x̂ it was computed at, as in the paper.

Inferred (the paper states a lock per worker and an atomic averaging, not how they are built):
- a **lock** per passive worker makes an averaging atomic: its main thread holds it while it reads
  x̂, applies its optimizer step and copies its buffers; its service thread holds it from receiving
  x_i to assigning the average; snapshots (evaluation) are taken under it;
- a **service thread** per passive worker (started in :meth:`setup`) serves the averaging requests
  on a channel of its own (:meth:`bench.comm.Comm.pairwise`), so an active waits only for that
  thread (and a lock held for one optimizer step), never for the passive's computation. A passive
  computes its gradient on a private copy of its model (autograd forbids changing the parameters
  between forward and backward);
- the **partner choice**: uniform over the passive neighbours, seeded (``seed``/adpsgd/rank);
- the exchange (its wire protocol is :mod:`bench.comm.pairwise`): active sends [MAGIC, AVG, rank, step]
  then x_i; the service thread, holding the lock, receives x_i, sends x_j, and both assign
  (x_active + x_passive)/2 computed in that operand order, so both hold the **bit-identical** average;
- **termination**: in :meth:`finalize` each active sends [MAGIC, DONE, rank, steps] to every passive
  neighbour; a service thread exits once all its active neighbours are done, and the passive's
  :meth:`finalize` joins it. Every receive has a timeout (``recv_timeout_s``): a dead or silent peer
  fails the run with a message naming it, never a hang.

``stats()`` records per rank the averagings initiated (active) or served (passive). The model
evaluated is the average of the replicas' snapshots, formed after training.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

import torch

from .. import BenchError, vectors
from ..comm import CommTimeout
from ..topology import Bipartite
from .base import Algorithm, StepStats


class ADPSGD(Algorithm):
    name = "adpsgd"
    paper = "AD-PSGD, asynchronous decentralized parallel SGD (Lian et al., ICML 2018)"
    family = "decentralised"
    averaged_evaluation = True

    @dataclass
    class Params:
        recv_timeout_s: float = 300.0
        """Longest wait for a message of the averaging protocol (a request, a model, DONE) before failing the run."""

    @classmethod
    def validate(cls, params, cfg) -> None:
        if not params.recv_timeout_s > 0:
            raise BenchError(f"adpsgd recv_timeout_s must be > 0, got {params.recv_timeout_s!r}")
        if cfg.launch.np > 1 and cfg.launch.p2p_backend == "nccl":
            raise BenchError("adpsgd needs p2p_backend gloo or auto (its passive workers receive from any rank)")

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_state(model, optimizer)  # comm: broadcast rank 0's parameters and optimizer state to every worker
        rank, n = self.comm.rank, self.comm.size
        self.graph = Bipartite(n)
        self.tensors = list(model.parameters())
        self.numel = vectors.numel(self.tensors)
        self.averagings = 0  # active: initiated; passive: served
        self.lock = threading.Lock()
        self.neighbours = self.graph.out_peers(rank) if n > 1 else []
        self.active = self.graph.is_active(rank)
        self.timeout_s = self.p.recv_timeout_s
        self.pairs = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.last_partner: int | None = None
        self.served_bytes = 0  # passive: bytes its service thread sent since its last step (reported by the step)
        if not self.neighbours:
            return
        self.pairs = self.comm.pairwise(self.timeout_s, label="adpsgd")  # comm: open the pairwise channel over all workers (collective, every rank)
        if self.active:
            self.rng = random.Random(f"{self.ctx.cfg.train.seed}/adpsgd/{rank}")
        else:
            self.work = self.ctx.build_model()  # the passive computes its gradient on a private copy of x_j
            self.thread = threading.Thread(target=self._serve_guarded, name=f"adpsgd-serve-{rank}", daemon=True)
            self.thread.start()

    # -- active side -----------------------------------------------------------------------
    def average_with(self, partner: int) -> int:
        """x_i, x_j ← (x_i + x_j)/2 with passive ``partner`` (served by its thread); returns bytes sent."""
        mine = vectors.flat(self.tensors)
        with self.ctx.timer.comm():
            theirs = self.pairs.swap(partner, mine, self.t - 1)  # comm: send x_i to the passive partner, receive its x_j back (the step counted from 0)
        vectors.assign_(self.tensors, (mine + theirs) / 2)  # (x_active + x_passive)/2, the passive's operand order
        self.averagings += 1
        self.last_partner = partner
        return mine.numel() * mine.element_size() + self.pairs.header_bytes

    # -- passive side ----------------------------------------------------------------------
    def _serve_guarded(self) -> None:
        try:
            self._serve()
        except BaseException as e:  # surfaced by the main thread (next step, or finalize)
            self.error = e

    def _serve(self) -> None:
        """Serve averaging requests until every active neighbour has sent DONE (the service thread)."""
        theirs = torch.empty(self.numel, dtype=self.tensors[0].dtype)
        for src in self.pairs.requests(self.neighbours):  # comm: receive a request from any active neighbour, until all are done
            with self.lock:
                self.pairs.receive(src, theirs)  # comm: receive x_i from the requesting active
                mine = vectors.flat(self.tensors)
                self.pairs.reply(src, mine)  # comm: send x_j back to the requesting active
                vectors.assign_(self.tensors, (theirs + mine) / 2)  # (x_active + x_passive)/2
                self.averagings += 1
                self.served_bytes += mine.numel() * mine.element_size()

    def _check_service(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"adpsgd: the service thread of rank {self.comm.rank} failed: {self.error}") from self.error

    # -- the step --------------------------------------------------------------------------
    def step(self, x, y) -> StepStats:
        if self.pairs is None:  # a single worker: plain local SGD
            return self.local_step(x, y)
        if self.active:
            stats = self.forward_backward(x, y)  # g at x̂ = x_i
            stats.bytes_sent = self.average_with(self.rng.choice(self.neighbours))
            self.optimizer.step()  # x_i ← Opt(x_i, g) on the averaged model
        else:
            self._check_service()
            with self.ctx.timer.comm():  # lock contention with the service thread
                self.lock.acquire()
            try:
                vectors.assign_(self.work.parameters(), vectors.flat(self.tensors))  # x̂ = x_j
            finally:
                self.lock.release()
            stats = self.forward_backward(x, y, model=self.work)
            with self.ctx.timer.comm():
                self.lock.acquire()
            try:
                for p, w in zip(self.tensors, self.work.parameters()):
                    p.grad = w.grad
                self.optimizer.step()  # x_j ← Opt(x_j, g), x_j possibly averaged since x̂
                with torch.no_grad():
                    for b, w in zip(self.model.buffers(), self.work.buffers()):
                        b.copy_(w)
                stats.bytes_sent, self.served_bytes = self.served_bytes, 0
            finally:
                self.lock.release()
        return stats

    def snapshot(self):
        with self.lock:  # not in the middle of an averaging
            return super().snapshot()

    def finalize(self) -> None:
        if self.pairs is None:
            return
        if self.active:
            self.pairs.done(self.neighbours, self.t)  # comm: send DONE to every passive neighbour
            return
        self.thread.join(self.timeout_s * 2)
        if self.thread.is_alive():
            raise CommTimeout(f"adpsgd: the service thread of passive rank {self.comm.rank} did not finish")
        self._check_service()

    def stats(self) -> dict:
        role = "initiated" if self.active else "served"
        return {f"adpsgd_averagings_rank{self.comm.rank}": self.averagings,
                f"adpsgd_{role}_rank{self.comm.rank}": self.averagings}
