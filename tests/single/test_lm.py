"""The language-model workload: the pydoc_topics byte windows and their split, the transformer's shapes and causal
mask, and next-byte loss and accuracy through the suite's own evaluation and step paths."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml
from torch import nn

from bench import BenchError
from bench.algorithms.base import Algorithm, Context, NoParams
from bench.config import TrainConfig
from bench.data import Shard, load_dataset, pydoc_corpus, pydoc_held_out
from bench.layout import REPO_ROOT
from bench.models import build_model
from bench.study import load_study
from bench.study.prepare import prepare
from bench.typed import build
from bench.worker import evaluate

LM = {"dataset": "pydoc_topics", "model": "transformer", "seq_len": 16, "layers": 2, "width": 16, "heads": 2,
      "test_fraction": 0.1}


def lm_config(**sets) -> TrainConfig:
    return build(TrainConfig, {**LM, **sets})


def text(x: torch.Tensor, y: torch.Tensor) -> bytes:
    """The bytes a part's windows cover: every window in order, then the last target."""
    return bytes(torch.cat([x.reshape(-1), y[-1, -1:]]).tolist())


def test_windows_are_the_topics_text_with_next_byte_targets():
    cfg = lm_config()
    ds = load_dataset(cfg)
    corpus = pydoc_corpus()
    assert ds.input_shape == (16,) and ds.num_classes == 256 and ds.x_train.dtype == ds.y_train.dtype == torch.int64
    for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
        assert (y[:, :-1] == x[:, 1:]).all() and (y[:-1, -1] == x[1:, 0]).all()  # the next byte, across windows too
    held = pydoc_held_out(corpus, cfg.test_fraction, cfg.split_seed)
    train_text = b"".join(t for name, t in corpus.items() if name not in held)
    test_text = b"".join(t for name, t in corpus.items() if name in held)
    # whole topics, disjoint: the windows are those texts in name order, less a tail shorter than a window
    assert train_text.startswith(text(ds.x_train, ds.y_train)) and len(train_text) - ds.x_train.numel() <= 16
    assert test_text.startswith(text(ds.x_test, ds.y_test)) and len(test_text) - ds.x_test.numel() <= 16
    total = sum(map(len, corpus.values()))
    assert 0.09 * total < len(test_text) <= 0.1 * total and 0 < len(held) < len(corpus)
    assert held == pydoc_held_out(corpus, 0.1, cfg.split_seed) != pydoc_held_out(corpus, 0.1, cfg.split_seed + 1)


def test_corpus_is_utf8_text_of_every_topic():
    corpus = pydoc_corpus()
    assert list(corpus) == sorted(corpus) and len(corpus) > 50
    assert sum(map(len, corpus.values())) > 300_000
    assert b"if_stmt" in corpus["if"] and corpus["if"].decode("utf-8")


def test_shards_cut_windows_as_samples():
    ds = load_dataset(lm_config())
    x, y = next(Shard(ds, 2, 1, batch_size=8, seed=0).batches(0))
    assert x.shape == y.shape == (8, 16) and (y[:, :-1] == x[:, 1:]).all()


def test_prepare_records_the_checksum_of_the_windows(tmp_path):
    profile = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["profiles"]["tiny-lm"]
    (tmp_path / "pipelines" / "hardware").mkdir(parents=True)
    (tmp_path / "pipelines" / "hardware" / "local.yaml").write_text("description: this machine\n")
    (tmp_path / "pipelines" / "studies").mkdir()
    (tmp_path / "pipelines" / "studies" / "lm.yaml").write_text("profile: lm\nalgorithms: [sync]\nnp: [1]\n")

    def prepared(seq_len: int) -> dict:
        params = {"profile": "lm", "hardware": "local", "profiles": {"lm": {**profile, "seq_len": seq_len}}}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        prepare(load_study("lm", tmp_path / "params.yaml"))
        return json.loads((tmp_path / "data" / "prepared" / "lm.json").read_text())

    info = prepared(profile["seq_len"])
    ds = load_dataset(lm_config(seq_len=profile["seq_len"]))
    assert info["dataset"] == "pydoc_topics" and info["num_classes"] == 256
    assert (info["train"], info["test"], info["input_shape"]) == (len(ds.x_train), len(ds.x_test), [profile["seq_len"]])
    assert len(info["sha256"]) == 64 and prepared(profile["seq_len"])["sha256"] == info["sha256"]
    assert prepared(profile["seq_len"] * 2)["sha256"] != info["sha256"]


