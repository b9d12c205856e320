"""horovodrun -np 2: malformed gossip and pairwise messages from rank 1 to rank 0 (issue 40, item 3).

``python wire_malformed.py OUT``: one round per malformed message, each on the real transport. Gossip
(:meth:`bench.comm.p2p.P2P.exchange`, as SGP and FAST receive): a vector that is short, one longer than expected
(by the whole spare room), one with NaN, one with inf. AD-PSGD's pairwise averaging (:mod:`bench.comm.pairwise`,
rank 0 passive, rank 1 active): a short request header, a long one, a short x_active, one with NaN, and a short
x_passive back to the active (rank 0 then the active). Rank 0 (and rank 1 for the last) write what each round raised
to OUT/<rank>.json; a well-formed exchange follows on the same transport.
"""

import json
import os
import sys

import torch

from bench.comm import Comm, pairwise, tags
from bench.comm.p2p import SPARE, WireError

N = 8
HDR = pairwise.HEADER_LEN


def header(length: int = HDR, kind: int = pairwise.AVG) -> torch.Tensor:
    return torch.tensor([pairwise.MAGIC, kind, 1, 0, 7, 7, 7][:length], dtype=torch.int64)


GOSSIP = {
    "short vector": torch.ones(N - 3),
    "long vector": torch.ones(N + SPARE),
    "nan vector": torch.tensor([0.0, float("nan")] + [1.0] * (N - 2)),
    "inf vector": torch.tensor([float("inf")] + [1.0] * (N - 1)),
}
PAIRWISE = {  # what the active (rank 1) sends: (header, x_active or None)
    "short header": (header(3), None),
    "long header": (header(7), None),
    "short x_active": (header(), torch.ones(N - 1)),
    "nan x_active": (header(), torch.tensor([float("nan")] * N)),
}


def main(out: str) -> None:
    comm = Comm()
    p2p = comm.p2p(60)
    seen = {}

    def note(name, fn):
        try:
            fn()
            seen[name] = "accepted"
        except WireError as e:
            seen[name] = f"WireError: {e}"

    for name, bad in GOSSIP.items():
        comm.barrier()  # comm: one round at a time
        if comm.rank == 0:
            note(name, lambda: p2p.exchange([], [(torch.empty(N), 1)], tag=tags.SGP_SHARE).wait())  # comm: receive a share from rank 1
        else:
            p2p.send(bad, 0, tag=tags.SGP_SHARE)  # comm: send the malformed share to rank 0
    for name, (hdr, x) in PAIRWISE.items():
        comm.barrier()  # comm: one round at a time
        chan = comm.pairwise(60, label="wire test")  # comm: a new channel each round
        if comm.rank == 0:
            def serve():
                for src in chan.requests([1]):  # comm: receive the request
                    chan.receive(src, torch.empty(N))  # comm: receive x_active
                    break
            note(name, serve)
        else:
            chan.chan.send(hdr, 0, tag=tags.PAIRWISE_HEADER)  # comm: send the malformed request
            if x is not None:
                chan.chan.send(x, 0, tag=tags.PAIRWISE_DATA)  # comm: send the malformed x_active
    comm.barrier()
    chan = comm.pairwise(60, label="wire test")  # comm: the passive answers with a short x_passive
    if comm.rank == 0:
        src = next(chan.requests([1]))  # comm: receive the request
        chan.receive(src, torch.empty(N))  # comm: receive x_active
        chan.chan.send(torch.ones(N - 2), src, tag=tags.PAIRWISE_REPLY)  # comm: send the short x_passive
    else:
        note("short x_passive", lambda: chan.swap(0, torch.ones(N), 0))  # comm: request, send x_active, receive x_passive
    comm.barrier()  # comm: then a well-formed exchange on the same transport
    got = p2p.exchange([(torch.full((N,), float(comm.rank)), 1 - comm.rank)], [(torch.empty(N), 1 - comm.rank)],  # comm: swap a vector with the other rank
                       tag=tags.SGP_SHARE).wait()
    seen["well-formed"] = got[0].tolist()
    with open(os.path.join(out, f"{comm.rank}.json"), "w") as f:
        json.dump(seen, f, indent=1)
    comm.barrier()
    comm.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
