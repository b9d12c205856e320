"""Shared machinery of the parameter-server family (docs/algorithms.md, parameter-server family).

Placement: one dedicated server rank, the last rank of the job (``server_ranks`` = 1, so a
PS run launches ``--np`` workers + 1 process). Worker ranks 0..np−1 train on their shards and
talk to the server through :class:`bench.comm.ps.PSClient`; the server rank runs
:class:`bench.comm.ps.PSServer` with the algorithm's :meth:`PSAlgorithm.server_rule`.

The centre variable θ̃ is the model's parameters as one flat float32 vector (buffers such
as BatchNorm statistics stay local to each worker). All ranks start from rank 0's broadcast
parameters, so θ̃₀ = θᵏ₀. τ (staleness) is computed by the server from the clock the worker
echoes (see bench/comm/ps.py) and returned with the reply; the worker stores it in
StepStats.staleness of the step that committed.

Evaluation (the model that matters is θ̃): at its evaluation points rank 0 sends the server a
SNAP message without waiting for anything, with its buffers (BatchNorm running statistics, which
θ̃ does not hold); the server keeps a copy of θ̃ as it is when the message arrives, stamped with the time
the server applied the last commit in it (when that state existed; time to target uses it). After serving,
the server rank evaluates those copies and the final θ̃ (with the buffers rank 0 sent with its
DONE); model.pt is the final centre.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass

import torch

from .. import BenchError, vectors
from ..comm.ps import PSClient, PSServer
from .base import Algorithm, StepStats, check_window, window_params


def check_positive_int(params, *names: str) -> None:
    for n in names:
        v = getattr(params, n)
        if v < 1:
            raise BenchError(f"{n} must be an integer >= 1, got {v!r}")


def check_range(name: str, value: float, lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> None:
    bad = value < lo or value > hi or (lo_open and value == lo) or (hi_open and value == hi)
    if bad:
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise BenchError(f"{name} must be in {rng}, got {value!r}")


SIGNAL_GRACE_S = 1.0  # the main thread's chance to end the rank itself (its handler runs between messages)


@contextlib.contextmanager
def signals_end_serving(rank: int, grace_s: float = SIGNAL_GRACE_S):
    """While the server waits for a message it sits in gloo's C++ wait, where Python signal handlers do not run: a
    SIGTERM (a cancelled job) would wait for the next message, or the receive timeout. Here a thread woken by the
    signal (``signal.set_wakeup_fd``) gives the main thread ``grace_s`` to end the rank through its own handler,
    then ends the process (exit code 128 + the signal), naming the rank. SIGTERM and SIGINT only; outside the main
    thread a no-op."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(r)
        os.close(w)
        yield
        return

    ended = threading.Event()

    def watch():
        try:
            while True:
                got = os.read(r, 1)
                if not got or got[0] == 0 or ended.is_set():  # serving ended
                    return
                if got[0] in (signal.SIGTERM, signal.SIGINT) and not ended.wait(grace_s):
                    sys.stderr.write(f"rank {rank}: parameter server received {signal.Signals(got[0]).name} while "
                                     f"waiting for a message: exiting\n")
                    sys.stderr.flush()
                    os._exit(128 + got[0])
        finally:
            os.close(r)

    threading.Thread(target=watch, name="bench-ps-signals", daemon=True).start()
    try:
        yield
    finally:
        ended.set()  # also when a handler's exception ends serving: the rank ends through the main thread
        signal.set_wakeup_fd(previous)
        os.close(w)  # the watcher reads end-of-file and closes its end


def add_rule(centre, payload, tau, worker, pulled) -> bool:
    """θ̃ ← θ̃ + payload (DOWNPOUR, A-SGD, (A/EAM)EASGD's elastic term, AGN's a/λ)."""
    centre.add_(payload)
    return True


