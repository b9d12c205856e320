"""``python -m bench predict``: predicted throughput, S(n) and time split of algorithms on a hardware, from the model.

    python -m bench predict sync,sgp,downpour,diloco --np 4 --hardware emu --set link=250mbit [--json]
    python -m bench predict sync,localsgd --np 8,64,256 --hardware dgx1 --profile dgx1
    python -m bench predict --calibrate                      # refit docs/results/predict/calibration.json
    python -m bench predict --publish docs/results/predict    # calibrate, then the notebook that publishes

Same profiles and ``--set`` keys as ``bench run``; the hardware is a launch profile the model can describe (an
emulated one, ``emu`` and ``emu-*``, with its link and CPU share; or one with ``pipelines/hardware/model/<id>.yaml``)
or a described-only id (``eth10g``, ``wan``, ``horovod-p100``). Without ``--profile``, the hardware's own workload:
the calibrated one on the emulated cluster (profile ``regimes``), the description's ``profile`` elsewhere. S(n) is over the prediction of ``sync`` at one worker
on the same hardware and profile (the suite's convention where an algorithm has no one-worker run of its own). Each
line carries the validation error of the algorithm's family (``tables/validation_summary.csv``).
"""

from __future__ import annotations

import json
import sys

from .. import BenchError

SUMMARY = "docs/results/predict/tables/validation_summary.csv"


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise BenchError(f"--{what} must be integers >= 1, comma-separated; got {text!r}")
    return values


def resolve_run(algorithm: str, np: int, hw_id: str, profile: str | None, overrides: dict):
    """The run's configuration (merged and typed as ``bench run`` would, not launched) and the hardware it models."""
    from ..algorithms import get_algorithm
    from ..resolve import hardware_profiles, load_hardware, resolve
    from . import hardware

    launch_ids = hardware_profiles()
    described = hardware.described_ids()
    if hw_id in launch_ids and load_hardware(hw_id).get("emulated_hosts"):
        launch_id, default = hw_id, hardware.load_calibration().get("profile")
    elif hw_id in described:
        hw = hardware.described(hw_id)
        launch_id, default = (hw.launch_profile or None), (hw.profile or None)
    elif hw_id in launch_ids:
        raise BenchError(f"hardware {hw_id!r} has no model description (pipelines/hardware/model/{hw_id}.yaml); "
                         f"valid: {', '.join(valid_hardware())}")
    else:
        raise BenchError(f"unknown hardware {hw_id!r}; valid: {', '.join(valid_hardware())}")
    cfg = resolve(algorithm, np=np, profile=profile or default, hardware=launch_id, overrides=overrides, check=False)
    cfg.train.validate()
    cfg.launch.validate()
    get_algorithm(algorithm).validate(cfg.params, cfg)
    return cfg, hw_id


def valid_hardware() -> list[str]:
    from ..resolve import hardware_profiles, load_hardware
    from . import hardware

    emulated = [h for h in hardware_profiles() if load_hardware(h).get("emulated_hosts")]
    return sorted(set(emulated) | set(hardware.described_ids()))


def family_errors() -> dict:
    import pandas as pd

    from ..layout import REPO_ROOT

    path = REPO_ROOT / SUMMARY
    if not path.is_file():
        return {}
    df = pd.read_csv(path)
    return {r["family"]: r for _, r in df.iterrows()}


