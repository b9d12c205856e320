"""One horovodrun job (np=2) for the allreduce family's checks (tests/parallel/test_allreduce_family.py).

    horovodrun -np 2 --gloo python allreduce_family.py OUT_DIR

1. Exact rules on a quadratic with known gradients (float64): every rank builds the algorithm
   with a real Context and Comm, feeds batches whose rows are a known target c(t, k), so that
   ∇L(w) = w − c(t, k), and compares every step with a closed-form reference recurrence
   (which knows every rank's c): ``delayed`` (d=2), ``easgd`` (centre and worker), ``localsgd``
   (replicas gathered from both ranks after each averaging). Prints ``RULE <name> ok rank <r>``.
2. Real runs of the bench worker loop, in this same job, one after the other, into OUT_DIR/<name>
   (config.json, rank*.jsonl, summary.json, model.pt): tiny-profile runs for the "equals sync"
   checks, laptop-profile runs for convergence. Sharing one job keeps the test wall time small
   (a horovodrun start costs 10-20 s on the 2-core machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from bench.comm import Comm
from quadratic import LR, Quad, batch, build, close, run_worker, target

TINY = {"max_steps": 6, "lr": 0.1, "eval_every": 0, "warmup_steps": 0, "epochs": 1}
LAPTOP = {"max_steps": 120, "eval_every": 40}


def check_delayed(comm: Comm, d: int = 2, steps: int = 7) -> None:
    algo, model = build(comm, "delayed", steps, delay=d)
    n = comm.size
    w = [Quad().w.detach().clone()]  # w[t]: parameters at the start of step t (rank 0's initial model)
    grads = []
    for t in range(steps):
        grads.append(w[t] - sum(target(t, k) for k in range(n)) / n)  # mean_k g_t, computed at w[t]
        w.append(w[t] - LR * grads[t - d] if t >= d else w[t].clone())  # applied at step t: gradient of step t-d
        algo.step(*batch(t, comm.rank))
        close(model.w.detach(), w[t + 1], f"delayed d={d}, after step {t}")
    algo.finalize()  # drains the last d reductions and applies them in order
    final = w[-1]
    for t in range(steps - d, steps):
        final = final - LR * grads[t]
    close(model.w.detach(), final, "delayed after finalize")
    print(f"RULE delayed ok rank {comm.rank}", flush=True)


def check_easgd(comm: Comm, rho: float = 2.0, lam: int = 3, steps: int = 8) -> None:
    algo, model = build(comm, "easgd", steps, rho=rho, communication_window=lam)
    n, alpha = comm.size, LR * rho
    x = [Quad().w.detach().clone() for _ in range(n)]
    centre = x[0].clone()

    def exchange():
        nonlocal centre
        e = [alpha * (x[k] - centre) for k in range(n)]
        for k in range(n):
            x[k] = x[k] - e[k]
        centre = centre + sum(e)

    for t in range(steps):
        for k in range(n):
            x[k] = x[k] - LR * (x[k] - target(t, k))
        if (t + 1) % lam == 0:
            exchange()
        algo.step(*batch(t, comm.rank))
        close(model.w.detach(), x[comm.rank], f"easgd worker after step {t}")
        close(algo.centre, centre, f"easgd centre after step {t}")
    assert float((x[0] - centre).abs().max()) > 1e-3, "the check must see workers away from the centre"
    algo.finalize()  # steps % lam != 0: one more exchange
    exchange()
    close(algo.centre, centre, "easgd centre after finalize")
    net = algo.evaluation_model(algo.snapshot())
    if comm.rank == 0:
        close(net.w.detach(), centre, "easgd's evaluated model is the centre")
    else:
        assert net is None
    print(f"RULE easgd ok rank {comm.rank}", flush=True)


def check_localsgd(comm: Comm, lam: int = 3, steps: int = 7) -> None:
    algo, model = build(comm, "localsgd", steps, communication_window=lam)
    n = comm.size
    x = [Quad().w.detach().clone() for _ in range(n)]
    for t in range(steps):
        for k in range(n):
            x[k] = x[k] - LR * (x[k] - target(t, k))
        averaged = (t + 1) % lam == 0
        if averaged:
            x = [sum(x) / n] * n
        algo.step(*batch(t, comm.rank))
        close(model.w.detach(), x[comm.rank], f"localsgd after step {t}")
        replicas = comm.allgather(model.w.detach().clone().unsqueeze(0))  # comm: every rank's replica
        if averaged:
            assert torch.equal(replicas[0], replicas[1]), f"replicas differ right after averaging at step {t}"
        else:
            assert not torch.equal(replicas[0], replicas[1]), f"replicas should differ between averagings (step {t})"
    print(f"RULE localsgd ok rank {comm.rank}", flush=True)


def main() -> int:
    out = Path(sys.argv[1])
    comm = Comm()
    check_delayed(comm)
    check_easgd(comm)
    check_localsgd(comm)
    momentum = TINY | {"momentum": 0.9}
    run_worker(comm, out, "sync-momentum", "sync", "tiny", momentum)
    run_worker(comm, out, "layerwise-momentum", "layerwise", "tiny", momentum)
    run_worker(comm, out, "delayed0-momentum", "delayed", "tiny", momentum | {"delay": 0})
    run_worker(comm, out, "sync-plain", "sync", "tiny", TINY)
    run_worker(comm, out, "localsgd1-plain", "localsgd", "tiny", TINY | {"communication_window": 1})
    for algo in ("delayed", "layerwise", "localsgd", "lasgd", "easgd"):
        run_worker(comm, out, f"laptop-{algo}", algo, "laptop", LAPTOP)
    comm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
