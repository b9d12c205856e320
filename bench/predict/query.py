"""One prediction query: a run's configuration resolved as ``bench run`` would (not launched), the hardware it is
modelled on, the model's prediction with S(n) over ``sync`` at one worker, and the validation error of the
algorithm's family (``tables/validation_summary.csv``) and of the validated cells nearest it: same family, same
delay band (``tables/validation_by_band.csv``; emulated hardware only, the validated cells' own)."""

from __future__ import annotations

import pandas as pd

from .. import BenchError, short
from ..algorithms import get_algorithm
from ..config import LaunchConfig, TrainConfig, parse_delay, parse_rate
from ..layout import REPO_ROOT
from ..resolve import hardware_profiles, load_hardware, resolve
from ..typed import field_types
from . import calibrate, hardware, machines, target
from .cells import read_published
from .model import Model
from .validate import delay_band

SUMMARY = "docs/results/predict/tables/validation_summary.csv"
BY_BAND = "docs/results/predict/tables/validation_by_band.csv"
MAX_NP = 1024
"""Workers a prediction models at most: the simulator steps every worker, and beyond this a query runs for minutes."""
MIN_RATE = 100e3
"""The slowest link modelled (bit/s): below it one step of the smallest model takes hours, and the simulator's events
with it."""
MIN_CPU = 0.01
"""The smallest CPU share of a host modelled (cores): below it a step takes minutes of simulated work."""
BOUNDS = {"slow_factor": (1.0, 1000.0, "a straggler more than 1000 times slower is a dead worker"),
          "step_jitter_s": (0.0, 60.0, "a step's jitter beyond a minute makes the simulation run for minutes")}
"""Training settings the simulator's work grows with: (low, high, why)."""


def resolve_run(algorithm: str, np: int, hw_id: str, profile: str | None, overrides: dict):
    """The run's configuration (merged and typed as ``bench run`` would, not launched) and the hardware it models."""
    launch_ids = hardware_profiles()
    described = hardware.described_ids()
    if hw_id in launch_ids and load_hardware(hw_id).get("emulated_hosts"):
        launch_id, default = hw_id, hardware.load_calibration().get("profile")
    elif hw_id in described or hardware.is_described(hw_id):
        hw = hardware.described(hw_id)
        launch_id, default = (hw.launch_profile or None), (hw.profile or None)
        if hw.probed:  # what the probe measured stands in for the profile's settings; --set still wins
            overrides = {**{k: hw.probed[k] for k in hardware.PROBED_SETTINGS},
                         **({"emulated_cpu": hw.probed["emulated_cpu"]} if hw.probed.get("emulated_cpu") else {}),
                         **overrides}
    elif hw_id in launch_ids:
        raise BenchError(f"hardware {hw_id!r} has no model description (pipelines/hardware/model/{hw_id}.yaml); "
                         f"valid: {', '.join(valid_hardware())}")
    else:
        raise BenchError(f"unknown hardware {hw_id!r}; valid: {', '.join(valid_hardware())}")
    cfg = resolve(algorithm, np=np, profile=profile or default, hardware=launch_id, overrides=overrides, check=False)
    cfg.train.validate()
    cfg.launch.validate()
    check_bounds(cfg)
    get_algorithm(algorithm).validate(cfg.params, cfg)
    return cfg, hw_id


def check_bounds(cfg) -> None:
    """The values the model's work grows with, bounded before it starts (n in :func:`bench.predict.cli`)."""
    if cfg.launch.np > MAX_NP:
        raise BenchError(f"np must be in [1, {MAX_NP}], got {cfg.launch.np}: the simulator steps every worker")
    if cfg.launch.link and parse_rate(cfg.launch.link) < MIN_RATE:
        raise BenchError(f"link {short(cfg.launch.link)} is below the slowest link modelled, {MIN_RATE / 1e3:g}kbit: "
                         "a step would take hours")
    shares = {"cpu_per_host": cfg.launch.cpu_per_host, **{f"emulated_cpu[{h}]": v for h, v in cfg.launch.emulated_cpu.items()}}
    for name, value in shares.items():
        if value and not value >= MIN_CPU:
            raise BenchError(f"{name} {short(value)} is below the smallest CPU share modelled, {MIN_CPU} cores: a step "
                             "would take minutes of simulated work")
    for name, (low, high, why) in BOUNDS.items():
        value = getattr(cfg.train, name)
        if not low <= value <= high:
            raise BenchError(f"{name} must be in [{low:g}, {high:g}] for a prediction ({why}), got {short(value)}")


def valid_hardware() -> list[str]:
    emulated = [h for h in hardware_profiles() if load_hardware(h).get("emulated_hosts")]
    return sorted(set(emulated) | set(hardware.described_ids()))


ERROR_COLUMNS = ("median_abs_error", "max_abs_error", "cells")
"""The validation errors a forecast quotes (per family, and per family and delay band)."""
REPUBLISH = "run `python -m bench predict --publish` again"


def family_errors() -> dict:
    path = REPO_ROOT / SUMMARY
    if not path.is_file():
        return {}
    df = read_published(path, ("family", *ERROR_COLUMNS), REPUBLISH)
    for k in ERROR_COLUMNS:
        if not pd.api.types.is_numeric_dtype(df[k]):
            raise BenchError(f"{path}: column {k!r} holds text, not numbers")
    return {r["family"]: r for _, r in df.iterrows()}


