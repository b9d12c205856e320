"""``python -m bench study reread --study S [--target-window K]``: a published study's claims recomputed from its
published tables (``docs/results/<study>/``, or ``--to``).

- With the registered window (``--target-window`` left out, or the registration's): every claim as registered, with
  the leave-one-seed-out range of its deciding bound, which claims.csv of a study published before that column
  existed does not carry; the verdicts and effects are the published ones.
- With another window K: the claims whose metric is the time to target, measured over the running mean of the last
  K held-out evaluations instead: how much a verdict owes to one evaluation above the target between ones below it.
  Only the window differs from the registration's measure, so every such verdict is labelled exploratory
  (:func:`bench.metrics.claims.claims`).

Prints one Markdown row per claim beside the published verdict; writes nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from .. import BenchError, registration
from ..layout import REPO_ROOT
from ..metrics import claims as claim_rules
from ..metrics import regimes
from ..metrics.report import read_table
from .spec import Study


def registered_window(reg: dict | None) -> int:
    """The evaluation window a registration (:func:`bench.registration.load`) measured time to target with (1 where it
    records none, or where the study is not registered)."""
    return int(claim_rules.registered_metric(reg, "target_window"))


def reread(study: Study, folder: Path, window: int) -> pd.DataFrame:
    """The claims of ``study`` from its published ``folder`` with ``window``: every claim at the registered window,
    those whose metric is the time to target at another; claims.csv's columns and ``published_verdict``,
    ``published_effect``, ``published_ci`` (the published row)."""
    tables = folder / "tables"
    needed = [tables / "regimes.csv", tables / "eval.csv", tables / "claims.csv", folder / "metrics" / "regimes.json"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise BenchError(f"study {study.name!r} is not published in {folder} with its per-run tables: missing "
                         f"{', '.join(missing)} (python -m bench study publish --study {study.name} --to {folder})")
    cells = read_table(tables / "regimes.csv")
    target = json.loads((folder / "metrics" / "regimes.json").read_text())["target_accuracy"]
    reg = registration.load(study.name)
    every = window == registered_window(reg)
    rules = tuple(r for r in claim_rules.select(study.spec.claims) if every or r.metric == "time_to_target_s")
    table = regimes.rewindow(cells, pd.read_csv(tables / "eval.csv"), target, window)
    now = claim_rules.claims(table, rules, reg, {"target_accuracy": target, "target_window": window})
    published = read_table(tables / "claims.csv").set_index(["source", "claim", "workload"])
    rows = []
    for row in now.itertuples(index=False):
        key = (row.source, row.claim, row.workload)
        old = published.loc[key] if key in published.index else None
        rows.append({**row._asdict(), "published_verdict": None if old is None else old["verdict"],
                     "published_effect": math.nan if old is None else old["effect"],
                     "published_ci": "" if old is None else f"[{old['ci_low']:.2f}, {old['ci_high']:.2f}]"})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, window: int, registered: bool = False) -> str:
    """The reread as a Markdown table: claim, verdict with effect, interval and leave-one-out range, published;
    ``registered``: the window is the registration's (every claim as registered)."""
    measure = "as registered" if registered else f"time to target over {window} evaluations"
    lines = [f"| source | claim | {measure} | leave one seed out | published |",
             "|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.source} | {r.claim} | {r.verdict}, x{r.effect:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] | "
                     f"[{r.loo_low:.2f}, {r.loo_high:.2f}] | {r.published_verdict}, x{r.published_effect:.2f} "
                     f"{r.published_ci} |")
    return "\n".join(lines)


def main(study: Study, args) -> None:
    registered = registered_window(registration.load(study.name))
    window = registered if args.target_window is None else args.target_window
    if window < 1:
        raise BenchError(f"--target-window must be a whole number of evaluations >= 1, got {window!r}")
    folder = Path(args.to) if args.to else REPO_ROOT / "docs" / "results" / study.name
    table = reread(study, folder, window)
    if table.empty:
        print(f"[reread] {study.name}: no claim of its rules is judged on the time to target")
        return
    print(markdown(table, window, registered=window == registered))
