"""The step model: a run's throughput, time split and staleness from its algorithm's communication pattern.

For one worker, a step costs (docs/results/predict/README.md gives the terms with their calibrated values):

- **compute** ``c``: the workload's forward, backward and update on the hardware (``hardware.Workload.compute_s``);
- **communication on the wire**: per exchange, the bytes on each link it crosses over the link's rate. A ring
  allreduce of M bytes over n workers sends and receives 2(n-1)/n M a worker in 2(n-1) dependent hops, so it
  costs 2(n-1)/n M / B + 2(n-1) latency (B and latency of the slowest level the ring spans), or, on a described
  GPU hardware whose file says ``collectives: nccl``, what NCCL's own tuner prices (:mod:`.nccl`: the least of its
  ring and tree and their protocols, with NCCL's latencies a step); a point-to-point round, M per peer and one hop;
  a parameter server's link carries every worker's push and pull (:mod:`.queue`);
- **host CPU** where the host's CPU does the communication (gloo over TCP on CPU hosts and on the emulated
  cluster): a per-operation cost plus a cost per byte sent or received, and on the emulated cluster a barrier
  term ω(√k - 1) for a collective after k independent local steps (the hosts' quota periods drift apart);
- **overlap**: ``none`` blocks the step, ``backward`` hides the wire time behind the backward pass (2/3 of ``c``),
  ``behind`` hides it behind the next ``every`` steps of compute (delayed allreduce, LASGD, overlapped gossip); a
  non-blocking Horovod allreduce on the emulated cluster goes through Horovod's loop, a negotiation every cycle and
  the reductions queued at its start fused (:meth:`Model.horovod_loop`).

Each worker's host is played as a CPU with its quota (:class:`.sim.CfsHost`; the emulated hosts' ``cpu_per_host``
times the share of a quota a host turns into work, none for a GPU): workers that wait for one another (a collective,
SGP's in-peers) are played step by step and go at the pace of the slowest (:func:`.sim.simulate_collective`);
parameter-server and AD-PSGD workers go at their own (:mod:`.queue`). Throughput is the samples of all workers
over that pace. (Validation v1 took max(CPU work / share, critical path) instead of playing the quota's periods:
docs/results/predict/NOTES.md.)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field

from ..config import FIRST_SLEEP_S, HOROVOD_DEFAULTS
from .hardware import Hardware, Workload
from .patterns import Exchange, Pattern, pattern
from . import nccl, transport
from .queue import Visit, simulate_pairs, simulate_server
from .sim import Client, Op, simulate_collective

BACKWARD_SHARE = 2 / 3
"""Share of a step's compute that is the backward pass (about twice the forward's FLOPs): what an allreduce started
from the gradients' hooks can hide behind."""

SERVER_STEPS = 1200
"""Local steps a worker plays in a parameter server's queue (at least 60 windows of its local steps)."""
SERVER_WORKER_WINDOWS = 38_400
"""Most worker-windows played in one parameter-server queue: past 32 workers each plays fewer windows (at 256
workers, 150 each). The queue settles into its round robin within its ten warm-up windows: the published forecasts
at 64-256 workers moved by at most 0.14 % when this cap came in, no winner changed, and ``bench predict``'s
forecasts took 70 s instead of 152 (tests/single/test_predict.py checks a saturated server at 256 workers)."""


def wait_polls(wait_s: float, sleep_max_s: float, first_s: float = FIRST_SLEEP_S) -> int:
    """How many times the suite's sleeping wait (``bench.comm.Comm.wait_sleeping``) polls in a wait of ``wait_s``:
    once at once, then after each sleep, the first ``first_s`` (:data:`bench.config.FIRST_SLEEP_S`) and each one twice
    the last up to ``sleep_max_s`` (``horovod.wait_sleep_us``). Every poll but the first follows a wake-up."""
    if wait_s <= 0:
        return 1
    polls, slept, sleep = 1, 0.0, min(first_s, sleep_max_s)
    while slept < wait_s and sleep < sleep_max_s:
        slept, sleep, polls = slept + sleep, min(2 * sleep, sleep_max_s), polls + 1
    if slept < wait_s:
        polls += math.ceil((wait_s - slept) / sleep_max_s - 1e-9)
    return polls


