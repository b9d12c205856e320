"""One horovodrun job (np=2) for the outer-optimizer and compression checks (tests/parallel/test_outer_optimizers_and_compression.py).

    horovodrun -np 2 --gloo python outer_optimizers_and_compression.py OUT_DIR

1. Exact rules on a quadratic with known gradients (float64), as scripts/allreduce_family.py: every
   rank builds the algorithm with a real Context and Comm, feeds batches whose rows are a known
   target c(t, k), so that ∇L(w) = w − c(t, k), and compares every step with a closed-form reference
   recurrence that knows every rank's c: ``diloco`` (outer Nesterov step), ``slowmo`` (slow momentum;
   and its reference equals diloco's heavy-ball one), Streaming DiLoCo (P = 2 fragments, τ = 1, α = 0.5:
   values and the schedule of every fragment), Streaming DiLoCo with P = 1, τ = 0 (plain DiLoCo).
   Prints ``RULE <name> ok rank <r>``.
2. Real runs of the bench worker loop in this same job into OUT_DIR/<name>: tiny-profile runs for the
   equalities (diloco and slowmo against localsgd), laptop-profile runs for convergence (diloco,
   streaming diloco, slowmo, sync with fp16 compression, ddp with each comm hook).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from bench.algorithms.diloco import fragment_offsets, fragment_slices
from bench.comm import Comm
from quadratic import D, LR, Quad, batch, build, close, run_worker, target

TINY = {"max_steps": 7, "lr": 0.1, "eval_every": 0, "warmup_steps": 0, "epochs": 1}
LAPTOP = {"max_steps": 120, "eval_every": 40}


def sgd(x: torch.Tensor, t: int, k: int) -> torch.Tensor:
    return x - LR * (x - target(t, k))


def replicas_equal(comm: Comm, model) -> bool:
    reps = comm.allgather(model.w.detach().clone().unsqueeze(0))  # comm: every rank's replica
    return torch.equal(reps[0], reps[1])


def check_diloco(comm: Comm, H: int = 3, steps: int = 8, lr: float = 0.7, mu: float = 0.9) -> None:
    algo, model = build(comm, "diloco", steps, communication_window=H, outer_lr=lr, outer_momentum=mu, outer_nesterov=True)
    n = comm.size
    outer = Quad().w.detach().clone()
    u = torch.zeros(D, dtype=torch.float64)
    x = [outer.clone() for _ in range(n)]

    def outer_step():
        nonlocal outer, u, x
        delta = sum(outer - x[k] for k in range(n)) / n  # Δ = mean_k (θ̃ − θᵏ)
        u = mu * u + delta
        outer = outer - lr * (delta + mu * u)  # Nesterov
        x = [outer.clone() for _ in range(n)]

    for t in range(steps):
        x = [sgd(x[k], t, k) for k in range(n)]
        if (t + 1) % H == 0:
            outer_step()
        algo.step(*batch(t, comm.rank))
        close(model.w.detach(), x[comm.rank], f"diloco worker after step {t}")
        close(algo.outer, outer, f"diloco θ̃ after step {t}")
        assert replicas_equal(comm, model) == ((t + 1) % H == 0), f"diloco replicas at step {t}"
    algo.finalize()  # steps % H != 0: one more outer step
    outer_step()
    close(algo.outer, outer, "diloco θ̃ after finalize")
    close(model.w.detach(), outer, "diloco workers restart from θ̃ after finalize")
    net = algo.evaluation_model(algo.snapshot())
    if comm.rank == 0:
        close(net.w.detach(), outer, "diloco's evaluated model is θ̃")
    else:
        assert net is None
    assert algo.outer_steps == steps // H + 1
    print(f"RULE diloco ok rank {comm.rank}", flush=True)


def check_slowmo(comm: Comm, tau: int = 3, steps: int = 8, beta: float = 0.6, alpha: float = 0.8) -> None:
    algo, model = build(comm, "slowmo", steps, communication_window=tau, slow_momentum=beta, slow_lr=alpha)
    n, gamma = comm.size, LR
    x0 = Quad().w.detach().clone()
    u = torch.zeros(D, dtype=torch.float64)
    x = [x0.clone() for _ in range(n)]
    # the same run as diloco with a heavy-ball outer step (outer_lr α, outer_momentum β): buf = γu
    d_outer, d_buf = x0.clone(), torch.zeros(D, dtype=torch.float64)

    def outer_step():
        nonlocal x0, u, x, d_outer, d_buf
        avg = sum(x) / n
        d_buf = beta * d_buf + (d_outer - avg)
        d_outer = d_outer - alpha * d_buf
        u = beta * u + (x0 - avg) / gamma
        x0 = x0 - alpha * gamma * u
        x = [x0.clone() for _ in range(n)]
        close(x0, d_outer, "slowmo equals diloco with a heavy-ball outer step")

    for t in range(steps):
        x = [sgd(x[k], t, k) for k in range(n)]
        if (t + 1) % tau == 0:
            outer_step()
        algo.step(*batch(t, comm.rank))
        close(model.w.detach(), x[comm.rank], f"slowmo worker after step {t}")
        close(algo.x0, x0, f"slowmo x_(s,0) after step {t}")
        close(algo.u, u, f"slowmo u after step {t}")
    algo.finalize()
    outer_step()
    close(algo.x0, x0, "slowmo after finalize")
    net = algo.evaluation_model(algo.snapshot())
    if comm.rank == 0:
        close(net.w.detach(), x0, "slowmo's evaluated model is x_(s,0)")
    print(f"RULE slowmo ok rank {comm.rank}", flush=True)


def streaming_reference(n: int, H: int, P: int, tau: int, alpha: float, lr: float, mu: float, steps: int):
    """Every rank's parameters and θ̃ after each step, and the (fragment, sent, applied) log, then after finalize."""
    slices, offsets = fragment_slices(D, P), fragment_offsets(H, P)
    outer = Quad().w.detach().clone()
    u = torch.zeros(D, dtype=torch.float64)
    x = [outer.clone() for _ in range(n)]
    inflight, log, trace = {}, [], []

    def apply(sl, delta, a):
        nonlocal outer, u, x
        u[sl] = mu * u[sl] + delta
        outer[sl] = outer[sl] - lr * (delta + mu * u[sl])
        for k in range(n):
            x[k][sl] = a * x[k][sl] + (1 - a) * outer[sl]

    for t in range(1, steps + 1):
        x = [sgd(x[k], t - 1, k) for k in range(n)]
        for p in sorted(inflight, key=lambda q: inflight[q][0]):
            if inflight[p][0] + tau <= t:
                sent, delta = inflight.pop(p)
                apply(slices[p], delta, alpha)
                log.append((p, sent, t))
        for p, o in enumerate(offsets):
            if t >= o and (t - o) % H == 0:
                delta = sum(outer[slices[p]] - x[k][slices[p]] for k in range(n)) / n
                if tau == 0:
                    apply(slices[p], delta, 0.0)
                    log.append((p, t, t))
                else:
                    inflight[p] = (t, delta)
        trace.append(([xk.clone() for xk in x], outer.clone()))
    for p in sorted(inflight, key=lambda q: inflight[q][0]):
        sent, delta = inflight.pop(p)
        apply(slices[p], delta, alpha)
        log.append((p, sent, steps))
    full = slice(0, D)
    apply(full, sum(outer - x[k] for k in range(n)) / n, 0.0)
    return trace, log, outer.clone()


