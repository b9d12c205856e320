"""The ranking ``bench advise`` prints: every algorithm's forecast on one hardware and n, ordered.

Order: the algorithms whose time to target a measured relation backs (:mod:`bench.predict.target`), fastest first;
then those forecast in throughput only, highest first; then those the configuration refuses (e.g. EASGD's n x alpha
< 2 at this n), each with its one-line reason. The winner is the first of the first group, or of the second when the
first is empty (and then it says it is a throughput winner).
"""

from __future__ import annotations

from .. import BenchError
from ..algorithms import get_algorithm, names
from ..predict.query import predict_many

COLUMNS = ("rank", "algorithm", "family", "np", "basis", "time_to_target_s", "throughput", "speedup", "step_s",
           "compute_s", "comm_s", "wait_s", "bound", "error", "error_source", "note")
"""The ranking table's columns (ranking.csv, advice.json)."""


def relation_sets(algorithm: str, np: int) -> dict:
    """The settings the time-to-target relation's study ran ``algorithm`` with (e.g. DOWNPOUR's rate and periods):
    a forecast and a confirmation run take them, so that both are of the configuration the relation measured."""
    from ..predict.target import CALIBRATION_STUDY
    from ..study import load_study

    study = load_study(CALIBRATION_STUDY)
    return study.overrides(algorithm, np, study.hardware[0])


def forecasts(algorithms: list[str], np: int, hardware: str, profile: str | None, overrides: dict) -> list[dict]:
    """One row per algorithm: its forecast (``predict_many``'s row) with the relation's settings under ``overrides``,
    or the reason it cannot run here (``refused``)."""
    rows = []
    for algo in algorithms:
        try:
            rows.append(predict_many([algo], [np], hardware, profile, {**relation_sets(algo, np), **overrides})[0])
        except BenchError as e:
            rows.append({"algorithm": algo, "np": np, "refused": str(e), "family": get_algorithm(algo).family})
    return rows


def _error(r: dict) -> tuple[float | None, str]:
    """The stated error of a forecast: the nearest validated cells' median |error| (same family, same delay band),
    else the family's; for a time to target, the held-out time-to-target median |error|."""
    if r.get("time_to_target_s") is not None and r.get("time_to_target_median_abs_error") is not None:
        return r["time_to_target_median_abs_error"], "held-out time-to-target cells"
    if r.get("nearest_median_abs_error") is not None:
        return r["nearest_median_abs_error"], f"validated cells nearest it ({r['nearest']}, {r['nearest_cells']})"
    if r.get("family_median_abs_error") is not None:
        return r["family_median_abs_error"], f"validated cells of its family ({r['family_cells']})"
    return None, "not validated"


def ranking(rows: list[dict]) -> list[dict]:
    """``rows`` ordered as the module docstring says, as :data:`COLUMNS` records."""
    timed = sorted((r for r in rows if "refused" not in r and r.get("time_to_target_s") is not None),
                   key=lambda r: r["time_to_target_s"])
    only = sorted((r for r in rows if "refused" not in r and r.get("time_to_target_s") is None),
                  key=lambda r: -r["throughput"])
    refused = [r for r in rows if "refused" in r]
    out = []
    for i, r in enumerate(timed + only + refused, 1):
        if "refused" in r:
            out.append({**{k: None for k in COLUMNS}, "rank": None, "algorithm": r["algorithm"], "family": r["family"],
                        "np": r["np"], "basis": "refused", "note": r["refused"]})
            continue
        err, src = _error(r)
        out.append({"rank": i, "algorithm": r["algorithm"], "family": r["family"], "np": r["np"],
                    "basis": "time to target" if r.get("time_to_target_s") is not None else "throughput only",
                    **{k: r.get(k) for k in ("time_to_target_s", "throughput", "speedup", "step_s", "compute_s",
                                             "comm_s", "wait_s", "bound")},
                    "error": err, "error_source": src, "note": r.get("time_to_target_note", "")})
    return out


def winner(ranked: list[dict]) -> dict | None:
    return next((r for r in ranked if r["rank"] is not None), None)


def check_algorithms(text: str | None) -> list[str]:
    """``--algorithms``: registry keys, comma-separated (default: every registered one)."""
    if text is None:
        return list(names())
    algos = [a.strip() for a in text.split(",") if a.strip()]
    if not algos:
        raise BenchError("--algorithms is empty: give registry keys, comma-separated (see `python -m bench list`)")
    for a in algos:
        get_algorithm(a)
    return list(dict.fromkeys(algos))


def render(ranked: list[dict], title: str) -> str:
    lines = [title, f"{'rank':>4}  {'algorithm':<10} {'basis':<16} {'to target s':>11} {'samples/s':>10} {'S(n)':>6} "
             f"{'step ms':>8} {'compute':>8} {'comm':>8} {'wait':>7}  {'bound':<8} stated |error|"]
    for r in ranked:
        if r["rank"] is None:
            lines.append(f"{'-':>4}  {r['algorithm']:<10} refused: {r['note']}")
            continue
        ttt = f"{r['time_to_target_s']:.1f}" if r["time_to_target_s"] is not None else "-"
        err = "-" if r["error"] is None else f"{r['error']:.3f} ({r['error_source']})"
        lines.append(f"{r['rank']:>4}  {r['algorithm']:<10} {r['basis']:<16} {ttt:>11} {r['throughput']:>10.1f} "
                     f"{r['speedup']:>6.2f} {1e3 * r['step_s']:>8.2f} {1e3 * r['compute_s']:>8.2f} "
                     f"{1e3 * r['comm_s']:>8.2f} {1e3 * r['wait_s']:>7.2f}  {r['bound']:<8} {err}")
    return "\n".join(lines)
