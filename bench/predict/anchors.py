"""Published results the model reproduces before it forecasts, from their published per-GPU rates and networks.

- **Horovod at 512 GPUs** (Sergeev and Del Balso 2018; Horovod's README and docs/benchmarks): 128 servers of 4
  Pascal GPUs on a RoCE-capable 25 Gbit/s network, tf_cnn_benchmarks at batch 64 a GPU: 90 % scaling efficiency for
  Inception V3 and ResNet-101, 68 % for VGG-16. Hardware ``horovod-p100``; per-GPU rates of TensorFlow's published
  DGX-1 (P100) benchmarks; ``sync`` with Horovod's defaults (gradients reduced from their hooks, behind the backward
  pass), so the model's terms are the ring's 2(n-1)/n M over the 25 GbE link, 2(n-1) hops, and the overlap.
- **A DGX-1 at 8 GPUs** (NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5, FP32): 367 img/s on one V100, 2855 on
  eight (7.76x). Hardware ``dgx1``; ``ddp`` (PyTorch DDP over NCCL, as that run), its allreduce priced by NCCL's
  tuner (:mod:`.nccl`).
- **A DGX A100 at 8 GPUs** (the same table, TF32): 938 img/s on one A100, 7248 on eight (7.72x). Hardware
  ``dgxa100-ib``; ``ddp``, NCCL's tuner with its Ampere constants.

The models (Inception V3, ResNet-101, VGG-16) are not ones the suite builds: a prediction needs only their sizes
(``pipelines/hardware/model/workloads.yaml``), so the run's configuration is the ``dgx1`` profile's with the model
named. The error is predicted / published - 1 of the efficiency (equal to that of the throughput at n: the one-GPU
rate is an input).
"""

from __future__ import annotations

import pandas as pd

from ..resolve import resolve
from . import hardware
from .model import Model

COLUMNS = ["anchor", "hardware", "algorithm", "workload", "np", "published_efficiency", "predicted_efficiency",
           "error", "predicted_samples_per_s", "source"]


def _config(algorithm: str, hw: hardware.Hardware, n: int, key: str):
    model, batch = key.split("@")
    cfg = resolve(algorithm, np=n, profile="dgx1", hardware=hw.launch_profile or None,
                  overrides={"batch_size": int(batch)}, check=False)
    cfg.train.model = model  # a model the suite does not build: the prediction needs only its size
    return cfg


def efficiency(model: Model, algorithm: str, hw_id: str, key: str, n: int) -> tuple[float, float]:
    """(efficiency T(n) / (n T(1)), T(n)) predicted for ``algorithm`` at ``n`` on ``hw_id`` with workload ``key``."""
    hw = hardware.described(hw_id)
    one, many = _config(algorithm, hw, 1, key), _config(algorithm, hw, n, key)
    t1 = model.predict(one, hw, hardware.workload(one, hw, None)).throughput
    tn = model.predict(many, hw, hardware.workload(many, hw, None)).throughput
    return tn / (n * t1), tn


def table(calibration: dict | None = None) -> pd.DataFrame:
    model = Model(calibration or hardware.load_calibration())
    rows = []
    for hw_id, algorithm, label in (("horovod-p100", "sync", "Horovod, 512 GPUs (Sergeev and Del Balso 2018)"),
                                    ("dgx1", "ddp", "DGX-1, 8 GPUs (NVIDIA DeepLearningExamples)"),
                                    ("dgxa100-ib", "ddp", "DGX A100, 8 GPUs (NVIDIA DeepLearningExamples)")):
        hw = hardware.described(hw_id)
        for key, a in hw.anchors.items():
            n = int(a["np"])
            published = float(a["efficiency"]) if "efficiency" in a else \
                float(a["samples_per_s"]) / (n * float(hw.compute[key]["samples_per_s"]))
            eff, tn = efficiency(model, algorithm, hw_id, key, n)
            rows.append({"anchor": label, "hardware": hw_id, "algorithm": algorithm, "workload": key, "np": n,
                         "published_efficiency": published, "predicted_efficiency": eff,
                         "error": eff / published - 1, "predicted_samples_per_s": tn, "source": a["source"]})
    return pd.DataFrame(rows, columns=COLUMNS)
