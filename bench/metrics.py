"""Metrics of benchmark runs: one implementation used by the CLI, the notebooks and the tests.

Every function takes loaded runs (:class:`bench.results.Run`) or the tidy frames of
:mod:`bench.results` and returns numbers or DataFrames; nothing here draws (see
:mod:`bench.plots`). Definitions follow ALGORITHMS.md section 5:

- throughput: samples/s over timed (non-warm-up) steps of the worker ranks; per-worker rate
  ``samples/step_s`` has mean and 95% interval ``mean +- 1.96 std / sqrt(N)`` across steps
  and ranks, the run's throughput is ``workers x`` that (Horovod's synthetic benchmark);
- speedup ``S(n) = throughput(n) / throughput(1)`` of the same algorithm, scaling efficiency
  ``S(n)/n``, and speedup against ``sync`` at the same ``n``;
- time split: mean compute / communication / wait seconds per timed step;
- time-to-accuracy and accuracy-after-time of the held-out evaluations;
- staleness: distribution of tau per commit (asynchronous algorithms);
- temporal efficiency (Hermans 2017): ``E(a, b) = int_0^m f_a / int_0^m f_b``.

Only runs whose status is ``ok`` enter an aggregate: :func:`ok_runs` filters, and
:func:`status_table` lists every run with its status so a failed run is reported, never dropped.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import BenchError
from .results import Run, load_run

Z95 = 1.96
KEYS = ["hardware", "study", "algorithm", "np", "tag"]


# ----------------------------------------------------------------------------- run selection


def ok_runs(runs: list[Run]) -> list[Run]:
    """The runs that finished with status ``ok`` (the only ones aggregated or plotted)."""
    return [r for r in runs if r.status == "ok"]


def status_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: its labels, status and, for a failed run, the reason."""
    rows = []
    for r in runs:
        row = {k: r.label[k] for k in KEYS}
        row.update(status=r.status, reason=r.summary.get("reason", ""), wall_s=r.summary.get("wall_s"),
                   final_accuracy=r.summary.get("final_accuracy"), run=str(r.path))
        rows.append(row)
    cols = [*KEYS, "status", "reason", "wall_s", "final_accuracy", "run"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)


def run_key(run: Run) -> str:
    """``<algo>-np<N>[-<tag>]``: the run's name inside its study."""
    lab = run.label
    return f"{lab['algorithm']}-np{lab['np']}" + (f"-{lab['tag']}" if lab["tag"] else "")


def _timed(steps: pd.DataFrame) -> pd.DataFrame:
    if steps.empty:
        return steps
    keep = ~steps["warmup"].fillna(False).astype(bool) if "warmup" in steps else pd.Series(True, index=steps.index)
    return steps[keep]


# ----------------------------------------------------------------------------- throughput


def throughput(run: Run) -> dict:
    """Throughput of one run (samples/s, all workers) with its 95% interval, from the step records."""
    steps = _timed(run.steps)
    steps = steps[steps["step_s"] > 0] if not steps.empty else steps
    workers = int(steps["rank"].nunique()) if not steps.empty else 0
    if workers == 0:
        return {"throughput": math.nan, "ci_low": math.nan, "ci_high": math.nan, "per_worker": math.nan,
                "per_worker_std": math.nan, "workers": 0, "timed_steps": 0}
    rate = steps["samples"] / steps["step_s"]
    mean, std, n = float(rate.mean()), float(rate.std(ddof=1)) if len(rate) > 1 else 0.0, len(rate)
    half = Z95 * std / math.sqrt(n)
    return {"throughput": workers * mean, "ci_low": workers * (mean - half), "ci_high": workers * (mean + half),
            "per_worker": mean, "per_worker_std": std, "workers": workers, "timed_steps": n}


def throughput_table(runs: list[Run]) -> pd.DataFrame:
    """Throughput of every ``ok`` run, one row per run (labels + :func:`throughput`)."""
    rows = [{**{k: r.label[k] for k in KEYS}, **throughput(r)} for r in ok_runs(runs)]
    cols = [*KEYS, "throughput", "ci_low", "ci_high", "per_worker", "per_worker_std", "workers", "timed_steps"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)


