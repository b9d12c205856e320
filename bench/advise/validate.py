"""How often is ``bench advise`` right? The registered studies ``advise-validation`` and ``advise-validation-2``
(issue 46, item 3).

    python -m bench.advise.validate register [--study S]   # pipelines/registrations/S.json: commit it, then
    python -m bench.advise.validate run [--study S] [--until HH:MM]   # per scenario: forecast, then every method
    python -m bench.advise.validate report [--study S]     # docs/results/S/: the tables and the verdicts

Two designs (:data:`DESIGNS`, ``--study``; ``advise-validation`` unless given), each registered before its first run:

- ``advise-validation``: the probe study's scenarios (``docs/results/probe/scenarios.yaml``: eight "user clusters"
  drawn on the emulated cluster by :func:`bench.probe.validate.draw`, seed 46, committed before any was probed), and
  what advise sees of each is its probed file (``docs/results/probe/probed/<id>.yaml``); seeds 460-462.
- ``advise-validation-2`` (registered after the first was seen, whose three seeds could not decide its close picks):
  eight new scenarios (the same generator, seed 47, ``docs/results/advise-validation-2/scenarios.yaml``), each probed
  by ``bench probe`` just before its forecast and its runs, in the same sitting (``results/advise-validation-2/
  probed/<id>.yaml``, published with the report); five new seeds, 463-467. Its verdict is its own.

Nothing of the generator's truth is read by a forecast: it reads the probed file only. Per scenario:

1. **advise**: every method of :data:`METHODS` forecast from the probed file and ranked as ``bench advise
   --algorithms`` ranks them (:func:`bench.advise.rank.ranking`); its pick is the first;
   (kept in ``results/<S>/forecasts/<id>.csv`` before the scenario's first run);
2. **measure**: every method of :data:`METHODS` at every seed of the design on the scenario's cluster (the
   generator's settings, through :func:`bench.launch.run_many`, the normal run path: one ``horovodrun`` job a
   scenario, seed-major so that the paired runs are close in time), with the settings of the time-to-target relation
   (:func:`bench.advise.rank.relation_sets`) and the relation's target accuracy. ``--until HH:MM`` (UTC): no scenario
   starts after that time, so that a scenario is never split between two sittings (or two machines).

The registration lists every planned run (its ``config.json``'s SHA-256 and seed, as a study's does:
:mod:`bench.registration`), the methods, the seeds (none of the relation's study's), the metrics and :data:`RULES`;
``run`` refuses a registration that is not committed, a tree that is dirty, and a plan that differs from it.

The metrics (registered): a cell's measured time to target is the **median** over its seeds that reached the target
(a cell most of whose seeds did not is censored: it can be neither the best nor a forecast's yardstick); the
measured best of a scenario is its cell with the lowest median; the **regret** of the pick is the pick's median over
the best's (1 when the pick is the best; infinite when the pick's cell is censored), with the paired t-interval over
the seeds where both reached (:func:`bench.metrics.stats.paired_ratio`); a forecast's error is forecast / measured
median - 1 over the cells with both; the rank correlation is Spearman's between forecast and measured medians of a
scenario's cells with both (:func:`scipy.stats.spearmanr`); the cost is the probe's and the forecast's seconds against
the measurement's; where the design probes, each probe's error against the generator's truth
(:func:`bench.probe.validate.compare`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import sys
import time
from pathlib import Path

import yaml

from .. import BenchError
from ..layout import REPO_ROOT

PROBE_STUDY = REPO_ROOT / "docs" / "results" / "probe"
METHODS = ("ddp", "sync", "localsgd", "lasgd", "sgp", "adpsgd")
"""Six of the methods issue 46 names, every one on n hosts (no server process, so that the scenario's CPU shares
hold): the five the time-to-target relation backs, and AD-PSGD, which it does not (advise forecasts its throughput
only, so it can never be the pick: where it is measured fastest, that blind spot is the regret). The order is a
seed's run order: ``ddp`` (torch.distributed alone) first, so that the other five, which start Horovod, share a job."""
RULES = {"regret_max": 1.10, "regret_share_min": 0.80, "time_to_target_median_abs_error_max": 0.20}
"""Issue 46: the pick's regret <= 1.10 in at least 80 % of the scenarios; forecast time to target median |error| <=
0.20 over the measured cells."""


