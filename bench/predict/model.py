"""The step model: a run's throughput, time split and staleness from its algorithm's communication pattern.

For one worker, a step costs (docs/results/predict/README.md gives the terms with their calibrated values):

- **compute** ``c``: the workload's forward, backward and update on the hardware (``hardware.Workload.compute_s``);
- **communication on the wire**: per exchange, the bytes on each link it crosses over the link's rate. A ring
  allreduce of M bytes over n workers sends and receives 2(n-1)/n M a worker in 2(n-1) dependent hops, so it
  costs 2(n-1)/n M / B + 2(n-1) latency (B and latency of the slowest level the ring spans); a point-to-point
  round, M per peer and one hop; a parameter server's link carries every worker's push and pull (:mod:`.queue`);
- **host CPU** where the host's CPU does the communication (gloo over TCP on CPU hosts and on the emulated
  cluster): a per-operation cost plus a cost per byte sent or received, and on the emulated cluster a barrier
  term ω(√k - 1) for a collective after k independent local steps (the hosts' quota periods drift apart);
- **overlap**: ``none`` blocks the step, ``backward`` hides the wire time behind the backward pass (2/3 of ``c``),
  ``behind`` hides it behind the next ``every`` steps of compute (delayed allreduce, LASGD, overlapped gossip).

A worker's step then takes max(CPU-bound time, critical path): the CPU-bound time is its CPU work over its CPU share
(the emulated hosts' quota, times the efficiency with which a quota is used); the critical path is its compute at
full speed, the exposed communication, and a straggler's sleep or jitter. Workers that wait for one another (a
collective, SGP's in-peers) go at the pace of the slowest; parameter-server and AD-PSGD workers go at their own
(:mod:`.queue`). Throughput is the samples of all workers over that pace.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..config import HOROVOD_DEFAULTS
from .hardware import Hardware, Workload
from .patterns import Exchange, Pattern, pattern
from .queue import Client, Visit, simulate_pairs, simulate_server

BACKWARD_SHARE = 2 / 3
"""Share of a step's compute that is the backward pass (about twice the forward's FLOPs): what an allreduce started
from the gradients' hooks can hide behind."""


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


def ring_cost(hw: Hardware, n: int, nbytes: float) -> tuple[float, float]:
    """(wire, latency) seconds of a ring allreduce of ``nbytes`` over ``n`` workers placed in order on ``hw``."""
    if n <= 1:
        return 0.0, 0.0
    ring = 2 * (n - 1) / n * nbytes
    spanned = spanned_levels(hw, n)
    wire = max(ring / lv.bytes_per_s for lv in spanned)
    return wire, 2 * (n - 1) * max(lv.latency_s for lv in spanned)


def spanned_levels(hw: Hardware, n: int) -> list:
    """The levels whose links n workers placed in order use: the innermost, and each whose inner groups n exceeds."""
    out, inner = [], 1
    for lv in hw.levels:
        if n > inner or not out:
            out.append(lv)
        inner = lv.group(n)
        if inner >= n:
            break
    return out


def p2p_cost(hw: Hardware, n: int, nbytes: float, distance: int, peers: int) -> tuple[float, float]:
    """(wire, latency) of a round in which every worker sends ``nbytes`` to ``peers`` workers ``distance`` away."""
    if n <= 1 or peers == 0:
        return 0.0, 0.0
    wire, lat, inner = 0.0, 0.0, 1
    for lv in spanned_levels(hw, n):
        # a group of `inner` workers sends min(inner, distance) messages across its link per peer
        crossing = min(inner, distance) if inner > 1 else 1
        if distance >= inner or inner == 1:
            wire = max(wire, peers * crossing * nbytes / lv.bytes_per_s)
            lat = max(lat, lv.latency_s)
        inner = lv.group(n)
    return wire, lat


