"""LASGD, Local Asynchronous SGD: model averaging that workers never wait for.

References:
    "Local Asynchronous SGD" (LASGD), arXiv:2203.13085, 2022.

Update rule: INFERRED. The paper's full rule was not available; this is the reading documented
in docs/algorithms.md (``lasgd``). Each worker k takes local steps θᵏ ← Opt(θᵏ, ∇L(θᵏ; B_k)). Every
λ = ``communication_window`` steps it takes a snapshot s = θᵏ and starts a non-blocking
allreduce (mean) of a copy of s, then keeps taking local steps. When that reduction has
completed (checked with a non-blocking poll after every step) it sets

    θᵏ ← mean_j sʲ + (θᵏ − s)

i.e. it moves to the average of the snapshots and keeps the progress it made while the
reduction was in flight. At most one averaging is in flight per worker: if the previous one has
not completed at the next sync point, the worker blocks on it (the only wait) before taking the
next snapshot. Optimizer state stays local. Replicas are not identical between averagings;
``stats()`` reports the largest relative distance of a snapshot from the average,
max ‖s − mean_j sʲ‖ / ‖mean_j sʲ‖, seen by each rank (``lasgd_max_rel_gap_rank<k>``).

End of training: ``finalize`` completes and applies the outstanding averaging;
periodic evaluations evaluate the average of the replicas' snapshots, formed after training.

Timing: taking the snapshot and launching the reduction is ``comm``; blocking on an averaging
that has not completed by the next sync point is ``wait``.
"""

from __future__ import annotations

from .. import vectors
from .averaging import WindowedAveraging


class LASGD(WindowedAveraging):
    name = "lasgd"
    paper = "Local Asynchronous SGD, overlapped non-blocking model averaging (arXiv:2203.13085, 2022)"

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.handle = None
        self.sent = self.mean = None  # s, and the buffer reduced in place into mean_j s_j
        self.waited = 0
        self.max_gap = 0.0

    def _complete(self, blocking: bool) -> None:
        if blocking:
            with self.ctx.timer.wait():
                self.comm.synchronize(self.handle)  # comm: wait for the late averaging's allreduce over all workers
            self.waited += 1
        else:
            self.comm.synchronize(self.handle)  # comm: take the completed averaging (polled: no wait) and release its handle
        theta = vectors.flat(self.model.parameters())
        theta += self.mean - self.sent  # θ ← mean(s) + (θ − s)
        vectors.assign_(self.model.parameters(), theta)
        norm = float(self.mean.norm())
        self.max_gap = max(self.max_gap, float((self.sent - self.mean).norm()) / max(norm, 1e-12))
        self.handle = None

    def communicate(self) -> int:
        if self.handle is not None and self.comm.poll(self.handle):  # comm: ask whether the averaging's allreduce has completed (never blocks)
            self._complete(blocking=False)
        return super().communicate()

    def exchange(self) -> int:
        """Start an averaging of a snapshot, after completing the one still in flight."""
        if self.handle is not None:
            self._complete(blocking=True)
        with self.ctx.timer.comm():
            self.sent = vectors.flat(self.model.parameters())
            self.mean = self.sent.clone()
            self.handle = self.comm.allreduce_async_(self.mean, name="lasgd.avg")  # comm: start the allreduce (mean over all workers) of the model copy s_j
        return self.param_bytes()

    def finalize(self) -> None:  # no leftover averaging: the one in flight is completed and applied
        if self.handle is not None:
            self._complete(blocking=True)

    def stats(self) -> dict:
        out = {f"lasgd_max_rel_gap_rank{self.comm.rank}": self.max_gap}
        if self.comm.rank == 0:  # every averaging started has been completed by finalize
            out.update(averagings=self.exchanges, averagings_waited_for=self.waited)
        return out