def server_windows(window: int, n: int) -> int:
    """Windows each of ``n`` workers plays in :func:`bench.predict.queue.simulate_server` (``window`` local steps
    each): :data:`SERVER_STEPS` local steps, at least 60 windows, at most :data:`SERVER_WORKER_WINDOWS` in all."""
    return max(60, min(SERVER_STEPS // window, SERVER_WORKER_WINDOWS // n))


@dataclass
class Prediction:
    algorithm: str
    np: int
    hardware: str
    workload: str
    throughput: float
    """Samples a second, all workers together."""
    step_s: float
    """Seconds a step of the pace-setting worker (the slowest for methods whose workers wait for one another)."""
    compute_s: float
    comm_s: float
    wait_s: float
    """Mean over the workers of seconds a step computing, communicating and waiting on a non-blocking operation."""
    bound: str
    """What sets the pace: ``cpu`` (the hosts' CPU), ``network``, ``compute`` or ``server``."""
    staleness_mean: float | None = None
    staleness_hist: dict = field(default_factory=dict)
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def spanned(hw: Hardware, n: int) -> list[tuple]:
    """(level, workers behind one of its links) for the levels whose links n workers placed in order use. Groups are
    nested (a node inside a region: each clipped to the group above it); a level is used when the group behind its
    link is smaller than n (the innermost always is: one worker behind each link)."""
    groups, outer = [], n
    for lv in reversed(hw.levels):
        outer = min(lv.group(n), outer)
        groups.append(outer)
    groups.reverse()
    out = []
    for i, lv in enumerate(hw.levels):
        inner = groups[i - 1] if i else 1
        if i == 0 or inner < n:
            out.append((lv, inner))
    return out


def ring_cost(hw: Hardware, n: int, nbytes: float) -> tuple[float, float]:
    """(wire, latency) seconds of a ring allreduce of ``nbytes`` over ``n`` workers placed in order on ``hw``: each
    link the ring crosses carries 2(n-1)/n of it, in 2(n-1) dependent hops."""
    if n <= 1:
        return 0.0, 0.0
    ring = 2 * (n - 1) / n * nbytes
    levels = spanned(hw, n)
    return max(ring / lv.bytes_per_s for lv, _ in levels), 2 * (n - 1) * max(lv.latency_s for lv, _ in levels)


def allreduce_cost(hw: Hardware, n: int, nbytes: float, ops: float = 1.0) -> tuple[float, float]:
    """(wire, latency) seconds of ``ops`` allreduces sharing ``nbytes`` over ``n`` workers on ``hw``: the ring of
    :func:`ring_cost`, or, where the description says ``collectives: nccl``, each operation as NCCL's tuner prices it
    (:func:`bench.predict.nccl.allreduce`: the least of its ring and tree, each protocol), run one after the other on
    NCCL's stream. As for the ring, one latency is the exposed term: the others are time the operations occupy, like
    their wire, which the backward pass may hide (``wire`` = ops x wire + (ops - 1) x latency of one)."""
    if hw.nccl is None:
        return ring_cost(hw, n, nbytes)
    if n <= 1:
        return 0.0, 0.0
    node, network = hw.levels[0], (hw.levels[1] if len(hw.levels) > 1 else None)
    cost = nccl.allreduce(hw.nccl, n, nbytes / ops, node.group(n) if network else n, node.bytes_per_s,
                          network.bytes_per_s if network else None)
    return ops * cost.wire_s + (ops - 1) * cost.latency_s, cost.latency_s


def p2p_cost(hw: Hardware, n: int, nbytes: float, distance: int, peers: int) -> tuple[float, float]:
    """(wire, latency) of a round in which every worker sends ``nbytes`` to ``peers`` workers ``distance`` away: a
    group of g workers behind a link sends min(g, distance) of its messages across it."""
    if n <= 1 or peers == 0:
        return 0.0, 0.0
    levels = spanned(hw, n)
    wire = max(peers * min(g, distance) * nbytes / lv.bytes_per_s for lv, g in levels)
    return wire, max(lv.latency_s for lv, _ in levels)


def shared_link(hw: Hardware, n: int, users) -> tuple[float, float]:
    """(bytes a second, latency) one transfer gets on the slowest link it may cross, ``users(g)`` transfers of a group
    of g workers sharing that link at once."""
    levels = spanned(hw, n)
    return (min(lv.bytes_per_s / max(1.0, users(g)) for lv, g in levels), max(lv.latency_s for lv, _ in levels))


def link_delay(hw: Hardware, n: int) -> tuple[float, float]:
    """(one-way delay, bytes a second) of the slowest link n workers' operations cross (the delay's terms:
    :mod:`.transport`)."""
    levels = spanned(hw, n)
    return max(lv.delay_s for lv, _ in levels), min(lv.bytes_per_s for lv, _ in levels)


class Model:
    """The step model with the constants of a calibration (``docs/results/predict/calibration.json``)."""

    def __init__(self, calibration: dict):
        self.k = calibration

    # -- per-exchange costs ----------------------------------------------------------------------------------
    def exchange_cost(self, e: Exchange, cfg, hw: Hardware, wl: Workload,
                      pat: Pattern) -> tuple[float, float, float, float]:
        """(every, seconds on the critical path, host CPU seconds, the part of those seconds the link's delay adds)
        of one exchange; an exchange overlapping the backward pass shows only its latency and the wire time the
        backward pass does not cover."""
        k, n = self.k, cfg.launch.np
        nbytes = wl.nbytes * e.fraction
        host = hw.emulated or hw.host_cores is not None
        every = e.every
        delay, bps = link_delay(hw, n)
        kt = k.get("transport")

        def delayed(op: str, count: float) -> float:
            """What the link's delay adds to ``count`` operations ``op`` of this exchange (:mod:`.transport`)."""
            if not delay or not kt or count <= 0:
                return 0.0
            return count * transport.delay_added_s(op, nbytes / count, n, bps, delay, kt)

        if e.kind == "allreduce":
            rounds = e.ops
            if e.overlap == "backward" and e.ops > 1 and pat.runtime == "horovod":
                # Horovod fuses the tensors ready in the same cycle; a cycle lasts its sleep and its negotiation
                cycle = (cfg.launch.horovod.cycle_time_ms or HOROVOD_DEFAULTS["cycle_time_ms"]) / 1e3
                if delay and kt:  # a cycle is half the wait a blocking allreduce pays (Model.horovod_loop)
                    cycle += (transport.horovod_wait_s("allreduce_hvd", n, delay, kt)
                              - transport.horovod_wait_s("allreduce_hvd", n, 0.0, kt)) / 2
                rounds = min(e.ops, 1 + BACKWARD_SHARE * wl.compute_s / cycle)
            wire, lat = allreduce_cost(hw, n, nbytes, rounds)
            if e.overlap == "backward":
                wire = max(0.0, wire - BACKWARD_SHARE * wl.compute_s)
            added = delayed("allreduce_hvd" if pat.runtime == "horovod" else "allreduce_gloo", rounds)
            comm = wire + lat + (hw.op_overhead_s if n > 1 else 0.0) + added
            cpu = 0.0
            if host and n > 1:
                cpu = rounds * k["a_allreduce_s"] + k["b_byte_s"] * 2 * 2 * (n - 1) / n * nbytes
                if hw.emulated:
                    cpu += k["omega_s"] * (math.sqrt(every) - 1)
            return every, comm, cpu, added
        if e.kind == "p2p":
            if e.peers == 0:
                return every, 0.0, 0.0, 0.0
            exps = pat.extra.get("exponents") or 1
            costs = [p2p_cost(hw, n, nbytes, 2 ** (j % exps) if exps > 1 else 1, e.peers) for j in range(max(exps, 1))]
            added = transport.GOSSIP_DELAYS * delay
            comm = sum(w + l for w, l in costs) / len(costs) + hw.op_overhead_s + added
            cpu = e.peers * (k["a_p2p_s"] + k["b_byte_s"] * 2 * nbytes) if host else 0.0
            return every, comm, cpu, added
        if e.kind == "broadcast":
            steps_per_epoch = max(1, wl.samples // (n * wl.batch))
            every = max(1, round(pat.extra.get("sync_epochs", 1.0) * steps_per_epoch))
            wire, lat = ring_cost(hw, n, nbytes / 2)  # a broadcast moves M a worker, half a ring allreduce's 2M
            added = delayed("broadcast", e.peers)
            comm = wire + lat / 2 * e.peers + hw.op_overhead_s * e.peers + added
            cpu = 0.0
            if host and n > 1:
                cpu = e.peers * k["a_allreduce_s"] + k["b_byte_s"] * 2 * nbytes
                if hw.emulated:
                    cpu += k["omega_s"] * (math.sqrt(every) - 1)
            return every, comm, cpu, added
        raise ValueError(f"exchange kind {e.kind!r} is not a collective")

    def horovod_loop(self, e: Exchange, cfg, hw: Hardware, wl: Workload, pat: Pattern) -> tuple[float, tuple]:
        """A non-blocking Horovod allreduce (``behind``) on the emulated cluster, as Horovod's background loop carries
        it (``RunLoopOnce``, horovod/common/operations.cc; ``ComputeResponseList``, controller.cc): the loop
        negotiates every cycle, whether or not a tensor is queued (``CoordinateCacheAndState``: the cache's bit
        allreduce), takes only the tensors queued when the cycle starts, and fuses them into one operation. So a
        reduction queued while the loop is busy goes with the next cycle, and those queued together go as one.
        Returns (T, data): T one negotiation, data the seconds of a cycle's operation carrying 1 .. K of these
        fused (K = lag / every + 1 can be queued at once: delayed allreduce's d + 1). The micro-benchmark that fits
        the Horovod terms times blocking operations back to back, each queued just after the loop started an empty
        cycle: an empty negotiation, its own, then its data, so T = half the loop's wait
        (:func:`.transport.horovod_wait_s`, its delays played in :mod:`.loop`) and data = the blocking cost less 2 T
        (our reading of those sources, checked against delayed allreduce's steps in regimes-latency:
        docs/results/predict/NOTES.md). (0, ()) for the others: their cost stays ``comm``."""
        kt = self.k.get("transport")
        n = cfg.launch.np
        if (e.kind != "allreduce" or e.overlap != "behind" or pat.runtime != "horovod" or n <= 1 or not kt
                or not hw.emulated):
            return 0.0, ()
        delay, _ = link_delay(hw, n)
        cycle = transport.horovod_wait_s("allreduce_hvd", n, delay, kt) / 2
        if cycle <= 0:
            return 0.0, ()
        most = 1 + (e.lag // max(1, round(e.every)) if e.lag else 0)
        data = tuple(max(0.0, self.exchange_cost(dataclasses.replace(e, fraction=e.fraction * k), cfg, hw, wl,
                                                 pat)[1] - 2 * cycle) for k in range(1, most + 1))
        return cycle, data

    def wait_cpu(self, cfg, hw: Hardware, pat: Pattern):
        """The CPU a rank's training thread spends waiting ``w`` seconds for a Horovod allreduce (the ops marked
        ``polled``) on a rationed host (the emulated cluster): ``wake_s`` (``python -m bench.perf wakeup``) for every
        wake-up of the sleeping wait (:func:`wait_polls`) when the run waits by sleeping polls
        (``horovod.wait_sleep_us``); None otherwise. Not modelled: a broadcast's polls (FAST's, one an epoch or
        more), a spinning wait's CPU (Horovod's own ``synchronize`` without ``wait_sleep_us``), torch.distributed's
        blocking waits (gossip, DDP), a GPU's."""
        sleep_us = cfg.launch.horovod.wait_sleep_us
        wake = self.k.get("wake_s")
        if not (wake and sleep_us and hw.emulated and cfg.launch.np > 1):
            return None
        return lambda w: wake * (wait_polls(w, sleep_us / 1e6) - 1)

    # -- shares and stragglers -------------------------------------------------------------------------------
    def shares(self, cfg, hw: Hardware) -> list[float | None]:
        """Each worker's effective CPU share (cores x the quota's efficiency); None: not CPU-bound (a GPU)."""
        n, launch, train = cfg.launch.np, cfg.launch, cfg.train
        if not hw.emulated:
            return [hw.host_cores] * n if hw.host_cores is not None else [None] * n
        out = []
        for w in range(n):
            q = launch.emulated_cpu.get(w, launch.cpu_per_host) or 1.0
            if launch.slow_mode == "cpu" and w in train.slow_ranks:
                q = q / train.slow_factor
            out.append(q * self.k["eta"])
        return out

    def sleeps(self, cfg, hw: Hardware, wl: Workload, shares) -> list[float]:
        """Wall seconds a step sleeps: a ``sleep`` straggler's (slow_factor - 1) x its compute, plus the jitter."""
        train = cfg.train
        out = []
        for w, s in enumerate(shares):
            extra = train.step_jitter_s
            if cfg.launch.slow_mode == "sleep" and w in train.slow_ranks:
                extra += (train.slow_factor - 1) * wl.compute_s / (s or 1.0)
            out.append(extra)
        return out

    # -- the three kinds of method -----------------------------------------------------------------------------
    def predict(self, cfg, hw: Hardware, wl: Workload) -> Prediction:
        pat = pattern(cfg, wl)
        if pat.server:
            return self._server(cfg, hw, wl, pat)
        if any(e.kind == "pairwise" for e in pat.exchanges):
            return self._pairs(cfg, hw, wl, pat)
        return self._collective(cfg, hw, wl, pat)

    def _prediction(self, cfg, hw, wl, pace: float, per_worker: list[tuple[float, float, float]], bound: str,
                    pat: Pattern, throughput: float | None = None, **kw) -> Prediction:
        n = cfg.launch.np
        comp, comm, wait = (sum(x[i] for x in per_worker) / n for i in range(3))
        thr = throughput if throughput is not None else n * wl.batch / pace
        return Prediction(cfg.algorithm, n, hw.id, f"{wl.model}@{wl.batch}", thr, pace, comp, comm, wait, bound,
                          note=pat.note, **kw)

    def _collective(self, cfg, hw, wl, pat) -> Prediction:
        c = wl.compute_s
        costs = [self.exchange_cost(e, cfg, hw, wl, pat) for e in pat.exchanges]
        ops = [Op(max(1, round(every)), comm, cpu, behind=e.overlap == "behind", lag=e.lag, delay_s=added,
                  polled=e.kind == "allreduce" and pat.runtime == "horovod",
                  **dict(zip(("cycle_s", "fused_s"), self.horovod_loop(e, cfg, hw, wl, pat))))
               for e, (every, comm, cpu, added) in zip(pat.exchanges, costs)]
        shares = self.shares(cfg, hw)
        sleeps = self.sleeps(cfg, hw, wl, shares)
        workers = [Client(1, c, s, sleep_s=sl - cfg.train.step_jitter_s, jitter_s=cfg.train.step_jitter_s)
                   for s, sl in zip(shares, sleeps)]
        res = simulate_collective(workers, ops, self.k["cfs_period_s"], wait_cpu=self.wait_cpu(cfg, hw, pat))
        pace = max(res.step_s)
        per_worker = list(zip(res.compute_s, res.comm_s, res.wait_s))
        cpu = c + sum(cpu_e / op.every for op, (_, _, cpu_e, _) in zip(ops, costs))
        slow = max(range(len(shares)), key=lambda i: res.step_s[i])
        if shares[slow] and cpu / shares[slow] > 0.8 * pace:
            bound = "cpu"
        else:
            bound = "network" if res.comm_s[slow] + res.wait_s[slow] > 0.5 * pace else "compute"
        return self._prediction(cfg, hw, wl, pace, per_worker, bound, pat)

    def _server(self, cfg, hw, wl, pat) -> Prediction:
        k, n, M = self.k, cfg.launch.np, wl.nbytes
        host = hw.emulated or hw.host_cores is not None
        window = int(max(e.every for e in pat.exchanges))
        delay, _ = link_delay(hw, n + 1)
        visits = []
        for e in sorted(pat.exchanges, key=lambda e: (e.push, -e.every)):
            count = max(1, round(window / e.every))
            moved = (e.push + e.pull) * M
            worker_cpu = k["a_ps_s"] + k["b_byte_s"] * moved
            server_cpu = worker_cpu + (k["pass_byte_s"] * M if e.push else 0.0)
            delays = (delay * d for d in transport.PROTOCOL_DELAYS["ps_commit" if e.push else "ps_pull"])
            visits += [Visit(e.push * M, e.pull * M, server_cpu, worker_cpu, *delays)] * count
        shares = self.shares(cfg, hw)
        sleeps = self.sleeps(cfg, hw, wl, shares)
        passes = k["pass_byte_s"] * M * pat.local_passes if host else 0.0
        clients = [Client(window, wl.compute_s + passes, s, sleep_s=sl - cfg.train.step_jitter_s,
                          jitter_s=cfg.train.step_jitter_s) for s, sl in zip(shares, sleeps)]
        server_share = (cfg.launch.cpu_per_host or 1.0) * k["eta"] if hw.emulated else hw.host_cores
        bw, lat = shared_link(hw, n + 1, lambda g: 1.0)  # every visit comes through the server's own link: its queue
        res = simulate_server(clients, visits, bw, hw.ps_kappa, lat, server_share, k["cfs_period_s"],
                              windows=server_windows(window, n))
        thr = sum(wl.batch / s for s in res.step_s)
        per_worker = [(cp, cm, 0.0) for cp, cm in zip(res.compute_s, res.comm_s)]
        bound = "server" if res.server_busy > 0.9 else ("cpu" if shares[0] else "compute")
        hist = {int(t): int(v) for t, v in sorted(res.staleness.items())}
        return self._prediction(cfg, hw, wl, n * wl.batch / thr, per_worker, bound, pat, throughput=thr,
                                staleness_mean=res.mean_staleness, staleness_hist=hist)

    def _pairs(self, cfg, hw, wl, pat) -> Prediction:
        k, n, M = self.k, cfg.launch.np, wl.nbytes
        shares = self.shares(cfg, hw)
        sleeps = self.sleeps(cfg, hw, wl, shares)
        clients = [Client(1, wl.compute_s, s, sleep_s=sl) for s, sl in zip(shares, sleeps)]
        if n == 1:
            pace = max(wl.compute_s / (shares[0] or 1.0), wl.compute_s) + sleeps[0]
            return self._prediction(cfg, hw, wl, pace, [(pace, 0.0, 0.0)], "compute", pat)
        host = hw.emulated or hw.host_cores is not None
        swap_cpu = (k["a_ps_s"] + k["b_byte_s"] * 2 * M + k["pass_byte_s"] * M) if host else hw.op_overhead_s
        # half of a group's workers are actives, each swapping with a passive outside the group with odds 1 - g/n
        bw, lat = shared_link(hw, n, lambda g: g / 2 * (1 - g / n))
        delay, _ = link_delay(hw, n)
        res = simulate_pairs(clients[0::2], clients[1::2], M, swap_cpu, bw, hw.ps_kappa, lat, k["cfs_period_s"],
                             delays_s=tuple(delay * d for d in transport.PROTOCOL_DELAYS["pairwise"]))
        order = list(range(0, n, 2)) + list(range(1, n, 2))
        step = [0.0] * n
        per = [(0.0, 0.0, 0.0)] * n
        for i, w in enumerate(order):
            step[w] = res.step_s[i]
            per[w] = (res.compute_s[i], res.comm_s[i], 0.0)
        thr = sum(wl.batch / s for s in step)
        return self._prediction(cfg, hw, wl, n * wl.batch / thr, per, "cpu" if shares[0] else "network", pat,
                                throughput=thr)
