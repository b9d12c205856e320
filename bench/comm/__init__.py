"""The only code that talks to Horovod and to the point-to-point transport.

Algorithms receive a :class:`Comm` and never import horovod or torch.distributed.
Horovod gives rank, size and every collective. Horovod has no point-to-point, so
:meth:`Comm.p2p` opens a second, real transport inside the same horovodrun job:
``torch.distributed`` (gloo on CPU, NCCL on GPU) initialised from Horovod's rank and size.
Point-to-point communication is one API, :mod:`bench.comm.p2p` (:class:`~bench.comm.p2p.P2P`,
the bounded wait :func:`~bench.comm.p2p.wait_for`), with one timeout error, :class:`CommTimeout`;
the protocols built on it are :mod:`bench.comm.ps` (the parameter server) and
:mod:`bench.comm.pairwise` (atomic pairwise exchanges, :meth:`Comm.pairwise`). A caller that
receives from any rank asks for a transport that can (:meth:`Comm.use_any_source_backend`).
"""

from __future__ import annotations

import os
import socket
import time

import torch

from ..timing import ThreadCpu
from .p2p import CommTimeout, P2P
from .pairwise import PairwiseChannel

__all__ = ["Comm", "CommTimeout"]

FIRST_SLEEP_S = 5e-6
"""The adaptive wait's first sleep (``Comm.wait_sleeping``); later sleeps double up to ``wait_sleep_us``."""

_PR_SET_TIMERSLACK = 29  # prctl(2)