def check_streaming(comm: Comm, H: int = 4, P: int = 2, tau: int = 1, alpha: float = 0.5, steps: int = 11,
                    lr: float = 0.7, mu: float = 0.9, rule: str = "streaming") -> None:
    algo, model = build(comm, "diloco", steps, communication_window=H, outer_lr=lr, outer_momentum=mu, outer_nesterov=True,
                        streaming=True, stream_fragments=P, stream_overlap=tau, stream_mixing=alpha)
    trace, log, final = streaming_reference(comm.size, H, P, tau, alpha, lr, mu, steps)
    for t in range(steps):
        algo.step(*batch(t, comm.rank))
        xs, outer = trace[t]
        close(model.w.detach(), xs[comm.rank], f"{rule} worker after step {t + 1}")
        close(algo.outer, outer, f"{rule} θ̃ after step {t + 1}")
    algo.finalize()
    assert algo.sync_log == log, f"{rule} schedule: {algo.sync_log} != {log}"
    # each fragment p exchanged at o_p, o_p + H, ... and applied τ steps later (or at the end of training)
    offsets = fragment_offsets(H, P)
    for p in range(P):
        sends = [s for f, s, _ in algo.sync_log if f == p]
        assert sends == [t for t in range(1, steps + 1) if t >= offsets[p] and (t - offsets[p]) % H == 0], (p, sends)
        assert all(a == min(s + tau, steps) for f, s, a in algo.sync_log if f == p)
    close(algo.outer, final, f"{rule} θ̃ after finalize")
    print(f"RULE {rule} ok rank {comm.rank}", flush=True)


def main() -> int:
    out = Path(sys.argv[1])
    comm = Comm()
    check_diloco(comm)
    check_slowmo(comm)
    check_streaming(comm)
    check_streaming(comm, P=1, tau=0, alpha=0.0, H=3, steps=8, rule="streaming-as-diloco")
    # equalities on the tiny profile (7 steps: two full windows of 3 and a partial one in finalize)
    run_worker(comm, out, "localsgd3", "localsgd", "tiny", TINY | {"communication_window": 3})
    run_worker(comm, out, "diloco3-lr1-mom0", "diloco", "tiny", TINY | {"communication_window": 3, "outer_lr": 1.0, "outer_momentum": 0.0})
    run_worker(comm, out, "slowmo3-b0-a1", "slowmo", "tiny", TINY | {"communication_window": 3, "slow_momentum": 0.0, "slow_lr": 1.0})
    run_worker(comm, out, "diloco3-default", "diloco", "tiny", TINY | {"communication_window": 3})
    run_worker(comm, out, "slowmo3-b05", "slowmo", "tiny", TINY | {"communication_window": 3, "slow_momentum": 0.5, "slow_lr": 1.0})
    run_worker(comm, out, "diloco3-heavyball", "diloco", "tiny", TINY | {"communication_window": 3, "outer_lr": 1.0,
                                                                        "outer_momentum": 0.5, "outer_nesterov": False})
    # convergence on the laptop profile
    laptop = {
        "diloco": ("diloco", {}),
        "diloco-streaming": ("diloco", {"streaming": True, "stream_fragments": 4, "stream_overlap": 1, "stream_mixing": 0.5}),
        "slowmo": ("slowmo", {}),
        "sync-fp16": ("sync", {"compression": "fp16"}),
        "ddp-allreduce": ("ddp", {"comm_hook": "allreduce"}),
        "ddp-fp16": ("ddp", {"comm_hook": "fp16"}),
        "ddp-powersgd": ("ddp", {"comm_hook": "powersgd"}),
        "ddp-post_localsgd": ("ddp", {"comm_hook": "post_localsgd"}),
    }
    for name, (algo, sets) in laptop.items():
        run_worker(comm, out, f"laptop-{name}", algo, "laptop", LAPTOP | sets)
    comm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
