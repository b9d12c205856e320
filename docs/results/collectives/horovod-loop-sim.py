"""Exploratory record (2026-11-30, written after the cells of 2026-11-30d-fc-v782/ were seen): how many one-way
delays D a Horovod allreduce or allgather of a small tensor costs when operations run back to back, from the
mechanisms alone, with no fitted constant. Run: ``python docs/results/collectives/horovod-loop-sim.py``.

Latency only (no bytes, no host time), each rank a sequence of gloo's own posts and waits:
- gloo's TCP pair (gloo/transport/tcp/pair.cc): a posted receive sends its notice at once (arrives after D); a send
  leaves when it is posted and the receiver's notice has arrived, and arrives after D; ``waitSend`` returns when it
  left, ``waitRecv`` when it arrived.
- gloo's ring allreduce (gloo/allreduce.cc): segments of ceil(M / 2n) bytes rounded up to the element, 2n of them at
  least, two transfers in flight; a segment whose offset lies past the buffer is neither sent nor waited for. Horovod's
  negotiation (``CrossRankBitwiseAnd``, horovod/common/gloo/gloo_controller.cc) is an allreduce of one long long
  (``CacheCoordinator::sync``, horovod/common/response_cache.cc: fewer than 61 cached tensors), so only segment 0
  exists and it is relayed rank to rank: 2n - 1 delays, not the 4, 8, 12 of a full ring.
- gloo's allgatherv (gloo/allgatherv.cc): n - 1 steps, each posting its send to the right before its receive from the
  left.
- Horovod's loop (``RunLoopOnce``, horovod/common/operations.cc; ``ComputeResponseList``, controller.cc): a cycle
  pops the rank's queue, negotiates, and runs the operation only if every rank had it. After an operation the loop
  starts its next cycle at once (the cycle time is long past), before the caller, polling every 250 us, has enqueued
  the next operation, so that cycle's negotiation is empty and the operation waits for the one after.
"""
D = 1.0


def ring_allreduce(r, n, total, esize, tag):
    seg = -(-min(-(-total // (2 * n)), 1 << 20) // esize) * esize
    num = max(-(-total // seg), 2 * n)
    num = -(-num // n) * n
    spr, right, left = num // n, (r + 1) % n, (r - 1) % n

    def lengths(phase, i):  # (send, recv) bytes of iteration i; <= 0: not issued
        base = (r + 1, r + 2) if phase == "rs" else (r, r + 1)
        return tuple(min(seg, total - ((b * spr + i) * seg) % (num * seg)) for b in base)
    prog = []
    for phase in ("rs", "ag"):
        for i in range(num):
            if i >= 2:
                s, rv = lengths(phase, i - 2)
                prog += [("wait_recv", right, (tag, phase, i - 2))] * (rv > 0)
                prog += [("wait_send", left, (tag, phase, i - 2))] * (s > 0)
            if i < num - 2:
                s, rv = lengths(phase, i)
                prog += [("recv", right, (tag, phase, i))] * (rv > 0)
                prog += [("send", left, (tag, phase, i))] * (s > 0)
    return prog


def allgatherv(r, n, tag):
    right, left = (r + 1) % n, (r - 1) % n
    return [a for i in range(n - 1) for a in (("send", right, (tag, i)), ("recv", left, (tag, i)),
                                              ("wait_recv", left, (tag, i)), ("wait_send", right, (tag, i)))]


def run(progs, start):
    """Each rank's time at the end of its program, from its start time (a dataflow: order of evaluation is free)."""
    t, pc, sent, posted = list(start), [0] * len(progs), {}, {}
    moved = True
    while moved:
        moved = False
        for r, prog in enumerate(progs):
            while pc[r] < len(prog):
                act, peer, key = prog[pc[r]]
                if act == "recv":
                    posted[(peer, r, key)] = t[r]
                elif act == "send":
                    sent[(r, peer, key)] = t[r]
                else:
                    k = (peer, r, key) if act == "wait_recv" else (r, peer, key)
                    if k not in sent or k not in posted:
                        break
                    leaves = max(sent[k], posted[k] + D)
                    t[r] = max(t[r], leaves + D if act == "wait_recv" else leaves)
                pc[r] += 1
                moved = True
    assert all(p == len(g) for p, g in zip(pc, progs)), "deadlock"
    return t


def horovod(n, op, ops=40, poll=0.01, cycle=0.04):
    """Seconds (in D) an operation takes, back to back, through Horovod's loop: the steady state's period."""
    t, queued, done, finished, last = [0.0] * n, [0.0] * n, 0, [], [-1e9] * n
    rounds = 0
    while done < ops:
        last = start = [max(t[r], last[r] + cycle) for r in range(n)]
        ready = all(queued[r] <= start[r] for r in range(n))
        t = run([ring_allreduce(r, n, 8, 8, ("neg", rounds)) for r in range(n)], start)
        rounds += 1
        if ready:
            tag = ("op", done)
            progs = [ring_allreduce(r, n, 4096, 4, tag) if op == "allreduce" else allgatherv(r, n, tag)
                     for r in range(n)]
            t = run(progs, t)
            queued = [x + poll for x in t]
            done += 1
            finished.append(max(t))
    return (finished[-1] - finished[9]) / (len(finished) - 10), rounds / ops


if __name__ == "__main__":
    print("| n | negotiation alone | allreduce 4 KiB alone | allgather alone | Horovod allreduce | Horovod allgather "
          "| negotiations an operation |")
    print("|---|---|---|---|---|---|---|")
    for n in (2, 3, 4):
        alone = [max(run([f(r) for r in range(n)], [0.0] * n)) for f in (
            lambda r: ring_allreduce(r, n, 8, 8, "x"), lambda r: ring_allreduce(r, n, 4096, 4, "x"),
            lambda r: allgatherv(r, n, "x"))]
        (ar, rounds), (ag, _) = horovod(n, "allreduce"), horovod(n, "allgather")
        row = [f"{x:.0f} D" for x in alone] + [f"{ar:.2f} D", f"{ag:.2f} D", f"{rounds:.2f}"]
        print(f"| {n} | " + " | ".join(row) + " |")
