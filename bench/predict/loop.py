"""How many one-way delays Horovod's background loop adds to a blocking operation repeated back to back, played from
the mechanisms of gloo and Horovod (the sources were read, not copied) as a dataflow of posts and waits, one program
a rank, latency only (no bytes, no host time).

- **gloo's TCP pair** (``gloo/transport/tcp/pair.cc``): a posted receive sends its notice to the sender at once; a
  send leaves when it is posted and the receiver's notice has arrived, one delay D after the notice left; it arrives
  D later. ``waitSend`` returns when the send left, ``waitRecv`` when the data arrived.
- **gloo's ring allreduce** (``gloo/allreduce.cc``): segments of ceil(M / 2n) bytes rounded up to the element size,
  numSegments = roundUp(max(ceil(M / segment), 2n), n); a reduce-scatter and an allgather loop over numSegments
  iterations, each posting a receive from the right and a send to the left (iterations < numSegments - 2) and
  waiting for those of two iterations before. A segment whose offset lies past the buffer is neither sent nor
  waited for.
- **Horovod's negotiation** (``CrossRankBitwiseAnd``, ``horovod/common/gloo/gloo_controller.cc``, called by
  ``CacheCoordinator::sync`` in ``horovod/common/response_cache.cc``): a ring allreduce of the cache's bit vector, one
  long long while fewer than 61 tensors are cached. Only its segment 0 exists, so it is relayed rank to rank:
  2n - 1 delays, where a ring of full segments takes 4, 8, 12 at n = 2, 3, 4.
- **gloo's allgatherv** (``gloo/allgatherv.cc``): n - 1 steps, each posting its send to the right, then its
  receive from the left, then waiting for both.
- **gloo's gather** (``gloo/gather.cc``): the root posts a receive from every rank and waits for them; every other
  rank sends to it. **gloo's broadcast** (``gloo/broadcast.cc``): a binomial tree from the root, a rank receiving
  from its parent before it sends to its children.
- **Horovod's loop** (``RunLoopOnce`` in ``horovod/common/operations.cc``, ``ComputeResponseList`` in
  ``controller.cc``): a cycle pops the rank's queue, negotiates, and performs an operation only if every rank had it
  queued when its cycle began. After an operation the loop begins its next cycle at once (its cycle time, 1 ms, is
  long past at a delay of milliseconds), before the caller, which polls every 250 us, has queued the next operation:
  that cycle's negotiation finds it missing, and the operation waits for the one after (our reading of those
  sources).
- **An operation the response cache does not hold** (the broadcast: ``ComputeResponseList`` caches only allreduce,
  allgather, adasum and alltoall responses): in a cycle that begins with one queued on some rank, the negotiation
  says so to every rank, and the requests go to rank 0 and its responses come back (``gloo_controller.cc``:
  ``SendReadyTensors`` / ``RecvReadyTensors``, a gather of the lengths and a gatherv of the lists;
  ``SendFinalTensors`` / ``RecvFinalTensors``, a broadcast of the length and one of the list). Rank 0 counts a
  request in its table across cycles (``IncrementTensorCount``); the operation runs in the cycle whose coordination
  finds it counted on every rank.
- **The race** (:func:`race_delays`): a rank whose caller queues the next operation before its loop begins the next
  cycle (the loop's thread was late: the hosts' cores are shared) sends that request one cycle early. A cached
  operation is unaffected (it waits for the cycle that finds it on every rank); an uncached one is counted in two
  coordinated cycles where one would do.

:func:`loop_delays` is what the micro-benchmark's Horovod operations pay besides their own transfers: 4, 10, 12
delays at n = 2, 3, 4 for the allreduce and the allgather alike, 10, 16, 19 for the broadcast (and the race
6, 6, 7 more). Measured back to back at 25 ms (docs/results/collectives/): the allreduce of 4 KiB took 8.2, 18.2,
24.2 delays (the dataflow: 8, 18, 24), the allgather 6.1, 14.2, 18.2 (6, 14, 18), the broadcast's single operations
12.2 or 18.3, 18.2 or 24.3, 21.4 or 28.5 (12, 18, 21; with the race 18, 24, 28). ``python -m bench.predict.loop``
prints the table.
"""

