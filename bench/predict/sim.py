"""Hosts with a CPU quota, and methods whose workers wait for one another, played step by step.

:class:`CfsHost` is a host's CPU as the kernel's CFS bandwidth control gives it to an emulated host (cgroup
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``): work runs at full speed until the host has used ``share`` x
``period_s`` of the period, then waits for the next period; each host's periods start at a random phase. A burst of
work longer than a period's budget is throttled even on a host idle on average, and a collective waits for the host
that is throttled: neither shows in an average CPU rate. Without a quota (``share`` None) work runs at once.

:func:`simulate_collective` plays n workers through ``steps`` steps: each computes on its host, then every operation
due at that step runs: a blocking one (an allreduce, a gossip round whose in-peers' messages it waits for, a
broadcast) starts when the last worker arrives, costs each host its CPU and lasts at least its time on the wire; a
non-blocking one (``behind``: delayed allreduce, LASGD's averaging, overlapped gossip) costs its CPU at launch and is
waited for ``every`` (or ``lag``) steps later. Collectives go through one at a time (Horovod's background thread and
the link): one starts when the one before it is through. A non-blocking one given Horovod's loop (``cycle_s``,
:meth:`bench.predict.model.Model.horovod_loop`) starts with the first negotiation cycle after every worker queued it
and is fused with those queued before that cycle starts. A link's delay (``delay_s``) follows a blocking operation's
CPU work on the hosts, which the rest of its wire time overlaps. A worker's wait for a collective may cost its host CPU
(``wait_cpu``: the polls of the suite's sleeping wait), which the host's next work finds gone from the period's
budget. The workers' mean step over the steps after a warm-up is their pace.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


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

    def burn(self, t0: float, t1: float, work: float) -> None:
        """``work`` seconds of CPU spread evenly over [t0, t1] beside what the host runs (a waiting thread's polls):
        each period's share of it comes out of that period's budget, as far as the budget goes; nothing waits."""
        if not self.share or work <= 0 or t1 <= t0:
            return
        budget, rate = self.share * self.period, work / (t1 - t0)
        t = t0
        while t < t1 - 1e-12:
            k = math.floor((t - self.phase) / self.period + 1e-9)
            end = min(t1, self.phase + (k + 1) * self.period)
            self._used[k] = min(budget, self._used.get(k, 0.0) + rate * (end - t))
            t = end


def all_active(times: list[list[float]], warm: int) -> tuple[float, float]:
    """The all-active window of event times per worker: from the last worker's ``warm``-th to the first's last."""
    return max(t[min(warm, len(t) - 1)] for t in times), min(t[-1] for t in times)


@dataclass(frozen=True)
class Op:
    """One operation every ``every`` steps: ``comm_s`` on the wire (and hops), ``cpu_s`` on each host."""

    every: int
    comm_s: float
    cpu_s: float
    behind: bool = False
    lag: int = 0
    """A ``behind`` operation is waited for this many steps after it starts (0: ``every``); a lagged one is started
    before the step waits for the one ``lag`` steps older (delayed allreduce's order)."""
    delay_s: float = 0.0
    """The part of ``comm_s`` a link's delay adds: a blocking operation's host CPU cannot overlap it."""
    cycle_s: float = 0.0
    """A ``behind`` operation of Horovod's: one negotiation of its background loop (0: not played as that loop)."""
    fused_s: tuple = ()
    """With ``cycle_s``: the data seconds of a cycle that carries 1, 2, ... of these operations fused."""
    polled: bool = False
    """A worker waits for it by the sleeping wait's polls (``simulate_collective``'s ``wait_cpu``)."""


@dataclass(frozen=True)
class Client:
    """One worker: ``steps`` local steps a window (a parameter server's clients), each ``step_cpu_s`` of CPU on a host
    of ``share``."""

    steps: int
    step_cpu_s: float
    share: float | None
    sleep_s: float = 0.0
    """Wall seconds a step sleeps (a straggler's injected delay, ``slow_mode: sleep``)."""
    jitter_s: float = 0.0
    """Mean of the exponential pause after every step (``step_jitter_s``)."""


@dataclass
class Pace:
    step_s: list[float]
    compute_s: list[float]
    comm_s: list[float]
    wait_s: list[float]


def simulate_collective(workers: list[Client], ops: list[Op], period_s: float, steps: int | None = None,
                        seed: int = 0, wait_cpu=None) -> Pace:
    """See the module docstring. ``wait_cpu(seconds)``: the CPU a worker's training thread spends waiting that long
    for a ``polled`` operation (the sleeping wait's polls, :func:`bench.predict.model.wait_polls`), drawn from its
    host's budget over the wait (:meth:`CfsHost.burn`); None: a wait costs no CPU."""
    rng = random.Random(seed)
    n = len(workers)
    hosts = [CfsHost(w.share, period_s, rng.uniform(0, period_s)) for w in workers]
    longest = max([max(o.every, o.lag) for o in ops] + [1])
    noisy = any(w.share for w in workers) or any(w.jitter_s for w in workers)
    steps = steps or (max(300, 30 * longest) if noisy else max(40, 8 * longest))
    warm = steps // 5 if noisy else steps // 2
    t = [0.0] * n
    compute, wait = [0.0] * n, [0.0] * n
    pending: list[tuple[int, list, bool]] = []  # (step it is waited for at, [the time it is through], polled)
    channel = 0.0  # when the collectives started so far are through
    cycle: dict = {}  # Horovod's loop: the last cycle that carries operations (start, operations, [end])
    mark = None

    stall = max([(1 - w.share) * period_s for w in workers if w.share and w.share < 1] + [0.0])

    def fusing(op: Op) -> bool:
        """Whether Horovod's loop keeps fusing ``len(op.fused_s)`` of these a cycle: once a cycle carries one, the
        next is queued while it runs and goes alone in the next cycle, which runs at once (no empty negotiation
        between them to gather two), and nothing brings the loop back; a fused cycle is followed by an empty one,
        which gathers the next ones only if every worker computes and queues them within that negotiation, after
        the longest a host's quota can hold it ((1 - share) of a period)."""
        most = len(op.fused_s)
        return most > 1 and most * max(w.step_cpu_s + op.cpu_s for w in workers) + stall < op.cycle_s

    def launch(op: Op, step: int) -> None:
        nonlocal t, channel, cycle
        launched = [hosts[i].run(t[i], op.cpu_s) for i in range(n)]
        t = launched
        ready = max(launched)
        if op.cycle_s > 0:
            if cycle and cycle["start"] >= ready and cycle["ops"] < len(op.fused_s):  # queued before it starts
                cycle["ops"] += 1
                cycle["end"][0] = cycle["start"] + op.cycle_s + op.fused_s[cycle["ops"] - 1]
            else:  # the first cycle to start after every worker queued it: empty ones run back to back until then
                free = channel
                start = free if ready <= free else free + math.ceil((ready - free) / op.cycle_s - 1e-9) * op.cycle_s
                if not cycle and not fusing(op):
                    start = ready  # the state the loop settles in: each reduction queued while the one before runs
                cycle = {"start": start, "ops": 1, "end": [start + op.cycle_s + op.fused_s[0]]}
            channel = cycle["end"][0]
            pending.append((step + (op.lag or op.every), cycle["end"], op.polled))
            return
        channel = max(ready, channel) + op.comm_s  # one collective at a time (Horovod's thread, the link)
        pending.append((step + (op.lag or op.every), [channel], op.polled))

    for step in range(1, steps + 1):
        if step == warm + 1:
            mark = (list(t), list(compute), list(wait))
        for i, w in enumerate(workers):
            start = t[i]
            t[i] = hosts[i].run(t[i], w.step_cpu_s) + w.sleep_s + (rng.expovariate(1 / w.jitter_s) if w.jitter_s else 0.0)
            compute[i] += t[i] - start
        for op in ops:  # delayed allreduce starts this step's reduction, then waits for the one lag steps older
            if op.behind and op.lag and not step % op.every:
                launch(op, step)
        due = [(done[0], polled) for at, done, polled in pending if at == step]
        pending = [p for p in pending if p[0] != step]
        for done, polled in due:
            for i in range(n):
                if done > t[i]:
                    wait[i] += done - t[i]
                    if wait_cpu and polled:
                        hosts[i].burn(t[i], done, wait_cpu(done - t[i]))
                    t[i] = done
        for op in ops:
            if step % op.every or (op.behind and op.lag):
                continue
            if op.behind:
                launch(op, step)
                continue
            arrive = max(t)
            end = max([max(arrive, channel) + op.comm_s - op.delay_s]
                      + [hosts[i].run(arrive, op.cpu_s) for i in range(n)]) + op.delay_s
            if wait_cpu and op.polled:
                for i in range(n):
                    hosts[i].burn(t[i], end, wait_cpu(end - t[i]))
            channel = end
            t = [end] * n
    t0, c0, w0 = mark
    count = steps - warm
    step_s = [(t[i] - t0[i]) / count for i in range(n)]
    comp = [(compute[i] - c0[i]) / count for i in range(n)]
    waited = [(wait[i] - w0[i]) / count for i in range(n)]
    return Pace(step_s, comp, [max(0.0, s - c - w) for s, c, w in zip(step_s, comp, waited)], waited)
