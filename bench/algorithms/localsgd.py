"""Local SGD / periodic model averaging.

References:
    Povey, Zhang and Khudanpur, "Parallel training of DNNs with natural gradient and
    parameter averaging", ICLR workshop 2015 (arXiv:1410.7455, 2014).
    Lin, Stich, Patel and Jaggi, "Don't use large mini-batches, use local SGD", ICLR 2020.

Update rule (docs/algorithms.md, ``localsgd``): every worker k takes λ = ``communication_window``
local steps θᵏ ← Opt(θᵏ, ∇L(θᵏ; B_k)) on its own mini-batches, then all replicas are
replaced by their mean, θᵏ ← mean_j θʲ (one blocking allreduce of the flattened
parameters). With λ = 1 and plain SGD, mean_k(θ − η g_k) = θ − η mean_k g_k: exactly
``sync``. Only parameters are averaged; the local optimizer's state (momentum, Adam
moments) stays local, as in Lin et al.

End of training: ``finalize`` averages once more if steps were taken since the last
averaging, so the final model is the average. Periodic evaluations evaluate the average of the
replicas' snapshots, formed after training (the replicas themselves are left untouched).

Timing: the blocking allreduce is ``comm``; there is no ``wait``.
"""

from __future__ import annotations

from .. import vectors
from .averaging import WindowedAveraging


class LocalSGD(WindowedAveraging):
    name = "localsgd"
    paper = "local SGD / model averaging every λ steps (Povey et al. 2014; Lin et al. 2020)"

    def exchange(self) -> int:
        vec = vectors.flat(self.model.parameters())
        with self.ctx.timer.comm():
            self.comm.allreduce_(vec, name="localsgd.avg")  # comm: allreduce the flat model over all workers: θᵏ ← mean_j θʲ
        vectors.assign_(self.model.parameters(), vec)
        return self.param_bytes()

    def stats(self) -> dict:
        return {"averagings": self.exchanges} if self.comm.rank == 0 else {}
