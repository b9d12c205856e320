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
  and the fusion copies), the loop's wait, and the gloo operation (:func:`horovod_wait_s`). The wait's delays are
  derived (:mod:`.loop`): for the allreduce and the allgather an empty negotiation, then the operation's own, each
  one long long relayed around the ring (4, 10, 12 one-way delays at n = 2, 3, 4); for the broadcast, which the
  response cache does not hold, the negotiation and a round of requests to rank 0 and responses back in the cycle
  that finds it queued (10, 16, 19), and in a share ``race_broadcast`` (fitted) of them a second such cycle, when a
  caller queued the next one before its loop's next cycle began (6, 6, 7 more). Its host time is ν of a tiny ring's
  transfers without delay, ν fitted.

B is the link's rate x the TCP goodput share (``eff``) with the host's CPU a byte (``byte_s``) added to the wire time
of a byte; a transfer takes max(h, 2D + h0) besides its bytes (:func:`transfer_s`). ``eff`` is fitted; framing alone
predicts :data:`WIRE_EFF` (what the shaper counts per segment: the MSS of a 1500-byte MTU with its Ethernet, IPv4 and
TCP-with-timestamps headers, 1448 / 1514 = 0.956), the fit's value is compared with it in
``docs/results/collectives/README.md``.

Two terms come from the link itself, on the emulated cluster (``bench/cluster/net.py``, ``delay.py``):

- **the shaper's bucket** (``tbf`` with ``burst`` = :func:`bench.cluster.net.tbf_burst_bytes`, 64 KiB at 100 Mbit/s,
  500 kB at 1 Gbit/s): an operation that starts with a full bucket saves at most burst / rate of the time the rate
  costs it; repeated back to back (as the micro-benchmark and a training loop repeat them) it cannot beat the rate
  over its period: the bytes its busiest shaper carries an operation over the rate (:func:`bucketed`).
