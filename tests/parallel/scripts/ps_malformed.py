"""horovodrun -np 2: a parameter server (rank 1) and a worker (rank 0) that sends malformed messages.

``python ps_malformed.py OUT rounds``: one round per malformed message (a short header, a long header, a
commit with NaN, one with inf, a short and a long commit payload, SNAP buffers with inf, a SNAP at a negative
step, a payload twice as long as a 50,000-element centre), a fresh server each round; then a well-formed round (pull, commit, done) on the same transport. The
server rank writes what each round raised to OUT/server.json.

``python ps_malformed.py OUT sigterm``: the server serves as a parameter-server run does (the worker's SIGTERM
handler installed, :func:`bench.algorithms.ps_base.signals_end_serving` around serving) with a long receive
timeout; the worker pulls once, writes OUT/ready with the server's pid, and sleeps. The test sends SIGTERM to
the server, which must end the job at once rather than after the receive timeout.
"""

import json
import os
import signal
import sys
import time

import torch

from bench.algorithms.ps_base import signals_end_serving
from bench.comm import Comm
from bench.comm import ps, tags

N = 4
BIG = 50_000
WORKER, SERVER = 0, 1


def header(kind: int, clock: int = 0, numel: int = 0, flags: int = 0, length: int = ps.HEADER_LEN) -> torch.Tensor:
    full = [ps.MAGIC, kind, WORKER, clock, numel, flags] + list(range(100, 100 + max(0, length - ps.HEADER_LEN)))
    return torch.tensor(full[:length], dtype=torch.int64)


ROUNDS = {  # name -> the messages (tensor, tag) the worker sends, without waiting for any reply
    "short header": [(header(ps.PULL, length=5), tags.PS_HEADER)],
    "long header": [(header(ps.PULL, length=12), tags.PS_HEADER)],
    "nan commit": [(header(ps.COMMIT, numel=N), tags.PS_HEADER), (torch.tensor([0.1, float("nan"), 0.2, 0.3]), tags.PS_DATA)],
    "inf commit": [(header(ps.COMMIT, numel=N), tags.PS_HEADER), (torch.tensor([0.1, 0.2, float("inf"), 0.3]), tags.PS_DATA)],
    "short payload": [(header(ps.COMMIT, numel=N), tags.PS_HEADER), (torch.ones(N - 1), tags.PS_DATA)],
    "long payload": [(header(ps.COMMIT, numel=N), tags.PS_HEADER), (torch.ones(N + 3), tags.PS_DATA)],
    "inf buffers": [(header(ps.SNAP, clock=3, numel=2), tags.PS_HEADER), (torch.tensor([1.0, float("-inf")]), tags.PS_DATA)],
    "negative snap": [(header(ps.SNAP, clock=-5), tags.PS_HEADER)],
    "double payload": [(header(ps.COMMIT, numel=BIG), tags.PS_HEADER), (torch.ones(2 * BIG), tags.PS_DATA)],
}
CENTRE = {"double payload": BIG}  # a round's centre size, when not N: a message twice as long as a real model's


def rounds(comm, out: str) -> None:
    seen = {}
    for name, messages in ROUNDS.items():
        comm.barrier()  # comm: one round at a time
        if comm.rank == SERVER:
            server = ps.PSServer(torch.zeros(CENTRE.get(name, N)), [WORKER], ps_add, timeout_s=30, buffers_numel=2)
            try:
                server.serve()
                seen[name] = "served without error"
            except ps.PSProtocolError as e:
                seen[name] = f"PSProtocolError: {e}"
            seen[name + " centre"] = server.centre.tolist()[:N]
        else:
            for tensor, tag in messages:
                comm.p2p().send(tensor, SERVER, tag=tag)  # comm: send the malformed message to the server
    comm.barrier()  # comm: then a well-formed exchange on the same transport
    if comm.rank == SERVER:
        server = ps.PSServer(torch.zeros(N), [WORKER], ps_add, timeout_s=30)
        server.serve()
        seen["well-formed centre"] = server.centre.tolist()
        with open(os.path.join(out, "server.json"), "w") as f:
            json.dump(seen, f, indent=1)
    else:
        client = ps.PSClient(WORKER, SERVER, N, timeout_s=30)
        into = torch.empty(N)
        client.pull(into)
        client.commit(torch.full((N,), 0.5))
        client.done()
    comm.barrier()  # comm:


def ps_add(centre, payload, tau, worker, pulled) -> bool:
    centre.add_(payload)
    return True


def sigterm(comm, out: str) -> None:
    pids = comm.allgather_object(os.getpid())
    if comm.rank == SERVER:
        def terminated(signum, frame):  # what bench.worker installs
            raise RuntimeError("received SIGTERM")

        signal.signal(signal.SIGTERM, terminated)
        server = ps.PSServer(torch.zeros(N), [WORKER], ps_add, timeout_s=3600)
        with signals_end_serving(comm.rank):
            server.serve()
    else:
        ps.PSClient(WORKER, SERVER, N, timeout_s=3600).pull(torch.empty(N))
        with open(os.path.join(out, "ready"), "w") as f:
            f.write(str(pids[SERVER]))
        time.sleep(3600)


def main(out: str, mode: str) -> None:
    comm = Comm()
    comm.p2p(60)
    (rounds if mode == "rounds" else sigterm)(comm, out)
    comm.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
