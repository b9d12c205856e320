"""Every measured cell of the published studies predicted without refitting, against what was measured.

The cells the calibration used (:data:`bench.predict.calibrate.CALIBRATION_CELLS`) are left out; a cell of another
study with the same configuration as one of them (``regimes-quota``'s sync at 2 workers unshaped, a re-measurement of
the calibration's) stays in, flagged ``same_config_as_calibration``, and the summary is given with and without them.
``error`` is predicted / measured - 1 on throughput (samples a second, all workers; ``metric``: ``throughput``).

``delay`` is the cell's one-way link delay (ms) and ``delay_band`` the nearest of :data:`BANDS`; ``forecast_before_run``
is true for the cells of a study whose forecast (``docs/results/<study>/forecast.csv``, ``python -m bench predict
--forecast-study``) was committed before its runs (:data:`FORECAST_BEFORE_RUN`, with the commits), and
``committed_forecast_error`` is that forecast's own error: the model of that day, not today's, which was revised
after those cells ran. ``lr`` is the cell's learning rate (the time-to-target relation moves to it:
:func:`bench.predict.target.backing`). ``machine`` is the machine its study ran on (its ``system.md``) and
``machine_calibrated`` whether the constants it was predicted with are that machine's own (:mod:`.machines`).
"""

from __future__ import annotations

import math

import pandas as pd

from ..algorithms import get_algorithm
from ..config import parse_delay
from ..layout import REPO_ROOT
from . import hardware, machines
from .calibrate import calibration_keys
from .cells import Cell, all_cells
from .model import Model

COLUMNS = ["study", "cell", "algorithm", "family", "np", "link", "straggler", "repeats", "measured", "predicted",
           "error", "bound", "measured_step_ms", "predicted_step_ms", "measured_comm_ms", "predicted_comm_ms",
           "measured_staleness", "predicted_staleness", "same_config_as_calibration", "delay", "delay_band",
           "forecast_before_run", "committed_forecast_error", "metric", "lr", "machine", "machine_calibrated"]
BANDS = (0.0, 1.0, 5.0, 25.0)
"""One-way delays (ms) the validation is summarised at; a cell goes to the nearest (on a log scale above 0)."""
FORECAST_BEFORE_RUN = {
    "regimes-latency": "forecast.csv committed in c0c6362 (2026-11-25 21:35 UTC), its runs in a38f94f (2026-11-26)",
    "regimes-latency-1ms": "forecast.csv committed in 4022ce7 (2026-11-30 05:40 UTC, with this machine's record), "
                           "its runs from 05:40 UTC at that commit",
}
"""Studies whose forecast was committed before their runs (``git log`` of ``forecast.csv`` and of ``runs.csv``)."""


def delay_band(delay_ms: float) -> str:
    """The band of a one-way delay: ``0ms``, ``1ms``, ``5ms`` or ``25ms`` (:data:`BANDS`, the nearest)."""
    if delay_ms <= 0:
        return "0ms"
    band = min(BANDS[1:], key=lambda b: abs(math.log(delay_ms / b)))
    return f"{band:g}ms"


def _committed_forecasts() -> dict:
    out = {}
    for study in FORECAST_BEFORE_RUN:
        path = REPO_ROOT / "docs" / "results" / study / "forecast.csv"
        if path.is_file():
            for r in pd.read_csv(path).itertuples():
                out[study, r.algorithm, int(r.np), str(r.point)] = float(r.predicted)
    return out


def _signature(cell: Cell) -> tuple:
    c = cell.cfg
    return (c.algorithm, c.launch.np, c.launch.link, c.launch.cpu_per_host, c.train.slow_factor, c.train.step_jitter_s,
            repr(c.params))


def table(calibration: dict | None = None, cells: list[Cell] | None = None) -> pd.DataFrame:
    calibration = calibration or hardware.load_calibration()
    cells = cells if cells is not None else all_cells()
    held = calibration_keys()
    models: dict[str, tuple] = {}
    used = {_signature(c) for c in cells if (c.study, c.algorithm, c.np, c.point) in held}
    rows = []
    committed = _committed_forecasts()
    for cell in cells:
        if (cell.study, cell.algorithm, cell.np, cell.point) in held:
            continue
        if cell.machine not in models:
            k, own = machines.for_machine(calibration, cell.machine)
            models[cell.machine] = (k, own, Model(k))
        k, own, model = models[cell.machine]
        hw, wl = hardware.for_config(cell.cfg, k)
        p = model.predict(cell.cfg, hw, wl)
        measured_step = cell.np * wl.batch / cell.throughput
        rows.append({"study": cell.study, "cell": cell.key, "algorithm": cell.algorithm,
                     "family": get_algorithm(cell.algorithm).family, "np": cell.np, "link": cell.link,
                     "straggler": cell.straggler, "repeats": cell.repeats, "measured": cell.throughput,
                     "predicted": p.throughput, "error": p.throughput / cell.throughput - 1, "bound": p.bound,
                     "measured_step_ms": 1e3 * measured_step, "predicted_step_ms": 1e3 * p.step_s,
                     "measured_comm_ms": 1e3 * (cell.comm_s + cell.wait_s), "predicted_comm_ms": 1e3 * (p.comm_s + p.wait_s),
                     "measured_staleness": cell.staleness, "predicted_staleness": p.staleness_mean,
                     "same_config_as_calibration": _signature(cell) in used})
        delay_ms = 1e3 * parse_delay(cell.cfg.launch.link_delay or "")
        before = committed.get((cell.study, cell.algorithm, cell.np, cell.point))
        rows[-1].update({"delay": delay_ms, "delay_band": delay_band(delay_ms), "forecast_before_run": before is not None,
                         "committed_forecast_error": None if before is None else before / cell.throughput - 1,
                         "metric": "throughput", "lr": float(cell.cfg.train.lr), "machine": cell.machine,
                         "machine_calibrated": own})
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(df: pd.DataFrame, by: str = "family") -> pd.DataFrame:
    """Per group: cells, median and maximum |error|, and how many are within 10 % and 25 %."""
    def agg(g: pd.DataFrame) -> pd.Series:
        a = g["error"].abs()
        return pd.Series({"cells": len(g), "median_abs_error": a.median(), "max_abs_error": a.max(),
                          "within_10pct": int((a <= 0.10).sum()), "within_25pct": int((a <= 0.25).sum())})
    groups = [(name, agg(g)) for name, g in df.groupby(by, sort=True)]
    groups.append(("all", agg(df)))
    out = pd.DataFrame([s for _, s in groups], index=[n for n, _ in groups])
    out.index.name = by
    return out.reset_index()


def nearest_summary(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`summary` per family and delay band: the cells nearest a forecast (``bench predict`` quotes its row)."""
    out = []
    for (fam, band), g in df.groupby(["family", "delay_band"], sort=True):
        row = summary(g).iloc[-1].drop("family").to_dict()
        out.append({"family": fam, "delay_band": band, **row})
    return pd.DataFrame(out)
