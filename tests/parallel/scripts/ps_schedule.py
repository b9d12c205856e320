"""horovodrun -np 3: a parameter server (rank 2) and two workers in a controlled schedule.

For each server rule (add, dynsgd, adag, dcasgd) the workers run, over the real transport:

    W1: pull (clock 0)                      -> token to W0
    W0: pull (clock 0); commit d1 (tau 0); commit d2 without pulling (tau 1) -> token to W1
    W1: commit d3 based on its clock-0 pull (tau 2); commit d4 + pull, still based on its
        clock-0 pull (tau 3); commit d5 based on that pull (tau 0)

then a round where W1 sends a header of the wrong size (the server must reject it), and a
round where W1 never says done (the server must time out naming rank 1). Each rank writes
what it saw to OUT/rank<r>.json.
"""

import json
import os
import sys

import torch

from bench.algorithms.adag import adag_update
from bench.algorithms.dcasgd import dcasgd_update
from bench.algorithms.dynsgd import dynsgd_update
from bench.comm import Comm, CommTimeout
from bench.comm import ps, tags

N = 4
RULES = {
    "add": (lambda c, d, tau, w, pulled: bool(c.add_(d) is not None), False),
    "dynsgd": (lambda c, d, tau, w, pulled: dynsgd_update(c, d, tau) or True, False),
    "adag": (lambda c, d, tau, w, pulled: adag_update(c, d, pulled, 0.5) or True, True),
    "dcasgd": (lambda c, d, tau, w, pulled: dcasgd_update(c, d, pulled, 0.1, 0.04) or True, True),
}


def delta(k: int) -> torch.Tensor:
    return torch.arange(1, N + 1, dtype=torch.float32) * 0.1 * k


def main(out: str) -> None:
    comm = Comm()
    comm.p2p(60)
    p2p = comm.p2p()
    rank, seen = comm.rank, {}
    token = torch.zeros(1)
    for name, (rule, keep) in RULES.items():
        comm.barrier()  # comm: one round at a time (a message of the next round must not reach this round's server)
        if rank == 2:
            server = ps.PSServer(torch.linspace(-1, 1, N), [0, 1], rule, keep_pulled=keep, timeout_s=60)
            server.serve()
            seen[name] = {"centre": server.centre.tolist(), "taus": server.taus, "clock": server.clock}
            continue
        client, buf = ps.PSClient(rank, 2, N, timeout_s=60), torch.empty(N)
        taus = []
        if rank == 1:
            client.pull(buf)
            p2p.send(token, 0, tag=7)  # comm:
            p2p.recv(token, 0, tag=8)  # comm:
            taus.append(client.commit(delta(3)))
            taus.append(client.commit(delta(4), into=buf))
            taus.append(client.commit(delta(5)))
        else:
            p2p.recv(token, 1, tag=7)  # comm:
            client.pull(buf)
            taus.append(client.commit(delta(1)))
            taus.append(client.commit(delta(2)))
            p2p.send(token, 1, tag=8)  # comm:
        client.done()
        seen[name] = {"taus": taus}
    # a malformed message: a commit header announcing N + 1 elements
    comm.barrier()  # comm:
    if rank == 2:
        try:
            ps.PSServer(torch.zeros(N), [0, 1], RULES["add"][0], timeout_s=60).serve()
        except ps.PSProtocolError as e:
            seen["rejected"] = str(e)
        p2p.send(token, 0, tag=9)  # comm: rank 0 may start the next round
    elif rank == 1:
        p2p.send(torch.tensor([ps.MAGIC, ps.COMMIT, 1, 0, N + 1, 0], dtype=torch.int64), 2, tag=tags.PS_HEADER)  # comm: a malformed commit header to the server
    # a worker that goes silent: rank 1 never says done
    if rank == 2:
        try:
            ps.PSServer(torch.zeros(N), [0, 1], RULES["add"][0], timeout_s=3).serve()
        except CommTimeout as e:
            seen["timeout"] = str(e)
    elif rank == 0:
        p2p.recv(token, 2, tag=9)  # comm:
        ps.PSClient(0, 2, N).done()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    comm.barrier()  # comm:
    sys.stdout.flush()
    os._exit(0)  # the server's timed-out receive is still posted: skip the process-group teardown


if __name__ == "__main__":
    main(sys.argv[1])
