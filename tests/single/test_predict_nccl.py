"""NCCL's allreduce as its tuner prices it (bench/predict/nccl.py), against values worked out by hand from the constants
of NVIDIA/nccl 2.30.7's src/graph/tuning.cc (quoted in each test), its hook into the step model (``collectives: nccl``
in a described hardware), the published anchors with it, and the schema's refusals."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from bench import BenchError
from bench.predict import anchors, hardware, nccl
from bench.predict.model import Model, allreduce_cost, ring_cost

GB = 1e9
# a DGX-1 (V100, Intel hosts, NVLink at 130 GB/s bus bandwidth, 4 x EDR at 40), 8 channels:
# pipelines/hardware/model/dgx1.yaml
VOLTA = nccl.Tuning("volta", "intel", "nvlink", 8)
NODE, NET = 130 * GB, 40 * GB


def pick(n: int, nbytes: int, tuning=VOLTA, per_node: int = 8, intra: float = NODE, inter: float = NET) -> nccl.Cost:
    return nccl.allreduce(tuning, n, nbytes, per_node, intra, inter)


def cost(algorithm: str, protocol: str, n: int, nbytes: int, tuning=VOLTA, per_node: int = 8) -> nccl.Cost:
    return next(c for c in nccl.costs(tuning, n, nbytes, per_node, NODE, NET)
                if (c.algorithm, c.protocol) == (algorithm, protocol))


def us(seconds: float) -> float:
    return seconds * 1e6


@pytest.mark.parametrize("n", [2, 4, 8])
def test_on_one_node_every_step_of_both_algorithms_is_an_nvlink_step(n):
    """tuning.cc: latency = baseLatencies[a][p] + the ring's 2(n-1) steps x hwLatencies[NVLINK][RING][p], or the
    tree's 2((n/nNodes - 1) x hwLatencies[NVLINK][TREE][p] + log2(1) x ...) on one node."""
    small = 64  # no plateau, no bandwidth to speak of
    assert us(cost("ring", "Simple", n, small).latency_s) == pytest.approx(8.4 + 2 * (n - 1) * 3.4)
    assert us(cost("ring", "LL", n, small).latency_s) == pytest.approx(6.6 + 2 * (n - 1) * 0.6)
    assert us(cost("ring", "LL128", n, small).latency_s) == pytest.approx(14.0 + 2 * (n - 1) * 1.9)
    assert us(cost("tree", "Simple", n, small).latency_s) == pytest.approx(8.4 + 2 * (n - 1) * 4.0)
    assert us(cost("tree", "LL", n, small).latency_s) == pytest.approx(6.8 + 2 * (n - 1) * 0.6)


@pytest.mark.parametrize("nodes", [2, 4, 8, 16])
def test_across_nodes_the_tree_pays_log2_nodes_network_steps_and_the_ring_every_node(nodes):
    """8 GPUs a node. Tree: 8.4 + 2((8 - 1) 4.0 + log2(nodes) 14.0) us (hwLatencies NVLINK/NET, Tree, Simple); ring:
    8.4 + (2(n-1) - 2(nodes-1)) max(3.4, 3 x 1.0) + 2(nodes-1) 14.0 (NVLink steps no faster than the network's post,
    getNetOverhead 1 us on Intel, x3 for Simple); on AMD hosts the post is 2 us, so every NVLink step costs 6."""
    n = 8 * nodes
    small = 64  # 64 // (8 channels x n) < 64: below the ring's plateau
    tree = 8.4 + 2 * (7 * 4.0 + math.log2(nodes) * 14.0)
    assert us(cost("tree", "Simple", n, small).latency_s) == pytest.approx(tree)
    ring = 8.4 + (2 * (n - 1) - 2 * (nodes - 1)) * 3.4 + 2 * (nodes - 1) * 14.0
    assert us(cost("ring", "Simple", n, small).latency_s) == pytest.approx(ring)
    amd = dataclasses.replace(VOLTA, cpu="amd")
    assert us(cost("ring", "Simple", n, small, amd).latency_s) == pytest.approx(
        8.4 + (2 * (n - 1) - 2 * (nodes - 1)) * 6.0 + 2 * (nodes - 1) * 14.0)
    # one GPU a node: every step is a network step, priced with the tree's network row (14.0 for Simple here too)
    assert us(cost("ring", "LL", nodes, small, per_node=1).latency_s) == pytest.approx(6.6 + 2 * (nodes - 1) * 5.0)


