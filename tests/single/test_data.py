"""Datasets and per-worker sharding."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.config import TrainConfig
from bench.typed import build
from bench.data import Shard, load_dataset, shard_indices, steps_per_epoch
from bench.models import build_model


@pytest.mark.parametrize("n, workers", [(100, 1), (100, 3), (4000, 4), (7, 7)])
def test_shards_are_disjoint_covering_and_deterministic(n, workers):
    shards = [shard_indices(n, workers, k, seed=3) for k in range(workers)]
    allidx = np.concatenate(shards)
    assert len(allidx) == n and len(set(allidx.tolist())) == n  # disjoint and covering
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    again = [shard_indices(n, workers, k, seed=3) for k in range(workers)]
    assert all((a == b).all() for a, b in zip(shards, again))
    if n > 10:
        assert not (shard_indices(n, workers, 0, seed=4) == shards[0]).all()


def test_shard_batches_reshuffle_per_epoch_within_the_shard():
    ds = load_dataset(build(TrainConfig, {"dataset": "digits"}))
    shard = Shard(ds, 2, 1, batch_size=16, seed=0)
    e0, e1 = shard.order(0), shard.order(1)
    assert sorted(e0) == sorted(e1) == sorted(shard.indices) and not (e0 == e1).all()
    batches = list(shard.batches(0))
    assert len(batches) == shard.steps == steps_per_epoch(len(ds.x_train), 2, 16)
    assert all(len(y) == 16 for _, y in batches)


def test_batch_larger_than_shard_is_a_clear_error():
    with pytest.raises(BenchError, match="batch_size 64 is larger than a worker's shard"):
        steps_per_epoch(100, 2, 64)


def test_embedded_datasets():
    mnist = load_dataset(build(TrainConfig, {"dataset": "mnist5k"}))
    assert mnist.x_train.shape[1:] == (1, 28, 28) and len(mnist.x_train) + len(mnist.x_test) == 5000
    assert set(mnist.y_train.unique().tolist()) == set(range(10))
    digits = load_dataset(build(TrainConfig, {"dataset": "digits"}))
    assert digits.x_train.shape[1:] == (1, 8, 8)
    syn = load_dataset(build(TrainConfig, {"dataset": "synthetic", "synthetic_shape": [3, 4, 4], "synthetic_samples": 64}))
    assert syn.x_train.shape == (64, 3, 4, 4) and syn.y_train.max() < 10


def _write_idx(path, arr: np.ndarray):
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}i", *arr.shape) + arr.astype(np.uint8).tobytes())


def test_mnist_idx_and_cifar_binary_from_local_files(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "mnist").mkdir()
    for prefix, n in (("train", 20), ("t10k", 5)):
        _write_idx(tmp_path / "mnist" / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(tmp_path / "mnist" / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    ds = load_dataset(build(TrainConfig, {"dataset": "mnist", "data_dir": str(tmp_path)}))
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (5, 1, 28, 28)

    d = tmp_path / "cifar-10-batches-bin"
    d.mkdir()
    labels = rng.integers(0, 10, 4)
    rec = np.concatenate([labels[:, None], rng.integers(0, 256, (4, 3072))], axis=1).astype(np.uint8)
    (d / "data_batch_1.bin").write_bytes(rec.tobytes())
    (d / "test_batch.bin").write_bytes(rec[:2].tobytes())
    ds = load_dataset(build(TrainConfig, {"dataset": "cifar10", "data_dir": str(tmp_path)}))
    assert ds.x_train.shape == (4, 3, 32, 32) and ds.y_train.tolist() == labels.tolist()
    (d / "test_batch.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(BenchError, match="not a whole number of 3073-byte"):
        load_dataset(build(TrainConfig, {"dataset": "cifar10", "data_dir": str(tmp_path)}))


def test_missing_local_dataset_names_the_file(tmp_path):
    with pytest.raises(BenchError, match="train-images-idx3-ubyte"):
        load_dataset(build(TrainConfig, {"dataset": "mnist", "data_dir": str(tmp_path)}))


def test_models_build_and_initialise_deterministically():
    cfg = build(TrainConfig, {"model": "hermans_mlp"})
    m = build_model(cfg, (1, 28, 28), 10)
    assert [p.shape[0] for p in m.parameters() if p.ndim == 2] == [1000, 2000, 1000, 10]
    cfg = build(TrainConfig, {"model": "lenet", "seed": 5})
    a, b = build_model(cfg, (1, 28, 28), 10), build_model(cfg, (1, 28, 28), 10)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert a(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_torchvision_models_give_a_clear_error_or_build():
    cfg = build(TrainConfig, {"model": "resnet18"})
    try:
        import torchvision  # noqa: F401
    except Exception:
        with pytest.raises(BenchError, match="needs torchvision"):
            build_model(cfg, (3, 32, 32), 10)
    else:
        assert build_model(cfg, (3, 32, 32), 10)(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