@dataclasses.dataclass(frozen=True)
class Design:
    """One registered design: its scenarios, seeds, and where each scenario's probed file comes from."""

    study: str
    scenarios_file: Path
    seeds: tuple[int, ...]
    why: str
    committed_probes: Path | None = None
    """The folder of a probe study's committed probed files (``<id>.yaml``, their ``probe_s`` in that study's table);
    None: ``run`` probes each scenario just before its forecast, into :attr:`probed` beside the runs."""

    @property
    def probe_live(self) -> bool:
        return self.committed_probes is None

    @property
    def probed(self) -> Path:
        """The folder of the probed files the forecasts read."""
        return self.committed_probes or self.runs / "probed"

    @property
    def runs(self) -> Path:
        return REPO_ROOT / "results" / self.study

    @property
    def out(self) -> Path:
        return REPO_ROOT / "docs" / "results" / self.study


DESIGNS = {d.study: d for d in (
    Design("advise-validation", PROBE_STUDY / "scenarios.yaml", (460, 461, 462),
           "Three paired seeds (an interval from three), none of the relation's study's (regimes-speedup: 0, 1, 2); "
           "the probe study's scenarios and probed files.", committed_probes=PROBE_STUDY / "probed"),
    Design("advise-validation-2", REPO_ROOT / "docs" / "results" / "advise-validation-2" / "scenarios.yaml",
           (463, 464, 465, 466, 467),
           "Registered after advise-validation was seen: its regret rule was met in 6 of 8 scenarios, and both misses "
           "were picks whose paired intervals held 1 at three seeds (half-widths 0.3-0.6). The number of seeds "
           "comes from that study's noise: a run's log time to target spreads by 0.10 (median sd within a cell), "
           "so the log of a ratio of two medians of n seeds by about 1.25 x 0.10 x sqrt(2 / n): 0.10 at three "
           "seeds, 0.079 at five, against the rule's log 1.10 = 0.095; five is what about two hours of runs on "
           "this machine allow. New scenarios (the generator's seed 47, none seen), new seeds (463-467), each "
           "scenario probed just before its forecast and runs. Its verdict is its own; the first study's stands."),
)}
DEFAULT_STUDY = "advise-validation"


def design(study: str) -> Design:
    if study not in DESIGNS:
        raise BenchError(f"unknown study {study!r}; valid: {', '.join(DESIGNS)}")
    return DESIGNS[study]


def _progress(text: str, d: Design | None = None) -> None:
    print(f"[{d.study if d else DEFAULT_STUDY}] {text}", file=sys.stderr, flush=True)


def scenarios(d: Design = DESIGNS[DEFAULT_STUDY]) -> list[dict]:
    return yaml.safe_load(d.scenarios_file.read_text())["scenarios"]


def probed_file(s: dict, d: Design = DESIGNS[DEFAULT_STUDY]) -> Path:
    return d.probed / f"{s['id']}.yaml"


def target() -> float:
    from .cli import relation_target

    return relation_target()


def configs(s: dict, d: Design = DESIGNS[DEFAULT_STUDY]) -> list[tuple[str, object]]:
    """The scenario's planned runs, seed-major: (run name, resolved configuration)."""
    from ..layout import run_name
    from ..predict.target import CALIBRATION_STUDY
    from ..probe.validate import sets
    from ..resolve import parse_set, resolve
    from ..study import load_study
    from .rank import relation_sets

    profile = load_study(CALIBRATION_STUDY).profile
    truth = parse_set(sets(s))  # the generator's cluster (what the probe ran on, and what the runs run on)
    out = []
    for seed in d.seeds:
        for m in METHODS:
            tag = f"seed{seed}"
            cfg = resolve(m, np=s["np"], profile=profile, hardware="emu",
                          overrides={**relation_sets(m, s["np"]), **truth, "seed": seed}, study=d.study, tag=tag)
            out.append((run_name(m, s["np"], tag), cfg))
    return out


def plan_file(s: dict, name: str, d: Design = DESIGNS[DEFAULT_STUDY]) -> Path:
    return d.runs / "plan" / s["id"] / f"{name}.json"


def write_plan(d: Design = DESIGNS[DEFAULT_STUDY]) -> list[dict]:
    """Every planned run's config file (as the launcher would write it; ``run`` copies it byte for byte) and its cell."""
    from .. import registration
    from ..results import write_json_atomic

    cells = []
    for s in scenarios(d):
        for name, cfg in configs(s, d):
            f = plan_file(s, name, d)
            f.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(f, cfg.to_dict())
            cells.append({"run": f"{s['id']}/{name}", "config": str(f.relative_to(REPO_ROOT)),
                          "config_sha256": registration.sha256(f), "seed": cfg.train.seed, "scenario": s["id"]})
    return cells


