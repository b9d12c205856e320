"""Point-to-point communication: the one API for sending tensors between two ranks of the horovodrun job.

Horovod has no point-to-point (its maintainers declined it), so parameter-server and gossip
algorithms use a second transport, ``torch.distributed`` initialised from Horovod's rank and size
by :meth:`bench.comm.Comm.p2p`. This module is the only code that sends or receives on it; the
protocols built on it (:mod:`bench.comm.ps`, the parameter server; :mod:`bench.comm.pairwise`,
AD-PSGD's pairwise averaging) go through :class:`P2P` and :func:`wait_for`, never through
``torch.distributed`` themselves. Only tensors travel (no pickled objects off the wire); a
receiver always supplies the buffer, so the shape and dtype it accepts are fixed by the
receiver, never by the sender.

:meth:`P2P.exchange` is the one gossip primitive (SGP, FAST): post every receive and send
of a round together as one batch (``torch.distributed.batch_isend_irecv``), which NCCL needs to pair
a send and a receive with the same peer without deadlock and gloo runs as separate operations.

:meth:`P2P.channel` opens a second, independent channel over all ranks (its own process group,
created collectively), for a background thread that must not share a group with the main thread
(AD-PSGD's passive service). :func:`wait_for` is the one bounded wait: it waits on a handle with a
timeout and raises :class:`CommTimeout` (the one timeout error of ``bench.comm``) instead
of hanging when the peer died or went silent.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

__all__ = ["CommTimeout", "Exchange", "P2P", "WireError", "arm", "inbox", "room", "source_rank", "take", "wait_for"]

SPARE = 1024
"""Least room, in elements, past the expected end of every receive buffer (:func:`room`)."""
INT_SENTINEL = -0x2F2F2F2F2F2F2F2F
"""Marks an int64 receive buffer's last expected and first spare element (no valid header field holds it)."""
FLOAT_SENTINELS = {torch.float32: (torch.int32, -0x00200001), torch.float64: (torch.int64, -0x0008000000000001)}
"""Float dtype -> (the integer view of its bits, the bits of a NaN no valid (finite) vector holds)."""


class WireError(RuntimeError):
    """A message its receiver refuses, naming the sender: shorter or longer than expected, not finite, malformed."""


def room(numel: int) -> int:
    """Elements of a receive buffer for a message of ``numel``: twice as many (at least :data:`SPARE` more). gloo
    aborts the receiving process on a message longer than the buffer posted and accepts a shorter one silently;
    with this room, any message up to twice the expected length is refused naming its sender (:func:`take`). The
    room costs address space only: pages that no message reaches are never touched."""
    return numel + max(SPARE, numel)


def _bits(buf: torch.Tensor) -> tuple[torch.Tensor, int]:
    if buf.dtype == torch.int64:
        return buf, INT_SENTINEL
    view, sentinel = FLOAT_SENTINELS[buf.dtype]
    return buf.view(view), sentinel


def arm(buf: torch.Tensor, numel: int) -> torch.Tensor:
    """Before a receive of ``numel`` elements into ``buf``: the sentinel in its last expected and, when it has room,
    its first spare element (:func:`take` reads them). Returns ``buf``."""
    bits, sentinel = _bits(buf)
    bits[numel:numel + 1] = sentinel
    if numel:
        bits[numel - 1:numel] = sentinel
    return buf


