"""Device paths on a GPU (``make test-gpu``): CUDA-synchronised timing, the model and batches on the rank's device,
NCCL under torch.distributed (ddp) and Horovod (sync). Skipped, with the reason, where no GPU is visible."""

from __future__ import annotations

import pytest
import torch

from bench.timing import device_sync
from support import run_algorithm

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason=f"needs a CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__})")]

NP = min(2, torch.cuda.device_count()) if torch.cuda.is_available() else 0
SETS = ("dataset=synthetic", "synthetic_shape=[3,64,64]", "synthetic_samples=64", "batch_size=8", "max_steps=3",
        "epochs=1", "eval_every=0", "warmup_steps=0", "device=cuda", "model=resnet18")


def test_device_sync_waits_for_the_compute_stream():
    dev = torch.device("cuda", 0)
    a = torch.randn(4096, 4096, device=dev)
    done = torch.cuda.Event()
    for _ in range(20):
        a = a @ a / 4096
    done.record()
    device_sync(dev)
    assert done.query(), "device_sync returned before the work queued on the compute stream finished"


@pytest.mark.parametrize("algorithm,backend", [("sync", "horovod"), ("ddp", "nccl")])
def test_run_on_the_ranks_gpus(tmp_path, algorithm, backend):
    run = run_algorithm(tmp_path, algorithm, NP, *SETS)
    assert run.status == "ok"
    assert sorted(run.steps["rank"].unique()) == list(range(NP))
    by_rank = run.system["runtime"]["by_rank"]
    if algorithm == "ddp":
        assert all(r["torch_distributed"] == "nccl" for r in by_rank)
    else:
        assert all(r["horovod_initialized"] for r in by_rank)
    # the saved model came from the GPU (its tensors load on the CPU: saved after moving back or mapped by torch.load)
    assert torch.load(run.path / "model.pt", map_location="cpu")