def nearest_errors() -> dict:
    """(family, delay band) -> its row of ``tables/validation_by_band.csv``: the validated cells nearest a forecast."""
    path = REPO_ROOT / BY_BAND
    if not path.is_file():
        return {}
    df = read_published(path, ("family", "delay_band", *ERROR_COLUMNS), REPUBLISH)
    return {(r["family"], r["delay_band"]): r for _, r in df.iterrows()}


def target_errors() -> float | None:
    """Median |error| of the time-to-target forecasts over the held-out cells (``validation_time_to_target.csv``)."""
    path = REPO_ROOT / "docs/results/predict/tables/validation_time_to_target.csv"
    if not path.is_file():
        return None
    df = read_published(path, ("error",), REPUBLISH)
    return float(df["error"].abs().median()) if len(df) else None


def predict_many(algorithms: list[str], nps: list[int], hw_id: str, profile: str | None, overrides: dict,
                 calibration: dict | None = None) -> list[dict]:
    """One row per (algorithm, n): the prediction, S(n) over sync at one worker, the family's validation error."""
    rows, base = [], None
    errors = family_errors()
    near = nearest_errors()
    rel = target.relation()
    staleness = ""
    ttt_err = target_errors()
    described = hardware.described(hw_id) if hardware.is_described(hw_id) else None
    probe_note = (described.probed or {}).get("link_source", "").split(":", 1)[0] if described else ""
    machine_note = ""
    for algorithm in algorithms:
        get_algorithm(algorithm)
        for n in nps:
            cfg, hw_id = resolve_run(algorithm, n, hw_id, profile, overrides)
            if calibration is None and cfg.launch.emulated_hosts:
                calibration = hardware.load_calibration()
                here = machines.this_machine()
                if here in (calibration.get("machines") or {}):  # this machine's own compute and transport
                    calibration, _ = machines.for_machine(calibration, here)
                    machine_note = f"compute and transport of this machine ({machines.slug(here)}.json)"
                if described is not None:  # a probed emulated cluster: its own step in place of the calibration's
                    calibration = hardware.probed_calibration(calibration, described)
            hw, wl = hardware.for_config(cfg, calibration, hw_id)
            if calibration is None and any(e.get("calibration") for e in hw.compute.values()):
                calibration = hardware.load_calibration()
            model = Model(calibration or hardware.load_calibration())
            if hw.emulated and not staleness:
                staleness = calibrate.staleness_note(model.k) or "current"
            if base is None:  # sync at one worker, with the run settings (not the algorithm's hyperparameters)
                run_keys = set(field_types(TrainConfig)) | set(field_types(LaunchConfig))
                one, _ = resolve_run("sync", 1, hw_id, profile, {k: v for k, v in overrides.items()
                                                                 if k in run_keys or k.startswith("horovod.")})
                base = model.predict(one, *hardware.for_config(one, calibration, hw_id)).throughput
            p = model.predict(cfg, hw, wl).as_dict()
            used = model.k if hw.emulated else None
            if used is not None:
                made = used.get("made") or {}
                p["calibration"] = (f"{made.get('machine', '?')}, {made.get('date', '?')}, "
                                    f"{str(made.get('commit', '?'))[:12]}")
                if machine_note:
                    p["calibration"] += f"; {machine_note}"
                if probe_note:
                    p["calibration"] += f"; link, delay, CPU share and step {probe_note}"
                p["calibration_note"] = staleness
            else:
                p["calibration"], p["calibration_note"] = "the hardware's description (its sources)", ""
            fam = get_algorithm(algorithm).family
            e = errors.get(fam)
            p.update({"speedup": p["throughput"] / base, "family": fam,
                      "family_median_abs_error": None if e is None else float(e["median_abs_error"]),
                      "family_max_abs_error": None if e is None else float(e["max_abs_error"]),
                      "family_cells": None if e is None else int(e["cells"])})
            band = delay_band(1e3 * parse_delay(cfg.launch.link_delay or "")) if hw.emulated else None
            e = near.get((fam, band))
            # the relation is of the workload (samples to the target): any hardware running that workload, the
            # emulated cluster's or a probed machine's
            backed = target.backing(algorithm, n, cfg.train.lr, rel) \
                if hw.emulated or cfg.profile == target.relation_profile() else None
            ttt = backed[0] / p["throughput"] if backed and p["throughput"] > 0 else None
            p.update({"time_to_target_s": ttt, "time_to_target_note": "throughput only: no measured relation"
                      + ("" if (algorithm, n) not in rel else f" at lr {cfg.train.lr:g}")
                      if ttt is None else f"samples to target of {backed[1]} / throughput",
                      "time_to_target_median_abs_error": ttt_err if ttt is not None else None})
            p.update({"nearest": None if e is None else f"{fam}, delay {band}",
                      "nearest_median_abs_error": None if e is None else float(e["median_abs_error"]),
                      "nearest_max_abs_error": None if e is None else float(e["max_abs_error"]),
                      "nearest_cells": None if e is None else int(e["cells"])})
            rows.append(p)
    return rows