def test_the_multi_node_simple_ring_pays_its_plateau_factor_once_each_rank_has_64_bytes_a_channel():
    """ncclTopoGetAlgoTime: lat x 1.9 before Ampere, 1.4 from it, once nBytes / (nChannels x nRanks) >= 64."""
    n, base = 16, 8.4 + (30 - 2) * 3.4 + 2 * 14.0
    assert us(cost("ring", "Simple", n, 64 * 8 * n - 1).latency_s) == pytest.approx(base)
    assert us(cost("ring", "Simple", n, 64 * 8 * n).latency_s) == pytest.approx(1.9 * base)
    ampere = dataclasses.replace(VOLTA, gpu="ampere")
    assert us(cost("ring", "Simple", n, 64 * 8 * n, ampere).latency_s) == pytest.approx(1.4 * base)
    assert us(cost("ring", "Simple", 8, 2 ** 26).latency_s) == pytest.approx(8.4 + 14 * 3.4)  # one node: none


def test_on_one_node_the_protocol_flips_with_the_size_and_the_ring_wins_throughout():
    """1 KiB: LL's latency (6.6 + 14 x 0.6 = 15.0 us) wins; the Simple ring at 25.6 MB (one DDP bucket of ResNet-50):
    56.0 + M / (130 x 8/14) against LL128's 40.6 + M / (0.92 x 130 x 8/14), the tree's 0.92 x 130 / 2 x 0.7 far
    behind (treeCorrectionFactor[Simple][18] = 0.7)."""
    tiny = pick(8, 1024)
    assert (tiny.algorithm, tiny.protocol) == ("ring", "LL")
    assert us(tiny.latency_s) == pytest.approx(15.0)
    m = 25_557_032
    big = pick(8, m)
    assert (big.algorithm, big.protocol) == ("ring", "Simple")
    assert us(big.seconds) == pytest.approx(56.0 + m / (1000 * 130 * 8 / 14))
    assert us(cost("ring", "LL128", 8, m).seconds) == pytest.approx(40.6 + m / (1000 * 0.92 * 130 * 8 / 14))
    assert us(cost("tree", "Simple", 8, m).seconds) == pytest.approx(
        8.4 + 2 * 7 * 4.0 + m / (1000 * 0.92 * 130 * 0.5 * 0.7))


def test_across_16_nodes_the_tree_wins_small_messages_and_the_ring_large_ones():
    """128 GPUs (16 DGX-1s). 8 KiB: the tree's LL, 6.8 + 2(7 x 0.6 + 4 x 5.0) us and (0.92 x 40) / 3.8 / 2 GB/s x
    treeCorrectionFactor[LL][7] = 0.7, against the ring's 224 NVLink steps of at least 1 us. 256 MiB: the ring's
    LL128, 14.0 + 224 x 1.9 + 30 x 4.0 us at 0.92 x 40 x 128/254 GB/s (its Simple pays the 1.9 plateau)."""
    n = 128
    small = pick(n, 8192)
    assert (small.algorithm, small.protocol) == ("tree", "LL")
    assert us(small.seconds) == pytest.approx(6.8 + 2 * (7 * 0.6 + 4 * 5.0) + 8192 / (1000 * 0.92 * 40 / 3.8 / 2 * 0.7))
    assert min(us(c.latency_s) for c in nccl.costs(VOLTA, n, 8192, 8, NODE, NET) if c.algorithm == "ring") >= 224
    m = 2 ** 28
    large = pick(n, m)
    assert (large.algorithm, large.protocol) == ("ring", "LL128")
    assert us(large.seconds) == pytest.approx(14.0 + 224 * 1.9 + 30 * 4.0 + m / (1000 * 0.92 * 40 * 128 / 254))


def test_at_one_megabyte_the_ring_wins_on_two_nodes_and_the_tree_on_32():
    """1 MiB. Two nodes: the ring's LL128, 14.0 + 28 x 1.9 + 2 x 4.0 us at 0.92 x 40 x 16/30 GB/s (129 us), before the
    tree's LL128 (14.0 + 2(7 x 1.25 + 8.5) at 0.92 x 40 x 120/128 / 2 x 0.6). 32 nodes: the ring's 448 NVLink and 62
    network steps cost more than the tree's wire: 14.0 + 2(7 x 1.25 + 5 x 8.5) us at the same bandwidth."""
    m = 2 ** 20
    two = pick(16, m)
    assert (two.algorithm, two.protocol) == ("ring", "LL128")
    assert us(two.seconds) == pytest.approx(14.0 + 28 * 1.9 + 2 * 4.0 + m / (1000 * 0.92 * 40 * 16 / 30))
    tree_bw = 1000 * 0.92 * 40 * 120 / 128 / 2 * 0.6
    assert us(cost("tree", "LL128", 16, m).seconds) == pytest.approx(14.0 + 2 * (7 * 1.25 + 8.5) + m / tree_bw)
    many = pick(256, m)
    assert (many.algorithm, many.protocol) == ("tree", "LL128")
    assert us(many.seconds) == pytest.approx(14.0 + 2 * (7 * 1.25 + 5 * 8.5) + m / tree_bw)


