"""A real asynchronous parameter server over the point-to-point transport (raw tensors only).

Its messages travel through :class:`bench.comm.p2p.P2P` (the channel :meth:`bench.comm.Comm.p2p` opened,
given to :class:`PSServer` / :class:`PSClient`), and every wait is :func:`bench.comm.p2p.wait_for`.

Placement: the server is a **dedicated rank** of the horovodrun job (the last rank; ``--np``
counts workers, so a PS run launches np + 1 processes). It holds the centre variable θ̃ as
one flat float32 vector and applies every commit the moment it arrives, with no barrier
between workers: a receive from any worker, then the update, then the reply. One server
serialises all commits (the single-server bottleneck: its commit rate is bounded by one
memory pass over θ̃ per commit plus the socket copy; see ``python -m bench.perf ps``).
Sharding θ̃ over several server ranks is not implemented.

Fairness: with gloo, the receive from any worker serves equal workers evenly (measured:
``tests/parallel/test_parameter_server.py`` saturates the server with four workers that only commit
and checks the spread of the per-worker counts). :meth:`PSServer.stats` reports the commits served
per worker while every worker is active (``ps_commits_served``: from the last worker's first message
to the first DONE) and their spread; uneven counts in a real run come from workers computing at
different speeds (compare their reply waits, ``comm_s``, in the step records).

Wire protocol (every message is a fixed-size int64 header, then at most one flat vector):

    worker -> server  header [MAGIC, kind, worker_rank, clock, numel, flags]     tag PS_HEADER
                      payload float32[numel] (COMMIT only)                       tag PS_DATA
    server -> worker  reply  [clock, tau, updates]                               tag PS_REPLY
                      centre float32[numel] (PULL, or COMMIT with F_PULL)        tag PS_CENTRE

(the tags: :mod:`bench.comm.tags`)

kinds: PULL, COMMIT, DONE, SNAP. SNAP (from rank 0 at its evaluation points, sent without waiting)
asks the server to keep a copy of θ̃ for evaluation after training; it carries rank 0's step in the
``clock`` field and, when the model has buffers (BatchNorm's running statistics, which are not part
of θ̃), those buffers as a float32 payload of ``numel`` elements (tag PS_DATA). DONE carries the same
buffers the same way, so the final centre is evaluated with the running statistics of rank 0. flags: F_SNAPSHOT (a pull that starts a new window: the server
keeps the worker's pulled copy of θ̃ when the rule needs it, e.g. ADAG's θ̃_{t−τ}, DC-ASGD's
θ_bak), F_PULL (a commit that also returns the new centre: one round trip instead of two).

Staleness: the server keeps a clock (number of updates applied to θ̃). A pull returns the
clock; the worker echoes the clock of its last window-starting pull in the ``clock`` field of
its commit, and the server computes τ = clock_now − clock_at_pull, passes τ to the update
rule (DynSGD, SASGD) and returns it in the reply, where the worker records it in its step.

Validation: the server rejects (raises :class:`PSProtocolError`, which fails the run with a
message naming the sender) a wrong magic, an unknown kind, a worker field that is not the
sending rank, a size that is not the centre's, a clock from the future, a SNAP with a negative
step, a commit or buffers with a non-finite value (NaN, ±inf: they would poison θ̃), any message
from a rank that is not a worker, and any message from a worker after its DONE. Every header and
payload is checked for its length: gloo accepts a message shorter than the receive buffer (the rest of
the buffer keeps what it held) and aborts the process on a longer one, so each receive posts a buffer with room
(:func:`bench.comm.p2p.room`: a header :data:`SPARE` int64 longer, a payload twice as long as expected), filled with
a sentinel where the message must end: a short message leaves the sentinel in its last element, a long one (up to
the room) overwrites the first spare one; both are refused naming the sender, never an abort. A message longer than
the room still aborts the server inside gloo (which checks the length only after matching the receive, and cannot
be told to refuse instead); the suite's own senders never send one (a commit's length is checked before it leaves,
:meth:`PSClient.commit`). Receives have a timeout: a worker that dies or goes silent ends
the server with a :class:`bench.comm.CommTimeout` naming the ranks that had not finished, never a hang.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from . import tags
from .p2p import INT_SENTINEL, SPARE, P2P, CommTimeout, WireError, arm, room, source_rank, take, wait_for

MAGIC = 0x50535631  # "PSV1"
PULL, COMMIT, DONE, SNAP = 1, 2, 3, 4
KINDS = {PULL: "PULL", COMMIT: "COMMIT", DONE: "DONE", SNAP: "SNAP"}
F_SNAPSHOT, F_PULL = 1, 2
HEADER_LEN, REPLY_LEN = 6, 3
HEADER_SENTINEL = INT_SENTINEL  # no field of a valid header holds it

# apply(centre, payload, tau, worker, pulled) -> True when θ̃ changed (the clock advances)
UpdateRule = Callable[[torch.Tensor, torch.Tensor, int, int, "torch.Tensor | None"], bool]


class PSProtocolError(WireError):
    """A message the server does not accept."""


def check_header(h: list[int], src: int, workers: set[int], numel: int, clock: int, buffers_numel: int = 0) -> None:
    """Raise PSProtocolError unless ``h`` (a received header) is a valid message from rank ``src``."""
    magic, kind, worker, wclock, n, flags = h
    if src not in workers:
        raise PSProtocolError(f"message from rank {src}, which is not a worker (workers: {sorted(workers)})")
    if magic != MAGIC:
        raise PSProtocolError(f"rank {src}: bad magic {magic:#x} (expected {MAGIC:#x}): not a parameter-server message")
    if kind not in KINDS:
        raise PSProtocolError(f"rank {src}: unknown message kind {kind}; valid: {KINDS}")
    if worker != src:
        raise PSProtocolError(f"rank {src}: header claims worker {worker}")
    if kind == COMMIT and n != numel:
        raise PSProtocolError(f"rank {src}: commit of {n} elements, the centre has {numel}")
    if kind == COMMIT and not 0 <= wclock <= clock:
        raise PSProtocolError(f"rank {src}: commit based on clock {wclock}, server clock is {clock}")
    if kind == SNAP and wclock < 0:
        raise PSProtocolError(f"rank {src}: SNAP at step {wclock}; a step is >= 0")
    if kind in (SNAP, DONE) and n not in (0, buffers_numel):
        raise PSProtocolError(f"rank {src}: {KINDS[kind]} with {n} buffer elements, the model has {buffers_numel}")
    if flags & ~(F_SNAPSHOT | F_PULL):
        raise PSProtocolError(f"rank {src}: unknown flags {flags:#x}")


def received_header(buf: torch.Tensor, src: int) -> list[int]:
    """The header in ``buf`` (HEADER_LEN + SPARE int64, filled with HEADER_SENTINEL before the receive), checked
    for its length; PSProtocolError naming ``src`` if the message was shorter or longer than a header."""
    h = buf[:HEADER_LEN + 1].tolist()
    if HEADER_SENTINEL in h[:HEADER_LEN]:
        got = h.index(HEADER_SENTINEL)
        raise PSProtocolError(f"rank {src}: short header ({got} of {HEADER_LEN} int64 fields arrived)")
    if h[HEADER_LEN] != HEADER_SENTINEL:
        raise PSProtocolError(f"rank {src}: header longer than {HEADER_LEN} int64 fields")
    return h[:HEADER_LEN]


def payload_buffer(numel: int) -> torch.Tensor:
    """A receive buffer for a float32 vector of ``numel`` elements, with the room :func:`received_payload` checks."""
    return torch.empty(room(numel), dtype=torch.float32)


def received_payload(buf: torch.Tensor, numel: int, src: int, what: str) -> torch.Tensor:
    """The first ``numel`` elements of ``buf`` (armed by :func:`bench.comm.p2p.arm`), checked for length and
    finiteness (:func:`bench.comm.p2p.take`); PSProtocolError naming ``src`` and ``what`` otherwise."""
    try:
        return take(buf, numel, src, what)
    except WireError as e:
        raise PSProtocolError(str(e)) from None


def served_spread(served: list[int]) -> float | None:
    """(max − min) / max of the per-worker served counts (0 = perfectly even); None when nothing was served."""
    return (max(served) - min(served)) / max(served) if served and max(served) > 0 else None


class PSServer:
    """Serve ``centre`` to ``workers`` until each has sent DONE; apply commits with ``rule``.

    ``on_snapshot(step, centre, buffers)`` is called for every SNAP (``buffers``: the float32 vector
    sent with it, or None); the last buffers received (SNAP or DONE) are kept in ``self.buffers``. ``p2p``: the
    channel to serve on (default: the default process group's)."""

    def __init__(self, centre: torch.Tensor, workers: list[int], rule: UpdateRule, keep_pulled: bool = False,
                 timeout_s: float = 120.0, buffers_numel: int = 0, on_snapshot: Callable | None = None,
                 p2p: P2P | None = None):
        self.p2p = p2p if p2p is not None else P2P.default()
        self.centre = centre.detach().clone().contiguous()
        self.numel = self.centre.numel()
        self.workers = set(workers)
        self.rule, self.keep_pulled, self.timeout_s = rule, keep_pulled, timeout_s
        self.clock = 0
        self.commits = self.pulls = 0
        self.taus: list[int] = []
        self.pulled: dict[int, torch.Tensor] = {}
        self.commits_by_worker = {w: 0 for w in workers}
        self.served_at: dict[int, list[float]] = {w: [] for w in workers}  # time.time() of each commit served
        self.first_heard: dict[int, float] = {}  # time.time() of each worker's first message
        self.first_done_at: float | None = None  # the end of the window in which every worker is active
        self.last_heard = {w: time.time() for w in workers}
        self._hdr = torch.empty(HEADER_LEN + SPARE, dtype=torch.int64)
        self._payload = payload_buffer(self.numel)
        self.buffers_numel, self.on_snapshot = buffers_numel, on_snapshot
        self.buffers: torch.Tensor | None = None

    def _receive_buffers(self, src: int, n: int) -> torch.Tensor | None:
        if n == 0:
            return None
        buf = payload_buffer(n)
        arm(buf, n)
        wait_for(self.p2p.irecv(buf, src=src, tag=tags.PS_DATA), self.timeout_s,  # comm: receive the buffers from the worker
                 f"buffers from rank {src}")
        self.buffers = received_payload(buf, n, src, "buffers")
        return self.buffers

    def serve(self) -> None:
        pending = set(self.workers)
        while pending:
            self._hdr.fill_(HEADER_SENTINEL)
            work = self.p2p.irecv(self._hdr, src=None, tag=tags.PS_HEADER)  # comm: post the receive of a header from any worker
            try:
                wait_for(work, self.timeout_s, "parameter server")  # comm: wait for a header from any worker
            except CommTimeout as e:
                now = time.time()
                silent = ", ".join(f"rank {w} (last heard {now - self.last_heard[w]:.1f} s ago)" for w in sorted(pending))
                raise CommTimeout(f"no message within {self.timeout_s:g} s; workers not done: {silent}; {e}") from e
            src = source_rank(work)
            h = received_header(self._hdr, src)
            check_header(h, src, self.workers, self.numel, self.clock, self.buffers_numel)
            if src not in pending:
                raise PSProtocolError(f"rank {src}: {KINDS[h[1]]} after DONE")
            self.last_heard[src] = time.time()
            self.first_heard.setdefault(src, self.last_heard[src])
            _, kind, _, wclock, n, flags = h
            if kind in (DONE, SNAP):
                buffers = self._receive_buffers(src, n)
                if kind == DONE:
                    pending.discard(src)
                    if self.first_done_at is None:
                        self.first_done_at = time.time()
                elif self.on_snapshot is not None:
                    self.on_snapshot(wclock, self.centre, buffers)
                continue
            tau = 0
            if kind == COMMIT:
                arm(self._payload, self.numel)
                wait_for(self.p2p.irecv(self._payload, src=src, tag=tags.PS_DATA), self.timeout_s,  # comm: receive the commit's payload from the worker
                         f"payload from rank {src}")
                payload = received_payload(self._payload, self.numel, src, "commit")
                tau = self.clock - wclock
                if self.rule(self.centre, payload, tau, src, self.pulled.get(src)):
                    self.clock += 1
                self.commits += 1
                self.commits_by_worker[src] += 1
                self.served_at[src].append(time.time())
                self.taus.append(tau)
            reply = torch.tensor([self.clock, tau, self.commits], dtype=torch.int64)
            self.p2p.send(reply, src, tag=tags.PS_REPLY)  # comm: send the reply (clock, τ, updates) to the worker
            if kind == PULL or flags & F_PULL:
                self.pulls += 1
                self.p2p.send(self.centre, src, tag=tags.PS_CENTRE)  # comm: send the centre θ̃ to the worker
                if self.keep_pulled and flags & F_SNAPSHOT:
                    self.pulled.setdefault(src, torch.empty_like(self.centre)).copy_(self.centre)

    def served_all_active(self) -> list[int]:
        """Commits served per worker (sorted by rank) while every worker is active: from the moment the last
        worker's first message arrived to the first DONE (after it, the others naturally get more)."""
        start = max(self.first_heard.values()) if len(self.first_heard) == len(self.workers) else float("inf")
        end = self.first_done_at if self.first_done_at is not None else float("inf")
        return [sum(1 for t in self.served_at[w] if start <= t <= end) for w in sorted(self.served_at)]

    def stats(self) -> dict:
        served = self.served_all_active()
        hist = torch.bincount(torch.tensor(self.taus, dtype=torch.int64)).tolist() if self.taus else []
        return {"ps_commits": self.commits, "ps_updates": self.clock, "ps_pulls": self.pulls,
                "ps_staleness_mean": (sum(self.taus) / len(self.taus)) if self.taus else None,
                "ps_staleness_max": max(self.taus) if self.taus else None, "ps_staleness_hist": hist,
                "ps_commits_by_worker": [self.commits_by_worker[w] for w in sorted(self.commits_by_worker)],
                "ps_commits_served": served, "ps_served_spread_all_active": served_spread(served)}


class PSClient:
    """A worker's end: pull the centre, commit a vector, say done. ``p2p``: the channel to the server (default: the
    default process group's)."""

    def __init__(self, rank: int, server: int, numel: int, timeout_s: float = 120.0, p2p: P2P | None = None):
        self.rank, self.server, self.numel, self.timeout_s = rank, server, numel, timeout_s
        self.p2p = p2p if p2p is not None else P2P.default()
        self._sent: list = []  # (handle, tensor) of the SNAP messages sent without waiting, released by done()
        self._reply = torch.empty(room(REPLY_LEN), dtype=torch.int64)
        self._centre = payload_buffer(numel)  # the centre is received here (with room: checked), then copied
        self.clock = 0  # server clock returned by the last window-starting pull
        self.header_bytes = HEADER_LEN * 8

    def _header(self, kind: int, clock: int, numel: int, flags: int) -> torch.Tensor:
        return torch.tensor([MAGIC, kind, self.rank, clock, numel, flags], dtype=torch.int64)

    def _exchange(self, header: torch.Tensor, payload: torch.Tensor | None, into: torch.Tensor | None) -> tuple[int, int]:
        rw = self.p2p.irecv(arm(self._reply, REPLY_LEN), src=self.server, tag=tags.PS_REPLY)  # comm: post the receive of the server's reply first
        cw = (self.p2p.irecv(arm(self._centre, self.numel), src=self.server, tag=tags.PS_CENTRE)  # comm: post the receive of θ̃ from the server
              if into is not None else None)
        self.p2p.send(header, self.server, tag=tags.PS_HEADER)  # comm: send the header to the server
        if payload is not None:
            self.p2p.send(payload, self.server, tag=tags.PS_DATA)  # comm: send the commit's payload to the server
        wait_for(rw, self.timeout_s,  # comm: receive the server's reply
                 f"rank {self.rank}: reply from the parameter server (rank {self.server})")
        if cw is not None:
            wait_for(cw, self.timeout_s,  # comm: receive the centre θ̃ from the server
                     f"rank {self.rank}: centre from the parameter server (rank {self.server})")
            into.copy_(take(self._centre, self.numel, self.server, "centre").view_as(into))
        clock, tau, _ = take(self._reply, REPLY_LEN, self.server, "reply").tolist()
        return clock, tau

    def pull(self, into: torch.Tensor, snapshot: bool = True) -> int:
        """Copy θ̃ into ``into``; a snapshot pull starts a window (τ of the next commit counts from it)."""
        clock, _ = self._exchange(self._header(PULL, 0, 0, F_SNAPSHOT if snapshot else 0), None, into)
        if snapshot:
            self.clock = clock
        return clock

    def commit(self, payload: torch.Tensor, into: torch.Tensor | None = None) -> int:
        """Send ``payload`` for the server's rule; returns τ. With ``into``, also pull (a snapshot pull)."""
        if payload.numel() != self.numel or payload.dtype != torch.float32:
            raise ValueError(f"commit of {payload.numel()} {payload.dtype} elements, the centre has {self.numel} float32")
        flags = (F_PULL | F_SNAPSHOT) if into is not None else 0
        clock, tau = self._exchange(self._header(COMMIT, self.clock, self.numel, flags), payload, into)
        if into is not None:
            self.clock = clock
        return tau

    def _notify(self, kind: int, step: int, buffers: torch.Tensor | None) -> list:
        """Send a header (and ``buffers``) without waiting; returns (handle, tensor) pairs to keep until complete."""
        header = self._header(kind, step, 0 if buffers is None else buffers.numel(), 0)
        sent = [(self.p2p.isend(header, self.server, tag=tags.PS_HEADER), header)]  # comm: send the header to the server
        if buffers is not None:
            buffers = buffers.contiguous()
            sent.append((self.p2p.isend(buffers, self.server, tag=tags.PS_DATA), buffers))  # comm: send the buffers to the server
        return sent

    def snapshot(self, step: int, buffers: torch.Tensor | None = None) -> None:
        """Ask the server to keep θ̃ for evaluation (rank 0's ``buffers`` with it); never waits (the worker goes on
        at once): :meth:`done` releases the sends."""
        self._sent += self._notify(SNAP, step, buffers)

    def done(self, buffers: torch.Tensor | None = None) -> None:
        """Release the SNAP messages (sent long ago), then say DONE (with rank 0's ``buffers``) and wait until it left."""
        for work, _ in self._sent:
            wait_for(work, self.timeout_s, f"rank {self.rank}: SNAP to the parameter server")  # comm: wait until a SNAP's send to the server has ended
        self._sent = []
        for work, _ in self._notify(DONE, 0, buffers):
            wait_for(work, self.timeout_s, f"rank {self.rank}: DONE to the parameter server")  # comm: wait until the DONE's send to the server has ended
