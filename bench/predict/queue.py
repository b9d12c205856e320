"""Asynchronous methods as a queue: a parameter server with n clients, and AD-PSGD's actives and passives.

A parameter server is a closed queueing system: each of n workers computes a window of local steps (its "think
time"), then visits the server (a push of Δ, a pull of θ̃, or both); the server takes one visit at a time, first come
first served, its link carrying every worker's push and pull, so it serialises them. :func:`simulate_server` plays
that system event by event (deterministic, seeded) and returns the throughput, each worker's time split and the
staleness of every commit: the commits applied to θ̃ between a worker's pull and its commit. With a saturated server
the workers fall into a strict round robin and every τ is n - 1; with a lightly loaded one τ spreads around n - 1.

Each host's CPU is a :class:`bench.predict.sim.CfsHost` (a CPU quota per period, as the emulated hosts have).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from dataclasses import dataclass, field

from .sim import CfsHost, Client, all_active


@dataclass(frozen=True)
class Visit:
    """One visit of a worker to the server at the end of its window."""

    push_bytes: float
    pull_bytes: float
    server_cpu_s: float
    worker_cpu_s: float
    to_server_s: float = 0.0
    """Link delay before the server can start on it (the header's first notice: one one-way delay)."""
    hold_s: float = 0.0
    """Link delay the server spends waiting inside the visit, serving no one (the header's and the payload's
    notice-then-data round trips, :data:`bench.predict.transport.PROTOCOL_DELAYS`)."""
    back_s: float = 0.0
    """Link delay from the server's reply to the worker having it (the reply's one way)."""


@dataclass
class QueueResult:
    step_s: list[float]
    """Each worker's mean seconds a local step (window and visits included)."""
    compute_s: list[float]
    comm_s: list[float]
    staleness: Counter = field(default_factory=Counter)
    server_busy: float = 0.0

    @property
    def mean_staleness(self) -> float:
        total = sum(self.staleness.values())
        return sum(k * v for k, v in self.staleness.items()) / total if total else float("nan")


def simulate_server(clients: list[Client], visits: list[Visit], bytes_per_s: float, kappa: float, latency_s: float,
                    server_share: float | None, period_s: float, windows: int = 200, seed: int = 0) -> QueueResult:
    """Play ``windows`` windows of every client against one FIFO server; see the module docstring."""
    rng = random.Random(seed)
    hosts = [CfsHost(c.share, period_s, rng.uniform(0, period_s)) for c in clients]
    server = CfsHost(server_share, period_s, rng.uniform(0, period_s))
    wire = (lambda b: b / bytes_per_s) if math.isfinite(bytes_per_s) else (lambda b: 0.0)
    n = len(clients)
    done = [[0.0] for _ in range(n)]
    compute = [0.0] * n
    comm = [0.0] * n
    pulled = [0] * n
    clock = 0
    staleness: Counter = Counter()
    server_free = busy = 0.0
    heap = []

    def window(w: int, t: float) -> float:
        c = clients[w]
        if not hosts[w].share and not c.jitter_s:  # no quota, no pauses: the steps add up
            return t + c.steps * (max(c.step_cpu_s, 0.0) + c.sleep_s)
        for _ in range(c.steps):
            t = hosts[w].run(t, c.step_cpu_s) + c.sleep_s + (rng.expovariate(1 / c.jitter_s) if c.jitter_s else 0.0)
        return t

    for w in range(n):
        t = window(w, 0.0)
        compute[w] += t
        heapq.heappush(heap, (t, w, 0))
    while heap:
        t, w, v = heapq.heappop(heap)
        visit = visits[v]
        if v == 0 and len(done[w]) > windows:
            continue
        sent = hosts[w].run(t, visit.worker_cpu_s / 2)
        start = max(sent + visit.to_server_s, server_free)
        link_end = start + visit.hold_s + wire(visit.push_bytes + kappa * visit.pull_bytes)
        cpu_end = server.run(start + visit.hold_s, visit.server_cpu_s)
        end = max(link_end, cpu_end)
        busy += end - start
        server_free = end
        if visit.push_bytes:
            staleness[clock - pulled[w]] += 1
            clock += 1
        if visit.pull_bytes:
            pulled[w] = clock
        back = end + wire((1 - kappa) * visit.pull_bytes) + 2 * latency_s + visit.back_s
        back = hosts[w].run(back, visit.worker_cpu_s / 2)
        comm[w] += back - t
        if v + 1 < len(visits):
            heapq.heappush(heap, (back, w, v + 1))
            continue
        done[w].append(back)
        nxt = window(w, back)
        compute[w] += nxt - back
        heapq.heappush(heap, (nxt, w, 0))
    steps = [c.steps for c in clients]
    t0, t1 = all_active(done, warm=min(10, windows // 4))
    step_s = []
    for w in range(n):
        inside = [x for x in done[w] if t0 < x <= t1]
        step_s.append((t1 - t0) / (len(inside) * steps[w]) if inside else (done[w][-1] / (len(done[w]) - 1) / steps[w]))
    total_steps = [(len(done[w]) - 1) * steps[w] for w in range(n)]
    return QueueResult(step_s, [compute[w] / total_steps[w] for w in range(n)],
                       [comm[w] / total_steps[w] for w in range(n)], staleness, busy / max(done[0][-1], 1e-12))


def simulate_pairs(actives: list[Client], passives: list[Client], swap_bytes: float, swap_cpu_s: float,
                   bytes_per_s: float, kappa: float, latency_s: float, period_s: float, steps: int = 300,
                   delays_s: tuple[float, float, float] = (0.0, 0.0, 0.0),
                   seed: int = 0) -> QueueResult:
    """AD-PSGD: every step an active sends its model to a random passive and gets the passive's back; the passive's
    service thread does that on the passive's host (its CPU quota, shared with the passive's own steps), one swap at
    a time, its link a server's link (the push, and ``kappa`` of the reply, serialised). The service thread holds the
    passive's lock for the whole averaging, transfers included, and the passive's optimizer step takes that lock
    (bench/algorithms/adpsgd.py): a passive whose step ends during a swap waits for it. Actives wait for their swap.
    Events are played in time order. ``delays_s``: the link delay of a swap (before the passive starts on it, while
    it waits inside it, back to the active; :data:`bench.predict.transport.PROTOCOL_DELAYS`)."""
    to_s, hold_s, back_s = delays_s
    rng = random.Random(seed)
    a_hosts = [CfsHost(c.share, period_s, rng.uniform(0, period_s)) for c in actives]
    p_hosts = [CfsHost(c.share, period_s, rng.uniform(0, period_s)) for c in passives]
    wire = (lambda b: b / bytes_per_s) if math.isfinite(bytes_per_s) else (lambda b: 0.0)
    na, npas = len(actives), len(passives)
    free = [0.0] * npas
    lock_until = [0.0] * npas
    compute, comm = [0.0] * (na + npas), [0.0] * (na + npas)
    ends: list[list[float]] = [[0.0] for _ in range(na + npas)]
    events = [(0.0, i, "a" if i < na else "p", None) for i in range(na + npas)]
    heapq.heapify(events)
    while events:
        t, i, kind, p = heapq.heappop(events)
        if kind == "p":
            c = passives[i - na]
            if all(len(ends[a]) > steps for a in range(na)):
                continue
            f = p_hosts[i - na].run(t, c.step_cpu_s) + c.sleep_s
            compute[i] += f - t
            heapq.heappush(events, (f, i, "q", None))
        elif kind == "q":  # the passive's optimizer step takes its lock
            if lock_until[i - na] > t:
                comm[i] += lock_until[i - na] - t
                heapq.heappush(events, (lock_until[i - na], i, "q", None))
                continue
            ends[i].append(t)
            heapq.heappush(events, (t, i, "p", None))
        elif kind == "a":
            if len(ends[i]) > steps:
                continue
            c = actives[i]
            f = a_hosts[i].run(t, c.step_cpu_s) + c.sleep_s
            compute[i] += f - t
            p = rng.randrange(npas)
            sent = a_hosts[i].run(f, swap_cpu_s / 2) + latency_s + to_s
            heapq.heappush(events, (sent, i, "s", (p, f)))
        else:
            p, f = p
            start = max(t, free[p])
            link_end = start + hold_s + wire((1 + kappa) * swap_bytes)
            served = free[p] = max(link_end, p_hosts[p].run(start + hold_s, swap_cpu_s))
            lock_until[p] = served + wire((1 - kappa) * swap_bytes)
            back = a_hosts[i].run(lock_until[p] + latency_s + back_s, swap_cpu_s / 2)
            comm[i] += back - f
            ends[i].append(back)
            heapq.heappush(events, (back, i, "a", None))
    t0, t1 = all_active(ends, warm=min(10, steps // 4))
    step_s = []
    for i in range(na + npas):
        inside = [x for x in ends[i] if t0 < x <= t1]
        step_s.append((t1 - t0) / len(inside) if inside else ends[i][-1] / (len(ends[i]) - 1))
    count = [len(e) - 1 for e in ends]
    return QueueResult(step_s, [compute[i] / count[i] for i in range(na + npas)],
                       [comm[i] / count[i] for i in range(na + npas)])