def test_transformer_shapes_and_seeded_init():
    cfg = lm_config()
    model = build_model(cfg, (16,), 256)
    x = torch.randint(0, 256, (3, 16))
    assert model(x).shape == (3, 256, 16) and model(x[:, :5]).shape == (3, 256, 5)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()) and not list(model.buffers())
    again, other = build_model(cfg, (16,), 256), build_model(lm_config(seed=1), (16,), 256)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    assert not torch.equal(model.tok.weight, other.tok.weight)
    with pytest.raises(BenchError, match="seq_len 16"):
        build_model(cfg, (32,), 256)


def test_a_later_byte_never_changes_an_earlier_prediction():
    model = build_model(lm_config(), (16,), 256).eval()
    x = torch.randint(0, 256, (2, 16))
    for k in (0, 7, 15):
        changed = x.clone()
        changed[:, k] = (changed[:, k] + 1) % 256
        a, b = model(x), model(changed)
        assert torch.equal(a[..., :k], b[..., :k])  # positions before k: bit for bit
        assert (a[..., k:] - b[..., k:]).abs().amax(dim=(0, 1)).min() > 0  # every position from k on sees byte k


def test_transformer_and_pydoc_topics_go_together():
    with pytest.raises(BenchError, match="model 'transformer' and dataset 'pydoc_topics' go together"):
        build(TrainConfig, {"model": "transformer"}).validate()
    with pytest.raises(BenchError, match="model 'transformer' and dataset 'pydoc_topics'.*'mlp'"):
        build(TrainConfig, {"dataset": "pydoc_topics"}).validate()
    with pytest.raises(BenchError, match="width must be a multiple of heads, got width=16 and heads=3"):
        lm_config(heads=3).validate()


class Echo(nn.Module):
    """Predicts that the next byte repeats this one: logit ``scale`` (2) for it, 0 for the three other bytes of a
    4-byte vocabulary; output (batch, classes, positions) as the transformer's."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return self.scale * nn.functional.one_hot(x, 4).float().transpose(1, 2)


X = torch.tensor([[0, 1, 2, 3], [3, 3, 1, 0], [2, 2, 2, 2]])
Y = torch.tensor([[0, 2, 2, 3], [3, 0, 1, 0], [2, 2, 2, 1]])  # 9 of the 12 targets repeat their byte


def test_evaluation_scores_every_position():
    hit, miss = -math.log(math.e ** 2 / (math.e ** 2 + 3)), -math.log(1 / (math.e ** 2 + 3))
    for batch in (4, 8, 1024):  # 1, 2 and all 3 sequences of 4 targets a forward
        loss, acc = evaluate(Echo(), X, Y, "cpu", batch=batch)
        assert acc == pytest.approx(9 / 12) and loss == pytest.approx((9 * hit + 3 * miss) / 12)


def test_a_step_counts_every_position():
    ctx = Context(cfg=None, comm=None, device=torch.device("cpu"), build_model=Echo, make_optimizer=None)
    algo, model = Algorithm(NoParams(), ctx), Echo()
    stats = algo.forward_backward(X, Y, model=model)
    assert stats.correct == 9 and stats.correct / Y.numel() == pytest.approx(0.75)
    assert stats.loss == pytest.approx(evaluate(model, X, Y, "cpu")[0]) and model.scale.grad is not None
