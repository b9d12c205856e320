"""``docs/results/predict/``: the validation table and figure, the anchors, the forecasts and a README generated from them.

``python -m bench predict --publish docs/results/predict`` refits the calibration, then runs ``notebooks/predict.ipynb``
(papermill, into ``results/predict/notebooks/``), whose cells call the functions here in order: :func:`validation`,
:func:`anchors`, :func:`forecasts`, :func:`figures`, :func:`readme`. ``NOTES.md`` beside them is written by hand.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import plots
from ..layout import REPO_ROOT
from . import anchors as anchor_table
from . import forecast, hardware, target, validate
from .calibrate import CALIBRATION_CELLS, MEANING
from .figures import forecast_speedup, predicted_vs_measured


def _md(df: pd.DataFrame, digits: int = 3) -> str:
    def cell(v):
        if not isinstance(v, float):
            return str(v)
        if v.is_integer() and abs(v) >= 1:
            return f"{v:.0f}"
        return f"{v:.{digits}g}" if abs(v) >= 100 or abs(v) < 10 ** -digits else f"{v:.{digits}f}"
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "\n".join("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))


def validation(dest: Path) -> pd.DataFrame:
    df = validate.table()
    tables = Path(dest) / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    df.to_csv(tables / "validation.csv", index=False)
    validate.summary(df).to_csv(tables / "validation_summary.csv", index=False)
    validate.summary(df, "study").to_csv(tables / "validation_by_study.csv", index=False)
    validate.summary(df[~df["same_config_as_calibration"]]).to_csv(tables / "validation_summary_new_configs.csv",
                                                                   index=False)
    validate.nearest_summary(df).to_csv(tables / "validation_by_band.csv", index=False)
    target.validation(df).to_csv(tables / "validation_time_to_target.csv", index=False)
    return df


def machine_table(val: pd.DataFrame) -> pd.DataFrame:
    """:func:`bench.predict.validate.summary` per machine, with whether its cells had that machine's own constants."""
    out = validate.summary(val, "machine")
    own = val.groupby("machine")["machine_calibrated"].all()
    out.insert(1, "own_calibration", [bool(own[m]) if m in own.index else "" for m in out["machine"]])
    return out


def anchors(dest: Path) -> pd.DataFrame:
    df = anchor_table.table()
    df.to_csv(Path(dest) / "tables" / "anchors.csv", index=False)
    return df


