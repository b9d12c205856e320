"""NCCL's allreduce as its own tuner prices it: the ring and the tree, each protocol, and the one NCCL picks.

Read at its source, NVIDIA/nccl 2.30.7 (commit 5067397c2676, 2026-06-11; ``makefiles/version.mk``):

- ``src/graph/tuning.cc``, ``ncclTopoTuneModel``: per communicator, a latency (us) and a bandwidth (GB/s, the
  algorithm bandwidth: bytes of the buffer over time) for each collective, algorithm and protocol, from the
  topology search's graphs (channels, bandwidth a channel, link types) and the constants
  ``ncclTunerConstantsDefaults`` (``baseLatencies``, ``hwLatencies``, ``llMaxBws``, ``perChMax*Bws``);
- ``src/graph/tuning.cc``, ``ncclTopoGetAlgoTime``: one operation of ``nBytes`` costs ``lat + nBytes / (1000 bw)``
  us, the tree's bandwidth scaled by ``treeCorrectionFactor`` and the multi-node Simple ring's latency by its
  "plateau" factor;
- ``src/enqueue.cc``, ``topoGetAlgoInfo``: NCCL runs the (algorithm, protocol) of least time, the first in its
  order (tree before ring, LL before LL128 before Simple) on a tie.

Only AllReduce, only Tree and Ring (``NCCL_ALGO_TREE`` 0, ``NCCL_ALGO_RING`` 1), with LL, LL128 and Simple: CollNet
needs SHARP switches and is off by default (``collnetEnable``), NVLS needs Hopper's NVSwitch multicast
(``nvlsEfficiency`` is 0 before Hopper), PAT does no allreduce. So only Volta and Ampere rows of the constants are
kept: a Hopper or Blackwell node would pick NVLS, which this module does not price.

What NCCL learns from its topology search (``src/graph/search.cc``) and this module is given instead, each a
simplification stated in the hardware's description (``pipelines/hardware/model/<id>.yaml``, key ``nccl``):

- ``channels``: the graph's channel count (``graphs[a]->nChannels``), the same for the ring and the tree;
- the bandwidth a channel (``bwIntra``/``bwInter``): the description's allreduce bus bandwidth of the slowest level
  the operation spans over ``channels`` (its ``busbw_GBps``, which is NCCL's ``nChannels * bw`` for a Simple ring);
  NCCL takes ``bwIntra`` up to two nodes and ``bwInter`` beyond, but its search fits both to the network on more
  than one node, so here both are the network's there (the tree's extra reach on two nodes, where it can beat the
  network's bus bandwidth, is left out: a conservative tree);
- ``intra``: the link type inside a node (``typeIntra``: NVLink or PCI, which picks the ``hwLatencies`` row);
- ``cpu``: the hosts' CPU vendor (``getNetOverhead``: 1 us Intel, 2 us AMD; and the ``llMaxBws`` row across nodes);
- the network's own latency (``latencyInter``, what the net plugin reports): 0, as NCCL's InfiniBand transport
  reports it (``src/transport/net_ib/init.cc``: ``props->latency = 0; // Not set``);
- the tree's pattern: a balanced or split tree (no 0.85 penalty), except one GPU a node, where NCCL's search takes
  ``NCCL_TOPO_PATTERN_TREE`` (``search.cc``: ``if (ngpus == 1 ...) graph->pattern = NCCL_TOPO_PATTERN_TREE``);
- LL128 on when the node's GPUs are on NVLink (tuning.cc: ``typeIntra <= PATH_NVB``), assuming the NICs sit on the
  GPUs' PCIe switches (``typeInter <= PATH_PXB``), as on DGX machines; no user ``NCCL_ALGO``/``NCCL_PROTO``;
- ``numPipeOps`` 1: each operation is priced alone.

Units: NCCL's GB is 1e9 bytes (``nBytes / (1000 * bw)`` us); latencies here in us, results in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

VERSION = "2.30.7"
COMMIT = "5067397c2676d5aed50042fc39e5c8ee96eb0027"

ALGORITHMS = ("tree", "ring")
"""NCCL_ALGO_TREE 0, NCCL_ALGO_RING 1 (src/include/plugin/nccl_tuner.h): topoGetAlgoInfo keeps the first of equal
times in this order."""
PROTOCOLS = ("LL", "LL128", "Simple")
"""NCCL_PROTO_LL 0, NCCL_PROTO_LL128 1, NCCL_PROTO_SIMPLE 2 (src/include/plugin/nccl_tuner.h)."""
GPUS = ("volta", "ampere")
"""The compute-capability rows kept (tuning.cc compCapIndex: NCCL_VOLTA_COMPCAP_IDX 0, NCCL_AMPERE_COMPCAP_IDX 1)."""
CPUS = ("intel", "amd", "other")
LINKS = ("nvlink", "pci")
MAX_CHANNELS = 64
"""MAXCHANNELS (src/include/device.h, NCCL 2.30.7)."""

BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
"""tuning.cc ncclTunerConstantsDefaults.baseLatencies, rows Tree and Ring, columns LL, LL128, Simple (NCCL 2.30.7)."""
HW_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
"""tuning.cc ncclTunerConstantsDefaults.hwLatencies[NCCL_HW_NVLINK | NCCL_HW_PCI | NCCL_HW_NET][Tree | Ring][LL,
LL128, Simple], us a step (NCCL 2.30.7)."""
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0))
"""tuning.cc llMaxBws (GB/s): row 0 "Volta-N1/Intel-N2/Intel-N4", row 1 "Ampere-N1/AMD-N2/AMD-N4"; the row is the GPU's
on one node, the CPU's (AMD 1, else 0) across nodes; the column is 1, 2, more than 2 nodes (NCCL 2.30.7)."""
PER_CHANNEL_MAX_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0))
"""tuning.cc perChMaxRingLL128Bws, Volta and Ampere rows, columns 1 / 2 / more nodes (GB/s a channel)."""
PER_CHANNEL_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0))
"""tuning.cc perChMaxTreeLL128Bws, Volta and Ampere rows."""
PER_CHANNEL_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8))
"""tuning.cc perChMaxTreeBws, Volta and Ampere rows."""