def predict_many(algorithms: list[str], nps: list[int], hw_id: str, profile: str | None, overrides: dict,
                 calibration: dict | None = None) -> list[dict]:
    """One row per (algorithm, n): the prediction, S(n) over sync at one worker, the family's validation error."""
    from ..algorithms import get_algorithm
    from ..config import LaunchConfig, TrainConfig
    from ..typed import field_types
    from . import hardware
    from .model import Model

    rows, base = [], None
    errors = family_errors()
    for algorithm in algorithms:
        get_algorithm(algorithm)
        for n in nps:
            cfg, hw_id = resolve_run(algorithm, n, hw_id, profile, overrides)
            if calibration is None and cfg.launch.emulated_hosts:
                calibration = hardware.load_calibration()
            hw, wl = hardware.for_config(cfg, calibration, hw_id)
            if calibration is None and any(e.get("calibration") for e in hw.compute.values()):
                calibration = hardware.load_calibration()
            model = Model(calibration or hardware.load_calibration())
            if base is None:  # sync at one worker, with the run settings (not the algorithm's hyperparameters)
                run_keys = set(field_types(TrainConfig)) | set(field_types(LaunchConfig))
                one, _ = resolve_run("sync", 1, hw_id, profile, {k: v for k, v in overrides.items()
                                                                 if k in run_keys or k.startswith("horovod.")})
                base = model.predict(one, *hardware.for_config(one, calibration, hw_id)).throughput
            p = model.predict(cfg, hw, wl).as_dict()
            fam = get_algorithm(algorithm).family
            e = errors.get(fam)
            p.update({"speedup": p["throughput"] / base, "family": fam,
                      "family_median_abs_error": None if e is None else float(e["median_abs_error"]),
                      "family_max_abs_error": None if e is None else float(e["max_abs_error"]),
                      "family_cells": None if e is None else int(e["cells"])})
            rows.append(p)
    return rows


def render(rows: list[dict]) -> str:
    head = (f"{'algorithm':<10} {'np':>4} {'samples/s':>10} {'S(n)':>7} {'step ms':>8} {'compute':>8} {'comm':>8} "
            f"{'wait':>7}  {'bound':<8} {'staleness':>9}  validation |error| of its family (median / max, cells)")
    lines = [head]
    for r in rows:
        stale = f"{r['staleness_mean']:.2f}" if r["staleness_mean"] is not None else "-"
        err = ("not validated" if r["family_cells"] is None else
               f"{r['family']}: {r['family_median_abs_error']:.3f} / {r['family_max_abs_error']:.3f}, {r['family_cells']}")
        lines.append(f"{r['algorithm']:<10} {r['np']:>4} {r['throughput']:>10.1f} {r['speedup']:>7.2f} "
                     f"{1e3 * r['step_s']:>8.2f} {1e3 * r['compute_s']:>8.2f} {1e3 * r['comm_s']:>8.2f} "
                     f"{1e3 * r['wait_s']:>7.2f}  {r['bound']:<8} {stale:>9}  {err}")
    return "\n".join(lines)


def cmd_predict(args) -> int:
    from ..layout import REPO_ROOT
    from ..resolve import parse_set

    if args.calibrate or args.publish:
        from . import calibrate

        k = calibrate.write()
        print(f"calibration: {len(k) - 1} constants -> docs/results/predict/calibration.json", file=sys.stderr)
        if args.publish:
            from .publish import run_notebook

            run_notebook(REPO_ROOT / args.publish if not args.publish.startswith("/") else args.publish)
        return 0
    if not args.algorithms or not args.hardware:
        raise BenchError("give ALGO[,ALGO...] and --hardware HW (or --calibrate, --publish DIR)")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    rows = predict_many(algorithms, _ints(args.np, "np"), args.hardware, args.profile, parse_set(args.set or []))
    print(json.dumps(rows, indent=2, default=float) if args.json else render(rows))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("predict", help="predicted throughput, S(n) and time split from the calibrated model")
    p.add_argument("algorithms", nargs="?", help="registry keys, comma-separated (see `python -m bench list`)")
    p.add_argument("--np", default="1", help="worker counts, comma-separated (default 1)")
    p.add_argument("--hardware", help="emulated launch profile (emu, emu-*) or described hardware "
                   "(pipelines/hardware/model/<id>.yaml)")
    p.add_argument("--profile", help="training profile from params.yaml (default: its `profile`)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a setting or hyperparameter, as bench run")
    p.add_argument("--json", action="store_true", help="one JSON object per (algorithm, n)")
    p.add_argument("--calibrate", action="store_true", help="refit the constants (docs/results/predict/calibration.json)")
    p.add_argument("--publish", metavar="DIR", help="calibrate, then run notebooks/predict.ipynb, which writes DIR")
    p.set_defaults(func=cmd_predict)