from __future__ import annotations

import functools

MAX_SEGMENT = 1 << 20
"""gloo's AllreduceOptions::kMaxSegmentSize (gloo/allreduce.h)."""
EXACT_UP_TO = 32
"""Largest n played in full (about a second at 32); past it :func:`loop_delays` goes on linearly from n = 16 and 32
(3n - 2 from n = 6 to 32)."""


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def segments(nbytes: float, n: int, element: int = 4) -> tuple[int, int]:
    """(segment bytes, numSegments) of gloo's ring allreduce of ``nbytes`` over ``n`` ranks (gloo/allreduce.cc):
    segments of ceil(M / 2n) bytes rounded up to the ``element`` size, at most :data:`MAX_SEGMENT`, a whole number
    of them a rank, at least two."""
    nbytes = max(element, int(nbytes))
    s = _round_up(min(-(-nbytes // (2 * n)), MAX_SEGMENT), element)
    return s, _round_up(max(-(-nbytes // s), 2 * n), n)


def ring_allreduce(rank: int, n: int, nbytes: int, element: int, tag) -> list[tuple]:
    """One rank's posts and waits in gloo's ring allreduce of ``nbytes`` bytes of ``element``-byte elements."""
    seg, count = segments(nbytes, n, element)
    per_rank, right, left = count // n, (rank + 1) % n, (rank - 1) % n

    def lengths(phase: str, i: int) -> tuple[int, int]:  # bytes sent and received at iteration i (<= 0: none)
        base = (rank + 1, rank + 2) if phase == "scatter" else (rank, rank + 1)
        return tuple(min(seg, nbytes - ((b * per_rank + i) * seg) % (count * seg)) for b in base)

    prog = []
    for phase in ("scatter", "gather"):
        for i in range(count):
            if i >= 2:
                sent, got = lengths(phase, i - 2)
                prog += [("wait_recv", right, (tag, phase, i - 2))] * (got > 0)
                prog += [("wait_send", left, (tag, phase, i - 2))] * (sent > 0)
            if i < count - 2:
                sent, got = lengths(phase, i)
                prog += [("recv", right, (tag, phase, i))] * (got > 0)
                prog += [("send", left, (tag, phase, i))] * (sent > 0)
    return prog


def allgatherv(rank: int, n: int, tag) -> list[tuple]:
    """One rank's posts and waits in gloo's ring allgatherv."""
    right, left = (rank + 1) % n, (rank - 1) % n
    return [act for i in range(n - 1) for act in (("send", right, (tag, i)), ("recv", left, (tag, i)),
                                                  ("wait_recv", left, (tag, i)), ("wait_send", right, (tag, i)))]


def gather(rank: int, n: int, tag, root: int = 0) -> list[tuple]:
    """One rank's posts and waits in gloo's gather (and gatherv) to ``root``."""
    if rank != root:
        return [("send", root, tag), ("wait_send", root, tag)]
    peers = [r for r in range(n) if r != root]
    return [("recv", r, tag) for r in peers] + [("wait_recv", r, tag) for r in peers]


def broadcast(rank: int, n: int, tag, root: int = 0) -> list[tuple]:
    """One rank's posts and waits in gloo's broadcast from ``root``: a binomial tree over the ranks renumbered from
    the root, in rounds i = 0, 1, ... of which a rank takes part once its bits above i are clear (the peer differs in
    bit i); a rank receives from its parent and waits for it before it sends to its children, and waits for its
    sends at the end."""
    vrank, dim = (rank - root) % n, max(1, (n - 1).bit_length())
    prog, sends = [], []
    for i in range(dim):
        vpeer = vrank ^ (1 << i)
        if vrank >> (i + 1) or vpeer >= n:
            continue
        peer = (vpeer + root) % n
        if vrank & (1 << i):
            prog += [("recv", peer, tag), ("wait_recv", peer, tag)]
        else:
            prog.append(("send", peer, tag))
            sends.append(("wait_send", peer, tag))
    return prog + sends


def coordination(n: int, tag) -> list[list[tuple]]:
    """The ranks' programs in a cycle that negotiates through rank 0 (module docstring): a gather of the request
    lists' lengths, a gatherv of the lists, a broadcast of the response list's length, one of the list."""
    return [gather(r, n, (tag, "len")) + gather(r, n, (tag, "req")) + broadcast(r, n, (tag, "rlen"))
            + broadcast(r, n, (tag, "resp")) for r in range(n)]


def play(programs: list[list[tuple]], start: list[float]) -> list[float]:
    """Each rank's time (in one-way delays) at the end of its program, from its start time: a dataflow, so the
    order in which ranks are advanced does not matter."""
    t, pc, sent, posted = list(start), [0] * len(programs), {}, {}
    moved = True
    while moved:
        moved = False
        for r, prog in enumerate(programs):
            while pc[r] < len(prog):
                act, peer, key = prog[pc[r]]
                if act == "recv":
                    posted[(peer, r, key)] = t[r]
                elif act == "send":
                    sent[(r, peer, key)] = t[r]
                else:
                    pair = (peer, r, key) if act == "wait_recv" else (r, peer, key)
                    if pair not in sent or pair not in posted:
                        break
                    leaves = max(sent[pair], posted[pair] + 1.0)
                    t[r] = max(t[r], leaves + 1.0 if act == "wait_recv" else leaves)
                pc[r] += 1
                moved = True
    if any(p < len(prog) for p, prog in zip(pc, programs)):
        raise RuntimeError("the programs wait for one another (a deadlock)")
    return t


def negotiation(n: int, tag) -> list[list[tuple]]:
    return [ring_allreduce(r, n, 8, 8, tag) for r in range(n)]


UNCACHED = ("broadcast",)
"""Operations whose responses Horovod's cache does not hold (module docstring)."""


def operation(rank: int, n: int, op: str, tag) -> list[tuple]:
    if op == "allreduce":
        return ring_allreduce(rank, n, 4096, 4, tag)
    return broadcast(rank, n, tag) if op == "broadcast" else allgatherv(rank, n, tag)


def _ends(n: int, op: str, ops: int, poll: float, cycle: float, early: tuple[int, ...] = ()) -> list[float]:
    """When each of ``ops`` blocking operations ``op`` repeated back to back ends (its last rank), through the loop;
    ``early``: ranks whose caller queues the operation after the first before their loop's next cycle begins."""
    t, queued, last, counted, ends, cycles = [0.0] * n, [0.0] * n, [-1e9] * n, [False] * n, [], 0
    while len(ends) < ops:
        last = begin = [max(t[r], last[r] + cycle) for r in range(n)]
        new = [queued[r] <= begin[r] and not counted[r] for r in range(n)]
        t = play(negotiation(n, ("neg", cycles)), begin)
        if op in UNCACHED:
            if any(new):  # the negotiation told every rank that one has a request the cache does not hold
                t = play(coordination(n, ("coord", cycles)), t)
            counted = [c or w for c, w in zip(counted, new)]
            ready = all(counted)
        else:  # a cached operation: only if every rank had it queued when its cycle began
            ready = all(new)
        cycles += 1
        if ready:
            t = play([operation(r, n, op, ("op", len(ends))) for r in range(n)], t)
            queued = [x + poll for x in t]
            if len(ends) == 0:
                queued = [x - 2 * poll if r in early else x for r, x in enumerate(queued)]
            counted = [False] * n
            ends.append(max(t))
    return ends


def back_to_back(n: int, op: str, ops: int = 16, poll: float = 0.01, cycle: float = 0.04) -> float:
    """Delays one blocking Horovod ``op`` ("allreduce" of 4 KiB, "allgather" or "broadcast") takes, back to back,
    through the loop (module docstring); ``poll`` and ``cycle``: the caller's poll and the loop's cycle time, in
    delays."""
    ends, settled = _ends(n, op, ops, poll, cycle), ops // 2
    return (ends[-1] - ends[settled - 1]) / (ops - settled)


@functools.lru_cache(maxsize=None)
def race_delays(n: int, op: str = "broadcast", poll: float = 0.01, cycle: float = 0.04) -> float:
    """Delays the race (module docstring) adds to one operation: rank 0's caller queues the second operation before
    its loop's next cycle begins (any ranks but all alike; all of them would save a cycle instead)."""
    ops = 8
    return _ends(n, op, ops, poll, cycle, early=(0,))[-1] - _ends(n, op, ops, poll, cycle)[-1]


def alone(n: int, op: str) -> float:
    """Delays ``op`` takes by itself, every rank starting together."""
    progs = negotiation(n, "x") if op == "negotiation" else [operation(r, n, op, "x") for r in range(n)]
    return max(play(progs, [0.0] * n))


FIRST_HOP = 2.0
"""Delays the transport charges an operation's first transfer (:func:`bench.predict.transport.transfer_s`: the
receiver's notice, then the data)."""


def _extended(delays, n: int) -> float:
    """``delays(n)`` played up to :data:`EXACT_UP_TO` ranks, linear from n = 16 and 32 past it; 0 for one rank."""
    if n <= 1:
        return 0.0
    if n > EXACT_UP_TO:
        lo, hi = delays(EXACT_UP_TO // 2), delays(EXACT_UP_TO)
        return hi + (hi - lo) / (EXACT_UP_TO - EXACT_UP_TO // 2) * (n - EXACT_UP_TO)
    return delays(n)


@functools.lru_cache(maxsize=None)
def _played(n: int, op: str) -> float:
    if op == "broadcast":
        return back_to_back(n, op) - FIRST_HOP
    return back_to_back(n, "allreduce") - alone(n, "allreduce")


@functools.lru_cache(maxsize=None)
def loop_delays(n: int, op: str = "allreduce") -> float:
    """One-way delays Horovod's loop adds to a blocking ``op`` repeated back to back over ``n`` ranks, besides its
    own transfers (0 for one rank): :func:`back_to_back` less :func:`alone` for the allreduce (the allgather's are
    the same); for the broadcast, less :data:`FIRST_HOP` (the transport charges the tree's first hop, its later ones
    are here) and without the race (:func:`race_delays`)."""
    return _extended(functools.partial(_played, op=op), n)


@functools.lru_cache(maxsize=None)
def race_loop_delays(n: int) -> float:
    """:func:`race_delays` of the broadcast, linear past :data:`EXACT_UP_TO` as :func:`loop_delays`."""
    return _extended(race_delays, n)


def main(argv: list[str] | None = None) -> int:
    from .. import OneLineParser

    OneLineParser(prog="python -m bench.predict.loop", description="The one-way delays Horovod's loop adds, played "
                  "from gloo's and Horovod's sources (a table; no arguments).").parse_args(argv)
    print("| n | negotiation alone | allreduce 4 KiB alone | allgather alone | broadcast alone | back to back: "
          "allreduce | allgather | broadcast | the loop's delays: allreduce, allgather | broadcast | its race |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (2, 3, 4, 5, 6, 8, 16):
        cells = [alone(n, "negotiation"), alone(n, "allreduce"), alone(n, "allgather"), alone(n, "broadcast"),
                 back_to_back(n, "allreduce"), back_to_back(n, "allgather"), back_to_back(n, "broadcast"),
                 loop_delays(n), loop_delays(n, "broadcast"), race_loop_delays(n)]
        print(f"| {n} | " + " | ".join(f"{c:g}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    import sys

    from .. import run_command

    sys.exit(run_command(main))
