"""The only code that talks to Horovod and to the point-to-point transport.

Algorithms receive a communicator and never import horovod or torch.distributed. A job starts one runtime
(:func:`open_comm`; ``Algorithm.runtime``, decided per run by :func:`bench.placement.runtime`):

- :class:`Comm`, Horovod: ``hvd.init()`` gives rank, size and every collective, and starts Horovod's background
  thread. Horovod has no point-to-point, so :meth:`Comm.p2p` opens a second, real transport inside the same
  horovodrun job: ``torch.distributed`` (gloo on CPU, NCCL on GPU) initialised from Horovod's rank and size.
- :class:`~bench.comm.torch_runtime.TorchComm`, torch.distributed alone, for the algorithms that never call Horovod
  (``ddp``): rank and size from horovodrun's environment, no Horovod thread, the harness's collectives on
  torch.distributed's default group.

Both share :class:`~bench.comm.base.CommBase` (the collectives the worker loop uses, torch.distributed opened on
first use). Point-to-point communication is one API, :mod:`bench.comm.p2p` (:class:`~bench.comm.p2p.P2P`,
the bounded wait :func:`~bench.comm.p2p.wait_for`), with one timeout error, :class:`CommTimeout`;
the protocols built on it are :mod:`bench.comm.ps` (the parameter server) and
:mod:`bench.comm.pairwise` (atomic pairwise exchanges, :meth:`CommBase.pairwise`). A caller that
receives from any rank asks for a transport that can (:meth:`CommBase.use_any_source_backend`).
"""

from __future__ import annotations

import os
import time

import torch

from ..config import FIRST_SLEEP_S
from ..timing import ThreadCpu
from .base import CommBase
from .p2p import CommTimeout
from .torch_runtime import TorchComm

__all__ = ["Comm", "CommBase", "CommTimeout", "TorchComm", "open_comm"]


_PR_SET_TIMERSLACK = 29  # prctl(2)


def _fine_timer_slack(ns: int = 1000) -> None:
    """Let this thread's sleeps end within ``ns`` of when they were asked to (Linux's default slack is 50 us, which
    makes a 5 us sleep last about 60 us). Linux only; elsewhere a no-op."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, ns, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def open_comm(runtime: str, launch) -> CommBase:
    """The communicator of a job that starts ``runtime`` (``horovod`` | ``torch``) with ``launch``
    (:class:`bench.config.LaunchConfig`: the network interface, the transport's backend, Horovod's settings)."""
    if runtime == "torch":
        return TorchComm(launch.network_interface, launch.p2p_backend)
    if runtime != "horovod":
        raise ValueError(f"unknown runtime {runtime!r}; valid: horovod, torch")
    hv = launch.horovod
    return Comm(launch.network_interface, launch.p2p_backend, wait_sleep_us=hv.wait_sleep_us,
                wait_spin_us=hv.wait_spin_us, groups=hv.groups)


class Comm(CommBase):
    """The Horovod runtime: rank, size and collectives of one horovodrun job through Horovod."""

    runtime = "horovod"

    def __init__(self, network_interface: str = "", p2p_backend: str = "auto", wait_sleep_us: float | None = None,
                 wait_spin_us: float | None = None, groups: int | None = None):
        import horovod.torch as hvd  # optional, heavy (its C++ library): only where a job runs

        before = ThreadCpu.tids()
        hvd.init()  # comm: start Horovod's controller (gloo or MPI) over all ranks and its background thread
        self.horovod_tids = frozenset(ThreadCpu.tids() - before)
        """The threads ``hvd.init()`` started (the background thread, gloo's): labelled ``horovod`` in the CPU record."""
        self.hvd = hvd
        super().__init__(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), network_interface, p2p_backend)
        self.Average, self.Sum = hvd.Average, hvd.Sum
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
        """Rank ``root``'s tensors on every rank, waited for as :meth:`synchronize` waits (Horovod's own
        ``broadcast_parameters`` starts the same broadcasts, one a tensor in name order, and spins in its wait)."""
        if not self.wait_sleep_s:
            self.hvd.broadcast_parameters(state_dict, root_rank=root)  # comm: broadcast rank root's tensors to every rank
            return
        handles = [self.hvd.broadcast_async_(t, root, name) for name, t in sorted(state_dict.items())]  # comm: start the broadcast of each of rank root's tensors to every rank
        self.wait_sleeping(handles)
        for handle in handles:
            self.hvd.synchronize(handle)  # comm: release the completed broadcast's handle (polled: no wait)

    def broadcast_optimizer_state(self, optimizer, root: int = 0) -> None:
        """Rank ``root``'s optimizer state on every rank. An optimizer that has not stepped yet has no state to send
        (its hyperparameters are equal by construction), and Horovod would fill an empty state by taking a step with
        zero gradients, which advances Adam's step count (its first real update then has a bias correction of two
        steps: 0.74 x lr at betas (0.9, 0.999)): so nothing is sent then. Every rank of a job decides alike, since
        they all construct the optimizer and step it the same number of times before a broadcast."""
        if optimizer.state_dict()["state"]:
            self.hvd.broadcast_optimizer_state(optimizer, root_rank=root)  # comm: broadcast rank root's optimizer state to every rank

    def broadcast_object(self, obj, root: int = 0, name: str = "bench.object"):
        """Broadcast a picklable object (control data only, never training tensors).

        The name is explicit: Horovod's default is the object's type name, which differs
        between the root and the receivers (who pass None) and would hang the job."""
        return self.hvd.broadcast_object(obj, root_rank=root, name=name)  # comm: broadcast rank root's object to every rank

    def allgather_object(self, obj, name: str = "bench.gather") -> list:
        return self.hvd.allgather_object(obj, name=name)  # comm: gather every rank's object on every rank

    def allgather(self, tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
        """Every rank's tensor, concatenated, on every rank; waited for as :meth:`synchronize` waits. ``name``: the
        same on every rank; a repeated operation needs one for Horovod's response cache (without one, each call is
        named anew and negotiated in full)."""
        if not self.wait_sleep_s:
            return self.hvd.allgather(tensor, name=name)  # comm: gather every rank's tensor on every rank
        return self.synchronize(self.hvd.allgather_async(tensor, name=name))  # comm: gather every rank's tensor on every rank, waiting adaptively

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
        self.close_torch_distributed()
        self.hvd.shutdown()  # comm: leave the job's Horovod (every rank)

    def publish_store(self, addr_port):
        return self.broadcast_object(addr_port, root=0)  # comm: broadcast rank 0's store address to every rank (rendezvous through Horovod)