def test_ll128_needs_nvlink_and_a_pci_node_pays_pci_steps():
    pci = dataclasses.replace(VOLTA, intra="pci")
    assert {c.protocol for c in nccl.costs(pci, 8, 2 ** 20, 8, NODE, NET)} == {"LL", "Simple"}
    assert us(cost("ring", "Simple", 4, 64, pci).latency_s) == pytest.approx(8.4 + 6 * 5.7)  # hwLatencies[PCI][RING]


def test_the_step_model_prices_a_described_allreduce_with_nccl_only_where_the_file_says_so():
    dgx1 = hardware.described("dgx1")
    assert dgx1.nccl == nccl.Tuning("volta", "intel", "nvlink", 8, dgx1.nccl.source) and dgx1.nccl.source
    assert hardware.described("eth10g").nccl is None  # the default: gloo's ring
    eth = hardware.described("eth10g")
    assert allreduce_cost(eth, 16, 1e8, ops=4) == ring_cost(eth, 16, 1e8)
    # four buckets of 25.6 MB on 8 GPUs: four Simple rings of 56.0 us and M / (130 x 8/14 GB/s) each, one after the
    # other: the last one's latency is exposed, the rest is time the backward pass may hide
    wire, lat = allreduce_cost(dgx1, 8, 4 * 25_557_032, ops=4)
    assert lat == pytest.approx(56.0e-6)
    assert wire == pytest.approx(4 * 25_557_032 / (130e9 * 8 / 14) + 3 * 56.0e-6)


@pytest.fixture(scope="module")
def model():
    return Model(hardware.load_calibration())


def test_the_dgx1_anchor_moves_by_the_latency_nccl_counts_and_stays_within_3_percent(model):
    """DDP's four 25 MB buckets of ResNet-50 on one DGX-1: the four operations hide behind the backward pass either way
    but for one latency, so the step changes by 56.0 us (NCCL's Simple ring on NVLink, 8.4 + 14 x 3.4) - 14 x 10 us
    (the gloo ring's hops at the file's latency_us): 84 us shorter. Published: 2855 img/s (7.76x)."""
    hw = hardware.described("dgx1")
    cfg = anchors._config("ddp", hw, 8, "resnet50@64")
    wl = hardware.workload(cfg, hw, None)
    with_nccl = model.predict(cfg, hw, wl)
    with_ring = model.predict(cfg, dataclasses.replace(hw, nccl=None), wl)
    assert with_nccl.step_s - with_ring.step_s == pytest.approx(56.0e-6 - 14 * 10e-6, abs=1e-7)
    published = 2855
    before, after = with_ring.throughput / published - 1, with_nccl.throughput / published - 1
    assert 0 < before < after < 0.03


def test_the_dgx_a100_anchor_is_reproduced_within_3_percent(model):
    """DeepLearningExamples: 938 img/s on one A100 (TF32), 7248 on eight (7.72x)."""
    eff, tn = anchors.efficiency(model, "ddp", "dgxa100-ib", "resnet50@64", 8)
    assert abs(eff / (7248 / (8 * 938)) - 1) < 0.03
    assert tn == pytest.approx(8 * 938 * eff)


DGX1 = Path(hardware.MODEL_DIR / "dgx1.yaml")


@pytest.mark.parametrize("old, new, fragment", [
    ("collectives: nccl", "collectives: mpi", "collectives is 'mpi'; valid: nccl, ring"),
    ("  gpu: volta", "  gpu: hopper", "nccl.gpu is 'hopper'; valid: volta, ampere"),
    ("  cpu: intel", "  cpu: arm", "nccl.cpu is 'arm'; valid: intel, amd, other"),
    ("  intra: nvlink", "  intra: nvswitch", "nccl.intra is 'nvswitch'; valid: nvlink, pci"),
    ("  channels: 8", "  channels: 0", "nccl.channels is 0, not an integer in [1, 64]"),
    ("  channels: 8", "  channels: many", "nccl.channels is 'many'"),
    ("  channels: 8", "  nchannels: 8", "collectives: nccl needs an nccl mapping with gpu, cpu, intra and channels"),
    ("    size: 8 ", "    size: half ", "collectives: nccl prices a node's link and one network"),
])
def test_a_bad_collectives_setting_is_refused_in_one_line(tmp_path, old, new, fragment):
    text = DGX1.read_text()
    assert old in text, old
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(BenchError) as err:
        hardware.described(str(bad))
    message = str(err.value)
    assert "\n" not in message and fragment in message and str(bad) in message


def test_the_cli_refuses_a_bad_collectives_value_in_one_line(tmp_path, capsys):
    from bench.__main__ import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(DGX1.read_text().replace("collectives: nccl", "collectives: [nccl]", 1))
    assert main(["predict", "sync", "--np", "2", "--hardware", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "collectives is ['nccl']; valid: nccl, ring" in err
