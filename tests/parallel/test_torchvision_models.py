"""The seeds' CNNs (torchvision's alexnet, googlenet, resnet18, resnet50) train under real horovodrun (np=2) on
synthetic ImageNet-shaped data at a tiny resolution (64 px: AlexNet's smallest workable side), a few steps each."""

from __future__ import annotations

import pytest
import torch

from bench.models import TORCHVISION_MODELS
from support import run_algorithm

try:
    import torchvision  # noqa: F401
    TORCHVISION = ""
except Exception as e:  # not installed, or a wheel built for another torch (PyPI's CUDA one beside a CPU torch)
    TORCHVISION = f"torchvision does not import beside torch {torch.__version__} ({type(e).__name__}: {e})"

STEPS = 2
SETS = ("dataset=synthetic", "synthetic_shape=[3,64,64]", "synthetic_samples=16", "num_classes=10", "batch_size=2",
        f"max_steps={STEPS}", "epochs=1", "eval_every=0", "warmup_steps=0", "device=cpu", "lr=0.01")


@pytest.mark.skipif(bool(TORCHVISION), reason=TORCHVISION or "torchvision imports")
@pytest.mark.parametrize("model", TORCHVISION_MODELS)
def test_torchvision_model_trains_under_horovodrun(tmp_path, model):
    run = run_algorithm(tmp_path, "sync", 2, *SETS, f"model={model}")
    assert run.status == "ok"
    assert run.steps.groupby("rank")["step"].max().tolist() == [STEPS, STEPS]
    assert run.steps["loss"].notna().all() and (run.steps["loss"] > 0).all()
    trained = torch.load(run.path / "model.pt")
    assert any(k.endswith("weight") for k in trained)
