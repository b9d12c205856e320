"""What a job's communicator has whatever runtime the job started: the job's rank, size and local rank, the
collectives every algorithm and the worker loop may use (declared here, implemented per runtime), and
``torch.distributed`` inside the job (DDP's process group, the point-to-point transport), opened on first use.

Two runtimes implement it: :class:`bench.comm.Comm` (Horovod: ``hvd.init()``, its background thread and its
collectives) and :class:`bench.comm.torch_runtime.TorchComm` (torch.distributed alone, for the algorithms that
never call Horovod; ``Algorithm.runtime``). :func:`bench.comm.open_comm` starts the one a job needs.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from typing import ClassVar

import torch

from .p2p import P2P
from .pairwise import PairwiseChannel


class CommBase:
    """Rank, size, the harness's collectives and the torch.distributed transport of one horovodrun job."""

    runtime: ClassVar[str] = ""
    """What the job started: ``horovod`` (``hvd.init()``: Horovod's controller and background thread) or ``torch``
    (torch.distributed's default group only, no Horovod thread in the process)."""
    horovod_tids: frozenset[int] = frozenset()
    """The threads ``hvd.init()`` started (labelled ``horovod`` in the CPU record); none without Horovod."""
    wait_sleep_s: float | None = None
    """The adaptive wait's longest sleep for Horovod's collectives (``horovod.wait_sleep_us``); None: not used."""
    wait_spin_s: float = 0.0

    def __init__(self, rank: int, size: int, local_rank: int, local_size: int, network_interface: str = "",
                 p2p_backend: str = "auto"):
        self.rank, self.size, self.local_rank, self.local_size = rank, size, local_rank, local_size
        self.network_interface = network_interface
        self.p2p_backend = p2p_backend
        self._p2p = None
        self._torch_dist = False

    def record(self) -> dict:
        """What this rank's process holds, as observed (``system.json``'s ``runtime``): the runtime started, whether
        Horovod's module is loaded, its library mapped into the process and Horovod initialised (its controller and
        background thread running), and the
        torch.distributed backend when the default group is open (None otherwise)."""
        hvd = sys.modules.get("horovod.torch")
        try:
            with open("/proc/self/maps") as f:  # Horovod's C++ library (its controller, background thread) mapped
                mapped = any("horovod" in line for line in f)
        except OSError:  # not Linux
            mapped = None
        return {"name": self.runtime, "horovod_loaded": hvd is not None, "horovod_library_mapped": mapped,
                "horovod_initialized": bool(hvd is not None and hvd.is_initialized()),
                "torch_distributed": self.backend() if self._torch_dist else None}

    # -- the collectives of every runtime (control data, state at a start, evaluation) ---------------
    def allreduce_(self, tensor: torch.Tensor, name: str | None = None, average: bool = True) -> torch.Tensor:
        """In-place blocking allreduce (mean by default)."""
        raise NotImplementedError

    def broadcast_parameters(self, state_dict, root: int = 0) -> None:
        """Rank ``root``'s tensors of ``state_dict`` on every rank, in place."""
        raise NotImplementedError

    def broadcast_optimizer_state(self, optimizer, root: int = 0) -> None:
        """Rank ``root``'s optimizer state on every rank. An optimizer that has not stepped yet has no state to send
        (its hyperparameters are equal by construction), so nothing is sent then (every rank decides alike)."""
        raise NotImplementedError

    def broadcast_state(self, model, optimizer=None, root: int = 0) -> None:
        """A common start: rank ``root``'s parameters and buffers (and optimizer state) on every rank."""
        self.broadcast_parameters(model.state_dict(), root)  # comm: broadcast rank root's parameters and buffers to every rank
        if optimizer is not None:
            self.broadcast_optimizer_state(optimizer, root)  # comm: broadcast rank root's optimizer state to every rank

    def broadcast_object(self, obj, root: int = 0, name: str = "bench.object"):
        """Broadcast a picklable object (control data only, never training tensors)."""
        raise NotImplementedError

    def allgather_object(self, obj, name: str = "bench.gather") -> list:
        """Every rank's picklable object, in rank order, on every rank."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Return once every rank has reached this point."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Close the transport and the runtime (every rank)."""
        self.close_torch_distributed()

    # -- torch.distributed (DDP and the point-to-point transport) -------------------------------------
    def host_address(self) -> str:
        """Address other ranks reach this host on: the configured interface's, else loopback or hostname."""
        if self.network_interface:
            import psutil

            for addr in psutil.net_if_addrs().get(self.network_interface, []):
                if addr.family == socket.AF_INET:
                    return addr.address
            raise RuntimeError(f"network interface {self.network_interface!r} has no IPv4 address on {socket.gethostname()}")
        if self.size == self.local_size:
            return "127.0.0.1"  # single host: bind to loopback only
        return socket.gethostbyname(socket.gethostname())

    def use_any_source_backend(self) -> None:
        """The caller receives from any rank (a parameter server, a passive gossip worker), which NCCL cannot: with
        ``p2p_backend`` auto the transport opens with gloo, also on GPU (GPU tensors are staged through host memory).
        Call it before the transport opens (:meth:`p2p`); an explicit backend is left as it is (validation refuses
        nccl for such algorithms before launch)."""
        if self.p2p_backend == "auto":
            self.p2p_backend = "gloo"

    def backend(self) -> str:
        if self.p2p_backend != "auto":
            return self.p2p_backend
        return "nccl" if torch.cuda.is_available() else "gloo"

    def publish_store(self, addr_port: tuple[str, int] | None) -> tuple[str, int]:
        """Rank 0's ``addr_port`` (None elsewhere) on every rank: the rendezvous of torch.distributed's store."""
        raise NotImplementedError

    def init_torch_distributed(self, timeout_s: float = 300.0) -> None:
        """Initialise the default torch.distributed group over the job's ranks (once)."""
        import torch.distributed as dist

        if self._torch_dist:
            return
        addr_port, listening = None, None
        if self.rank == 0:  # the store listens on the job's address only (a socket bound there, handed to the store)
            listening = socket.socket()
            listening.bind((self.host_address(), 0))
            listening.listen(128)
            addr_port = listening.getsockname()[:2]
        addr, port = self.publish_store(addr_port)  # comm: rank 0's store address to every rank (the runtime's rendezvous)
        if self.backend() == "gloo" and self.network_interface:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", self.network_interface)
        elif self.backend() == "gloo" and addr == "127.0.0.1":
            os.environ.setdefault("GLOO_SOCKET_IFNAME", _loopback_interface())
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(addr, port, self.size, self.rank == 0, timeout, wait_for_workers=False,  # comm: connect to rank 0's store (rank 0 serves it on the socket bound above)
                              master_listen_fd=listening.detach() if listening is not None else None)
        dist.init_process_group(self.backend(), store=store, rank=self.rank,  # comm: join torch.distributed's default group of all ranks
                                world_size=self.size, timeout=timeout)
        self._torch_dist = True

    def close_torch_distributed(self) -> None:
        if self._p2p is not None:
            self._p2p.close()
            self._p2p = None
        if self._torch_dist:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._torch_dist = False

    def p2p(self, timeout_s: float = 300.0):
        """The point-to-point transport (raw tensors over torch.distributed), opened on first use."""
        if self._p2p is None:
            self.init_torch_distributed(timeout_s)
            self._p2p = P2P(self.rank, self.size)
        return self._p2p

    def pairwise(self, timeout_s: float = 300.0, label: str = "pairwise"):
        """A new channel for atomic pairwise exchanges of vectors (:class:`bench.comm.pairwise.PairwiseChannel`) on a
        process group of its own (gloo), so that a service thread can use it beside the main thread's transport.
        Collective: every rank calls it, in the same order. ``label`` prefixes its error messages."""
        return PairwiseChannel(self.p2p(timeout_s).channel(), timeout_s, label)  # comm: open a new process group over all ranks for the pairwise channel


def _loopback_interface() -> str:
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address.startswith("127.") for a in addrs):
            return name
    return "lo"