def speedup_table(tp: pd.DataFrame, reference: str = "sync") -> pd.DataFrame:
    """Add ``speedup`` S(n) = tp(n)/tp(1) of the same algorithm (NaN without an np=1 run), ``efficiency``
    S(n)/n and ``vs_<reference>`` = tp / tp of ``reference`` at the same n, hardware, study and tag-less run."""
    df = tp.copy()
    group = ["hardware", "study", "algorithm", "tag"]
    base = df[df["np"] == 1].set_index(group)["throughput"]
    df["speedup"] = [row.throughput / base.get(tuple(row[g] for g in group), math.nan) for _, row in df.iterrows()]
    df["efficiency"] = df["speedup"] / df["np"]
    ref = df[(df["algorithm"] == reference) & (df["tag"] == "")].set_index(["hardware", "study", "np"])["throughput"]
    df[f"vs_{reference}"] = [row.throughput / ref.get((row.hardware, row.study, row.np), math.nan)
                             for _, row in df.iterrows()]
    return df


# ----------------------------------------------------------------------------- time split


def time_split(runs: list[Run]) -> pd.DataFrame:
    """Mean compute / communication / wait seconds per timed step of each ``ok`` run, and their shares."""
    rows = []
    for r in ok_runs(runs):
        steps = _timed(r.steps)
        if steps.empty:
            continue
        means = {c: float(steps[c].fillna(0).mean()) for c in ("compute_s", "comm_s", "wait_s")}
        total = sum(means.values())
        rows.append({**{k: r.label[k] for k in KEYS}, **means, "step_s": total,
                     **{c.replace("_s", "_share"): (v / total if total > 0 else math.nan) for c, v in means.items()}})
    cols = [*KEYS, "compute_s", "comm_s", "wait_s", "step_s", "compute_share", "comm_share", "wait_share"]
    return pd.DataFrame(rows, columns=cols).sort_values(KEYS, ignore_index=True)


# ----------------------------------------------------------------------------- convergence


def time_to_accuracy(evals: pd.DataFrame, target: float, by: str = "t") -> float:
    """First ``by`` (seconds ``t`` or ``epoch``) at which held-out accuracy reaches ``target``; NaN if never."""
    if evals.empty:
        return math.nan
    ev = evals.sort_values(by)
    hit = ev[ev["accuracy"] >= target]
    return float(hit[by].iloc[0]) if not hit.empty else math.nan


def accuracy_after_time(evals: pd.DataFrame, seconds: float) -> float:
    """Held-out accuracy of the last evaluation at or before ``seconds``; NaN if none."""
    if evals.empty:
        return math.nan
    ev = evals[evals["t"] <= seconds].sort_values("t")
    return float(ev["accuracy"].iloc[-1]) if not ev.empty else math.nan


def convergence_table(runs: list[Run], target: float, seconds: float) -> pd.DataFrame:
    """Per ``ok`` run: final held-out accuracy and loss, time and epochs to ``target``, accuracy after ``seconds``."""
    rows = []
    for r in ok_runs(runs):
        rows.append({**{k: r.label[k] for k in KEYS}, "final_accuracy": r.summary.get("final_accuracy"),
                     "final_loss": r.summary.get("final_loss"), "wall_s": r.summary.get("wall_s"),
                     f"seconds_to_{target:g}": time_to_accuracy(r.evals, target, "t"),
                     f"epochs_to_{target:g}": time_to_accuracy(r.evals, target, "epoch"),
                     f"accuracy_after_{seconds:g}s": accuracy_after_time(r.evals, seconds)})
    return pd.DataFrame(rows).sort_values(KEYS, ignore_index=True) if rows else pd.DataFrame(columns=KEYS)


# ----------------------------------------------------------------------------- staleness