def register(d: Design = DESIGNS[DEFAULT_STUDY], force: bool = False) -> dict:
    from .. import registration
    from ..predict.target import CALIBRATION_STUDY
    from ..results import write_text_atomic
    from ..system import git_record

    path = registration.path(d.study)
    if path.is_file() and not force:
        raise BenchError(f"{path.relative_to(REPO_ROOT)} exists ({registration.sha256(path)[:12]}); --force writes a "
                         f"new registration, under which the runs made so far carry no verdict")
    if not d.scenarios_file.is_file():
        raise BenchError(f"no scenarios file {d.scenarios_file.relative_to(REPO_ROOT)}: draw it first (python -m "
                         f"bench.probe.validate draw --seed N --out {d.scenarios_file.relative_to(REPO_ROOT)})")
    probed = ({s["id"]: {"file": str(probed_file(s, d).relative_to(REPO_ROOT)),
                         "sha256": registration.sha256(probed_file(s, d))} for s in scenarios(d)}
              if not d.probe_live else
              f"probed by bench probe just before each scenario's forecast, into {d.probed.relative_to(REPO_ROOT)}")
    record = {
        "study": d.study, "description": __doc__.split("\n\n")[0].strip(), "design": d.why,
        "scenarios_file": str(d.scenarios_file.relative_to(REPO_ROOT)),
        "scenarios_sha256": registration.sha256(d.scenarios_file), "probed": probed,
        "methods": list(METHODS), "seeds": list(d.seeds), "rules": RULES,
        "metrics": {"target_accuracy": target(), "relation_study": CALIBRATION_STUDY,
                    "cell": "median time to target over the seeds that reached it (censored: most did not)",
                    "regret": "pick's cell median / the lowest cell median of the scenario; paired t-interval of the "
                              "per-seed ratio over the seeds where both reached",
                    "error": "forecast / measured median - 1", "rank_correlation": "Spearman, per scenario"},
        "cells": write_plan(d), "code_commit": git_record()["commit"],
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def check_ready(d: Design = DESIGNS[DEFAULT_STUDY]) -> dict:
    """The committed registration, on a clean tree, whose cells the plan reproduces (else one line why not)."""
    from .. import registration
    from ..system import git_record

    reg = registration.load(d.study)
    if reg is None:
        raise BenchError(f"{d.study} is not registered: python -m bench.advise.validate register --study {d.study}, "
                         f"then commit it")
    if not registration.committed(registration.path(d.study)):
        raise BenchError(f"{registration.path(d.study).relative_to(REPO_ROOT)} is not committed: commit it before the "
                         f"first judged run")
    if git_record()["dirty"] is not False:
        raise BenchError("the tree is dirty: a verdict never uses a dirty run (commit or stash first)")
    planned = {c["run"]: c["config_sha256"] for c in write_plan(d)}
    if planned != {c["run"]: c["config_sha256"] for c in reg["cells"]}:
        raise BenchError("the plan differs from the registration (a configuration changed since): register again")
    return reg


def forecast(s: dict, d: Design = DESIGNS[DEFAULT_STUDY]) -> tuple[list[dict], float]:
    """Advise's ranking of :data:`METHODS` from the probed file, and the seconds it took."""
    from . import rank

    t0 = time.monotonic()
    ranked = rank.ranking(rank.forecasts(list(METHODS), s["np"], str(probed_file(s, d)), None, {}))
    return ranked, time.monotonic() - t0


def _done(d: Path, sha: str) -> bool:
    from ..results import ResultsError, read_json

    try:
        return (read_json(d / "summary.json") or {}).get("status") == "ok" and \
            (read_json(d / "system.json") or {})["provenance"]["config_sha256"] == sha
    except (OSError, ResultsError, KeyError, TypeError):  # absent, unreadable or without provenance: run it (again)
        return False


def save_cost(cost: dict, path: Path) -> None:
    """cost.csv: per scenario, the probe's, the forecast's and the measurement's seconds (summed over resumptions)."""
    import pandas as pd

    from ..results import write_text_atomic

    write_text_atomic(path, pd.DataFrame([{"id": i, **c} for i, c in cost.items()]).to_csv(index=False))


def parse_until(text: str | None) -> datetime.datetime | None:
    """``--until HH:MM`` (UTC, today; tomorrow when that time has passed) as an aware time; None: no limit."""
    if text is None:
        return None
    try:
        hh, mm = (int(x) for x in text.split(":"))
        if not (0 <= hh < 24 and 0 <= mm < 60):
            raise ValueError
    except ValueError:
        raise BenchError(f"bad --until {text!r}: give a UTC time HH:MM, e.g. 14:05") from None
    now = datetime.datetime.now(datetime.UTC)
    at = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    return at if at > now else at + datetime.timedelta(days=1)


def run(d: Design = DESIGNS[DEFAULT_STUDY], until: datetime.datetime | None = None) -> None:
    """Every scenario not yet complete: the probe where the design probes, the forecast (kept in forecasts/<id>.csv),
    then its missing runs; no scenario starts after ``until``."""
    import pandas as pd

    from ..launch import run_many
    from ..probe.validate import probe_one

    reg = check_ready(d)
    sha = {c["run"]: c["config_sha256"] for c in reg["cells"]}
    (d.runs / "forecasts").mkdir(parents=True, exist_ok=True)  # beside the runs, untracked: the tree stays clean
    cost_file = d.runs / "cost.csv"  # per scenario: the probe's and forecast's seconds, the measurement's
    cost = pd.read_csv(cost_file).set_index("id").to_dict("index") if cost_file.is_file() else {}
    probe_table = d.runs / "probe.csv"
    probes = pd.read_csv(probe_table).to_dict("records") if probe_table.is_file() else []
    started, every = time.monotonic(), scenarios(d)
    for k, s in enumerate(every, 1):
        todo = [(name, cfg) for name, cfg in configs(s, d)
                if not _done(d.runs / s["id"] / name, sha[f"{s['id']}/{name}"])]
        fc_file = d.runs / "forecasts" / f"{s['id']}.csv"
        if not todo and fc_file.is_file():
            continue
        if until is not None and datetime.datetime.now(datetime.UTC) >= until:
            _progress(f"it is past --until {until:%H:%M} UTC: scenario {s['id']} and later not started; run again "
                      f"to go on", d)
            return
        if not fc_file.is_file():
            row = {"probe_s": math.nan}
            if d.probe_live:
                _progress(f"[{time.monotonic() - started:5.0f} s] scenario {k}/{len(every)} {s['id']}: probe", d)
                probed = probe_one(s, probed_file(s, d))
                probes = [p for p in probes if p["id"] != s["id"]] + [probed]
                pd.DataFrame(probes).to_csv(probe_table, index=False)
                row["probe_s"] = probed["probe_s"]
            ranked, row["forecast_s"] = forecast(s, d)
            pd.DataFrame(ranked).to_csv(fc_file, index=False)
            cost[s["id"]] = {**row, "measure_s": 0.0}
            save_cost(cost, cost_file)  # at once: a runner stopped during the scenario's runs keeps its timing
        _progress(f"[{time.monotonic() - started:5.0f} s] scenario {k}/{len(every)} {s['id']}: {len(todo)} runs", d)
        t0 = time.monotonic()
        items = [(cfg, d.runs / s["id"] / name, plan_file(s, name, d)) for name, cfg in todo]
        try:
            codes = run_many(items, force=True, echo=False, progress=lambda text: _progress(text, d))
        finally:  # the minutes measured, even when the batch was cancelled (a resumption adds its own)
            row = cost.setdefault(s["id"], {"forecast_s": math.nan, "measure_s": 0.0})
            row["measure_s"] = float(row.get("measure_s") or 0.0) + time.monotonic() - t0
            save_cost(cost, cost_file)
        failed = [str(x) for x, rc in codes if rc]
        if any(rc > 128 for _, rc in codes):  # a signal to this process cancelled the batch (bench.launch.run_many)
            raise BenchError(f"scenario {s['id']}: cancelled by a signal; {len(failed)} runs not complete; run again "
                             f"to repeat only those")
        if failed:
            raise BenchError(f"scenario {s['id']}: {len(failed)} runs failed (first: {failed[0]}); run again to "
                             f"repeat only those")


def runs_table(d: Design = DESIGNS[DEFAULT_STUDY]) -> "pd.DataFrame":
    """One row per registered run that exists: scenario, method, seed, its figures and ``judged``."""
    import pandas as pd

    from .. import registration
    from ..metrics import regimes
    from ..results import load_run

    reg = registration.load(d.study)
    accuracy = target()  # the relation's target, read once
    rows = []
    for s in scenarios(d):
        for name, cfg in configs(s, d):
            folder = d.runs / s["id"] / name
            if not (folder / "summary.json").is_file():
                continue
            r = load_run(folder)
            if r.summary.get("status") != "ok":
                continue
            c = regimes.cell(r, accuracy, math.nan, reg)  # no accuracy-at-budget here: no budget
            rows.append({"id": s["id"], "method": cfg.algorithm, "seed": cfg.train.seed, "np": s["np"],
                         "commit": ((r.system or {}).get("git") or {}).get("commit"),
                         **{k: c[k] for k in ("throughput", "time_to_target_s", "censored", "train_s",
                                              "final_accuracy", "judged")}})
    return pd.DataFrame(rows)


def cells(runs: "pd.DataFrame", forecasts: dict[str, "pd.DataFrame"]) -> "pd.DataFrame":
    """One row per scenario and method: the measured median (over the seeds that reached), reached/censored, the
    forecast and its rank, and the forecast's error."""
    import pandas as pd

    from .confirm import measured_time_to_target

    rows = []
    for (sid, m), g in runs.groupby(["id", "method"], sort=False):
        reached = g[~g["censored"].astype(bool)]["time_to_target_s"].tolist()
        fc = forecasts[sid].set_index("algorithm").loc[m]
        med = measured_time_to_target(reached, len(g))
        f_ttt = fc["time_to_target_s"] if pd.notna(fc["time_to_target_s"]) else None
        rows.append({"id": sid, "method": m, "seeds": len(g), "reached": len(reached),
                     "measured_time_to_target_s": med, "measured_throughput": float(g["throughput"].median()),
                     "forecast_rank": int(fc["rank"]) if pd.notna(fc["rank"]) else None,
                     "forecast_basis": fc["basis"], "forecast_time_to_target_s": f_ttt,
                     "forecast_throughput": fc["throughput"],
                     "time_to_target_error": f_ttt / med - 1 if f_ttt is not None and med else None,
                     "throughput_error": fc["throughput"] / float(g["throughput"].median()) - 1
                     if pd.notna(fc["throughput"]) else None})
    return pd.DataFrame(rows)


def verdicts(runs: "pd.DataFrame", cell: "pd.DataFrame", seeds: int) -> "pd.DataFrame":
    """One row per scenario measured in full (every method at ``seeds`` seeds): the pick, the measured best, the
    regret with its interval, Spearman."""
    import pandas as pd
    from scipy import stats as sps

    from ..metrics.stats import paired_ratio

    rows = []
    for sid, c in cell.groupby("id", sort=False):
        if len(c) < len(METHODS) or (c["seeds"] < seeds).any():
            continue  # not complete: no verdict
        ranked = c[c["forecast_rank"].notna()].sort_values("forecast_rank")
        pick = ranked.iloc[0]["method"]
        ok = c[c["measured_time_to_target_s"].notna()]
        best = ok.loc[ok["measured_time_to_target_s"].idxmin()]["method"] if not ok.empty else None
        pm = c.set_index("method")["measured_time_to_target_s"]
        regret = (math.inf if pd.isna(pm[pick]) else pm[pick] / pm[best]) if best is not None else math.nan
        r = runs[runs["id"] == sid]
        both = r[r["method"] == pick].merge(r[r["method"] == (best or pick)], on="seed", suffixes=("", "_best"))
        both = both[~both["censored"].astype(bool) & ~both["censored_best"].astype(bool)]
        pr = paired_ratio(both["time_to_target_s"].to_numpy(), both["time_to_target_s_best"].to_numpy())
        both_fc = c[c["forecast_time_to_target_s"].notna() & c["measured_time_to_target_s"].notna()]
        rho = sps.spearmanr(both_fc["forecast_time_to_target_s"], both_fc["measured_time_to_target_s"]).statistic \
            if len(both_fc) >= 3 else math.nan
        rows.append({"id": sid, "pick": pick, "best": best, "regret": regret,
                     "regret_low": pr["ci_low"] if pick != best else 1.0,
                     "regret_high": pr["ci_high"] if pick != best else 1.0, "pairs": pr["n"],
                     "right": bool(regret <= RULES["regret_max"]), "spearman": float(rho),
                     "cells_with_forecast": len(both_fc)})
    return pd.DataFrame(rows)


def report(d: Design = DESIGNS[DEFAULT_STUDY]) -> str:
    """The tables in docs/results/<study>/tables (and, where the design probes, the probed files) and the verdict
    lines (returned, printed)."""
    import shutil

    import pandas as pd

    runs = runs_table(d)
    if runs.empty:
        raise BenchError(f"no run of {d.study} yet: python -m bench.advise.validate run --study {d.study}")
    forecasts = {s["id"]: pd.read_csv(d.runs / "forecasts" / f"{s['id']}.csv") for s in scenarios(d)
                 if (d.runs / "forecasts" / f"{s['id']}.csv").is_file()}
    cell = cells(runs, forecasts)
    v = verdicts(runs, cell, len(d.seeds))
    tables = d.out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    probe_times = pd.read_csv(PROBE_STUDY / "scenarios.csv")[["id", "probe_s"]] if not d.probe_live else None
    if d.probe_live and (d.runs / "probe.csv").is_file():  # each probe against the generator's truth, published
        probes = pd.read_csv(d.runs / "probe.csv")
        probes.to_csv(tables / "probe.csv", index=False)
        (d.out / "probed").mkdir(exist_ok=True)
        for s in scenarios(d):
            if probed_file(s, d).is_file():
                shutil.copyfile(probed_file(s, d), d.out / "probed" / probed_file(s, d).name)
    if (d.runs / "cost.csv").is_file() and not v.empty:  # minutes: the probe and advise's forecast against the measurement
        cost = pd.read_csv(d.runs / "cost.csv")
        if probe_times is not None:
            cost = cost.drop(columns=["probe_s"], errors="ignore").merge(probe_times, on="id", how="left")
        cost["advise_min"] = (cost["probe_s"] + cost["forecast_s"]) / 60
        cost["measure_min"] = cost["measure_s"] / 60
        v = v.merge(cost[["id", "advise_min", "measure_min"]], on="id", how="left")
    runs.to_csv(tables / "runs.csv", index=False)
    pd.concat([f.assign(id=i) for i, f in forecasts.items()]).to_csv(tables / "forecasts.csv", index=False)
    cell.to_csv(tables / "cells.csv", index=False)
    v.to_csv(tables / "scenarios.csv", index=False)
    errs = cell[cell["id"].isin(v["id"] if len(v) else [])]["time_to_target_error"].dropna().abs()  # complete only
    unjudged = runs[runs["judged"] != ""]
    lines = [f"{len(v)} of {len(scenarios(d))} scenarios measured in full ({len(runs)} runs; "
             f"{len(unjudged)} not judged{': ' + unjudged['judged'].iloc[0] if len(unjudged) else ''})"]
    if len(v):
        share = float(v["right"].mean())
        lines.append(f"regret <= {RULES['regret_max']}: {int(v['right'].sum())} of {len(v)} ({share:.0%}; rule: >= "
                     f"{RULES['regret_share_min']:.0%}) -> {'met' if share >= RULES['regret_share_min'] else 'NOT met'}")
    if len(errs):
        med = float(errs.median())
        lines.append(f"forecast time to target median |error| {med:.3f} over {len(errs)} cells (rule: <= "
                     f"{RULES['time_to_target_median_abs_error_max']}) -> "
                     f"{'met' if med <= RULES['time_to_target_median_abs_error_max'] else 'NOT met'}")
    text = "\n".join(lines)
    (tables / "summary.txt").write_text(text + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.advise.validate")
    sub = ap.add_subparsers(dest="mode", required=True)
    modes = {m: sub.add_parser(m) for m in ("register", "run", "report")}
    for m in modes.values():
        m.add_argument("--study", default=DEFAULT_STUDY, help=f"one of {', '.join(DESIGNS)}")
    modes["register"].add_argument("--force", action="store_true")
    modes["run"].add_argument("--until", help="UTC HH:MM: no scenario starts after it")
    args = ap.parse_args(argv)
    try:
        d = design(args.study)
        if args.mode == "register":
            rec = register(d, args.force)
            print(f"{len(rec['cells'])} cells, seeds {rec['seeds']}: commit pipelines/registrations/{d.study}.json")
            return 0
        if args.mode == "run":
            run(d, parse_until(args.until))
        print(report(d))
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