RING_LL_SHARE = 0.5
"""tuning.cc: ``if (a == NCCL_ALGO_RING && p == NCCL_PROTO_LL) busBw = std::min(llMaxBw, busBw * .5)``."""
RING_LL128_SHARE = 0.92
"""tuning.cc: the ring's LL128 ``busBw * (0.92 /*120.0/128.0*/)``, at most nChannels x perChMaxRingLL128Bw."""
TREE_ALLREDUCE_SHARE = 0.92
"""tuning.cc: the tree's allreduce ``busBw * .92``, at most nChannels x perChMaxTreeBw (every protocol)."""
TREE_LL_DIVISOR = 3.8
"""tuning.cc: the tree's LL ``busBw * 1.0 / 3.8``, at most llMaxBw."""
TREE_LL128_SHARE = (7.0 / 9.0, 120.0 / 128.0)
"""tuning.cc: the tree's LL128 ``busBw * (nNodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0)``, at most nChannels x
perChMaxTreeLL128Bw."""
TREE_PATTERN_SHARE = 0.85
"""tuning.cc: ``if (a == NCCL_ALGO_TREE && comm->maxTreePattern == NCCL_TOPO_PATTERN_TREE) busBw *= .85``."""
TREE_ALGBW_RATIO = 0.5
"""tuning.cc, "Convert bus BW to algorithm BW": the tree's ``ratio *= .5``; the ring's is nRanks / nsteps."""
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}
"""tuning.cc getNetOverhead: a network post's overhead, us (x86 Intel 1.0, x86 AMD 2.0, else 1.0)."""
SIMPLE_NET_OVERHEAD = 3
"""tuning.cc: ``if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3`` (an inter-node ring's intra steps)."""
NET_LATENCY_US = 0.0
"""graphs[a]->latencyInter: the net plugin's latency; NCCL's InfiniBand transport reports 0
(src/transport/net_ib/init.cc ``props->latency = 0; // Not set``)."""
RING_PLATEAU = {"volta": 1.9, "ampere": 1.4}
"""tuning.cc ncclTopoGetAlgoTime, "Plateau effect of ring": a multi-node Simple ring allreduce's latency
``*= comm->minCompCap < 80 ? 1.9 : 1.4`` once ``nBytes / (nChannels * nRanks) >= 64``."""
RING_PLATEAU_MIN_BYTES = 64
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}
"""tuning.cc treeCorrectionFactor[protocol][log2i(nBytes >> 6)], applied by ncclTopoGetAlgoTime to the tree's
allreduce bandwidth for 0 <= log2i(nBytes >> 6) < 23 ("powers of two, 64 B to 256MB")."""
TREE_CORRECTION_SIZES = 23


@dataclass(frozen=True)
class Tuning:
    """What NCCL's tuner would learn from the topology search, given by the hardware's description instead."""

    gpu: str
    cpu: str
    intra: str
    channels: int
    source: str = ""


@dataclass(frozen=True)
class Cost:
    """One (algorithm, protocol) of an allreduce of ``nbytes``, as ncclTopoGetAlgoTime prices it."""

    algorithm: str
    protocol: str
    latency_s: float
    """NCCL's latency term, the ring's plateau factor included."""
    wire_s: float
    """nBytes over the algorithm bandwidth, the tree's correction factor included."""

    @property
    def seconds(self) -> float:
        return self.latency_s + self.wire_s