class PSAlgorithm(Algorithm):
    family = "parameter-server"
    keep_pulled = False  # the server keeps each worker's pulled θ̃ (ADAG, DC-ASGD)

    @dataclass
    class Params:
        """Settings common to every parameter-server algorithm (subclasses extend this dataclass)."""

        recv_timeout_s: float = 120.0
        """Longest wait for a message (server: from any worker; worker: the server's reply) before failing the run."""

    @classmethod
    def server_ranks(cls, params, np: int) -> int:
        return 1

    @classmethod
    def validate(cls, params, cfg) -> None:
        check_range("recv_timeout_s", params.recv_timeout_s, 0.0, float("inf"), lo_open=True)
        if cfg.launch.p2p_backend == "nccl":
            raise BenchError("the parameter server needs p2p_backend gloo or auto (it receives from any rank, "
                             "which NCCL cannot); got 'nccl'")

    # -- server side ---------------------------------------------------------------------
    def server_rule(self, centre, payload, tau, worker, pulled) -> bool:
        return add_rule(centre, payload, tau, worker, pulled)

    # -- life cycle ------------------------------------------------------------------------
    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        self.comm.broadcast_parameters(model.state_dict(), root=0)  # comm: broadcast rank 0's parameters to every rank: θ̃₀ = θᵏ₀
        self.comm.use_any_source_backend()  # the server receives from any rank: gloo when p2p_backend is auto
        p2p = self.comm.p2p(self.p.recv_timeout_s)  # comm: open the point-to-point transport between the workers and the server (collective)
        self.tensors = list(model.parameters())
        self.buffers = list(model.buffers())
        self.numel = vectors.numel(self.tensors)
        self.server_rank = self.ctx.num_workers  # the last rank
        self._done = False
        if self.is_server():
            self.snapshots: list[tuple[dict, dict]] = []
            self.server = PSServer(self.flat(), list(range(self.ctx.num_workers)), self.server_rule,
                                   keep_pulled=self.keep_pulled, timeout_s=self.p.recv_timeout_s,
                                   buffers_numel=vectors.numel(self.buffers), on_snapshot=self._keep_centre, p2p=p2p)
        else:
            self.client = PSClient(self.comm.rank, self.server_rank, self.numel, timeout_s=self.p.recv_timeout_s, p2p=p2p)
            self._buf = torch.empty(self.numel, dtype=torch.float32)

    def is_server(self) -> bool:
        return self.comm.rank >= self.ctx.num_workers

    def serve(self) -> None:
        with signals_end_serving(self.comm.rank):
            self.server.serve()  # comm: receive every worker's messages and answer them until all are done

    # -- helpers for workers ---------------------------------------------------------------
    def flat(self) -> torch.Tensor:
        return vectors.flat(self.tensors).to(torch.float32).cpu()

    def load(self, vec: torch.Tensor) -> None:
        vectors.assign_(self.tensors, vec.to(self.tensors[0].device))

    def pull(self) -> None:
        """θᵏ ← θ̃ (a window-starting pull)."""
        with self.ctx.timer.comm():
            self.client.pull(self._buf, snapshot=True)  # comm: pull the centre θ̃ from the server
        self.load(self._buf)

    def commit(self, payload: torch.Tensor, pull: bool = False) -> StepStats:
        """Send ``payload`` to the server; with ``pull`` also θᵏ ← new θ̃. Returns the bytes and τ to record."""
        with self.ctx.timer.comm():
            tau = self.client.commit(payload.cpu().contiguous(), into=self._buf if pull else None)  # comm: send the payload to the server (and pull θ̃)
        if pull:
            self.load(self._buf)
        nbytes = payload.numel() * 4 + self.client.header_bytes
        return StepStats(loss=0.0, correct=0, staleness=float(tau), bytes_sent=nbytes)

    def flush(self) -> None:
        """Commit what a worker still holds before saying done (override where it applies)."""

    def _buffers_vector(self) -> torch.Tensor | None:
        return vectors.flat(self.buffers).to(torch.float32).cpu() if self.buffers else None

    # -- evaluation and the end ------------------------------------------------------------
    def _keep_centre(self, step: int, centre: torch.Tensor, buffers: torch.Tensor | None) -> None:
        """Server: a SNAP arrived from rank 0; keep θ̃ as it is now, stamped with the moment that state existed: when
        the server applied the last commit in it (the job's start when none yet), not when the SNAP arrived."""
        applied = [times[-1] for times in self.server.served_at.values() if times]
        meta = {**self.ctx.progress(step), "t": (max(applied) - self.ctx.t0) if applied else 0.0}
        self.snapshots.append((meta, self._centre_snapshot(centre, buffers)))

    def _centre_snapshot(self, centre: torch.Tensor, buffers: torch.Tensor | None) -> dict:
        return {"theta": centre.clone(),
                "buffers": vectors.split_like(buffers, self.buffers) if buffers is not None else None}

    def snapshot(self):
        if self.is_server():  # the final centre (after serve), with the buffers rank 0 sent with DONE
            return self._centre_snapshot(self.server.centre, self.server.buffers)
        if self.comm.rank == 0 and not self._done:
            self.client.snapshot(self.t, self._buffers_vector())  # comm: send SNAP (and rank 0's buffers) to the server, without waiting
        return None

    def own_snapshots(self):
        return self.snapshots if self.is_server() else []

    def finalize(self) -> None:
        if not self.is_server() and not self._done:
            self.flush()
            self.client.done(self._buffers_vector() if self.comm.rank == 0 else None)  # comm: send DONE to the server once the SNAP sends have ended; the server stops once every worker is done
        self._done = True

    def stats(self) -> dict:
        return self.server.stats() if self.is_server() else {}


