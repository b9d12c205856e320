"""Atomic pairwise exchanges of vectors over the point-to-point transport (AD-PSGD's averaging).

An *active* rank gives a *passive* rank its vector and receives the passive's in one request
(:meth:`PairwiseChannel.swap`); the passive serves requests from any active, in a service thread,
until every active it serves has said DONE (:meth:`PairwiseChannel.requests`, then
:meth:`~PairwiseChannel.receive` and :meth:`~PairwiseChannel.reply` for each request). What both do
with the two vectors (AD-PSGD: both assign their average), and what makes it atomic on the passive
(a lock held from the receive to the assignment), is the caller's.

Wire protocol, on a channel of its own (:meth:`bench.comm.p2p.P2P.channel`, opened by
:meth:`bench.comm.Comm.pairwise`); every message is an int64 header or one flat vector:

    active -> passive  header [MAGIC, AVG, active_rank, step]    tag PAIRWISE_HEADER
                       x_active (the passive's numel and dtype)   tag PAIRWISE_DATA
    passive -> active  x_passive                                  tag PAIRWISE_REPLY
    active -> passive  header [MAGIC, DONE, active_rank, step]   tag PAIRWISE_HEADER   (once, at the end)

(the tags: :mod:`bench.comm.tags`)

The passive refuses (a :class:`bench.comm.p2p.WireError` naming the sender) a header with a wrong magic, an unknown
kind, a rank field that is not the sending rank, or a sender that is not an active it serves or has said DONE; both
ends refuse a header or vector shorter or longer than expected, or a vector with a value that is not finite
(:func:`bench.comm.p2p.take`). Every wait is bounded (:func:`bench.comm.p2p.wait_for`): a dead or silent peer raises
:class:`bench.comm.CommTimeout` naming it, never a hang.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import torch

from . import tags
from .p2p import P2P, CommTimeout, WireError, arm, inbox, room, source_rank, take, wait_for

MAGIC = 0x41445047  # "ADPG"
AVG, DONE = 1, 2
HEADER_LEN = 4


class PairwiseChannel:
    """One rank's end of the pairwise protocol: :meth:`swap` and :meth:`done` (active), :meth:`requests`,
    :meth:`receive` and :meth:`reply` (passive, in its service thread)."""

    def __init__(self, chan: P2P, timeout_s: float, label: str = "pairwise"):
        self.chan, self.rank, self.timeout_s, self.label = chan, chan.rank, timeout_s, label
        self.header_bytes = HEADER_LEN * 8

    def _header(self, kind: int, step: int) -> torch.Tensor:
        return torch.tensor([MAGIC, kind, self.rank, step], dtype=torch.int64)

    # -- active side -----------------------------------------------------------------------
    def swap(self, partner: int, mine: torch.Tensor, step: int) -> torch.Tensor:
        """Send a request and ``mine`` to passive ``partner``; return the partner's vector (``mine``'s shape and
        dtype) once it has arrived, checked (:func:`bench.comm.p2p.take`: its length, every value finite)."""
        theirs = inbox(mine.numel(), mine.dtype)
        what = f"rank {self.rank}: averaging with passive rank {partner}"
        reply = self.chan.irecv(theirs, src=partner, tag=tags.PAIRWISE_REPLY)  # comm: post the receive of x_passive from the passive first
        request = self._header(AVG, step)
        wait_for(self.chan.isend(request, partner, tag=tags.PAIRWISE_HEADER), self.timeout_s, what)  # comm: send the AVG request to the passive
        wait_for(self.chan.isend(mine, partner, tag=tags.PAIRWISE_DATA), self.timeout_s, what)  # comm: send x_active to the passive
        wait_for(reply, self.timeout_s, what)  # comm: receive x_passive from the passive
        return take(theirs, mine.numel(), partner, f"{self.label}: x_passive").view_as(mine)

    def done(self, passives: Iterable[int], step: int) -> None:
        """Tell every one of ``passives`` that this active sends no more requests."""
        for j in passives:
            wait_for(self.chan.isend(self._header(DONE, step), j, tag=tags.PAIRWISE_HEADER),  # comm: send DONE to passive j
                     self.timeout_s, f"{self.label}: rank {self.rank}: DONE to passive rank {j}")

    # -- passive side ----------------------------------------------------------------------
    def requests(self, actives: Iterable[int]) -> Iterator[int]:
        """The rank of each active that requests an exchange, in the order the requests arrive, until every one of
        ``actives`` has sent DONE. The caller answers each request (:meth:`receive`, then :meth:`reply`) before it
        asks for the next one."""
        pending = set(actives)
        hdr = torch.empty(room(HEADER_LEN), dtype=torch.int64)
        me = self.rank
        while pending:
            work = self.chan.irecv(arm(hdr, HEADER_LEN), src=None, tag=tags.PAIRWISE_HEADER)  # comm: receive a request header from any active
            try:
                wait_for(work, self.timeout_s, f"rank {me} (passive)")
            except CommTimeout as e:
                raise CommTimeout(f"{self.label}: passive rank {me} heard from no active within {self.timeout_s:g} s; "
                                  f"actives not done: {sorted(pending)}; {e}") from e
            src = source_rank(work)
            magic, kind, sender, _ = take(hdr, HEADER_LEN, src, f"{self.label}: request header to passive rank {me}").tolist()
            if magic != MAGIC or sender != src or src not in pending or kind not in (AVG, DONE):
                raise WireError(f"{self.label}: passive rank {me}: bad request {hdr[:HEADER_LEN].tolist()} from rank "
                                f"{src} (active neighbours not done: {sorted(pending)})")
            if kind == DONE:
                pending.discard(src)
                continue
            yield src

    def _serving(self, src: int) -> str:
        return f"{self.label}: passive rank {self.rank}: averaging requested by rank {src}"

    def receive(self, src: int, into: torch.Tensor) -> torch.Tensor:
        """The requesting active's vector, received with room, checked (:func:`bench.comm.p2p.take`: its length,
        every value finite) and copied into ``into`` (returned)."""
        box = inbox(into.numel(), into.dtype)
        wait_for(self.chan.irecv(box, src=src, tag=tags.PAIRWISE_DATA), self.timeout_s,  # comm: receive x_active from the active
                 self._serving(src))
        return into.copy_(take(box, into.numel(), src, f"{self._serving(src)}: x_active").view_as(into))

    def reply(self, src: int, mine: torch.Tensor) -> None:
        """Send ``mine`` to the requesting active (the end of its :meth:`swap`)."""
        wait_for(self.chan.isend(mine, src, tag=tags.PAIRWISE_REPLY), self.timeout_s,  # comm: send x_passive to the active
                 self._serving(src))
