"""What a job starts (Algorithm.runtime, bench.placement.runtime) and the torch.distributed runtime's communicator
(bench.comm.torch_runtime.TorchComm): its rendezvous through horovodrun's own HTTP server, its collectives on a
real default group of one process. (Under horovodrun: tests/parallel/test_sync_ddp.py, test_jobs.py.)"""

from __future__ import annotations

import ast
import inspect
import threading

import pytest
import torch

from bench.algorithms import KEYS, get_algorithm
from bench.comm import CommBase, TorchComm, open_comm
from bench.placement import runtime
from bench.resolve import resolve


def test_ddp_alone_starts_torch_and_only_with_a_gloo_rendezvous():
    assert {k for k in KEYS if get_algorithm(k).runtime == "torch"} == {"ddp"}
    assert {get_algorithm(k).runtime for k in KEYS} == {"horovod", "torch"}
    assert runtime(resolve("ddp", np=2, profile="tiny")) == "torch"
    assert runtime(resolve("sync", np=2, profile="tiny")) == "horovod"
    mpi = resolve("ddp", np=2, profile="tiny", overrides={"controller": "mpi"}, check=False)
    assert runtime(mpi) == "horovod"  # mpirun gives no rendezvous server to open torch.distributed from


def test_a_torch_runtime_algorithm_calls_only_what_every_runtime_offers():
    """self.comm.X in a torch-runtime algorithm's source names a method or attribute of CommBase, never one of
    Horovod's own operations (allreduce_async_, synchronize, distributed_optimizer, ...)."""
    offered = {n for n in dir(CommBase) if not n.startswith("_")} | {"rank", "size", "local_rank", "local_size"}
    for key in KEYS:
        cls = get_algorithm(key)
        if cls.runtime != "torch":
            continue
        used = set()
        for klass in cls.__mro__:
            if klass.__module__.startswith("bench.algorithms"):
                for node in ast.walk(ast.parse(inspect.getsource(klass))):
                    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                            and node.value.attr == "comm"):
                        used.add(node.attr)
        assert used and used <= offered, f"{key} uses {sorted(used - offered)}, which the torch runtime lacks"


def test_rank_zero_publishes_the_store_address_through_horovodruns_rendezvous_server():
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer()
    port = server.start()
    try:
        env = {"HOROVOD_SIZE": "2", "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
               "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port)}
        zero, one = (TorchComm(env={**env, "HOROVOD_RANK": str(r), "HOROVOD_LOCAL_RANK": str(r)}) for r in (0, 1))
        assert (zero.rank, zero.size, one.rank, one.local_size) == (0, 2, 1, 2)
        got = {}
        reader = threading.Thread(target=lambda: got.update(addr=one.publish_store(None, timeout_s=20)))
        reader.start()  # rank 1 asks before rank 0 has published: it waits for it
        zero.publish_store(("127.0.0.1", 29512))
        reader.join(30)
        assert got["addr"] == ("127.0.0.1", 29512)
    finally:
        server.stop()


def test_without_a_rendezvous_more_than_one_rank_is_refused():
    with pytest.raises(RuntimeError, match="needs horovodrun's gloo rendezvous"):
        TorchComm(env={"HOROVOD_RANK": "0", "HOROVOD_SIZE": "2"})


def test_the_collectives_of_a_one_rank_job_on_torch_distributed(monkeypatch):
    for var in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    comm = open_comm("torch", resolve("ddp", np=1, profile="tiny").launch)
    assert isinstance(comm, TorchComm) and (comm.rank, comm.size) == (0, 1)
    try:
        comm.barrier()
        assert comm.record()["torch_distributed"] == "gloo"
        assert comm.broadcast_object({"t0": 1.5}) == {"t0": 1.5}
        assert comm.allgather_object("mine") == ["mine"]
        t = torch.tensor([2.0, 4.0])
        assert comm.allreduce_(t).tolist() == [2.0, 4.0] and comm.allreduce_(t, average=False).tolist() == [2.0, 4.0]
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        comm.broadcast_state(model, opt)  # nothing stepped yet: no optimizer state to send, the parameters unchanged
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and not opt.state_dict()["state"]
        model(torch.ones(1, 3)).sum().backward()
        opt.step()
        comm.broadcast_optimizer_state(opt)  # a momentum buffer now: sent and loaded back
        assert len(opt.state_dict()["state"]) == 2
    finally:
        comm.shutdown()
    assert comm.record()["torch_distributed"] is None
