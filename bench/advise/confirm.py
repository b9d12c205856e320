"""``bench advise --confirm K``: the forecast's top K and ``sync`` measured on the cluster itself, side by side.

Each confirmed algorithm runs ``--repeats`` times through the normal run path (:func:`bench.launch.run`: run
directories under the report's ``runs/`` as ``bench run`` writes them), paired: repeat i of every algorithm uses seed
i. The runs take the settings the time-to-target relation was measured with (the relation's study's per-algorithm
settings, e.g. DOWNPOUR's rate) and the cluster the hardware names: a probed emulated cluster is brought up as the
probe found it (its ``cluster_set``, the launch settings the probe ran under, which no forecast reads). Per
algorithm: the measured throughput (median) and time to the target accuracy (median over the repeats that reached it,
with the suite's t-interval over them, :func:`bench.metrics.stats.t_interval`; a run that never reached it is
censored and counted), beside the forecast; the measured
winner is the algorithm with the lowest median time to target among those most of whose repeats reached it (else the
highest throughput), and the report says whether it is the forecast one.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from .. import BenchError

MAX_CONFIRM_S = 15 * 60
"""What the confirmation is meant to take at most on 4 emulated hosts (the runs' ``timeout_s`` bounds each)."""


def plan(ranked: list[dict], k: int) -> list[str]:
    """The top ``k`` of the ranking and ``sync`` (once)."""
    top = [r["algorithm"] for r in ranked if r["rank"] is not None][:k]
    return top + ([] if "sync" in top else ["sync"])


def measure(algorithms: list[str], np: int, hardware: str, profile: str | None, overrides: dict, repeats: int,
            out: Path, target: float, progress) -> list[dict]:
    """Run the plan and summarise it per algorithm (the module docstring)."""
    from ..launch import run as launch_run
    from ..layout import run_name
    from ..metrics.accuracy import time_to_target
    from ..metrics.stats import t_interval
    from ..predict import hardware as hw_mod
    from ..predict.target import CALIBRATION_STUDY
    from ..resolve import resolve
    from ..results import load_run
    from ..study import load_study
    from .rank import relation_sets

    launch_id, sets = hardware, dict(overrides)
    if hw_mod.is_described(hardware):
        hw = hw_mod.described(hardware)
        if not hw.launch_profile:
            raise BenchError(f"hardware {hardware!r} is described only (no launch profile): nothing to run on")
        launch_id = hw.launch_profile
        sets = {**((hw.probed or {}).get("cluster_set") or {}), **sets}
    study = load_study(CALIBRATION_STUDY)
    rows, k, total = [], 0, len(algorithms) * repeats
    for algo in algorithms:
        thr, ttt, censored = [], [], 0
        for i in range(repeats):
            k += 1
            cfg = resolve(algo, np=np, profile=profile or study.profile, hardware=launch_id,
                          overrides={**relation_sets(algo, np), **sets, "seed": i + 1},
                          study="advise", tag=f"confirm-seed{i + 1}")
            progress(f"confirm {k}/{total}: {algo} n={np} seed {i + 1}")
            run_dir, rc = launch_run(cfg, out / "runs" / run_name(algo, np, f"seed{i + 1}"), force=True,
                                     echo=False)
            run = load_run(run_dir)
            if rc != 0 or run.summary.get("status") != "ok":
                raise BenchError(f"confirmation run {run_dir} failed ({run.summary.get('status')}: "
                                 f"{run.summary.get('reason', 'see its launch.log')})")
            thr.append(float(run.summary["throughput"]))
            t, cens = time_to_target(run.evals, target, run.summary.get("train_s"))
            censored += bool(cens)
            if not cens:
                ttt.append(t)
        _, low, high = t_interval(ttt)  # the suite's one t-interval (bench.metrics.stats), NaN below its MIN_N (3) values
        low, high = (None, None) if math.isnan(low) else (low, high)
        rows.append({"algorithm": algo, "np": np, "repeats": repeats, "throughput": statistics.median(thr),
                     "throughputs": thr, "time_to_target_s": measured_time_to_target(ttt, repeats),
                     "time_to_target_low": low, "time_to_target_high": high, "reached": len(ttt),
                     "censored": censored})
    return rows


def measured_time_to_target(reached: list[float], runs: int) -> float | None:
    """A method's measured time to target over ``runs`` runs: the median over the ``reached`` times when most runs
    reached the target; None (censored) otherwise. The one definition ``--confirm`` and advise-validation use."""
    return statistics.median(reached) if len(reached) > runs / 2 else None


def measured_winner(rows: list[dict]) -> dict:
    """The measured fastest to target (among the methods with a measured time), else the highest throughput."""
    reached = [r for r in rows if r["time_to_target_s"] is not None]
    if reached:
        return min(reached, key=lambda r: r["time_to_target_s"]) | {"basis": "time to target"}
    return max(rows, key=lambda r: r["throughput"]) | {"basis": "throughput"}


def side_by_side(ranked: list[dict], rows: list[dict]) -> list[dict]:
    """Forecast and measurement per confirmed algorithm, with the forecast's error on each."""
    fc = {r["algorithm"]: r for r in ranked}
    out = []
    for m in rows:
        f = fc[m["algorithm"]]
        err_t = (f["time_to_target_s"] / m["time_to_target_s"] - 1
                 if f["time_to_target_s"] is not None and m["time_to_target_s"] else None)
        out.append({"algorithm": m["algorithm"], "forecast_rank": f["rank"],
                    "forecast_throughput": f["throughput"], "measured_throughput": m["throughput"],
                    "throughput_error": f["throughput"] / m["throughput"] - 1,
                    "forecast_time_to_target_s": f["time_to_target_s"],
                    "measured_time_to_target_s": m["time_to_target_s"],
                    "measured_interval": [m["time_to_target_low"], m["time_to_target_high"]],
                    "reached": f"{m['reached']}/{m['repeats']}", "time_to_target_error": err_t})
    return out


def render(table: list[dict], forecast: str, winner: dict) -> str:
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = ["confirmation: forecast beside measured (median over the repeats; t-interval of the time to target)",
             f"{'algorithm':<10} {'rank':>4} {'samples/s fc':>12} {'measured':>9} {'error':>7}   "
             f"{'to target fc':>12} {'measured':>9} {'interval':>17} {'reached':>7} {'error':>7}"]
    for r in table:
        lo, hi = r["measured_interval"]
        iv = "-" if lo is None else f"[{lo:.1f}, {hi:.1f}]"
        lines.append(f"{r['algorithm']:<10} {r['forecast_rank']:>4} {r['forecast_throughput']:>12.1f} "
                     f"{r['measured_throughput']:>9.1f} {r['throughput_error']:>+7.1%}   "
                     f"{num(r['forecast_time_to_target_s'], '.1f'):>12} {num(r['measured_time_to_target_s'], '.1f'):>9} "
                     f"{iv:>17} {r['reached']:>7} "
                     f"{'-' if r['time_to_target_error'] is None else format(r['time_to_target_error'], '+.1%'):>7}")
    same = winner["algorithm"] == forecast
    lines.append(f"measured winner: {winner['algorithm']} (by {winner['basis']}); forecast winner: {forecast}: "
                 + ("the same" if same else "NOT the same"))
    return "\n".join(lines)
