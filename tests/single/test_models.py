"""bench.models: the footprint the launcher's memory check reads (bench.supports.rank_bytes)."""

import pytest

from bench.config import TrainConfig
from bench.models import build_model, footprint

CASES = {  # (config, input shape, classes)
    "mlp": (TrainConfig(dataset="digits", model="mlp", hidden=[32]), (1, 8, 8), 10),
    "lenet": (TrainConfig(dataset="mnist5k", model="lenet"), (1, 28, 28), 10),
    "cnn_bn": (TrainConfig(dataset="mnist5k", model="cnn_bn"), (1, 28, 28), 10),
    "transformer": (TrainConfig(dataset="pydoc_topics", model="transformer", seq_len=16, layers=1, width=16, heads=2),
                    (16,), 256),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_models_footprint_is_the_same_run_for_real_or_on_the_meta_device(name):
    cfg, shape, classes = CASES[name]
    real = footprint(cfg, shape, classes)
    meta = footprint(cfg, shape, classes, real_up_to=0)
    assert real == meta
    params, activations = real
    assert params == sum(p.numel() for p in build_model(cfg, shape, classes).parameters())
    assert activations > 0


def test_an_mlps_activations_are_the_outputs_of_its_modules():
    cfg, shape, classes = CASES["mlp"]
    # Flatten 64, Linear 32, ReLU 32, Linear 10, and the Sequential's own output 10
    assert footprint(cfg, shape, classes) == (64 * 32 + 32 + 32 * 10 + 10, 64 + 32 + 32 + 10 + 10)
