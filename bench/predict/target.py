"""Time to a target accuracy: the samples a method needs to reach it (measured) over the throughput the model forecasts.

time to target = samples to target / throughput, where samples to target is a relation measured per algorithm and
worker count on the suite's workload: the median over the uncensored runs of :data:`CALIBRATION_STUDY` (a run's
``time_to_target_s`` x its ``throughput``, from its published per-run table ``tables/regimes.csv``); at a worker
count between two measured ones (n = 3 between 2 and 4) it is interpolated, log samples linear in log n, and says so
(an inference: no run at that n backs it; ``bench.advise.validate`` measures it). It does not
model how the period or the staleness change it: a configuration whose (algorithm, n) has no such cell, or whose
runs mostly did not reach the target, gets "throughput only" (None). The relation is validated on the cells of
:data:`VALIDATION_STUDIES` (other links, delays and stragglers of the same workload and target), never fitted there.

The samples a method needs depend on its learning rate: the relation is measured at each method's rate in
:data:`CALIBRATION_STUDY` (``lr``). A configuration at another rate takes the relation times the ratio of samples to
the target that :data:`LR_STUDY`, a learning-rate sweep of the same workload and target at 4 workers, measured
between the two rates (:func:`lr_ratio`: the method's own runs there, else its family's representative's); where
that sweep has no uncensored run at either rate, the forecast is throughput only. Inferences, stated where they are
used: the ratio is measured at 4 workers and one seed a rate, and applied at every worker count; a method outside
the sweep moves as its family's representative (:data:`LR_REPRESENTATIVE`) does.
"""

from __future__ import annotations

import math

import pandas as pd

from ..layout import run_name
from .cells import RESULTS, read_published

CALIBRATION_STUDY = "regimes-speedup"
"""The named calibration cells of the relation: every (algorithm, n) of this study, both of its links."""
VALIDATION_STUDIES = ("regimes-latency", "regimes", "regimes-latency-1ms")
"""Held-out studies with the same workload and target accuracy (the regimes profile's)."""
MIN_RUNS = 2
"""Uncensored runs an (algorithm, n) needs for its relation to back a forecast."""
LR_STUDY = "regimes-lr"
"""The learning-rate sweep (points ``lr<rate>``) that moves the relation from its rate to a configuration's."""
LR_REPRESENTATIVE = {"allreduce": "sync", "decentralised": "sgp", "parameter-server": "downpour"}
"""The method of each family that :data:`LR_STUDY` sweeps for every method of the family it does not sweep."""


COLUMNS = ("algorithm", "np", "point", "time_to_target_s", "throughput", "censored")


def _runs(study: str) -> pd.DataFrame:
    """A study's published per-run table (its :data:`COLUMNS` checked: :func:`.cells.read_published`)."""
    path = RESULTS / study / "tables" / "regimes.csv"
    df = read_published(path, COLUMNS, f"the published runs the time-to-target relation reads; restore them: "
                                       f"git checkout -- {path.relative_to(RESULTS.parent.parent)}")
    df["point"] = df["point"].fillna("")
    df["samples_to_target"] = df["time_to_target_s"] * df["throughput"]
    return df


def study_lr(study: str, algorithm: str, n: int) -> float:
    """The learning rate ``study`` runs ``algorithm`` at ``n`` workers with (its profile's, or the study's sets)."""
    from ..resolve import resolve
    from ..study import load_study

    s = load_study(study)
    return float(resolve(algorithm, np=n, profile=s.profile, hardware=s.hardware[0], study=study, check=False,
                         overrides=s.overrides(algorithm, n, s.hardware[0])).train.lr)


def relation(study: str = CALIBRATION_STUDY) -> dict[tuple[str, int], dict]:
    """(algorithm, n) -> {samples: median samples to the target, runs, censored, source, lr}, where backed."""
    out = {}
    for (algo, n), g in _runs(study).groupby(["algorithm", "np"]):
        ok = g[~g["censored"].astype(bool) & g["samples_to_target"].notna()]
        if len(ok) >= MIN_RUNS and len(ok) > len(g) / 2:
            out[algo, int(n)] = {"samples": float(ok["samples_to_target"].median()), "runs": len(ok),
                                 "censored": int(len(g) - len(ok)), "source": f"{study}/{algo}/np{int(n)}",
                                 "lr": study_lr(study, algo, int(n))}
    for algo in {a for a, _ in out}:  # a worker count between two measured ones: interpolated, never extrapolated
        ns = sorted(n for a, n in out if a == algo)
        for lo, hi in zip(ns, ns[1:]):
            for n in range(lo + 1, hi):
                a, b = out[algo, lo], out[algo, hi]
                w = math.log(n / lo) / math.log(hi / lo)  # log samples linear in log n
                out[algo, n] = {"samples": math.exp((1 - w) * math.log(a["samples"]) + w * math.log(b["samples"])),
                                "runs": min(a["runs"], b["runs"]), "censored": a["censored"] + b["censored"],
                                "source": f"{study}/{algo}/np{n} interpolated between np{lo} and np{hi}",
                                "lr": a["lr"] if math.isclose(a["lr"], b["lr"]) else math.nan}
    return out