def merge(a: StepStats, b: StepStats | None) -> StepStats:
    """The local step's loss/accuracy with the commit's staleness and bytes."""
    if b is not None:
        a.staleness, a.bytes_sent = b.staleness, a.bytes_sent + b.bytes_sent
    return a


class WindowAlgorithm(PSAlgorithm):
    """Pull every ``n_fetch`` steps, local Opt steps, commit ``scale`` × the accumulated change every ``n_push``.

    DOWNPOUR (any n_fetch, n_push), A-SGD (both = n_sync), DynSGD (both = λ, scale 1),
    AGN / ADAG (both = λ, scale 1/λ). A commit that coincides with the next pull is one
    round trip (commit + pull).
    """

    def fetch_push(self) -> tuple[int, int, float]:
        raise NotImplementedError

    def setup(self, model, optimizer):
        super().setup(model, optimizer)
        if not self.is_server():
            self.acc = torch.zeros(self.numel, dtype=torch.float32)
            self._fresh = False  # θᵏ was just pulled by the last commit

    def step(self, x, y) -> StepStats:
        n_fetch, n_push, scale = self.fetch_push()
        if self.t % n_fetch == 0 and not self._fresh:
            self.pull()
        self._fresh = False
        before = self.flat()
        stats = self.local_step(x, y)
        self.acc += self.flat() - before
        if self.t % n_push == 0:
            pull = self.t % n_fetch == 0
            stats = merge(stats, self.commit(self.acc * scale if scale != 1.0 else self.acc, pull=pull))
            self.acc.zero_()
            self._fresh = pull
        return stats

    def flush(self) -> None:
        if self.acc.abs().max() > 0:  # the tail of an unfinished push window
            _, _, scale = self.fetch_push()
            self.commit(self.acc * scale if scale != 1.0 else self.acc)
            self.acc.zero_()


class CommitWindow(WindowAlgorithm):
    """Pull, λ = ``communication_window`` local steps, commit ``scale`` × the accumulated change and pull again
    (one round trip): DynSGD (scale 1), AGN and ADAG (scale 1/λ)."""

    @dataclass
    class Params(window_params(4), WindowAlgorithm.Params):
        """``communication_window`` λ: local steps accumulated before a worker commits and pulls."""

    def commit_scale(self) -> float:
        return 1.0

    @classmethod
    def validate(cls, params, cfg) -> None:
        super().validate(params, cfg)
        check_window(cls.name, params)

    def fetch_push(self):
        lam = self.p.communication_window
        return lam, lam, self.commit_scale()


class GradientAlgorithm(PSAlgorithm):
    """Workers commit raw gradients g = ∇L(θ_bak) computed at their last pulled θ̃ (= θ_bak) and
    get the new θ̃ back in the same round trip; the server's rule applies the step (SASGD, DC-ASGD).
    The worker's local optimizer is not used; the server's learning rate is the run's ``lr``."""

    keep_pulled = True

    def step(self, x, y) -> StepStats:
        if self.t == 0:
            self.pull()
        stats = self.forward_backward(x, y)
        grad = vectors.flat(p.grad for p in self.tensors).to(torch.float32)
        return merge(stats, self.commit(grad, pull=True))