def log2i(n: int) -> int:
    """NCCL's log2i (src/include/utils.h, log2Down): floor(log2 n), -1 for n < 1."""
    return n.bit_length() - 1 if n >= 1 else -1


def _bus_bandwidth(t: Tuning, algorithm: str, protocol: str, bus: float, nodes: int, per_node: int) -> float:
    """tuning.cc's "various model refinements" of ``nChannels * bw`` (GB/s) for an allreduce."""
    g, col = GPUS.index(t.gpu), min(nodes, 3) - 1
    ll_max = LL_MAX_BW[g if nodes == 1 else int(t.cpu == "amd")][col]
    p = PROTOCOLS.index(protocol)
    if algorithm == "ring":
        if p == 0:
            return min(ll_max, bus * RING_LL_SHARE)
        if p == 1:
            return min(bus * RING_LL128_SHARE, t.channels * PER_CHANNEL_MAX_RING_LL128[g][col])
        return bus
    bus = min(bus * TREE_ALLREDUCE_SHARE, t.channels * PER_CHANNEL_MAX_TREE[g][col])
    if p == 0:
        bus = min(bus / TREE_LL_DIVISOR, ll_max)
    elif p == 1:
        bus = min(bus * TREE_LL128_SHARE[nodes > 1], t.channels * PER_CHANNEL_MAX_TREE_LL128[g][col])
    return bus * (TREE_PATTERN_SHARE if per_node == 1 else 1.0)


def _latency_us(t: Tuning, algorithm: str, protocol: str, n: int, nodes: int) -> float:
    """tuning.cc's ``latencies[ncclFuncAllReduce][a][p]``: the base, plus a hardware latency per step NCCL counts."""
    p = PROTOCOLS.index(protocol)
    intra = HW_LATENCY_US[t.intra][algorithm][p]
    # one GPU a node exposes the network's whole latency: NCCL takes the tree's network row then
    inter = HW_LATENCY_US["net"]["tree" if n == nodes else algorithm][p] + NET_LATENCY_US
    if protocol == "Simple":
        inter += NET_LATENCY_US  # "the flush extra latency"
    lat = BASE_LATENCY_US[algorithm][p]
    if algorithm == "ring":
        steps = 2 * (n - 1)
        inter_steps = 2 * (nodes - 1)
        if nodes > 1:  # an inter-node ring still posts every step to the network
            intra = max(intra, NET_OVERHEAD_US[t.cpu] * (SIMPLE_NET_OVERHEAD if protocol == "Simple" else 1))
        return lat + (steps - inter_steps) * intra + inter_steps * inter
    return lat + 2 * ((n // nodes - 1) * intra + log2i(nodes) * inter)


def costs(t: Tuning, n: int, nbytes: float, per_node: int, intra_Bps: float, inter_Bps: float | None) -> list[Cost]:
    """Every enabled (algorithm, protocol) of one allreduce of ``nbytes`` over ``n`` GPUs, ``per_node`` a node, the
    node's link at ``intra_Bps`` and the network at ``inter_Bps`` (bus bandwidths, bytes/s), in NCCL's order."""
    if n <= 1:
        return [Cost("ring", "Simple", 0.0, 0.0)]
    per_node = max(1, min(per_node, n))
    nodes = math.ceil(n / per_node)
    bus = (intra_Bps if nodes == 1 or inter_Bps is None else min(intra_Bps, inter_Bps)) / 1e9
    size = int(nbytes)
    out = []
    for algorithm in ALGORITHMS:
        for protocol in PROTOCOLS:
            if protocol == "LL128" and t.intra != "nvlink":
                continue
            algbw = _bus_bandwidth(t, algorithm, protocol, bus, nodes, per_node)
            algbw *= n / (2 * (n - 1)) if algorithm == "ring" else TREE_ALGBW_RATIO
            lat = _latency_us(t, algorithm, protocol, n, nodes)
            log_size = log2i(size >> 6)
            if algorithm == "tree" and 0 <= log_size < TREE_CORRECTION_SIZES:
                algbw *= TREE_CORRECTION[protocol][log_size]
            if (algorithm == "ring" and protocol == "Simple" and nodes > 1
                    and size // (t.channels * n) >= RING_PLATEAU_MIN_BYTES):
                lat *= RING_PLATEAU[t.gpu]
            out.append(Cost(algorithm, protocol, lat * 1e-6, size / (1000 * algbw) * 1e-6))
    return out


def allreduce(t: Tuning, n: int, nbytes: float, per_node: int, intra_Bps: float, inter_Bps: float | None) -> Cost:
    """The (algorithm, protocol) NCCL runs: the least time, the first in NCCL's order on a tie (enqueue.cc)."""
    return min(costs(t, n, nbytes, per_node, intra_Bps, inter_Bps), key=lambda c: c.seconds)
