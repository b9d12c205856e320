"""What one operation costs on a link of a given rate and one-way delay, from the transport's own mechanisms.

Each term restates, in our own code, how the software the suite runs moves bytes (the sources were read, not copied):

- **a message** (gloo's TCP pair, ``gloo/transport/tcp/pair.cc``: a send of an unbound buffer is held until the
  peer's ``NOTIFY_RECV_READY`` for it has arrived, ``handleRemotePendingRecv``; a receive from any rank first waits
  for the sender's ``NOTIFY_SEND_READY``): data takes one delay when the receive was posted a delay or more before
  the send (:func:`message_s`), two when both are posted together (notice, then data), three when the receiver
  takes it from any rank (send-ready notice, recv-ready notice, data). :func:`protocol_delays` counts them for the
  suite's protocols (``bench/comm/ps.py``, ``pairwise.py``, ``p2p.py``).
- **gloo's ring allreduce** (``gloo/allreduce.cc``, ``allreduce.h``): segments of s = min(ceil(M / 2n), 1 MiB)
  bytes, numSegments = roundUp(max(ceil(M / s), 2n), n); a reduce-scatter loop and an allgather loop, each issuing
  numSegments - 2 segment transfers with two in flight (iteration i waits for the transfer of iteration i - 2).
  A transfer is a receive posted and a send posted together: max(h, 2D + h0) + s / B (:func:`ring_loop_s`).
- **broadcast** (Horovod's over gloo, ``gloo/broadcast.cc``): the root sends the buffer to every rank (n - 1 times
  on its link; :func:`broadcast_s` says why not gloo's binomial tree).
- **gloo's allgatherv** (``gloo/allgatherv.cc``): a ring of n - 1 dependent steps of one rank's share.
- **Horovod** (``horovod/common/controller.cc``: ``ComputeResponseList`` agrees every cycle on the tensors ready
  with ``CrossRankBitwiseAnd`` when the response cache holds them, a small allreduce of its own over the same gloo
  context, ``gloo_controller.cc``; then the operation itself, ``ops/gloo_operations.cc``): a fixed cost a (the cycle
  and the fusion copies) plus ν negotiations of a tiny ring allreduce, plus the gloo operation. ν is fitted per
  operation (1 is the cached allreduce's mechanism; broadcast and allgather negotiate without the cache's fast path).

B is the link's rate x the TCP goodput share (``eff``) with the host's CPU a byte (``byte_s``) added to the wire time
of a byte; a transfer takes max(h, 2D + h0) besides its bytes (:func:`transfer_s`).
The constants are fitted (:func:`fit`) on ``python -m bench.perf collectives`` only (``docs/results/collectives/``),
never on a study's cell.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from ..cluster.net import tbf_burst_bytes
from ..layout import REPO_ROOT

CELLS = REPO_ROOT / "docs" / "results" / "collectives" / "cells.jsonl"
MAX_SEGMENT = 1 << 20
"""gloo's AllreduceOptions::kMaxSegmentSize (gloo/allreduce.h)."""
HOROVOD_OPS = ("allreduce_hvd", "broadcast", "allgather")
OPS = ("allreduce_hvd", "allreduce_gloo", "broadcast", "allgather", "sendrecv")
SHARED = ("eff", "h_s", "h0_s", "byte_s", "w_allgather")
MEANING = {
    "eff": "TCP goodput over the configured rate of a shaped link (collectives micro-benchmark)",
    "h_s": "s a transfer takes besides its bytes without a link delay (kernel, shaper, wake-ups of busy hosts)",
    "w_allgather": "bytes on a rank's link per byte of its share in Horovod's allgather, over gloo's ring's one",
    "h0_s": "s a transfer takes besides its bytes and its two one-way delays on a delayed link",
    "byte_s": "s of host CPU a byte adds to its wire time (gloo over TCP)",
    "a_": "s an operation costs besides its transfers (Horovod's cycle and fusion copies; the call itself)",
    "nu_": "Horovod negotiations (tiny ring allreduces) an operation waits for",
}


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def segments(nbytes: float, n: int) -> tuple[int, int]:
    """(segment bytes, numSegments) of gloo's ring allreduce of ``nbytes`` over ``n`` ranks (gloo/allreduce.cc)."""
    nbytes = max(4, int(nbytes))
    s = _round_up(min(-(-nbytes // (2 * n)), MAX_SEGMENT), 4)
    return s, _round_up(max(-(-nbytes // s), 2 * n), n)


def ring_loop_s(transfers: int, first_s: float, wire_s: float) -> float:
    """Seconds of one loop of gloo's ring that issues ``transfers`` segment transfers, two in flight: transfer k ends
    at c_k = max(c_{k-1} + wire, c_{k-2} + first) (the link serialises the segments; iteration k waits for k - 2),
    ``first`` = max(h, 2D + h0) + wire the time of one alone. Closed form: bandwidth-bound when wire >= first / 2."""
    if transfers <= 0:
        return 0.0
    k = transfers - 1
    if wire_s >= first_s / 2:
        return first_s + k * wire_s
    return (k // 2 + 1) * first_s + (k % 2) * wire_s


def _wire(nbytes: float, bytes_per_s: float, k: dict, idle_s: float = 0.0) -> float:
    """Seconds ``nbytes`` take on the wire and in the hosts' CPU; after ``idle_s`` of an idle link its shaper's bucket
    (``burst`` bytes, :func:`bench.cluster.net.tbf_burst_bytes`) lets min(burst, rate x idle) of them through at once."""
    if bytes_per_s <= 0:
        return nbytes * k["byte_s"]
    credit = min(nbytes, k.get("burst", 0.0), bytes_per_s * idle_s)
    return (nbytes - credit) / bytes_per_s + nbytes * k["byte_s"]


def transfer_s(delay_s: float, k: dict) -> float:
    """Time of a transfer besides its bytes: the receiver's notice and the data, two one-way delays, and the hosts'
    own h; at a short delay the two overlap (a rank still busy when its peer's notice arrives), so the larger."""
    return max(k["h_s"], 2 * delay_s + k["h0_s"])


def ring_allreduce_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """gloo's ring allreduce (module docstring): a reduce-scatter and an allgather loop, each moving (n - 1) / n of
    the buffer a rank in (n - 1) x numSegments / n segment transfers, two in flight."""
    if n <= 1:
        return 0.0
    _, count = segments(nbytes, n)
    transfers = (n - 1) * count // n
    seg = (n - 1) / n * nbytes / transfers
    wire, lat = _wire(seg, bytes_per_s, k), transfer_s(delay_s, k)
    first = _wire(seg, bytes_per_s, k, lat) - wire  # the bucket filled while the first notice travelled
    return 2 * (ring_loop_s(transfers, lat + wire, wire) + first)


def broadcast_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """Horovod's broadcast over gloo: the root's link carries the buffer n - 1 times. (gloo/broadcast.cc today is a
    binomial tree, ceil(log2 n) rounds; the micro-benchmark's 16 MiB cells take (n - 1) x M / B at n = 4, 3 x, not
    the tree's 2 x: the root sends to every rank.)"""
    lat = transfer_s(delay_s, k)
    return lat + (n - 1) * _wire(nbytes, bytes_per_s, k, lat / (n - 1)) if n > 1 else 0.0


def allgather_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """gloo's ring allgatherv of ``nbytes`` in all: n - 1 dependent steps of one share (gloo/allgatherv.cc)."""
    lat = transfer_s(delay_s, k)
    return (n - 1) * (lat + _wire(k["w_allgather"] * nbytes / n, bytes_per_s, k, lat)) if n > 1 else 0.0


def message_s(nbytes: float, bytes_per_s: float, delay_s: float, k: dict, delays: int = 1) -> float:
    """One point-to-point message (gloo/transport/tcp/pair.cc): ``delays`` one-way delays (1: the receive was posted
    early; 2: posted with the send; 3: a receive from any rank), h and its bytes."""
    lat = max(k["h_s"] / 2, delays * delay_s + k["h0_s"])
    return lat + _wire(nbytes, bytes_per_s, k, 2 * lat)


def negotiation_s(n: int, delay_s: float, k: dict) -> float:
    """One Horovod negotiation: a tiny ring allreduce (CrossRankBitwiseAnd, horovod/common/controller.cc)."""
    return ring_allreduce_s(8, n, 0.0, delay_s, {**k, "byte_s": 0.0})


def seconds(op: str, nbytes: float, n: int, rate_bps: float, delay_s: float, k: dict) -> float:
    """Seconds of operation ``op`` (:data:`OPS`) of ``nbytes`` over ``n`` ranks, one a host, on links of
    ``rate_bps`` bits a second (0: unshaped) and one-way delay ``delay_s``, with the constants ``k``."""
    burst = tbf_burst_bytes(rate_bps) if rate_bps else 0.0
    return op_seconds(op, nbytes, n, rate_bps / 8 * k["eff"] if rate_bps else 0.0, delay_s, {**k, "burst": burst})


def op_seconds(op: str, nbytes: float, n: int, bps: float, delay_s: float, k: dict) -> float:
    """:func:`seconds` on a link that carries ``bps`` bytes a second (0 or inf: no limit but the host's)."""
    bps = 0.0 if not math.isfinite(bps) else bps
    if op == "sendrecv":
        return k["a_sendrecv"] + message_s(nbytes, bps, delay_s, k)
    data = {"allreduce_hvd": ring_allreduce_s, "allreduce_gloo": ring_allreduce_s, "broadcast": broadcast_s,
            "allgather": allgather_s}[op](nbytes, n, bps, delay_s, k)
    neg = k[f"nu_{op}"] * negotiation_s(n, delay_s, k) if op in HOROVOD_OPS else 0.0
    return k[f"a_{op}"] + neg + data


def delay_added_s(op: str, nbytes: float, n: int, bps: float, delay: float, k: dict) -> float:
    """What a one-way delay ``delay`` adds to an operation on a link of ``bps`` bytes a second: seconds with it less
    seconds without it (the step model keeps its own zero-delay terms and adds this)."""
    if delay <= 0 or n <= 1:
        return 0.0
    return op_seconds(op, nbytes, n, bps, delay, k) - op_seconds(op, nbytes, n, bps, 0.0, k)


PROTOCOL_DELAYS = {"ps_commit": (1, 4, 1), "ps_pull": (1, 2, 1), "pairwise": (1, 4, 1)}
"""One-way delays of a visit of the suite's request/reply protocols over gloo's pair (:func:`message_s`'s rules):
(before the serving side starts on it, while it waits inside the visit serving no one, back to the asker).
A parameter-server commit (``bench/comm/ps.py``): the header to a receive from any worker (the send-ready notice
reaches the server, 1; its recv-ready and the data, 2 more, waited by the server), the payload whose receive the
server posts on the header (recv-ready, data: 2, waited by the server), the reply whose receive the worker posted
first (1): 6 in all, 4 of them holding the server. A pull without payload: 1 + 2 + 1. AD-PSGD's swap
(``bench/comm/pairwise.py``: the request to a passive's receive from any active, x_active, the reply posted first):
as a commit."""
GOSSIP_DELAYS = 2
"""One-way delays of a gossip round (``P2P.exchange``: each receive posted with its send, so a message waits for
the receiver's notice, then travels)."""


# -- the fit ---------------------------------------------------------------------------------------------------------
def load_cells(path: Path = CELLS) -> list[dict]:
    from ..config import parse_delay, parse_rate

    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            rec["rate_bps"], rec["delay_s"] = parse_rate(rec["link"]), parse_delay(rec["delay"])
            out.append(rec)
    return out


def _names(ops) -> list[str]:
    return [*SHARED, *(f"a_{op}" for op in ops), *(f"nu_{op}" for op in ops if op in HOROVOD_OPS)]


def fit(cells: list[dict] | None = None) -> dict:
    """The constants that minimise the squared log error of :func:`seconds` over the micro-benchmark's cells
    (scipy.optimize.least_squares, bounded); ``{"constants": ..., "table": per-operation errors, "source": ...}``."""
    import numpy as np
    from scipy.optimize import least_squares

    cells = load_cells() if cells is None else cells
    ops = [op for op in OPS if any(c["op"] == op for c in cells)]
    names = _names(ops)
    start = {"eff": 0.95, "h_s": 1e-3, "h0_s": 2e-4, "byte_s": 1e-9, "w_allgather": 1.0, **{f"a_{op}": 1e-3 for op in ops},
             **{f"nu_{op}": 1.0 for op in ops if op in HOROVOD_OPS}}
    upper = {"eff": 1.2, "h_s": 0.05, "h0_s": 0.05, "byte_s": 1e-7, "w_allgather": 3.0, **{f"a_{op}": 0.5 for op in ops},
             **{f"nu_{op}": 10.0 for op in ops if op in HOROVOD_OPS}}

    def residuals(x):
        k = dict(zip(names, x))
        return np.array([math.log(seconds(c["op"], c["bytes"], c["np"], c["rate_bps"], c["delay_s"], k)
                                  / c["median_s"]) for c in cells])

    res = least_squares(residuals, [start[n] for n in names], bounds=([0.5 if n in ("eff", "w_allgather") else 0.0 for n in names],
                                                                      [upper[n] for n in names]))
    k = dict(zip(names, map(float, res.x)))
    return {"constants": k, "table": error_table(cells, k), "source": str(CELLS.relative_to(REPO_ROOT)),
            "cells": len(cells)}


def error_table(cells: list[dict], k: dict) -> list[dict]:
    """Per operation (and per delay): cells, median and max |predicted / measured - 1|."""
    rows = []
    groups: dict[tuple, list[float]] = {}
    for c in cells:
        err = seconds(c["op"], c["bytes"], c["np"], c["rate_bps"], c["delay_s"], k) / c["median_s"] - 1
        groups.setdefault((c["op"], "all"), []).append(err)
        groups.setdefault((c["op"], f"{c['delay_s'] * 1e3:g}ms"), []).append(err)
    for (op, delay), errs in groups.items():
        rows.append({"op": op, "delay": delay, "cells": len(errs), "median_abs_error": statistics.median(map(abs, errs)),
                     "max_abs_error": max(map(abs, errs)), "median_error": statistics.median(errs)})
    return sorted(rows, key=lambda r: (OPS.index(r["op"]), r["delay"] != "all", float(r["delay"].rstrip("ms") or 0)
                                       if r["delay"] != "all" else 0.0))