def forecasts(dest: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = forecast.table()
    win = forecast.winners(df)
    df.to_csv(Path(dest) / "tables" / "forecast.csv", index=False)
    win.to_csv(Path(dest) / "tables" / "winners.csv", index=False)
    return df, win


def figures(dest: Path, val: pd.DataFrame, fc: pd.DataFrame) -> list[Path]:
    fig_dir = Path(dest) / "figures"
    keep = ["sync", "ddp", "delayed", "localsgd", "lasgd", "diloco", "sgp", "adpsgd", "agn", "downpour"]
    return [plots.save(predicted_vs_measured(val), fig_dir / "validation.png"),
            plots.save(forecast_speedup(fc[fc["algorithm"].isin(keep)]), fig_dir / "forecast_speedup.png")]


def readme(dest: Path, val: pd.DataFrame, anc: pd.DataFrame, win: pd.DataFrame) -> Path:
    k = hardware.load_calibration()
    dest = Path(dest)
    v1_path = dest / "history" / "validation_v1.csv"
    consts = pd.DataFrame([{"constant": name, "value": k[name], "meaning": MEANING[name],
                            "fitted on": "/".join(map(str, CALIBRATION_CELLS[name])) if name in CALIBRATION_CELLS else
                            ("bench.perf link" if name in ("wire_efficiency", "b_byte_s") else
                             "bench.perf wakeup" if name == "wake_s" else
                             "regimes calibration run" if name in ("c_full_s", "eta") else "the cluster's setting")}
                           for name in MEANING])
    fam = validate.summary(val)
    band = validate.summary(val, "delay_band")
    before = val[val["forecast_before_run"]]
    before_table = pd.DataFrame([
        {"forecast": "today's model", **validate.summary(before).iloc[-1].drop("family").to_dict()},
        {"forecast": "as committed before the runs",
         **validate.summary(before.assign(error=before["committed_forecast_error"])).iloc[-1].drop("family").to_dict()}])
    tfit = k.get("transport_fit", {})
    ttt = target.validation(val)
    ttt_summary = validate.summary(ttt, "study") if len(ttt) else ttt
    ttable = pd.DataFrame([r for r in tfit.get("table", []) if r["delay"] == "all"],
                          columns=["op", "cells", "median_abs_error", "max_abs_error", "median_error"])
    new = validate.summary(val[~val["same_config_as_calibration"]])
    study = validate.summary(val, "study")
    misses = val[val["error"].abs() > 0.25].sort_values("error", key=abs, ascending=False)
    lines = [
        "# Predictions: a calibrated performance model of every algorithm",
        "",
        "Generated by `dvc repro pipelines/predict/dvc.yaml` (which runs `python -m bench predict --publish "
        "docs/results/predict` when an input changed; notebook `notebooks/predict.ipynb`) "
        "from the published studies, `calibration.json` and `pipelines/hardware/model/`. How it was made, what "
        "surprised us and every miss explained: [NOTES.md](NOTES.md). The model: `bench/predict/` (docstrings).",
        "",
        "## Calibration (`calibration.json`)",
        "",
        "Fitted once on micro-benchmarks and named runs, never per cell; the cells it used are left out of the "
        "validation.",
        "",
        _md(consts, 4),
        "",
        "### What a link's delay costs each operation (`transport` in `calibration.json`, `bench/predict/transport.py`)",
        "",
        f"Fitted on `{tfit.get('source', '?')}` alone ({tfit.get('cells', 0)} cells of `python -m bench.perf "
        "collectives`: operation, size, n, rate, one-way delay; docs/results/collectives/README.md). Predicted / "
        "measured - 1 of each operation's seconds, over its sizes, n, rates and delays:",
        "",
        _md(ttable) if len(ttable) else "no fit (no micro-benchmark cells)",
        "",
        "### Per machine (`machines` in `calibration.json`, `machines/`, `bench/predict/machines.py`)",
        "",
        f"The constants above are of `{k.get('machine') or '?'}` (regimes-v1's calibration run). A cell of another "
        "machine with a record of its own takes that machine's compute and quota share (`c_full_s`, `eta`, from its "
        "calibration run) and, where the collectives were measured on it, its transport; the rest as above:",
        "",
        _md(pd.DataFrame([{"machine": m, "c_full_s": c["c_full_s"], "eta": c["eta"],
                           "transport": (c.get("transport_fit") or {}).get("source", "the default"),
                           "source": c.get("source", "")} for m, c in (k.get("machines") or {}).items()],
                         columns=["machine", "c_full_s", "eta", "transport", "source"]), 4)
        if k.get("machines") else "no other machine's record",
        "",
        f"## Validation (`tables/validation.csv`: {len(val)} measured cells of {val['study'].nunique()} studies)",
        "",
        "Throughput predicted without refitting against the median over each cell's repeats; error = predicted / "
        "measured - 1 (`metric` throughput; the time-to-target forecast is validated apart, below). Per one-way link delay "
        "(the cell's `delay`, in its nearest band):",
        "",
        _md(band),
        "",
        f"The {len(before)} cells whose forecast was committed before they ran (`forecast_before_run`: "
        + "; ".join(f"{s}: {w}" for s, w in validate.FORECAST_BEFORE_RUN.items())
        + "): the forecast as committed is the honest forecast's error; today's model's differs where the model was "
        "revised after the runs (then its error on them is a validation, not a forecast):",
        "",
        _md(before_table),
        "",
        "Per family:",
        "",
        _md(fam),
        "",
        "Per machine (`machine`: the CPU and kernel build its study's runs recorded, `system.md`; "
        "`machine_calibrated`: predicted with that machine's own compute, and transport where measured, from "
        "`machines/` (`python -m bench predict --measure-machine` on it, or `--machine-from` its studies' calibration "
        "runs), not with another machine's: bench/predict/machines.py):",
        "",
        _md(machine_table(val)),
        "",
        "### Time to target (`tables/validation_time_to_target.csv`, `metric` time_to_target)",
        "",
        f"Samples to the target per (algorithm, n), the median over the uncensored runs of `{target.CALIBRATION_STUDY}` "
        "(its per-run table), over the model's throughput; validated on the held-out cells of "
        + ", ".join(f"`{s}`" for s in target.VALIDATION_STUDIES) + " (error = predicted / measured - 1 of the median "
        "time to target of each cell's uncensored runs). The relation is at each method's rate in "
        f"`{target.CALIBRATION_STUDY}`; a cell at another rate takes it times the ratio of samples to the target "
        f"that `{target.LR_STUDY}` (a learning-rate sweep of the workload, one seed a rate, 4 workers) measured "
        "between the two rates, the method's own or its family's representative's (`relation` names it). An "
        "(algorithm, n) without such runs, or at a rate the sweep cannot reach, is forecast as throughput only and "
        "left out here.",
        "",
        _md(ttt_summary) if len(ttt_summary) else "no held-out cell",
        "",
        "Without the cells whose configuration equals a calibration cell's (re-measurements in another study): ",
        "",
        _md(new),
        "",
        "Per study:",
        "",
        _md(study),
        "",
        f"Cells off by more than 25 % ({len(misses)}; NOTES.md says why, cell by cell):",
        "",
        _md(misses[["study", "cell", "measured", "predicted", "error"]]) if len(misses) else "none",
        "",
    ]
    if v1_path.is_file():
        v1 = pd.read_csv(v1_path)
        lines += ["The model was revised after validation v1 (`history/validation_v1.csv`, NOTES.md); v1's summary:",
                  "", _md(validate.summary(v1)), ""]
    lines += ["## Anchors (`tables/anchors.csv`): published results reproduced before forecasting", "",
              _md(anc.drop(columns=["source"])), "", "Sources: " + "; ".join(sorted(set(anc["source"]))), "",
              "## Forecasts (`tables/forecast.csv`, `tables/winners.csv`, `figures/forecast_speedup.png`)", "",
              "S(n) = throughput over `sync`'s at one worker on the same hardware; throughput only: which method "
              "reaches an accuracy first is not predicted (no measured relation here between staleness or period "
              "and epochs backs it).", "", _md(win), "",
              "## Figures", "", "- `figures/validation.png`: predicted against measured throughput per cell, ±10 % "
              "and ±25 % dashed and dotted", "- `figures/forecast_speedup.png`: forecast S(n), one panel per hardware",
              ""]
    path = dest / "README.md"
    path.write_text("\n".join(lines))
    return path


def run_notebook(dest: Path) -> Path:
    """Execute ``notebooks/predict.ipynb`` (parameter ``dest``) into ``results/predict/notebooks/predict.ipynb``
    (executed notebooks are not tracked: results/.gitignore)."""
    import papermill

    out = REPO_ROOT / "results" / "predict" / "notebooks" / "predict.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(str(REPO_ROOT / "notebooks" / "predict.ipynb"), str(out), parameters={"dest": str(dest)},
                               cwd=str(REPO_ROOT), kernel_name="python3", progress_bar=False)
    return out
