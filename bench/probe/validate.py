"""How well ``bench probe`` recovers a cluster it is not told about: scenarios drawn by a seeded generator on the
emulated cluster, each probed, each measurement against the generator's truth.

    python -m bench.probe.validate draw --seed 46 --scenarios 8 --out docs/results/probe/scenarios.yaml
    python -m bench.probe.validate run --scenarios-file docs/results/probe/scenarios.yaml --out docs/results/probe

``draw`` writes the scenarios (committed before any is run): n from 2 to 4 hosts; a link rate log-uniform from
20 Mbit/s to 10 Gbit/s (two significant digits); a one-way delay of none (one in four) or uniform from 0.5 to 25 ms;
a CPU share a host uniform from 0.20 to 0.45 of a core; one host in three scenarios a straggler at half the share.
``run`` brings each scenario's cluster up with those settings and runs ``python -m bench probe`` on it: the probe's
ranks see only the hosts (what they measure is all the file holds; the settings are kept beside it as
``cluster_set``, which no part of the probe's reduction reads). Per scenario: the rate, the delay and each host's CPU
share measured against the truth, written to ``scenarios.csv`` and ``README.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from ..layout import REPO_ROOT


def draw(seed: int, count: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(2, 5))
        rate = float(f"{math.exp(rng.uniform(math.log(20e6), math.log(10e9))):.2g}")
        delay = 0.0 if rng.random() < 0.25 else round(float(rng.uniform(0.5, 25.0)), 1)
        share = round(float(rng.uniform(0.20, 0.45)), 2)
        straggler = bool(rng.random() < 1 / 3)
        out.append({"id": f"s{i + 1}", "np": n, "rate_bps": rate, "delay_ms": delay, "cpu_per_host": share,
                    "straggler_host": n - 1 if straggler else None})
    return out


def sets(s: dict) -> list[str]:
    rate = s["rate_bps"]
    link = f"{rate / 1e9:g}gbit" if rate >= 1e9 else f"{rate / 1e6:g}mbit"
    out = [f"link={link}", f"cpu_per_host={s['cpu_per_host']}"] + (
        [f"link_delay={s['delay_ms']:g}ms"] if s["delay_ms"] else [])  # none: the profile's (no delay)
    if s["straggler_host"] is not None:
        out.append(f"emulated_cpu={{{s['straggler_host']}: {s['cpu_per_host'] / 2:g}}}")
    return out


def truth_share(s: dict, host: int) -> float:
    return s["cpu_per_host"] / 2 if s["straggler_host"] == host else s["cpu_per_host"]


def rereduce(m: dict) -> dict:
    """The file's measured values reduced again with the current :mod:`.describe` (its per-host and per-pair lists are
    all the reduction reads): a change of the reduction is applied to every scenario without running it again."""
    from ..predict.hardware import load_calibration
    from . import describe

    return describe.summarise(m["hosts"], m["pairs"], m["collectives"], m["made"], m["np"], m["workload"],
                              m["model_bytes"], load_calibration()["wire_efficiency"])


def compare(s: dict, d: dict) -> dict:
    m = rereduce(d["measured"])
    shares = [(h["rank"], h["cpu_share"] / truth_share(s, h["rank"]) - 1) for h in m["hosts"]]
    rate_err = None if m["rate_bps"] is None else m["rate_bps"] / s["rate_bps"] - 1
    delay_abs = m["one_way_s"] * 1e3 - s["delay_ms"]
    return {"id": s["id"], "np": s["np"], "rate": s["rate_bps"], "delay_ms": s["delay_ms"],
            "cpu_per_host": s["cpu_per_host"], "straggler_host": s["straggler_host"],
            "probed_rate": m["rate_bps"], "goodput": m["goodput_bps"], "cpu_bound": m["cpu_bound"],
            "rate_error": rate_err, "probed_one_way_ms": m["one_way_s"] * 1e3, "delay_error_ms": delay_abs,
            "delay_rel_error": delay_abs / s["delay_ms"] if s["delay_ms"] else None,
            "delay_ok": abs(delay_abs) <= max(0.2, 0.10 * s["delay_ms"]),
            "rate_ok": rate_err is not None and abs(rate_err) <= 0.10,
            "share_max_abs_error": max(abs(e) for _, e in shares),
            "share_ok": all(abs(e) <= 0.10 for _, e in shares),
            "step_cpu_ms": m["step_s"] * 1e3}


def probe_one(s: dict, f: Path) -> dict:
    """``python -m bench probe`` on scenario ``s``'s cluster (brought up with the generator's settings, which the
    probe's ranks never see) into ``f``; its comparison with the truth (:func:`compare`) and its seconds."""
    f.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "bench", "probe", "--hardware", "emu", "--np", str(s["np"]), "--out", str(f)]
    for x in sets(s):
        cmd += ["--set", x]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO_ROOT), timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"scenario {s['id']}: the probe failed:\n{proc.stderr[-3000:]}")
    return {**compare(s, yaml.safe_load(f.read_text())), "probe_s": time.monotonic() - t0}


