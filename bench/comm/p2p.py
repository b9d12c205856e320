"""Point-to-point transport: raw tensors over ``torch.distributed`` inside the horovodrun job.

Horovod has no point-to-point (its maintainers declined it), so parameter-server and gossip
algorithms use this second transport, initialised from Horovod's rank and size by
:meth:`bench.comm.Comm.p2p`. Only tensors travel (no pickled objects off the wire); a
receiver always supplies the buffer, so the shape and dtype it accepts are fixed by the
receiver, never by the sender.

:meth:`P2P.exchange` is the one gossip primitive (SGP, AD-PSGD, FAST): post every receive and send
of a round together as one batch (``torch.distributed.batch_isend_irecv``), which NCCL needs to pair
a send and a receive with the same peer without deadlock and gloo runs as separate operations.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class P2P:
    """Blocking and non-blocking send/receive of tensors between ranks."""

    def __init__(self, comm):
        self.rank = comm.rank
        self.size = comm.size

    def _check_peer(self, peer: int | None) -> None:
        if peer is not None and not (0 <= peer < self.size and peer != self.rank):
            raise ValueError(f"invalid peer rank {peer} for rank {self.rank} of {self.size}")

    def send(self, tensor: torch.Tensor, dst: int, tag: int = 0) -> None:
        self._check_peer(dst)
        dist.send(tensor.contiguous(), dst=dst, tag=tag)  # comm:

    def recv(self, buffer: torch.Tensor, src: int | None = None, tag: int = 0) -> int:
        """Receive into ``buffer`` (from ``src``, or from any rank when None); returns the sender's rank."""
        self._check_peer(src)
        return dist.recv(buffer, src=src, tag=tag)  # comm:

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0):
        """Non-blocking send; returns a work handle with ``wait()`` and ``is_completed()``."""
        self._check_peer(dst)
        return dist.isend(tensor.contiguous(), dst=dst, tag=tag)  # comm:

    def irecv(self, buffer: torch.Tensor, src: int | None = None, tag: int = 0):
        """Non-blocking receive into ``buffer``; returns a work handle."""
        self._check_peer(src)
        return dist.irecv(buffer, src=src, tag=tag)  # comm:

    def exchange(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]], tag: int = 0) -> "Exchange":
        """Start a round of point-to-point messages: ``sends`` (tensor, peer) and ``recvs`` (buffer, peer)."""
        ops = []
        for buf, src in recvs:
            self._check_peer(src)
            ops.append(dist.P2POp(dist.irecv, buf, src, tag=tag))
        for tensor, dst in sends:
            self._check_peer(dst)
            ops.append(dist.P2POp(dist.isend, tensor.contiguous(), dst, tag=tag))
        return Exchange(dist.batch_isend_irecv(ops) if ops else [], [b for b, _ in recvs])  # comm:

    def close(self) -> None:
        """Nothing to release beyond the process group, which :meth:`Comm.shutdown` destroys."""


class Exchange:
    """The handles of one :meth:`P2P.exchange` round; the received buffers are valid after :meth:`wait`."""

    def __init__(self, works: list, buffers: list[torch.Tensor]):
        self.works, self.buffers = works, buffers

    def wait(self) -> list[torch.Tensor]:
        for w in self.works:
            w.wait()  # comm:
        self.works = []
        return self.buffers

    def done(self) -> bool:
        return all(w.is_completed() for w in self.works)