- **TCP's congestion control, BBR** (``net/ipv4/tcp_bbr.c``; the kernel's default here, ``CONFIG_DEFAULT_TCP_CONG``
  ``"bbr"``, which every new network namespace inherits, and the suite sets none; :data:`MICROBENCH_CC`): a flight
  written whole into an idle connection is *app-limited*, so BBR never leaves STARTUP
  (``bbr_check_full_bw_reached`` skips app-limited samples), where the pacing rate only grows
  (``bbr_set_pacing_rate``) to high_gain x the best delivery rate seen, and a flight's delivery rate is its bytes
  over its pacing time plus a round trip (``net/ipv4/tcp_rate.c``: the longer of the send and the ack phase). So a
  connection that carries flights of F bytes settles where the pacing rate is ((high_gain - 1) F + first burst) /
  RTT (:func:`bbr_pacing_rate`): a flight takes about RTT / 1.86 more than its first burst to leave, one more delay
  than the wire, whatever its size, until the wire is slower (:func:`pace_s`). That is the "one more round trip" a
  64 KiB - 1 MiB message takes at 25 ms. A message whose next one waits for a notice sent behind it on the same
  socket (the ping-pong: the receiver's ``NOTIFY_RECV_READY`` for the next message follows its reply) pays the pacing
  of all its bytes, F / p. gloo's ring sends two segments together (one flight of two). Linux's restart of the
  window after an idle spell (RFC 2861, ``tcp_slow_start_after_idle`` = 1 here, ``tcp_cwnd_restart`` in
  ``net/ipv4/tcp_output.c``: back to the initial 10 segments, RFC 6928, once idle longer than the RTO), which a Cubic
  or Reno connection would pay, is skipped for a congestion control with its own ``cong_control`` (BBR's
  ``bbr_main``: ``tcp_slow_start_after_idle_check`` in ``include/net/tcp.h``, and RFC 2861's decay in
  ``tcp_cwnd_validate``), so it is no term here. Nor would it cost the micro-benchmark under Cubic: a cell's timed
  operations run back to back after an untimed warm-up operation and a barrier on the same gloo pairs (the barrier and
  the timing allreduce between measurements included), spells far shorter than the RTO (at least 200 ms,
  TCP_RTO_MIN, plus the round trip), and Horovod's own pairs carry its cache negotiation every cycle
  (``CoordinateCacheAndState``, horovod/common/controller.cc).
- **Horovod's host cost a byte** (``byte_hvd_s``, :func:`horovod_constants`): fitted, in place of gloo's ``byte_s``, for
  its allreduce and allgather, which copy their tensor in its background thread (:data:`HOROVOD_COPY`).

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
from . import loop
from .loop import segments

CELLS = REPO_ROOT / "docs" / "results" / "collectives" / "2026-11-30e-fc-v782" / "cells.jsonl"
"""The micro-benchmark's cells the calibration fits: the set measured back to back on the fc-v782 AMD EPYC (its Horovod
operations 2026-11-30 18:24 - 19:01 UTC, gloo's and send/recv 16:40 - 17:12 UTC; docs/results/collectives/README.md)."""
MTU = 1500
"""Bytes an IP packet on the emulated links may have: the veth default (``bench/cluster/net.py`` sets no MTU)."""
MSS = MTU - 20 - 20 - 12
"""TCP payload of a full segment: the MTU less the IPv4 and TCP headers and the timestamps option (Linux's default
``net.ipv4.tcp_timestamps = 1``): 1448 bytes."""
FRAME = MSS + 14 + 20 + 32
"""Bytes the shaper counts for a full segment: tbf charges a packet's length with its Ethernet header
(``qdisc_pkt_len``; a GSO packet its headers once a segment, ``qdisc_pkt_len_init``): 1514 bytes."""
WIRE_EFF = MSS / FRAME
"""Payload over the bytes the shaper counts: the goodput share of the configured rate framing alone leaves, 0.956."""
INIT_CWND = 10
"""Linux's TCP_INIT_CWND (``include/net/tcp.h``; RFC 6928's initial window of 10 segments)."""
BBR_HIGH_GAIN = (256 * 2885 // 1000 + 1) / 256
"""``bbr_high_gain`` (``net/ipv4/tcp_bbr.c``: BBR_UNIT * 2885 / 1000 + 1, i.e. 2 / ln 2), STARTUP's pacing gain."""
BBR_PACING_MARGIN = 0.99
"""``bbr_pacing_margin_percent`` = 1: BBR paces 1 % below its gain x bandwidth (``bbr_rate_bytes_per_sec``)."""
PACING_SHIFT = 10
"""``sk_pacing_shift``'s default: a paced socket's TSO/GSO burst is its pacing rate >> 10 bytes, about 1 ms of it
(``bbr_tso_segs_goal``; at least 2 segments, ``bbr_min_tso_segs``; at most one 64 KiB GSO packet)."""
GSO_MAX = 1 << 16
MICROBENCH_CC = "bbr"
"""TCP congestion control of the collectives micro-benchmark's connections: this machine's kernel default
(``CONFIG_DEFAULT_TCP_CONG="bbr"``; ``net.ipv4.tcp_congestion_control`` reads ``bbr`` in a new network namespace,
which the emulated hosts are, and nothing in ``bench/cluster`` sets another). ``cells.jsonl`` does not record it;
:func:`load_cells` gives every cell this value, and :func:`fit` records it as the constant ``cc``."""
MAX_LOAD = None
"""The fit's choice of cells by the 1-minute load average recorded when each cell's job started (``load``): cells
above it are left out (None: every cell). Kept at None: in ``cells.jsonl`` the load grew with time, and every 1 Gbit/s
cell ran at 3.7 or more, so a cut by load removes a link rate rather than noise; the README reports the fit on the
cells at most 4.0 (two runnable tasks a core) beside it."""
LOSS = "soft_l1"
"""The fit's loss on each cell's log(predicted / measured) (scipy's ``least_squares``): ``soft_l1`` counts a residual
past :data:`F_SCALE` about linearly, not squared, so the cells the load disturbed (the 0-delay and Horovod cells: up
to 40 % between a cell's own repeats) pull the constants less than the many that agree; the issue's target is a
median. ``linear`` (plain least squares, the fit until 2026-11-29) is reported beside it in the README."""
F_SCALE = 0.1
"""Residual (in log units, about 10 %) past which :data:`LOSS` ``soft_l1`` stops squaring."""
HOROVOD_OPS = ("allreduce_hvd", "broadcast", "allgather")
OPS = ("allreduce_hvd", "allreduce_gloo", "broadcast", "allgather", "sendrecv")
SHARED = ("eff", "h_s", "h0_s", "byte_s", "w_allgather")
MEANING = {
    "cc": "TCP congestion control of the micro-benchmark's connections (bbr: STARTUP's pacing of app-limited flights)",
    "eff": "TCP goodput over the configured rate of a shaped link (collectives micro-benchmark)",
    "h_s": "s a transfer takes besides its bytes without a link delay (kernel, shaper, wake-ups of busy hosts)",
    "w_allgather": "bytes on a rank's link per byte of its share in Horovod's allgather, over gloo's ring's one",
    "h0_s": "s a transfer takes besides its bytes and its two one-way delays on a delayed link",
    "byte_s": "s of host CPU a byte adds to its wire time (gloo over TCP)",
    "byte_hvd_s": "s of host CPU a byte adds to Horovod's allreduce and allgather (its copies, its background thread)",
    "h_hvd_s": "h of Horovod's operations (gloo called from its background thread in C++, its caller woken once)",
    "a_": "s an operation costs besides its transfers (Horovod's cycle and fusion copies; the call itself)",
    "nu_": "tiny ring allreduces of Horovod's negotiations an operation waits for (their host time without delay; "
           "their delays are derived, bench/predict/loop.py)",
    "race_broadcast": "share of the broadcasts negotiated in two cycles, a caller having queued one before its "
                      "loop's next cycle began (bench/predict/loop.py, race_delays)",
}


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


def tso_burst(pacing_bps: float) -> float:
    """Bytes a paced BBR socket sends at once: its pacing rate >> :data:`PACING_SHIFT` (about 1 ms of it), at least
    2 segments, at most one GSO packet (``bbr_tso_segs_goal``, ``bbr_min_tso_segs`` in ``net/ipv4/tcp_bbr.c``)."""
    return min(GSO_MAX, max(2 * MSS, pacing_bps / 2 ** PACING_SHIFT))


def bbr_pacing_rate(flight: float, rtt_s: float) -> float:
    """Bytes a second BBR paces at, in STARTUP, on a connection that carries app-limited flights of ``flight`` bytes
    over a round trip of ``rtt_s`` (``net/ipv4/tcp_bbr.c``, ``net/ipv4/tcp_rate.c``; the module docstring).

    It starts at g x INIT_CWND x MSS / srtt (``bbr_init_pacing_rate_from_rtt``), g = high_gain less the 1 % margin.
    A flight whose first burst b leaves at once and the rest at p is delivered at F / ((F - b) / p + rtt) (its last
    ACK's sample: the ack phase from the flight's first send); BBR raises p to g x that while it is higher, so p
    settles where p x rtt = (g - 1) F + b(p), b(p) = :func:`tso_burst`, or stays at its start if that is higher."""
    g = BBR_HIGH_GAIN * BBR_PACING_MARGIN
    start = g * INIT_CWND * MSS / rtt_s
    tau, lo, hi = 2.0 ** -PACING_SHIFT, 2 * MSS, GSO_MAX
    base = (g - 1) * flight
    p = (base + lo) / rtt_s  # the burst at its floor of 2 segments
    if p * tau > lo:  # the burst at 1/1024 s of the rate; past 64 KiB (or a round trip under 1/1024 s) one GSO packet
        p = base / (rtt_s - tau) if rtt_s > tau else math.inf
        if p * tau > hi:
            p = (base + hi) / rtt_s
    return max(start, p)


def pace_s(flight: float, rtt_s: float) -> float:
    """Seconds from the first to the last byte of an app-limited flight of ``flight`` bytes leaving a BBR socket in
    STARTUP over a round trip of ``rtt_s`` (:func:`bbr_pacing_rate`): all but its first burst go at the pacing rate.
    About rtt / (g - 1) = 0.54 rtt, one one-way delay, for every flight larger than a burst; 0 without a delay."""
    if rtt_s <= 0 or flight <= 0:
        return 0.0
    p = bbr_pacing_rate(flight, rtt_s)
    return max(0.0, flight - tso_burst(p)) / p


def _pace(flight: float, delay_s: float, k: dict, trailing: bool = False) -> float:
    """:func:`pace_s` of a flight on a link of one-way delay ``delay_s`` where the congestion control is BBR (``k``'s
    ``cc``; a calibration without it: none); ``trailing``: until a packet queued behind the flight may leave, F / p."""
    if not (k.get("cc") == "bbr" and delay_s > 0):
        return 0.0
    if trailing:
        return flight / bbr_pacing_rate(flight, 2 * delay_s)
    return pace_s(flight, 2 * delay_s)


def _wire(nbytes: float, bytes_per_s: float, k: dict) -> float:
    """Seconds ``nbytes`` take at the link's rate and in the hosts' CPU (0 or less: no rate but the host's)."""
    return (nbytes / bytes_per_s if bytes_per_s > 0 else 0.0) + nbytes * k["byte_s"]


def transfer_s(delay_s: float, k: dict) -> float:
    """Time of a transfer besides its bytes: the receiver's notice and the data, two one-way delays, and the hosts'
    own h; at a short delay the two overlap (a rank still busy when its peer's notice arrives), so the larger."""
    return max(k["h_s"], 2 * delay_s + k["h0_s"])


def ring_allreduce_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """gloo's ring allreduce (module docstring): a reduce-scatter and an allgather loop, each moving (n - 1) / n of
    the buffer a rank in (n - 1) x numSegments / n segment transfers, two in flight (iterations 0 and 1 post theirs
    together, ``ring`` in gloo/allreduce.cc), so a flight of two segments, paced as one (:func:`pace_s`)."""
    if n <= 1:
        return 0.0
    _, count = segments(nbytes, n)
    transfers = (n - 1) * count // n
    seg = (n - 1) / n * nbytes / transfers
    inflight = min(2, transfers)
    pace = _pace(inflight * seg, delay_s, k) / inflight
    wire = max(_wire(seg, bytes_per_s, k), pace)
    return 2 * ring_loop_s(transfers, transfer_s(delay_s, k) + wire, wire)


def broadcast_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """Horovod's broadcast over gloo: the root's link carries the buffer n - 1 times, one connection each, each
    flight paced on its own. (gloo/broadcast.cc today is a binomial tree, ceil(log2 n) rounds; the micro-benchmark's
    16 MiB cells take (n - 1) x M / B at n = 4, 3 x, not the tree's 2 x: the root sends to every rank.)"""
    if n <= 1:
        return 0.0
    return transfer_s(delay_s, k) + max((n - 1) * _wire(nbytes, bytes_per_s, k), _pace(nbytes, delay_s, k))


def allgather_s(nbytes: float, n: int, bytes_per_s: float, delay_s: float, k: dict) -> float:
    """gloo's ring allgatherv of ``nbytes`` in all: n - 1 dependent steps of one share (gloo/allgatherv.cc)."""
    share = k["w_allgather"] * nbytes / n
    step = transfer_s(delay_s, k) + max(_wire(share, bytes_per_s, k), _pace(share, delay_s, k))
    return (n - 1) * step if n > 1 else 0.0


def message_s(nbytes: float, bytes_per_s: float, delay_s: float, k: dict, delays: int = 1) -> float:
    """One point-to-point message (gloo/transport/tcp/pair.cc): ``delays`` one-way delays (1: the receive was posted
    early; 2: posted with the send; 3: a receive from any rank), h, and its bytes at the rate or paced, the slower:
    paced whole, as the next message of a ping-pong waits for the notice its receiver sends behind this one."""
    lat = max(k["h_s"] / 2, delays * delay_s + k["h0_s"])
    return lat + max(_wire(nbytes, bytes_per_s, k), _pace(nbytes, delay_s, k, trailing=True))


HOROVOD_HOST = {"h_s": "h_hvd_s"}
"""Host constants of every Horovod operation in place of gloo's own (a calibration without them: gloo's)."""
HOROVOD_BYTE = {"byte_s": "byte_hvd_s"}
"""Host constants of Horovod's operations that copy their tensor (:data:`HOROVOD_COPY`) in place of gloo's."""
HOROVOD_COPY = ("allreduce_hvd", "allgather")
"""Horovod's operations that copy their tensor (``GlooAllreduce::Execute``: into the output before the allreduce;
``GlooAllgather::Execute``: the rank's share into the output); ``GlooBroadcast::Execute`` hands gloo the tensor."""


def horovod_constants(k: dict, op: str) -> dict:
    """``k`` with the host constants of Horovod's operation ``op`` in place of gloo's: h (:data:`HOROVOD_HOST`) and,
    for the operations that copy their tensor, the CPU a byte (:data:`HOROVOD_BYTE`). Horovod runs gloo's algorithms
    in its background thread (``BackgroundThreadLoop``, horovod/common/operations.cc), calling gloo from C++ and
    waking its caller once (the handle it polls), where torch.distributed runs them in a worker thread and wakes the
    Python caller on a future each operation; it copies an allreduce's tensor before it (``GlooAllreduce::Execute``,
    horovod/common/ops/gloo_operations.cc) while the caller polls for the result, all on the hosts' shared cores.
    Fitted constants, not derived ones: a 4 KiB ring allreduce at n = 4 and no delay takes 6.5 - 7.2 ms through
    torch.distributed, 5.0 - 5.9 ms through Horovod (its negotiation included); the micro-benchmark's gloo operations
    are wire-bound at 1 Gbit/s (64 MiB: within 1 % of framing's rate), Horovod's allreduce of 64 MiB takes up to
    1.6 x as long."""
    names = {**HOROVOD_HOST, **(HOROVOD_BYTE if op in HOROVOD_COPY else {})}
    return {**k, **{name: k[hvd] for name, hvd in names.items() if hvd in k}}


def negotiation_s(n: int, delay_s: float, k: dict) -> float:
    """A tiny ring allreduce (the unit of Horovod's negotiation, CrossRankBitwiseAnd, horovod/common/controller.cc,
    in :func:`horovod_wait_s`)."""
    return ring_allreduce_s(8, n, 0.0, delay_s, {**k, "byte_s": 0.0})


def horovod_wait_s(op: str, n: int, delay_s: float, k: dict) -> float:
    """What Horovod's loop adds to a blocking ``op`` repeated back to back, besides the call's ``a_``: the loop's
    one-way delays played in :mod:`.loop` (:func:`~bench.predict.loop.loop_delays`; the broadcast's, and
    ``race_broadcast`` of its race's, :func:`~bench.predict.loop.race_loop_delays`: none in a calibration without
    it) and ν (``nu_``) tiny rings' host time without delay (:func:`negotiation_s`)."""
    if op == "broadcast":
        delays = loop.loop_delays(n, op) + k.get("race_broadcast", 0.0) * loop.race_loop_delays(n)
    else:
        delays = loop.loop_delays(n)
    return delays * delay_s + k[f"nu_{op}"] * negotiation_s(n, 0.0, k)


def carried(op: str, nbytes: float, n: int, k: dict) -> float:
    """Bytes the busiest shaper carries an operation ``op`` (a rank's egress, or the bridge port to it): the ring
    allreduce 2 (n - 1) / n M, the broadcast's root (n - 1) M, the allgather n - 1 shares, a ping-pong half a round
    one message a direction every two."""
    if op == "sendrecv":
        return nbytes / 2
    if op == "broadcast":
        return (n - 1) * nbytes
    if op == "allgather":
        return (n - 1) * k["w_allgather"] * nbytes / n
    return 2 * (n - 1) / n * nbytes


def bucketed(rate_s: float, free_s: float, carried_s: float, bucket_s: float) -> float:
    """An operation's seconds through a token bucket of ``bucket_s`` seconds of the rate (the shaper's ``burst``):
    ``rate_s`` with the rate throughout, ``free_s`` without its limit. A full bucket saves at most bucket_s of the
    time the rate costs (rate_s - free_s); repeated back to back, the operation cannot beat the rate over its period,
    ``carried_s`` (:func:`carried` at the rate): the bucket refills only at the rate (tbf, ``bench/cluster/net.py``)."""
    return max(rate_s - min(bucket_s, rate_s - free_s), carried_s)


def seconds(op: str, nbytes: float, n: int, rate_bps: float, delay_s: float, k: dict) -> float:
    """Seconds of operation ``op`` (:data:`OPS`) of ``nbytes`` over ``n`` ranks, one a host, on links of
    ``rate_bps`` bits a second (0: unshaped) and one-way delay ``delay_s``, with the constants ``k``."""
    burst = tbf_burst_bytes(rate_bps) if rate_bps else 0.0
    return op_seconds(op, nbytes, n, rate_bps / 8 * k["eff"] if rate_bps else 0.0, delay_s, {**k, "burst": burst})


def _data_s(op: str, nbytes: float, n: int, bps: float, delay_s: float, k: dict) -> float:
    """Seconds of ``op``'s own transfers, without Horovod's cycle and negotiation."""
    if op == "sendrecv":
        return message_s(nbytes, bps, delay_s, k)
    return {"allreduce_hvd": ring_allreduce_s, "allreduce_gloo": ring_allreduce_s, "broadcast": broadcast_s,
            "allgather": allgather_s}[op](nbytes, n, bps, delay_s, k)


def op_seconds(op: str, nbytes: float, n: int, bps: float, delay_s: float, k: dict) -> float:
    """:func:`seconds` on a link that carries ``bps`` bytes a second (0 or inf: no limit but the host's); ``k``'s
    ``burst`` (bytes the shaper counts, :func:`seconds` sets it) is the shaper's bucket (:func:`bucketed`), over the
    operation's whole period: its transfers, and the call's and Horovod's cycle's time (``a_``, ``nu_``) during which
    the bucket refills."""
    bps = 0.0 if not math.isfinite(bps) else bps
    k = horovod_constants(k, op) if op in HOROVOD_OPS else k
    rest = k[f"a_{op}"] + (horovod_wait_s(op, n, delay_s, k) if op in HOROVOD_OPS else 0.0)
    data = _data_s(op, nbytes, n, bps, delay_s, k)
    if bps > 0 and n > 1:
        # the period of an operation repeated back to back is all of it, its cycle and negotiation too: the bucket
        # refills at the rate through them, so the rate's floor is on the whole period, not on the transfers alone
        return bucketed(rest + data, rest + _data_s(op, nbytes, n, 0.0, delay_s, k), carried(op, nbytes, n, k) / bps,
                        k.get("burst", 0.0) * k["eff"] / bps)
    return rest + data


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
    """The micro-benchmark's cells, with their rate (bits/s), delay (s) and congestion control (``cc``, recorded or
    :data:`MICROBENCH_CC`)."""
    from ..config import parse_delay, parse_rate

    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            rec["rate_bps"], rec["delay_s"] = parse_rate(rec["link"]), parse_delay(rec["delay"])
            rec.setdefault("cc", MICROBENCH_CC)
            out.append(rec)
    return out


def unnamed_allgather(cell: dict) -> bool:
    """A Horovod allgather measured before the benchmark named it (c05476d, 2026-11-30; the same change made it wait
    by sleeping polls, so its cells are those without ``wait_sleep_us``). Unnamed, Horovod named each call anew and
    negotiated it through rank 0, without its response cache: a path of other collectives (``RecvReadyTensors``,
    ``SendFinalTensors``) that :func:`horovod_wait_s` does not describe. :func:`fit` leaves these cells out."""
    return cell["op"] == "allgather" and "wait_sleep_us" not in cell


def _names(ops) -> list[str]:
    split = [*(HOROVOD_HOST.values() if any(op in HOROVOD_OPS for op in ops) else ()),
             *(HOROVOD_BYTE.values() if any(op in HOROVOD_COPY for op in ops) else ())]
    race = ["race_broadcast"] if "broadcast" in ops else []
    return [*SHARED, *split, *(f"a_{op}" for op in ops), *(f"nu_{op}" for op in ops if op in HOROVOD_OPS), *race]


def fit(cells: list[dict] | None = None, max_load: float | None = MAX_LOAD, loss: str = LOSS,
        f_scale: float = F_SCALE) -> dict:
    """The constants that minimise the ``loss`` (:data:`LOSS`, scale ``f_scale``) of the log error of :func:`seconds`
    over the micro-benchmark's cells (scipy.optimize.least_squares, bounded); ``{"constants": ..., "table":
    per-operation errors, "source": ...}``. Cells recorded at a load average above ``max_load``, and the allgather
    cells measured unnamed (:func:`unnamed_allgather`), are left out (their count is ``left_out``); the cells'
    congestion control (one for all, or none recorded) is kept as the constant ``cc``."""
    import numpy as np
    from scipy.optimize import least_squares

    cells = load_cells() if cells is None else cells
    every = len(cells)
    cells = [c for c in cells if not unnamed_allgather(c)]
    if max_load is not None:
        cells = [c for c in cells if c.get("load", 0.0) <= max_load]
    ccs = {c.get("cc") for c in cells}
    if len(ccs) > 1:
        raise ValueError(f"cells of more than one congestion control: {sorted(map(str, ccs))}")
    cc = ccs.pop() if ccs else None
    ops = [op for op in OPS if any(c["op"] == op for c in cells)]
    names = _names(ops)
    start = {"eff": 0.95, "h_s": 1e-3, "h_hvd_s": 1e-3, "h0_s": 2e-4, "byte_s": 1e-9, "w_allgather": 1.0,
             "byte_hvd_s": 1e-9, "race_broadcast": 0.3, **{f"a_{op}": 1e-3 for op in ops},
             **{f"nu_{op}": 1.0 for op in ops if op in HOROVOD_OPS}}
    upper = {"eff": 1.2, "h_s": 0.05, "h_hvd_s": 0.05, "h0_s": 0.05, "byte_s": 1e-7, "w_allgather": 3.0,
             "byte_hvd_s": 1e-7, "race_broadcast": 1.0, **{f"a_{op}": 0.5 for op in ops},
             **{f"nu_{op}": 10.0 for op in ops if op in HOROVOD_OPS}}

    def residuals(x):
        k = {**dict(zip(names, x)), "cc": cc}
        return np.array([math.log(seconds(c["op"], c["bytes"], c["np"], c["rate_bps"], c["delay_s"], k)
                                  / c["median_s"]) for c in cells])

    lower = [0.5 if n in ("eff", "w_allgather") else 0.0 for n in names]
    res = least_squares(residuals, [start[n] for n in names], bounds=(lower, [upper[n] for n in names]), loss=loss,
                        f_scale=f_scale)
    k = {**dict(zip(names, map(float, res.x))), **({"cc": cc} if cc else {})}
    return {"constants": k, "table": error_table(cells, k), "source": str(CELLS.relative_to(REPO_ROOT)),
            "cells": len(cells), "left_out": every - len(cells), "max_load": max_load, "loss": loss, "f_scale": f_scale}


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
