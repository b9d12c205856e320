"""Asynchronous methods as a queue: a parameter server with n clients, and AD-PSGD's actives and passives.

A parameter server is a closed queueing system: each of n workers computes a window of local steps (its "think
time"), then visits the server (a push of Δ, a pull of θ̃, or both); the server takes one visit at a time, first come
first served, its link carrying every worker's push and pull, so it serialises them. :func:`simulate_server` plays
that system event by event (deterministic, seeded) and returns the throughput, each worker's time split and the
staleness of every commit: the commits applied to θ̃ between a worker's pull and its commit. With a saturated server
the workers fall into a strict round robin and every τ is n - 1; with a lightly loaded one τ spreads around n - 1.

Each host's CPU is a :class:`CfsHost`: work runs at full speed until the host has used its quota of the period
(``share`` x ``period_s``), then waits for the next period, as the kernel's CFS bandwidth control does to the emulated
hosts (cgroup ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``). Each host's periods start at a random phase. A host
without a quota (``share`` None) runs its work at once.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from dataclasses import dataclass, field


class CfsHost:
    """A host whose work is limited to ``share`` of a core per period (None: unlimited). Several activities (a rank's
    main thread and its service thread) may draw on the same budget: each period's use is kept."""

    def __init__(self, share: float | None, period_s: float, phase: float = 0.0):
        self.share, self.period, self.phase = share, period_s, phase
        self._used: dict[int, float] = {}

    def run(self, t: float, work: float) -> float:
        """Start ``work`` seconds of CPU at ``t``; the time it ends."""
        if not self.share or work <= 0:
            return t + max(work, 0.0)
        budget = self.share * self.period
        while work > 1e-12:
            k = math.floor((t - self.phase) / self.period + 1e-9)  # a time on a boundary opens the next period
            end = self.phase + (k + 1) * self.period
            avail = budget - self._used.get(k, 0.0)
            if avail <= 1e-12:
                t = end
                continue
            dt = min(work, avail, end - t)
            t, work = t + dt, work - dt
            self._used[k] = self._used.get(k, 0.0) + dt
        return t


@dataclass(frozen=True)
class Visit:
    """One visit of a worker to the server at the end of its window."""

    push_bytes: float
    pull_bytes: float
    server_cpu_s: float
    worker_cpu_s: float


@dataclass(frozen=True)
class Client:
    """One worker: ``steps`` local steps a window, each ``step_cpu_s`` of CPU on a host of ``share``."""

    steps: int
    step_cpu_s: float
    share: float | None
    sleep_s: float = 0.0
    """Wall seconds a step sleeps (a straggler's injected delay, ``slow_mode: sleep``)."""
    jitter_s: float = 0.0
    """Mean of the exponential pause after every step (``step_jitter_s``)."""


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


def _rates(times: list[list[float]], steps: list[int], warm: int) -> tuple[float, float]:
    """The all-active window: from the last worker's ``warm``-th window to the first worker's last."""
    t0 = max(t[min(warm, len(t) - 1)] for t in times)
    t1 = min(t[-1] for t in times)
    return t0, t1


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
        start = max(sent, server_free)
        link_end = start + wire(visit.push_bytes + kappa * visit.pull_bytes)
        cpu_end = server.run(start, visit.server_cpu_s)
        end = max(link_end, cpu_end)
        busy += end - start
        server_free = end
        if visit.push_bytes:
            staleness[clock - pulled[w]] += 1
            clock += 1
        if visit.pull_bytes:
            pulled[w] = clock
        back = end + wire((1 - kappa) * visit.pull_bytes) + 2 * latency_s
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
    t0, t1 = _rates(done, steps, warm=min(10, windows // 4))
    step_s = []
    for w in range(n):
        inside = [x for x in done[w] if t0 < x <= t1]
        step_s.append((t1 - t0) / (len(inside) * steps[w]) if inside else (done[w][-1] / (len(done[w]) - 1) / steps[w]))
    total_steps = [(len(done[w]) - 1) * steps[w] for w in range(n)]
    return QueueResult(step_s, [compute[w] / total_steps[w] for w in range(n)],
                       [comm[w] / total_steps[w] for w in range(n)], staleness, busy / max(done[0][-1], 1e-12))


def simulate_pairs(actives: list[Client], passives: list[Client], swap_bytes: float, swap_cpu_s: float,
                   bytes_per_s: float, latency_s: float, period_s: float, steps: int = 300, seed: int = 0) -> QueueResult:
    """AD-PSGD: every step an active sends its model to a random passive and gets the passive's back; the passive's
    service thread does that on the passive's host (its CPU quota, shared with the passive's own steps), one swap at
    a time. Actives wait for the swap, passives never wait. Events are played in time order."""
    rng = random.Random(seed)
    a_hosts = [CfsHost(c.share, period_s, rng.uniform(0, period_s)) for c in actives]
    p_hosts = [CfsHost(c.share, period_s, rng.uniform(0, period_s)) for c in passives]
    wire = (lambda b: b / bytes_per_s) if math.isfinite(bytes_per_s) else (lambda b: 0.0)
    na, npas = len(actives), len(passives)
    free = [0.0] * npas
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
            ends[i].append(f)
            heapq.heappush(events, (f, i, "p", None))
        elif kind == "a":
            if len(ends[i]) > steps:
                continue
            c = actives[i]
            f = a_hosts[i].run(t, c.step_cpu_s) + c.sleep_s
            compute[i] += f - t
            p = rng.randrange(npas)
            arrive = a_hosts[i].run(f, swap_cpu_s / 2) + wire(swap_bytes) + latency_s
            heapq.heappush(events, (arrive, i, "s", (p, f)))
        else:
            p, f = p
            start = max(t, free[p])
            served = free[p] = p_hosts[p].run(start, swap_cpu_s)
            back = a_hosts[i].run(served + wire(swap_bytes) + latency_s, swap_cpu_s / 2)
            comm[i] += back - f
            ends[i].append(back)
            heapq.heappush(events, (back, i, "a", None))
    t0, t1 = _rates(ends, [1] * (na + npas), warm=min(10, steps // 4))
    step_s = []
    for i in range(na + npas):
        inside = [x for x in ends[i] if t0 < x <= t1]
        step_s.append((t1 - t0) / len(inside) if inside else ends[i][-1] / (len(ends[i]) - 1))
    count = [len(e) - 1 for e in ends]
    return QueueResult(step_s, [compute[i] / count[i] for i in range(na + npas)],
                       [comm[i] / count[i] for i in range(na + npas)])
