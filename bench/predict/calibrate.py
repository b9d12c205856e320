"""The model's constants, fitted on micro-benchmarks and a small named set of published runs; nothing per cell.

Sources, in the order the constants are fitted (each with the model itself, so the fitted value is the one that
makes the model reproduce its source exactly):

1. ``docs/results/regimes-v1/calibration.json``, the regimes study's calibration run (``sync`` at one worker on one
   emulated host at 0.36 of a core, not one of the study's cells): the compute a step at full speed (the median step,
   ``c_full_s``: most steps run inside the quota) and the mean step (the quota's periods included); their ratio is
   the share of its quota a host turns into work (``eta``).
2. ``docs/results/predict/microbench/link.txt`` (``python -m bench.perf link``): the TCP goodput of a shaped link
   over its configured rate (``wire_efficiency``, the median over the rates), and the host CPU a byte sent or received
   costs (``b_byte_s``: the unshaped 256 MiB allreduce between two hosts, which is CPU-bound).
   ``docs/results/predict/microbench/wakeup.json`` (``python -m bench.perf wakeup``): the host CPU a wake-up of a
   rank's sleeping wait for a collective costs (``wake_s``).
3. :data:`CALIBRATION_CELLS`, seven cells of two published studies, one constant each (two for the last pair but one).
4. :data:`.transport.CELLS` (``python -m bench.perf collectives``, measured back to back): the transport's constants
   (:mod:`.transport`: what a link's one-way delay costs each operation), fitted on the micro-benchmark alone, kept
   under ``transport`` with their per-operation fit table under ``transport_fit``.
5. ``docs/results/predict/machines/*.json`` (:mod:`.machines`): the compute and transport constants of the other
   machines the published cells ran on, under ``machines``; ``machine`` names the one the constants above are of.

The cells of :data:`CALIBRATION_CELLS` are left out of the validation (:mod:`.validate`).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from .. import BenchError
from ..cluster.spec import CFS_PERIOD_US
from ..layout import REPO_ROOT
from . import hardware, transport
from ..study import load_study
from .cells import RESULTS, all_cells, find
from .model import Model

MICROBENCH = REPO_ROOT / "docs" / "results" / "predict" / "microbench" / "link.txt"
WAKEUP = REPO_ROOT / "docs" / "results" / "predict" / "microbench" / "wakeup.json"
STUDY_CALIBRATION = RESULTS / "regimes-v1" / "calibration.json"
CALIBRATION_CPU = 0.36  # cores of the host the regimes calibration run had (pipelines/hardware/emu.yaml cpu_per_host)

CALIBRATION_CELLS = {
    "a_allreduce_s": ("regimes-speedup", "sync", 2, "linknone"),
    "hop_s": ("regimes-speedup", "sync", 2, "linkshare0.75"),
    "omega_s": ("regimes-speedup", "localsgd", 2, "linknone"),
    "a_p2p_s": ("regimes-speedup", "sgp", 2, "linknone"),
    "a_ps_s": ("regimes-te", "agn", 2, "communication_window1"),
    "pass_byte_s": ("regimes-te", "agn", 2, "communication_window16"),
    "ps_kappa": ("regimes-speedup", "downpour", 4, "linkshare0.75"),
}
"""Constant -> the published cell (study, algorithm, workers, grid point) it is fitted on."""

MEANING = {
    "c_full_s": "s of CPU a step of the workload computes at full speed (median step alone)",
    "eta": "share of its CPU quota a host turns into work (full-speed step / (mean step x quota))",
    "wire_efficiency": "TCP goodput over the configured rate of a shaped link",
    "b_byte_s": "s of host CPU a byte sent or received costs (gloo over TCP)",
    "wake_s": "s of host CPU a wake-up of a rank's sleeping wait for a Horovod collective costs",
    "a_allreduce_s": "s of host CPU an allreduce costs besides its bytes (Horovod's negotiation, fusion, waits)",
    "hop_s": "s a hop of a ring (or a message) takes besides its bytes, on the critical path",
    "omega_s": "s of host CPU a collective after k local steps costs over one after every step, times (sqrt(k) - 1)",
    "a_p2p_s": "s of host CPU a gossip round costs besides its bytes, per peer (push-sum's own work included)",
    "a_ps_s": "s of host CPU a parameter-server visit costs each side besides its bytes",
    "pass_byte_s": "s of host CPU a pass over a byte of the model costs (a worker's accumulated change, the server's apply)",
    "ps_kappa": "share of the pull the server's link serialises with the push (0: full duplex)",
    "cfs_period_s": "s of a CPU-quota period (the cluster's cpu.cfs_period_us)",
}


def _bisect(f, lo: float, hi: float, iters: int = 60) -> float:
    """x in [lo, hi] with f(x) = 0 for f increasing or decreasing; the bound nearest to it if none."""
    flo, fhi = f(lo), f(hi)
    if flo * fhi > 0:
        return lo if abs(flo) < abs(fhi) else hi
    for _ in range(iters):
        mid = (lo + hi) / 2
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return (lo + hi) / 2


def microbench(path: Path = MICROBENCH) -> dict:
    """Wire efficiency and CPU a byte from the output of ``python -m bench.perf link``."""
    text = path.read_text()
    ratios = [float(m.group(1)) for m in re.finditer(r"p2p TCP stream h0->h1\s+[\d.]+ Mb/s\s+([\d.]+)", text)]
    m = re.search(r"unshaped allreduce busbw n=2 (\d+) MiB.*?, (\d+) ms per allreduce", text)
    if not ratios or not m:
        raise BenchError(f"{path}: no shaped p2p stream or no unshaped 2-host allreduce line")
    payload = int(m.group(1)) * 2 ** 20
    # two hosts: each sends and receives the payload once (ring: 2(n-1)/n of it), one core each
    return {"wire_efficiency": statistics.median(ratios), "b_byte_s": int(m.group(2)) / 1e3 / (2 * payload)}


def wakeup(path: Path = WAKEUP) -> float:
    """CPU a wake-up of the sleeping wait costs (``wake_s``) from the output of ``python -m bench.perf wakeup --json``."""
    try:
        value = float(json.loads(path.read_text())["fit"]["wake_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{path}: not a `python -m bench.perf wakeup --json` output ({type(e).__name__}: {e})") from None
    if not 0 <= value < 1e-3:
        raise BenchError(f"{path}: wake_s {value!r} is not in [0, 1 ms)")
    return value


def fit(cells=None) -> dict:
    """The calibration (constants and their provenance) from the sources of the module docstring."""
    from . import machines

    study = json.loads(STUDY_CALIBRATION.read_text())
    workload = "lenet@32"
    own = machines.constants(study, CALIBRATION_CPU)  # c_full_s and eta, as every machine's record gives them
    k = {"workload": workload, "profile": load_study(study["study"]).profile, "c_full_s": own["c_full_s"],
         "eta": own["eta"],
         **microbench(), "wake_s": wakeup(), "cfs_period_s": CFS_PERIOD_US / 1e6,
         "a_allreduce_s": 0.0, "hop_s": 0.0, "omega_s": 0.0, "a_p2p_s": 0.0, "a_ps_s": 0.0, "pass_byte_s": 0.0,
         "ps_kappa": 0.0, "compute_source": "the median step of docs/results/regimes-v1/calibration.json's run"}
    cells = cells if cells is not None else all_cells(("regimes-speedup", "regimes-te"))

    def error(name: str):
        cell = find(cells, *CALIBRATION_CELLS[name])

        def f(x: float) -> float:
            k[name] = x
            model = Model(k)
            hw, wl = hardware.for_config(cell.cfg, k)
            return model.predict(cell.cfg, hw, wl).throughput / cell.throughput - 1
        return f

    bounds = {"a_allreduce_s": (0, 0.05), "hop_s": (0, 0.02), "omega_s": (0, 0.05), "a_p2p_s": (0, 0.05),
              "a_ps_s": (0, 0.02), "pass_byte_s": (0, 2e-8), "ps_kappa": (0, 1)}
    for name in ("a_allreduce_s", "hop_s", "omega_s", "a_p2p_s"):
        k[name] = _bisect(error(name), *bounds[name])
    for _ in range(8):  # a_ps and the passes enter both parameter-server cells: alternate until they settle
        k["a_ps_s"] = _bisect(error("a_ps_s"), *bounds["a_ps_s"])
        k["pass_byte_s"] = _bisect(error("pass_byte_s"), *bounds["pass_byte_s"])
    k["ps_kappa"] = _bisect(error("ps_kappa"), *bounds["ps_kappa"])
    if transport.CELLS.is_file():
        tfit = transport.fit()
        k["transport"] = tfit["constants"]
        k["transport_fit"] = {"source": tfit["source"], "cells": tfit["cells"], "table": tfit["table"],
                              "meaning": transport.MEANING, "loss": tfit["loss"], "f_scale": tfit["f_scale"],
                              "max_load": tfit["max_load"], "left_out": tfit["left_out"]}
    from .cells import study_machine

    k["machine"] = study_machine(STUDY_CALIBRATION.parent.name)
    k["machines"] = {m: c for m, c in machines.load(CALIBRATION_CPU).items() if m != k["machine"]}
    k["made"] = made()
    k["provenance"] = {
        "study_calibration": str(STUDY_CALIBRATION.relative_to(REPO_ROOT)),
        "microbench": str(MICROBENCH.relative_to(REPO_ROOT)),
        "wakeup": str(WAKEUP.relative_to(REPO_ROOT)),
        "cells": {name: "/".join(map(str, c)) for name, c in CALIBRATION_CELLS.items()},
        "meaning": MEANING,
    }
    return k


def made() -> dict:
    """Where and when a calibration is made: this machine (host, CPU, cores), the UTC date, the checkout's commit."""
    import datetime
    import os
    import platform

    from ..system import git_record

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine()) if Path("/proc/cpuinfo").is_file() else ""
    return {"machine": f"{platform.node()} ({cpu}, {os.cpu_count()} cores)",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_record().get("commit") or "unknown"}


def staleness_note(k: dict) -> str:
    """What a forecast must say of its calibration: made on another machine, or before the model's code changed."""
    from ..system import git_record

    m, now = k.get("made") or {}, made()
    notes = []
    if not m:
        return "calibration of unknown origin (no 'made' record)"
    if m.get("machine") != now["machine"]:
        notes.append(f"calibrated on another machine ({m.get('machine')})")
    commit = m.get("commit")
    if commit and commit != "unknown" and git_record().get("commit"):
        import subprocess

        diff = subprocess.run(["git", "-C", str(REPO_ROOT), "diff", "--quiet", commit, "--", "bench/predict"],
                              capture_output=True, timeout=30)
        if diff.returncode == 1:
            notes.append(f"calibration older than the model's code (made at {commit[:12]})")
    return "; ".join(notes)


def write(path: Path = hardware.CALIBRATION) -> dict:
    k = fit()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(k, indent=2, sort_keys=True) + "\n")
    return k


def calibration_keys() -> set[tuple[str, str, int, str]]:
    return {tuple(c) for c in CALIBRATION_CELLS.values()}