def staleness_frame(runs: list[Run]) -> pd.DataFrame:
    """Every recorded tau (one row per commit) of the ``ok`` runs that record staleness."""
    frames = []
    for r in ok_runs(runs):
        s = r.steps
        if s.empty or "staleness" not in s or s["staleness"].isna().all():
            continue
        df = s.loc[s["staleness"].notna(), ["rank", "step", "staleness"]].copy()
        for k in reversed(KEYS):
            df.insert(0, k, r.label[k])
        frames.append(df)
    cols = [*KEYS, "rank", "step", "staleness"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def staleness_table(stale: pd.DataFrame) -> pd.DataFrame:
    """Mean, median, 95th percentile and max of tau per run (from :func:`staleness_frame`)."""
    if stale.empty:
        return pd.DataFrame(columns=[*KEYS, "commits", "mean", "median", "p95", "max"])
    g = stale.groupby(KEYS)["staleness"]
    return pd.DataFrame({"commits": g.size(), "mean": g.mean(), "median": g.median(),
                         "p95": g.quantile(0.95), "max": g.max()}).reset_index()


# ----------------------------------------------------------------------------- temporal efficiency


def window_curve(t, acc, window: float = 5.0, stride: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Hermans' smoothed training-accuracy curve: for each start s = 0, stride, 2 stride, ... (time measured
    from the earliest record), y(s) = mean accuracy of the records with t in [s, s + window); starts with
    no record are skipped. Returns (starts, y)."""
    if window <= 0 or stride <= 0:
        raise BenchError(f"window and stride must be > 0 seconds, got window={window!r}, stride={stride!r}")
    t = np.asarray(t, dtype=float)
    acc = np.asarray(acc, dtype=float)
    if t.size == 0:
        raise BenchError("temporal efficiency needs at least one accuracy record")
    t = t - t.min()
    starts = np.arange(0.0, t.max() + stride * 0.5, stride)
    starts = starts[starts <= t.max()]
    order = np.argsort(t)
    ts, accs = t[order], acc[order]
    csum = np.concatenate([[0.0], np.cumsum(accs)])
    lo = np.searchsorted(ts, starts, side="left")
    hi = np.searchsorted(ts, starts + window, side="left")
    count = hi - lo
    keep = count > 0
    return starts[keep], (csum[hi] - csum[lo])[keep] / count[keep]


def integrate_to(x: np.ndarray, y: np.ndarray, m: float) -> float:
    """Integral from x[0] to ``m`` of the piecewise-linear interpolation of (x, y) (m <= x[-1])."""
    inside = x < m
    xs = np.concatenate([x[inside], [m]])
    ys = np.concatenate([y[inside], [np.interp(m, x, y)]])
    return float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2.0))


def temporal_efficiency(t_a, acc_a, t_b, acc_b, window: float = 5.0, stride: float = 1.0) -> float:
    """E(a, b) = int_0^m f_a dt / int_0^m f_b dt, f the :func:`window_curve` interpolated piecewise-linearly,
    m the smaller of the two curves' last window start (no extrapolation). E > 1: a is better."""
    xa, ya = window_curve(t_a, acc_a, window, stride)
    xb, yb = window_curve(t_b, acc_b, window, stride)
    m = min(xa[-1], xb[-1])
    if m <= 0:
        raise BenchError(f"runs too short for window={window:g} s, stride={stride:g} s (shorter run's last window "
                         f"starts at 0); pass smaller --window/--stride")
    fb = integrate_to(xb, yb, m)
    if fb <= 0:
        raise BenchError("temporal efficiency undefined: run b's accuracy integral is 0")
    return integrate_to(xa, ya, m) / fb


def _as_run(run) -> Run:
    run = run if isinstance(run, Run) else load_run(Path(run))
    if run.status != "ok":
        raise BenchError(f"run {str(run.path)!r} has status {run.status!r} "
                         f"({run.summary.get('reason', 'no reason recorded')}); temporal efficiency needs ok runs")
    if run.steps.empty:
        raise BenchError(f"run {str(run.path)!r} has no worker step records")
    return run


def temporal_efficiency_runs(run_a, run_b, window: float = 5.0, stride: float = 1.0) -> float:
    """E(a, b) of two run directories (or loaded runs) from every worker's mini-batch accuracy records."""
    a, b = _as_run(run_a), _as_run(run_b)
    return temporal_efficiency(a.steps["t"], a.steps["accuracy"], b.steps["t"], b.steps["accuracy"], window, stride)


def te_matrix(runs: list[Run], window: float = 5.0, stride: float = 1.0) -> pd.DataFrame:
    """E(row, column) for every ordered pair of ``ok`` runs, indexed by :func:`run_key` (NaN where undefined)."""
    good = [r for r in ok_runs(runs) if not r.steps.empty]
    keys = [run_key(r) for r in good]
    out = pd.DataFrame(np.nan, index=keys, columns=keys)
    for (i, a), (j, b) in itertools.product(enumerate(good), repeat=2):
        try:
            out.iloc[i, j] = temporal_efficiency_runs(a, b, window, stride)
        except BenchError:
            pass
    out.index.name, out.columns.name = "a", "b"
    return out


def te_grid(runs: list[Run], a: str, b: str, param: str, window: float = 5.0, stride: float = 1.0) -> pd.DataFrame:
    """E(a, b) for each (np, ``param``) configuration both algorithms ran (runs matched on np and the value of
    hyperparameter ``param``, e.g. ``communication_window``). Columns: np, ``param``, E, winner."""
    def index(name):
        return {(r.label["np"], r.config.get("params", {}).get(param)): r for r in ok_runs(runs)
                if r.label["algorithm"] == name and not r.steps.empty}

    ia, ib = index(a), index(b)
    rows = []
    for key in sorted(set(ia) & set(ib), key=lambda k: (k[0], str(k[1]))):
        try:
            e = temporal_efficiency_runs(ia[key], ib[key], window, stride)
        except BenchError:
            e = math.nan
        rows.append({"np": key[0], param: key[1], "E": e,
                     "winner": a if e > 1 else b if e < 1 else ("tie" if e == 1 else "undefined")})
    return pd.DataFrame(rows, columns=["np", param, "E", "winner"])


def win_share(grid: pd.DataFrame, a: str) -> float:
    """Share of the defined configurations of a :func:`te_grid` where ``a`` wins (E > 1); NaN if none."""
    e = grid["E"].dropna()
    return float((e > 1).mean()) if len(e) else math.nan


# ----------------------------------------------------------------------------- DVC metrics


def study_metrics(runs: list[Run]) -> dict:
    """Metrics file content for DVC: per run (keyed ``<algo>-np<N>[-tag]``) status, throughput and
    final held-out accuracy / loss; failed runs are present with their status and no figures."""
    tp = {run_key(r): throughput(r)["throughput"] for r in ok_runs(runs)}
    out = {}
    for r in runs:
        k = run_key(r)
        entry = {"status": r.status}
        if r.status == "ok":
            entry.update(throughput=_finite(tp[k]), final_accuracy=_finite(r.summary.get("final_accuracy")),
                         final_loss=_finite(r.summary.get("final_loss")), wall_s=_finite(r.summary.get("wall_s")))
        out[k] = entry
    return {"runs": dict(sorted(out.items())), "ok": sum(r.status == "ok" for r in runs),
            "failed": sum(r.status != "ok" for r in runs)}


def _finite(v):
    return None if v is None or not math.isfinite(float(v)) else round(float(v), 6)


# ----------------------------------------------------------------------------- study status (report)


def study_status(runs: list[Run], plan_dir: str | Path | None = None) -> pd.DataFrame:
    """:func:`status_table` of the runs plus one ``not run`` row per algorithm whose DVC plan file
    (``results/<hardware>/<study>/plan/<algo>.json``) has no runs (not registered yet)."""
    table = status_table(runs)
    rows = []
    for f in sorted(Path(plan_dir).glob("*.json")) if plan_dir and Path(plan_dir).is_dir() else []:
        from .results import read_json

        plan = read_json(f)
        if plan.get("status") == "not registered":
            rows.append({"hardware": plan.get("hardware"), "study": plan.get("study"), "algorithm": plan["algorithm"],
                         "np": None, "tag": "", "status": "not run", "reason": plan["status"]})
    return pd.concat([table, pd.DataFrame(rows)], ignore_index=True) if rows else table


def status_summary(status: pd.DataFrame) -> str:
    """One Markdown line: how many runs are ok, failed, incomplete or not run."""
    counts = status["status"].value_counts()
    parts = [f"**{counts.get(s, 0)} {s}**" for s in ("ok", "failed", "incomplete", "not run") if counts.get(s, 0)]
    bad = status.loc[status["status"] != "ok"]
    line = f"{len(status)} entries: " + ", ".join(parts) if parts else "no runs found"
    if not bad.empty:
        line += ". Not ok (left out of every figure and aggregate): " + ", ".join(
            f"{a} np{n if n == n and n is not None else '-'} ({s})" for a, n, s in zip(bad["algorithm"], bad["np"], bad["status"]))
    return line


def hardware_table(runs: list[Run]) -> pd.DataFrame:
    """One row per hardware id: hosts, CPU, GPUs, interconnect, torch / horovod versions (from system.json)."""
    rows = {}
    for r in runs:
        s = r.system
        hw = r.label["hardware"]
        if hw in rows:
            continue
        gpus = s.get("gpus") or []
        rows[hw] = {"hardware": hw, "hosts": ",".join(sorted(set(s.get("hosts_by_rank") or [s.get("hostname", "")]))),
                    "cpu_model": s.get("cpu_model"), "cpu_cores": s.get("cpu_cores"),
                    "gpus": f"{len(gpus)} x {gpus[0].get('name', gpus[0]) if isinstance(gpus[0], dict) else gpus[0]}" if gpus else "",
                    "interconnect": s.get("interconnect") or "", "torch": s.get("torch"), "horovod": s.get("horovod")}
    cols = ["hardware", "hosts", "cpu_model", "cpu_cores", "gpus", "interconnect", "torch", "horovod"]
    return pd.DataFrame(list(rows.values()), columns=cols)


def load_study_everywhere(results_root: str | Path, study: str) -> list[Run]:
    """Every run of ``study`` on every hardware profile under ``results_root`` (``<hardware>/<study>/runs/``)."""
    from .results import load_runs

    runs = []
    for d in sorted(Path(results_root).glob(f"*/{study}/runs")):
        runs += load_runs(d)
    return runs


def eval_points(evals: pd.DataFrame) -> pd.DataFrame:
    """Held-out evaluations as (run, t, epoch, accuracy, loss) rows: the data of ``dvc plots``."""
    if evals.empty:
        return pd.DataFrame(columns=["run", "t", "epoch", "accuracy", "loss"])
    tag = evals["tag"].fillna("")
    run = evals["algorithm"] + "-np" + evals["np"].astype(str) + ("-" + tag).where(tag != "", "")
    return pd.DataFrame({"run": run, "t": evals["t"], "epoch": evals["epoch"], "accuracy": evals["accuracy"],
                         "loss": evals["loss"]}).sort_values(["run", "t"], ignore_index=True)


def convergence_metrics(conv: pd.DataFrame) -> dict:
    """DVC metrics of a :func:`convergence_table`: per run, every numeric column."""
    out = {}
    for _, row in conv.iterrows():
        key = f"{row['algorithm']}-np{row['np']}" + (f"-{row['tag']}" if row["tag"] else "")
        out[key] = {c: _finite(row[c]) for c in conv.columns if c not in KEYS and _is_num(row[c])}
    return {"runs": out}


def te_metrics(matrix: pd.DataFrame, grid: pd.DataFrame, a: str, b: str) -> dict:
    """DVC metrics of the temporal-efficiency notebook: E per ordered pair and the grid's win share."""
    pairs = {f"{i}__vs__{j}": _finite(matrix.loc[i, j]) for i in matrix.index for j in matrix.columns if i != j}
    return {"pairs": pairs, "grid": {"a": a, "b": b, "configurations": int(grid["E"].notna().sum()),
                                     "a_win_share": _finite(win_share(grid, a)) if len(grid) else None}}


def write_metrics(obj: dict, path: str | Path) -> Path:
    """Write a metrics dict as sorted JSON (the files DVC declares as ``metrics``)."""
    from .results import write_json_atomic

    write_json_atomic(path, obj)
    return Path(path)


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