def _fine_timer_slack(ns: int = 1000) -> None:
    """Let this thread's sleeps end within ``ns`` of when they were asked to (Linux's default slack is 50 us, which
    makes a 5 us sleep last about 60 us). Linux only; elsewhere a no-op."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, ns, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Comm:
    """Rank, size and collectives of one horovodrun job."""

    def __init__(self, network_interface: str = "", p2p_backend: str = "auto", wait_sleep_us: float | None = None,
                 wait_spin_us: float | None = None, groups: int | None = None):
        import horovod.torch as hvd  # optional, heavy (its C++ library): only where a job runs

        before = ThreadCpu.tids()
        hvd.init()  # comm: start Horovod's controller (gloo or MPI) over all ranks and its background thread
        self.horovod_tids = frozenset(ThreadCpu.tids() - before)
        """The threads ``hvd.init()`` started (the background thread, gloo's): labelled ``horovod`` in the CPU record."""
        self.hvd = hvd
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.Average, self.Sum = hvd.Average, hvd.Sum
        self.network_interface = network_interface
        self.p2p_backend = p2p_backend
        self._p2p = None
        self._torch_dist = False
        self.wait_sleep_s = wait_sleep_us / 1e6 if wait_sleep_us else None
        self.wait_spin_s = (wait_spin_us or 0.0) / 1e6
        self.groups = groups
        if self.wait_sleep_s:
            _fine_timer_slack()

    # -- collectives -------------------------------------------------------------------
    def allreduce_(self, tensor: torch.Tensor, name: str | None = None, average: bool = True) -> torch.Tensor:
        """In-place blocking allreduce (mean by default)."""
        if self.wait_sleep_s:
            return self.synchronize(self.allreduce_async_(tensor, name=name, average=average))  # comm: allreduce the tensor over all ranks, waiting adaptively
        return self.hvd.allreduce_(tensor, name=name, op=self.Average if average else self.Sum)  # comm: allreduce the tensor over all ranks (in place, blocking)

    def allreduce_async_(self, tensor: torch.Tensor, name: str | None = None, average: bool = True):
        """Start an in-place non-blocking allreduce; returns a handle for :meth:`synchronize`."""
        return self.hvd.allreduce_async_(tensor, name=name, op=self.Average if average else self.Sum)  # comm: start the tensor's allreduce over all ranks

    def synchronize(self, handle):
        """Wait for a non-blocking operation to complete and return its output (sleeping between polls when
        ``wait_sleep_us`` is set, else in Horovod's spinning wait)."""
        self.wait_sleeping([handle])
        return self.hvd.synchronize(handle)  # comm: wait for the operation over all ranks to complete

    def wait_sleeping(self, handles) -> None:
        """With ``wait_sleep_us`` set: return once every handle has completed, waiting adaptively so that a waiting
        rank leaves its core to Horovod's background thread and the other ranks without paying a long sleep on a
        collective that is nearly done:

        1. poll without sleeping for ``wait_spin_us`` (``os.sched_yield`` between polls: the core goes to any other
           runnable thread, this one stays runnable);
        2. then sleep between polls, the first sleep :data:`FIRST_SLEEP_S` and each one twice the last, up to
           ``wait_sleep_us`` (the thread's timer slack is 1 us, not Linux's 50 us, so a short sleep is short).

        Without ``wait_sleep_us``: nothing (the caller's ``synchronize`` waits in Horovod's spin)."""
        if not self.wait_sleep_s:
            return
        pending = [h for h in handles if h is not None and not callable(h)]
        if not pending:
            return
        spin_until = time.perf_counter() + self.wait_spin_s
        sleep = min(FIRST_SLEEP_S, self.wait_sleep_s)
        while True:
            pending = [h for h in pending if not self.poll(h)]
            if not pending:
                return
            if time.perf_counter() < spin_until:
                os.sched_yield()
                continue
            time.sleep(sleep)
            sleep = min(2 * sleep, self.wait_sleep_s)

    def wait_optimizer(self, dist_opt) -> None:
        """Wait (as :meth:`wait_sleeping`) for the allreduces a ``DistributedOptimizer`` started in backward; its
        own ``synchronize()`` then finds them complete. Reads Horovod's ``_handles`` (parameter -> (handle, ctx))."""
        if self.wait_sleep_s:
            self.wait_sleeping([h for h, _ in getattr(dist_opt, "_handles", {}).values()])

    def poll(self, handle) -> bool:
        """True when a non-blocking operation has completed (never blocks)."""
        return self.hvd.poll(handle)  # comm: ask whether the operation has completed (never blocks)

    def broadcast_parameters(self, state_dict, root: int = 0) -> None:
        self.hvd.broadcast_parameters(state_dict, root_rank=root)  # comm: broadcast rank root's tensors to every rank

    def broadcast_optimizer_state(self, optimizer, root: int = 0) -> None:
        """Rank ``root``'s optimizer state on every rank. An optimizer that has not stepped yet has no state to send
        (its hyperparameters are equal by construction), and Horovod would fill an empty state by taking a step with
        zero gradients, which advances Adam's step count (its first real update then has a bias correction of two
        steps: 0.74 x lr at betas (0.9, 0.999)): so nothing is sent then. Every rank of a job decides alike, since
        they all construct the optimizer and step it the same number of times before a broadcast."""
        if optimizer.state_dict()["state"]:
            self.hvd.broadcast_optimizer_state(optimizer, root_rank=root)  # comm: broadcast rank root's optimizer state to every rank

    def broadcast_state(self, model, optimizer=None, root: int = 0) -> None:
        """A common start: rank ``root``'s parameters and buffers (and optimizer state) on every rank."""
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=root)  # comm: broadcast rank root's parameters and buffers to every rank
        if optimizer is not None:
            self.broadcast_optimizer_state(optimizer, root)

    def broadcast_object(self, obj, root: int = 0, name: str = "bench.object"):
        """Broadcast a picklable object (control data only, never training tensors).

        The name is explicit: Horovod's default is the object's type name, which differs
        between the root and the receivers (who pass None) and would hang the job."""
        return self.hvd.broadcast_object(obj, root_rank=root, name=name)  # comm: broadcast rank root's object to every rank

    def allgather_object(self, obj, name: str = "bench.gather") -> list:
        return self.hvd.allgather_object(obj, name=name)  # comm: gather every rank's object on every rank

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.hvd.allgather(tensor)  # comm: gather every rank's tensor on every rank

    def barrier(self) -> None:
        self.hvd.barrier()  # comm: wait until every rank has reached this point

    def distributed_optimizer(self, optimizer, named_parameters, compression: str = "none", op: str = "average"):
        """Horovod's DistributedOptimizer: allreduces started from backward hooks, per gradient or, with the job's
        ``horovod.groups``, per group of gradients once the whole group is ready; ``compression`` none | fp16
        (Horovod's Compression), ``op`` average | adasum (Horovod's reduction)."""
        hvd = self.hvd
        compressor = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}[compression]
        reduce_op = {"average": hvd.Average, "adasum": hvd.Adasum}[op]
        return hvd.DistributedOptimizer(optimizer, named_parameters=named_parameters,  # comm: wrap the optimizer: backward hooks allreduce the gradients over all ranks
                                        compression=compressor, op=reduce_op, groups=self.groups)

    def shutdown(self) -> None:
        if self._p2p is not None:
            self._p2p.close()
            self._p2p = None
        if self._torch_dist:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._torch_dist = False
        self.hvd.shutdown()  # comm: leave the job's Horovod (every rank)

    # -- torch.distributed (DDP baseline and the point-to-point transport) ----------------
    def host_address(self) -> str:
        """Address other ranks reach this host on: the configured interface's, else loopback or hostname."""
        if self.network_interface:
            import psutil

            for addr in psutil.net_if_addrs().get(self.network_interface, []):
                if addr.family == socket.AF_INET:
                    return addr.address
            raise RuntimeError(f"network interface {self.network_interface!r} has no IPv4 address on {socket.gethostname()}")
        if self.size == self.hvd.local_size():
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

    def init_torch_distributed(self, timeout_s: float = 300.0) -> None:
        """Initialise the default torch.distributed group from Horovod's rank and size."""
        import datetime

        import torch.distributed as dist

        if self._torch_dist:
            return
        addr_port, listening = None, None
        if self.rank == 0:  # the store listens on the job's address only (a socket bound there, handed to the store)
            listening = socket.socket()
            listening.bind((self.host_address(), 0))
            listening.listen(128)
            addr_port = listening.getsockname()[:2]
        addr, port = self.broadcast_object(addr_port, root=0)  # comm: broadcast rank 0's store address to every rank (rendezvous through Horovod)
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