def inbox(numel: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """An armed receive buffer for ``numel`` elements with :func:`room` (int64, float32 or float64)."""
    return arm(torch.empty(room(numel), dtype=dtype, device=device), numel)


def take(buf: torch.Tensor, numel: int, src: int, what: str, finite: bool = True) -> torch.Tensor:
    """The first ``numel`` elements of ``buf`` (armed by :func:`arm`) once a message from rank ``src`` arrived,
    checked: not shorter than ``numel`` (the last expected element still holds the sentinel), not longer (the first
    spare one does not), and with ``finite`` every value finite; WireError naming ``src`` and ``what`` otherwise."""
    bits, sentinel = _bits(buf)
    kind = str(buf.dtype).replace("torch.", "")
    if numel and int(bits[numel - 1]) == sentinel:
        raise WireError(f"rank {src}: short {what} (fewer than the {numel} {kind} elements expected)")
    if buf.numel() > numel and int(bits[numel]) != sentinel:
        raise WireError(f"rank {src}: {what} longer than the {numel} {kind} elements expected")
    out = buf[:numel]
    if finite and out.is_floating_point() and not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        raise WireError(f"rank {src}: {what} with {bad} non-finite value(s) (NaN or inf); refused")
    return out


class CommTimeout(RuntimeError):
    """A point-to-point message did not complete within its timeout (the peer died or went silent, or its
    connection closed): the one timeout error of :mod:`bench.comm` (raised by :func:`wait_for` and by the
    protocols built on it)."""


def wait_for(work, timeout_s: float, what: str) -> None:
    """Wait for a handle of :meth:`P2P.isend` / :meth:`P2P.irecv` at most ``timeout_s`` seconds; raise
    :class:`CommTimeout` naming ``what`` otherwise (gloo also raises on a closed connection)."""
    try:
        work.wait(datetime.timedelta(seconds=timeout_s))  # comm: wait for the send or receive with the peer to complete, at most timeout_s
    except RuntimeError as e:
        raise CommTimeout(f"{what}: no completion within {timeout_s:g} s ({e})".strip()) from e


def source_rank(work) -> int:
    """The sender of a completed receive-from-any (``irecv`` with ``src=None``; what ``dist.recv`` uses)."""
    return work._source_rank()


class P2P:
    """Blocking and non-blocking send/receive of tensors between ranks, on one process group."""

    def __init__(self, rank: int, size: int, group=None):
        self.rank = rank
        self.size = size
        self.group = group  # None: the default process group

    @classmethod
    def default(cls) -> "P2P":
        """The channel on the default process group (the one :meth:`bench.comm.Comm.p2p` opens), for a protocol
        object made without one."""
        return cls(dist.get_rank(), dist.get_world_size())

    def channel(self, backend: str = "gloo") -> "P2P":
        """A new channel over all ranks with its own process group: its messages never match this one's, and
        one thread per process may use it while another uses this one. Collective: every rank calls it, in the
        same order."""
        return P2P(self.rank, self.size, dist.new_group(backend=backend))  # comm: open a new process group over all ranks

    def _check_peer(self, peer: int | None) -> None:
        if peer is not None and not (0 <= peer < self.size and peer != self.rank):
            raise ValueError(f"invalid peer rank {peer} for rank {self.rank} of {self.size}")

    def send(self, tensor: torch.Tensor, dst: int, tag: int = 0) -> None:
        self._check_peer(dst)
        dist.send(tensor.contiguous(), dst=dst, tag=tag, group=self.group)  # comm: send the tensor to rank dst

    def recv(self, buffer: torch.Tensor, src: int | None = None, tag: int = 0) -> int:
        """Receive into ``buffer`` (from ``src``, or from any rank when None); returns the sender's rank."""
        self._check_peer(src)
        return dist.recv(buffer, src=src, tag=tag, group=self.group)  # comm: receive a tensor from rank src (any rank when None) into buffer

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0):
        """Non-blocking send; returns a work handle with ``wait()`` and ``is_completed()`` (wait with :func:`wait_for`)."""
        self._check_peer(dst)
        return dist.isend(tensor.contiguous(), dst=dst, tag=tag, group=self.group)  # comm: start sending the tensor to rank dst

    def irecv(self, buffer: torch.Tensor, src: int | None = None, tag: int = 0):
        """Non-blocking receive into ``buffer`` (from ``src``, or from any rank when None: the sender is then
        :func:`source_rank`); returns a work handle."""
        self._check_peer(src)
        return dist.irecv(buffer, src=src, tag=tag, group=self.group)  # comm: start receiving a tensor from rank src (any rank when None) into buffer

    def exchange(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]], tag: int = 0) -> "Exchange":
        """Start a round of point-to-point messages: ``sends`` (tensor, peer) and ``recvs`` (a tensor of the shape and
        dtype expected, peer). Over gloo each message is received with room and checked (:func:`take`: not short, not
        long, finite); over NCCL, whose receives must match their sends' length, into the tensor itself, checked
        finite."""
        roomy = dist.get_backend(self.group) == "gloo"
        ops, boxes = [], []
        for buf, src in recvs:
            self._check_peer(src)
            box = inbox(buf.numel(), buf.dtype, buf.device) if roomy else arm(buf, buf.numel())
            ops.append(dist.P2POp(dist.irecv, box, src, tag=tag, group=self.group))
            boxes.append((box, buf, src))
        for tensor, dst in sends:
            self._check_peer(dst)
            ops.append(dist.P2POp(dist.isend, tensor.contiguous(), dst, tag=tag, group=self.group))
        return Exchange(dist.batch_isend_irecv(ops) if ops else [], boxes, tag)  # comm: start the round's sends to and receives from the peers, as one batch

    def close(self) -> None:
        """Nothing to release beyond the process group, which :meth:`Comm.shutdown` destroys."""


class Exchange:
    """The handles of one :meth:`P2P.exchange` round; :meth:`wait` returns the received messages, checked."""

    def __init__(self, works: list, boxes: list[tuple[torch.Tensor, torch.Tensor, int]], tag: int = 0):
        self.works, self.boxes, self.tag = works, boxes, tag

    def wait(self) -> list[torch.Tensor]:
        """The received messages (shaped as the tensors given), each checked (:func:`take`); WireError naming the
        sender of one refused."""
        for w in self.works:
            w.wait()  # comm: wait for the round's sends and receives to complete
        self.works = []
        return [take(box, like.numel(), src, f"message (tag {self.tag})").view(like.shape)
                for box, like, src in self.boxes]

    def done(self) -> bool:
        return all(w.is_completed() for w in self.works)