class Model:
    """The step model with the constants of a calibration (``docs/results/predict/calibration.json``)."""

    def __init__(self, calibration: dict):
        self.k = calibration

    # -- per-exchange costs ----------------------------------------------------------------------------------
    def exchange_cost(self, e: Exchange, cfg, hw: Hardware, wl: Workload, pat: Pattern) -> tuple[float, float, float]:
        """(every, communication seconds on the path, host CPU seconds) of one exchange."""
        k, n = self.k, cfg.launch.np
        nbytes = wl.nbytes * e.fraction
        host = hw.emulated or hw.host_cores is not None
        every = e.every
        if e.kind == "allreduce":
            wire, lat = ring_cost(hw, n, nbytes)
            comm = wire + lat + (hw.op_overhead_s if n > 1 else 0.0)
            rounds = e.ops
            if e.overlap == "backward" and e.ops > 1:  # Horovod fuses the tensors ready in the same cycle
                cycle = (cfg.launch.horovod.cycle_time_ms or HOROVOD_DEFAULTS["cycle_time_ms"]) / 1e3
                rounds = min(e.ops, 1 + BACKWARD_SHARE * wl.compute_s / cycle)
            cpu = 0.0
            if host and n > 1:
                cpu = rounds * k["a_allreduce_s"] + k["b_byte_s"] * 2 * 2 * (n - 1) / n * nbytes
                if hw.emulated:
                    cpu += k["omega_s"] * (math.sqrt(every) - 1)
            return every, comm, cpu
        if e.kind == "p2p":
            if e.peers == 0:
                return every, 0.0, 0.0
            exps = pat.extra.get("exponents") or 1
            costs = [p2p_cost(hw, n, nbytes, 2 ** (j % exps) if exps > 1 else 1, e.peers) for j in range(max(exps, 1))]
            comm = sum(w + l for w, l in costs) / len(costs) + hw.op_overhead_s
            cpu = e.peers * (k["a_p2p_s"] + k["b_byte_s"] * 2 * nbytes) if host else 0.0
            return every, comm, cpu
        if e.kind == "broadcast":
            steps_per_epoch = max(1, wl.samples // (n * wl.batch))
            every = max(1, round(pat.extra.get("sync_epochs", 1.0) * steps_per_epoch))
            wire, lat = ring_cost(hw, n, nbytes / 2)  # a broadcast moves M a worker, half a ring allreduce's 2M
            comm = wire + lat / 2 * e.peers + hw.op_overhead_s * e.peers
            cpu = 0.0
            if host and n > 1:
                cpu = e.peers * k["a_allreduce_s"] + k["b_byte_s"] * 2 * nbytes
                if hw.emulated:
                    cpu += k["omega_s"] * (math.sqrt(every) - 1)
            return every, comm, cpu
        raise ValueError(f"exchange kind {e.kind!r} is not a collective")

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
        n, c = cfg.launch.np, wl.compute_s
        costs = [self.exchange_cost(e, cfg, hw, wl, pat) for e in pat.exchanges]
        shares = self.shares(cfg, hw)
        sleeps = self.sleeps(cfg, hw, wl, shares)
        cpu = c + sum(cpu_e / every for every, _, cpu_e in costs)
        times = []
        for share, sleep in zip(shares, sleeps):
            exposed = waited = 0.0
            for e, (every, comm, _) in zip(pat.exchanges, costs):
                if e.overlap == "none":
                    exposed += comm / every
                elif e.overlap == "backward":
                    wire_part = max(0.0, comm - BACKWARD_SHARE * c)
                    exposed += wire_part / every
                else:
                    late = max(0.0, comm - every * c) / every
                    exposed += late
                    waited += late
            t_cpu = cpu / share if share else 0.0
            t_path = c + sleep + exposed
            times.append((t_cpu, t_path, waited, sleep))
        pace = max(max(tc, tp) for tc, tp, _, _ in times)
        per_worker = []
        for tc, tp, waited, sleep in times:
            if tc >= tp:
                compute = tc * c / cpu
                waited = 0.0
            else:
                compute = c + sleep
            per_worker.append((compute, max(0.0, pace - compute - waited), waited))
        slow = max(times, key=lambda x: max(x[0], x[1]))
        bound = "cpu" if slow[0] >= slow[1] else ("compute" if slow[1] - c - slow[3] < 0.05 * slow[1] else "network")
        return self._prediction(cfg, hw, wl, pace, per_worker, bound, pat)

    def _link(self, hw: Hardware, n: int) -> tuple[float, float]:
        """(bytes a second, one-way latency) of the way into one host (a server, a passive) from the others."""
        spanned = spanned_levels(hw, n + 1)
        bw = min(lv.bytes_per_s for lv in spanned)
        return bw, max(lv.latency_s for lv in spanned)

    def _server(self, cfg, hw, wl, pat) -> Prediction:
        k, n, M = self.k, cfg.launch.np, wl.nbytes
        host = hw.emulated or hw.host_cores is not None
        window = int(max(e.every for e in pat.exchanges))
        visits = []
        for e in sorted(pat.exchanges, key=lambda e: (e.push, -e.every)):
            count = max(1, round(window / e.every))
            moved = (e.push + e.pull) * M
            worker_cpu = k["a_ps_s"] + k["b_byte_s"] * moved
            server_cpu = worker_cpu + (k["pass_byte_s"] * M if e.push else 0.0)
            visits += [Visit(e.push * M, e.pull * M, server_cpu, worker_cpu)] * count
        shares = self.shares(cfg, hw)
        sleeps = self.sleeps(cfg, hw, wl, shares)
        passes = k["pass_byte_s"] * M * pat.local_passes if host else 0.0
        clients = [Client(window, wl.compute_s + passes, s, sleep_s=sl - cfg.train.step_jitter_s,
                          jitter_s=cfg.train.step_jitter_s) for s, sl in zip(shares, sleeps)]
        server_share = (cfg.launch.cpu_per_host or 1.0) * k["eta"] if hw.emulated else hw.host_cores
        bw, lat = self._link(hw, n)
        res = simulate_server(clients, visits, bw, hw.ps_kappa, lat, server_share, k["cfs_period_s"],
                              windows=max(60, 1200 // window))
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
        bw, lat = self._link(hw, n)
        res = simulate_pairs(clients[0::2], clients[1::2], M, swap_cpu, bw, lat, k["cfs_period_s"])
        order = list(range(0, n, 2)) + list(range(1, n, 2))
        step = [0.0] * n
        per = [(0.0, 0.0, 0.0)] * n
        for i, w in enumerate(order):
            step[w] = res.step_s[i]
            per[w] = (res.compute_s[i], res.comm_s[i], 0.0)
        thr = sum(wl.batch / s for s in step)
        return self._prediction(cfg, hw, wl, n * wl.batch / thr, per, "cpu" if shares[0] else "network", pat,
                                throughput=thr)
