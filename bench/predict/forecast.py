"""Forecasts of S(n) on hardware this machine cannot emulate, and which method wins where.

Every registered algorithm at n = 8 ... 256 workers on:

- ``dgx1``: DGX-1 nodes (8 V100 on NVLink) joined by 4 x EDR InfiniBand; ResNet-50 at batch 64 a GPU;
- ``cluster-ib``: CPU hosts on IPoIB, one worker a host on a whole core; the regimes workload (LeNet-5, batch 32);
- ``eth10g``: the same GPU nodes as ``dgx1`` joined by 10 GbE; ResNet-50;
- ``wan``: two regions of such nodes joined by a 10 Gbit/s, 35 ms wide-area link; ResNet-50.

S(n) is throughput over ``sync``'s at one worker on the same hardware (samples a second: it does not say which
method reaches an accuracy first; the staleness, the period and the learning rate decide that, and no measured
relation here backs a prediction of it). The parameter-server methods and AD-PSGD (which receive from any rank) run
their transport over gloo (host memory):
``p2p_backend: gloo`` where the launch profile says NCCL. EASGD's elastic force is set to n·α = 0.5 at every n (as the
regimes study did at 4 workers; ρ = 5 diverges beyond 3 workers and its validation refuses it); it does not change
what a step sends.
"""

from __future__ import annotations

import pandas as pd

import json
from pathlib import Path

from ..algorithms import KEYS, get_algorithm
from ..layout import REPO_ROOT, StudyLayout
from ..metrics.selection import point
from ..runconfig import config_from_dict
from . import hardware, machines
from .query import resolve_run
from .model import Model

HARDWARE = ("dgx1", "dgxa100-ib", "cluster-ib", "eth10g", "wan")
WORKERS = (8, 16, 32, 64, 128, 256)
TIE = 0.99  # methods within 1 % of the fastest share the win: the model is not that precise
COLUMNS = ["hardware", "workload", "algorithm", "family", "np", "throughput", "speedup", "efficiency", "step_ms",
           "compute_ms", "comm_ms", "wait_ms", "bound", "staleness"]


def table(calibration: dict | None = None, hardware_ids=HARDWARE, workers=WORKERS, algorithms=KEYS) -> pd.DataFrame:
    calibration = calibration or hardware.load_calibration()
    model = Model(calibration)
    rows = []
    for hw_id in hardware_ids:
        one, _ = resolve_run("sync", 1, hw_id, None, {})
        base = model.predict(one, *hardware.for_config(one, calibration, hw_id)).throughput
        for algorithm in algorithms:
            family = get_algorithm(algorithm).family
            sets = {"p2p_backend": "gloo"} if family == "parameter-server" or algorithm == "adpsgd" else {}
            for n in workers:
                if algorithm == "easgd":
                    sets = {"rho": 0.5 / (n * one.train.lr)}
                cfg, _ = resolve_run(algorithm, n, hw_id, None, sets)
                hw, wl = hardware.for_config(cfg, calibration, hw_id)
                p = model.predict(cfg, hw, wl)
                rows.append({"hardware": hw_id, "workload": p.workload, "algorithm": algorithm, "family": family,
                             "np": n, "throughput": p.throughput, "speedup": p.throughput / base,
                             "efficiency": p.throughput / base / n, "step_ms": 1e3 * p.step_s,
                             "compute_ms": 1e3 * p.compute_s, "comm_ms": 1e3 * p.comm_s, "wait_ms": 1e3 * p.wait_s,
                             "bound": p.bound, "staleness": p.staleness_mean})
    return pd.DataFrame(rows, columns=COLUMNS)


def winners(df: pd.DataFrame) -> pd.DataFrame:
    """Per hardware and n: the fastest methods (every one within 1 % of the best: a tie), the next one, the fastest of
    each family, and sync's S(n)."""
    out = []
    for (hw_id, n), g in df.groupby(["hardware", "np"], sort=False):
        g = g.sort_values(["speedup", "algorithm"], ascending=[False, True])
        best = g.iloc[0]["speedup"]
        tied = g[g["speedup"] >= TIE * best]
        rest = g[g["speedup"] < TIE * best]
        row = {"hardware": hw_id, "np": n, "winner": " = ".join(tied["algorithm"]), "winner_speedup": best,
               "runner_up": rest.iloc[0]["algorithm"], "runner_up_speedup": rest.iloc[0]["speedup"],
               "sync_speedup": float(g[g["algorithm"] == "sync"]["speedup"].iloc[0])}
        for family, f in g.groupby("family"):
            row[f"best_{family}"] = f"{f.iloc[0]['algorithm']} ({f.iloc[0]['speedup']:.1f})"
        out.append(row)
    return pd.DataFrame(out)


def planned(study: str, calibration: dict | None = None, root: Path = REPO_ROOT) -> pd.DataFrame:
    """The model's throughput for every planned cell of ``study`` (its plan, results/<study>/plan/: one row per
    algorithm and grid point, the repeats being the same configuration but for the seed), written before the study
    runs so that its runs validate a forecast, not a fit (``python -m bench predict --forecast-study S --out F``). With
    this machine's constants where it has a record (:mod:`.machines`): the study runs here; ``machine`` says which."""
    here = machines.this_machine()
    calibration, own = machines.for_machine(calibration or hardware.load_calibration(), here)
    model = Model(calibration)
    rows, seen = [], set()
    for manifest in sorted(StudyLayout(study, Path(root) / "results").dir.glob("plan/*/plan.json")):
        for entry in json.loads(manifest.read_text())["runs"]:
            cfg = config_from_dict(json.loads((manifest.parent.parent.parent / entry["config"]).read_text()))
            cell = (cfg.algorithm, cfg.launch.np, point(cfg.tag, cfg.repeat))
            if cell in seen:
                continue
            seen.add(cell)
            p = model.predict(cfg, *hardware.for_config(cfg, calibration))
            rows.append({"study": study, "algorithm": cfg.algorithm, "np": cfg.launch.np, "point": cell[2],
                         "link": cfg.launch.link or "unshaped", "link_delay": cfg.launch.link_delay or "0ms",
                         "predicted": p.throughput, "step_ms": 1e3 * p.step_s, "comm_ms": 1e3 * p.comm_s,
                         "wait_ms": 1e3 * p.wait_s, "bound": p.bound, "machine": here, "machine_calibrated": own})
    return pd.DataFrame(rows)
