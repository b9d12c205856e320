"""horovodrun -np 5: a parameter server (rank 4) and four equal workers that only commit (no compute).

For each round (centre size, mode): every worker pulls, then sends COMMITS commits back to back
(mode "commit": commit only; "commit+pull": each commit also returns the centre), then DONE. The
server's rule takes APPLY_S per commit (a sleep), far longer than a worker needs to send its next
commit, so the server is saturated the whole time: whenever it looks for the next message, every
other worker has one waiting (and the workers, blocked on replies, leave the CPUs free). A server that serves "whichever comes first from any rank" lets the lowest ranks
be served first and the others starve; a fair one serves the four in turn. The server records
the commits it served per worker up to the first DONE (the window in which every worker is
active); each worker records its mean wait per reply. Rank 4 writes OUT/fairness.json.
"""

import json
import os
import sys
import time

import torch

from bench.comm import Comm, ps

COMMITS = int(os.environ.get("PS_FAIRNESS_COMMITS", "40"))
APPLY_S = float(os.environ.get("PS_FAIRNESS_APPLY_S", "0.004"))  # the server's time per commit: the workers wait on it, so none is held back by the 2 loaded cores
ROUNDS = [(1000, "commit"), (1000, "commit+pull")]


def add(centre, payload, tau, worker, pulled):
    time.sleep(APPLY_S)  # a slow server (sleeping, not computing): saturated by four workers that only commit
    centre.add_(payload)
    return True


def main(out: str) -> None:
    torch.set_num_threads(1)
    comm = Comm()
    comm.p2p(120)
    server_rank = comm.size - 1
    workers = list(range(server_rank))
    results = []
    for numel, mode in ROUNDS:
        comm.barrier()  # comm: one round at a time
        if comm.rank == server_rank:
            server = ps.PSServer(torch.zeros(numel), workers, add, timeout_s=120)
            server.serve()
            stats, waits = server.stats(), None
        else:
            client, buf = ps.PSClient(comm.rank, server_rank, numel, timeout_s=120), torch.empty(numel)
            delta = torch.full((numel,), 1e-3)
            client.pull(buf)
            t0 = time.perf_counter()
            for _ in range(COMMITS):
                client.commit(delta, into=buf if mode == "commit+pull" else None)
            waits = (time.perf_counter() - t0) / COMMITS
            client.done()
            stats = None
        gathered = comm.allgather_object({"rank": comm.rank, "stats": stats, "wait": waits})  # comm:
        if comm.rank == server_rank:
            s = next(g["stats"] for g in gathered if g["stats"])
            results.append({"numel": numel, "mode": mode, "commits": COMMITS,
                            "served": s["ps_commits_served"], "spread": s["ps_served_spread_all_active"],
                            "total": s["ps_commits_by_worker"], "centre_sum": float(server.centre.sum()),
                            "reply_wait_s": [g["wait"] for g in sorted(gathered, key=lambda g: g["rank"]) if g["wait"] is not None]})
            print(f"[fairness] {results[-1]}", flush=True)
    if comm.rank == server_rank:
        with open(os.path.join(out, "fairness.json"), "w") as f:
            json.dump(results, f)
    comm.barrier()  # comm:
    comm.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
