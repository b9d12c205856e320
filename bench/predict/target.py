"""Time to a target accuracy: the samples a method needs to reach it (measured) over the throughput the model forecasts.

time to target = samples to target / throughput, where samples to target is a relation measured per algorithm and
worker count on the suite's workload: the median over the uncensored runs of :data:`CALIBRATION_STUDY` (a run's
``time_to_target_s`` x its ``throughput``, from its published per-run table ``tables/regimes.csv``); at a worker
count between two measured ones (n = 3 between 2 and 4) it is interpolated, log samples linear in log n, and says so
(an inference: no run at that n backs it; ``bench.advise.validate`` measures it). It does not
model how the period or the staleness change it: a configuration whose (algorithm, n) has no such cell, or whose
runs mostly did not reach the target, gets "throughput only" (None). The relation is validated on the cells of
:data:`VALIDATION_STUDIES` (other links, delays and stragglers of the same workload and target), never fitted there.
"""

from __future__ import annotations

import math

import pandas as pd

from ..layout import run_name
from .cells import RESULTS, read_published

CALIBRATION_STUDY = "regimes-speedup"
"""The named calibration cells of the relation: every (algorithm, n) of this study, both of its links."""
VALIDATION_STUDIES = ("regimes-latency", "regimes")
"""Held-out studies with the same workload and target accuracy (the regimes profile's)."""
MIN_RUNS = 2
"""Uncensored runs an (algorithm, n) needs for its relation to back a forecast."""


COLUMNS = ("algorithm", "np", "point", "time_to_target_s", "throughput", "censored")


def _runs(study: str) -> pd.DataFrame:
    """A study's published per-run table (its :data:`COLUMNS` checked: :func:`.cells.read_published`)."""
    path = RESULTS / study / "tables" / "regimes.csv"
    df = read_published(path, COLUMNS, f"the published runs the time-to-target relation reads; restore them: "
                                       f"git checkout -- {path.relative_to(RESULTS.parent.parent)}")
    df["point"] = df["point"].fillna("")
    df["samples_to_target"] = df["time_to_target_s"] * df["throughput"]
    return df


def relation(study: str = CALIBRATION_STUDY) -> dict[tuple[str, int], dict]:
    """(algorithm, n) -> {samples: median samples to the target, runs, censored, source}, where backed."""
    out = {}
    for (algo, n), g in _runs(study).groupby(["algorithm", "np"]):
        ok = g[~g["censored"].astype(bool) & g["samples_to_target"].notna()]
        if len(ok) >= MIN_RUNS and len(ok) > len(g) / 2:
            out[algo, int(n)] = {"samples": float(ok["samples_to_target"].median()), "runs": len(ok),
                                 "censored": int(len(g) - len(ok)), "source": f"{study}/{algo}/np{int(n)}"}
    for algo in {a for a, _ in out}:  # a worker count between two measured ones: interpolated, never extrapolated
        ns = sorted(n for a, n in out if a == algo)
        for lo, hi in zip(ns, ns[1:]):
            for n in range(lo + 1, hi):
                a, b = out[algo, lo], out[algo, hi]
                w = math.log(n / lo) / math.log(hi / lo)  # log samples linear in log n
                out[algo, n] = {"samples": math.exp((1 - w) * math.log(a["samples"]) + w * math.log(b["samples"])),
                                "runs": min(a["runs"], b["runs"]), "censored": a["censored"] + b["censored"],
                                "source": f"{study}/{algo}/np{n} interpolated between np{lo} and np{hi}"}
    return out


def relation_profile(study: str = CALIBRATION_STUDY) -> str:
    """The training profile (workload) the relation is measured on."""
    from ..study import load_study

    return load_study(study).profile


def time_to_target(algorithm: str, n: int, throughput: float, rel: dict | None = None) -> float | None:
    """Seconds to the target at ``throughput`` samples a second; None where no measured relation backs it."""
    r = (rel if rel is not None else relation()).get((algorithm, n))
    return None if r is None or throughput <= 0 else r["samples"] / throughput


def validation(val: pd.DataFrame, studies=VALIDATION_STUDIES) -> pd.DataFrame:
    """Per held-out cell with a backed relation: the measured median time to target (its uncensored runs; a cell
    most of whose runs were censored is left out) against samples to target / the model's throughput for it
    (``val``: :func:`bench.predict.validate.table`)."""
    rel = relation()
    pred = {(r.study, r.cell): r.predicted for r in val.itertuples()}
    rows = []
    for study in studies:
        for (algo, n, point), g in _runs(study).groupby(["algorithm", "np", "point"]):
            ok = g[~g["censored"].astype(bool) & g["time_to_target_s"].notna()]
            key = (study, run_name(algo, int(n), point))
            if key not in pred or (algo, int(n)) not in rel or len(ok) <= len(g) / 2:
                continue
            forecast = time_to_target(algo, int(n), pred[key], rel)
            measured = float(ok["time_to_target_s"].median())
            rows.append({"study": study, "cell": key[1], "algorithm": algo, "np": int(n), "metric": "time_to_target",
                         "relation": rel[algo, int(n)]["source"], "measured": measured, "predicted": forecast,
                         "error": forecast / measured - 1, "runs": len(ok)})
    return pd.DataFrame(rows)