def relation_profile(study: str = CALIBRATION_STUDY) -> str:
    """The training profile (workload) the relation is measured on."""
    from ..study import load_study

    return load_study(study).profile


def _sweep(study: str = LR_STUDY) -> dict[tuple[str, float], float]:
    """(algorithm, rate) -> median samples to the target over the uncensored runs of the sweep's point ``lr<rate>``."""
    df = _runs(study)
    df = df[df["point"].str.startswith("lr") & ~df["censored"].astype(bool) & df["samples_to_target"].notna()]
    return {(a, float(p[2:])): float(g["samples_to_target"].median()) for (a, p), g in df.groupby(["algorithm", "point"])}


def lr_ratio(algorithm: str, lr_from: float, lr_to: float, sweep: dict | None = None) -> tuple[float, str] | None:
    """(samples at ``lr_to`` / samples at ``lr_from``, which runs say so) from :data:`LR_STUDY`: the method's own
    sweep, else its family's representative's (:data:`LR_REPRESENTATIVE`); None where neither has an uncensored run
    at both rates. (1, "") at the same rate."""
    from ..algorithms import get_algorithm

    if math.isclose(lr_from, lr_to, rel_tol=1e-9):
        return 1.0, ""
    sweep = _sweep() if sweep is None else sweep
    for a in dict.fromkeys((algorithm, LR_REPRESENTATIVE.get(get_algorithm(algorithm).family, algorithm))):
        lo, hi = sweep.get((a, _rate(lr_from))), sweep.get((a, _rate(lr_to)))
        if lo and hi:
            return hi / lo, f"{LR_STUDY}/{a} lr {lr_from:g} -> {lr_to:g}"
    return None


def _rate(lr: float) -> float:
    """A rate as the sweep's point names it (``lr0.2``: 0.2), so that 0.2 and 0.2000000001 meet."""
    return float(f"{lr:g}")


def backing(algorithm: str, n: int, lr: float | None = None, rel: dict | None = None,
            sweep: dict | None = None) -> tuple[float, str] | None:
    """(samples to the target, where they come from) for ``algorithm`` at ``n`` workers and rate ``lr`` (None: the
    relation's own rate); None where no measured relation backs it (module docstring)."""
    r = (rel if rel is not None else relation()).get((algorithm, n))
    if r is None:
        return None
    if lr is None or math.isclose(lr, r["lr"], rel_tol=1e-9):
        return r["samples"], r["source"]
    if not math.isfinite(r["lr"]):
        return None
    moved = lr_ratio(algorithm, r["lr"], lr, sweep)
    if moved is None:
        return None
    return r["samples"] * moved[0], f"{r['source']} x {moved[0]:.3g} ({moved[1]})"


def time_to_target(algorithm: str, n: int, throughput: float, rel: dict | None = None, lr: float | None = None,
                   sweep: dict | None = None) -> float | None:
    """Seconds to the target at ``throughput`` samples a second at rate ``lr``; None where no measured relation backs
    it."""
    b = backing(algorithm, n, lr, rel, sweep)
    return None if b is None or throughput <= 0 else b[0] / throughput


def validation(val: pd.DataFrame, studies=VALIDATION_STUDIES) -> pd.DataFrame:
    """Per held-out cell with a backed relation: the measured median time to target (its uncensored runs; a cell
    most of whose runs were censored is left out) against samples to target / the model's throughput for it
    (``val``: :func:`bench.predict.validate.table`)."""
    rel, sweep = relation(), _sweep()
    pred = {(r.study, r.cell): (r.predicted, r.lr) for r in val.itertuples()}
    rows = []
    for study in studies:
        for (algo, n, point), g in _runs(study).groupby(["algorithm", "np", "point"]):
            ok = g[~g["censored"].astype(bool) & g["time_to_target_s"].notna()]
            key = (study, run_name(algo, int(n), point))
            if key not in pred or (algo, int(n)) not in rel or len(ok) <= len(g) / 2:
                continue
            b = backing(algo, int(n), pred[key][1], rel, sweep)
            if b is None:  # the cell's rate is one the sweep cannot move the relation to
                continue
            forecast = b[0] / pred[key][0]  # time_to_target's arithmetic, on the backing already found
            measured = float(ok["time_to_target_s"].median())
            rows.append({"study": study, "cell": key[1], "algorithm": algo, "np": int(n), "metric": "time_to_target",
                         "relation": b[1], "lr": pred[key][1], "measured": measured, "predicted": forecast,
                         "error": forecast / measured - 1, "runs": len(ok)})
    return pd.DataFrame(rows)