def run(scenarios: list[dict], out: Path) -> list[dict]:
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    table = out / "scenarios.csv"
    rows = pd.read_csv(table).to_dict("records") if table.is_file() else []  # an interrupted run resumes
    done = {r["id"] for r in rows}
    started = time.monotonic()
    for k, s in enumerate(scenarios, 1):
        if s["id"] in done:
            continue
        row = probe_one(s, out / "probed" / f"{s['id']}.yaml")
        rows.append(row)
        print(f"[{time.monotonic() - started:6.0f} s] {k}/{len(scenarios)} {s['id']}: "
              f"{json.dumps({k2: row[k2] for k2 in ('rate_error', 'delay_error_ms', 'share_max_abs_error')})}",
              flush=True)
        pd.DataFrame(rows).to_csv(table, index=False)  # each scenario kept as it ends
    return rows


def report(spec: dict, out: Path) -> None:
    """scenarios.csv (every scenario's probe against its truth, from its probed file) and the headline counts."""
    import pandas as pd

    rows = []
    for s in spec["scenarios"]:
        f = out / "probed" / f"{s['id']}.yaml"
        if f.is_file():
            rows.append(compare(s, yaml.safe_load(f.read_text())))
    old = pd.read_csv(out / "scenarios.csv") if (out / "scenarios.csv").is_file() else pd.DataFrame()
    df = pd.DataFrame(rows)
    if "probe_s" in old:
        df = df.merge(old[["id", "probe_s"]], on="id", how="left")
    df.to_csv(out / "scenarios.csv", index=False)
    from ..predict.hardware import load_calibration

    host_limited = df["cpu_bound"] & (df["rate"] > df["goodput"] / load_calibration()["wire_efficiency"] * 1.1)
    print(f"{len(df)} scenarios: rate within 10 % {int(df['rate_ok'].sum())}, said CPU-bound {int(df['cpu_bound'].sum())} "
          f"(of which the link was > 1.1 x what the hosts got: {int(host_limited.sum())}); delay within 10 % or "
          f"0.2 ms {int(df['delay_ok'].sum())}; every host's CPU share within 10 % {int(df['share_ok'].sum())}; "
          f"probe {df['probe_s'].median() if 'probe_s' in df else float('nan'):.0f} s median")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probe.validate")
    sub = ap.add_subparsers(dest="mode", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--seed", type=int, required=True)
    d.add_argument("--scenarios", type=int, default=8)
    d.add_argument("--out", required=True)
    for mode in ("run", "report"):  # report: the table and README again from the probed files (no run)
        r = sub.add_parser(mode)
        r.add_argument("--scenarios-file", required=True)
        r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.mode == "draw":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(yaml.safe_dump({"seed": args.seed, "generator": "bench.probe.validate.draw",
                                                  "scenarios": draw(args.seed, args.scenarios)}, sort_keys=False))
        return 0
    spec = yaml.safe_load(Path(args.scenarios_file).read_text())
    if args.mode == "run":
        run(spec["scenarios"], Path(args.out))
    report(spec, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
