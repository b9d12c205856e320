"""The torch.distributed runtime: a job whose algorithm communicates only through torch.distributed (``ddp``;
``Algorithm.runtime = "torch"``) starts no Horovod, so no Horovod background thread runs its cycles on the job's
cores.

horovodrun still launches the job (the same hosts, ssh, placement and environment as every run), but the ranks
never call ``hvd.init()``: rank, size and local rank come from the environment horovodrun gives every process
(``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``), and rank 0's address for
torch.distributed's TCP store reaches the other ranks through horovodrun's own rendezvous server
(``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``_PORT``: the HTTP key-value store that Horovod's gloo controller uses; a job of
the ``mpi`` controller has none and runs Horovod, :func:`bench.placement.runtime`). A process started outside
horovodrun is rank 0 of 1. The harness's collectives (the start barrier, the clock broadcast, the gathers of every
rank's figures, the evaluation's averages) run on torch.distributed's default group.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request

import torch
import torch.distributed as dist

from .base import CommBase

STORE_KEY = "distbench/torch_store"
"""The rendezvous server's scope/key under which rank 0 publishes its store address (one per horovodrun job)."""


class TorchComm(CommBase):
    """torch.distributed alone: the collectives on the default process group, opened on first use."""

    runtime = "torch"

    def __init__(self, network_interface: str = "", p2p_backend: str = "auto", env=os.environ):
        size = int(env.get("HOROVOD_SIZE", 1))
        super().__init__(int(env.get("HOROVOD_RANK", 0)), size, int(env.get("HOROVOD_LOCAL_RANK", 0)),
                         int(env.get("HOROVOD_LOCAL_SIZE", size)), network_interface, p2p_backend)
        addr, port = env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR"), env.get("HOROVOD_GLOO_RENDEZVOUS_PORT")
        if size > 1 and not (addr and port):
            raise RuntimeError("the torch runtime needs horovodrun's gloo rendezvous (HOROVOD_GLOO_RENDEZVOUS_ADDR and "
                               "_PORT) to open torch.distributed; this job has none (controller mpi?)")
        self.rendezvous = f"http://{addr}:{port}/{STORE_KEY}" if size > 1 else None

    def publish_store(self, addr_port, timeout_s: float = 300.0):
        if self.rendezvous is None:
            return addr_port
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the launcher's server, never a proxy
        if self.rank == 0:
            value = f"{addr_port[0]}:{addr_port[1]}".encode()
            opener.open(urllib.request.Request(self.rendezvous, data=value, method="PUT"), timeout=10).read()  # comm: publish rank 0's store address on horovodrun's rendezvous server
            return addr_port
        deadline, wait = time.monotonic() + timeout_s, 0.005
        while True:
            try:
                with opener.open(self.rendezvous, timeout=10) as r:  # comm: read rank 0's store address from horovodrun's rendezvous server
                    addr, port = r.read().decode().rsplit(":", 1)
                    return addr, int(port)
            except urllib.error.HTTPError as e:  # 404: rank 0 has not published it yet
                if e.code != 404 or time.monotonic() > deadline:
                    raise RuntimeError(f"rank {self.rank}: no torch.distributed store address from rank 0 at "
                                       f"{self.rendezvous} within {timeout_s:g} s ({e})") from e
            time.sleep(wait)
            wait = min(2 * wait, 0.2)

    def _group(self) -> None:
        self.init_torch_distributed()

    def allreduce_(self, tensor: torch.Tensor, name: str | None = None, average: bool = True) -> torch.Tensor:
        self._group()
        dist.all_reduce(tensor)  # comm: sum the tensor over all ranks (in place, blocking)
        if average:
            tensor.div_(self.size)
        return tensor

    def broadcast_parameters(self, state_dict, root: int = 0) -> None:
        self._group()
        for _, tensor in sorted(state_dict.items()):
            dist.broadcast(tensor, src=root)  # comm: broadcast rank root's tensor to every rank (in place)

    def broadcast_optimizer_state(self, optimizer, root: int = 0) -> None:
        if optimizer.state_dict()["state"]:
            state = self.broadcast_object(optimizer.state_dict() if self.rank == root else None, root)  # comm: broadcast rank root's optimizer state to every rank
            optimizer.load_state_dict(state)

    def broadcast_object(self, obj, root: int = 0, name: str = "bench.object"):
        self._group()
        box = [obj]
        dist.broadcast_object_list(box, src=root)  # comm: broadcast rank root's object to every rank
        return box[0]

    def allgather_object(self, obj, name: str = "bench.gather") -> list:
        self._group()
        out = [None] * self.size
        dist.all_gather_object(out, obj)  # comm: gather every rank's object on every rank
        return out

    def barrier(self) -> None:
        self._group()
        dist.barrier()  # comm: wait until every rank has reached this point
