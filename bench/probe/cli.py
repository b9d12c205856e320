"""``python -m bench probe``: the command (checks, the job, progress, the file). See :mod:`bench.probe`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import BenchError, short
from ..layout import REPO_ROOT
from . import describe

ANSWER_S = 60
"""Seconds a host has to answer on its ssh port before the probe names it and stops."""
JOB_TIMEOUT_S = 600
"""Seconds the whole job may take (it takes about a minute on 4 emulated hosts)."""


def _hosts(cfg, emulated: dict | None) -> list[tuple[str, int]]:
    """(address, ssh port) of every host the job reaches over ssh (none for a job on this machine alone)."""
    if emulated is not None:
        return [(h, int(emulated["ssh_port"])) for h in dict.fromkeys(emulated["hosts"])]
    from ..launch.command import host_slots

    given = host_slots(cfg)
    if given is None:
        return []
    return [(h, cfg.launch.ssh_port or 22) for h, _ in given[1] if h not in ("localhost", "127.0.0.1")]


def check_answer(hosts: list[tuple[str, int]], wait_s: float = ANSWER_S) -> None:
    """Every host accepts a TCP connection on its ssh port within ``wait_s`` (together), else one line naming those
    that did not."""
    end = time.monotonic() + wait_s
    silent = []
    for host, port in hosts:
        while True:
            try:
                with socket.create_connection((host, port), timeout=max(0.1, min(5.0, end - time.monotonic()))):
                    break
            except OSError as e:
                if time.monotonic() >= end:
                    silent.append(f"{host}:{port} ({e.strerror or type(e).__name__})")
                    break
                time.sleep(0.5)
    if silent:
        raise BenchError(f"hosts that do not answer on ssh within {wait_s:g} s: {', '.join(silent)}")


def run_job(cmd: list[str], env: dict, config: Path, timeout: float = JOB_TIMEOUT_S) -> list[dict]:
    """The job, its PROGRESS lines shown as they come; the PROBE records (RuntimeError with the output's tail when
    horovodrun fails or passes ``timeout``). SIGTERM, SIGHUP and SIGINT end it as they end a run: horovodrun, every
    process below it and the ranks ssh started on this machine (those naming ``config``) terminated, then killed."""
    from ..cluster.probe import read_record
    from ..launch.terminate import Terminated, kill_job, signals_end_the_job

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=str(REPO_ROOT), start_new_session=True)
    records, tail, started = [], [], time.monotonic()
    try:
        with signals_end_the_job():
            for line in proc.stdout:
                tail = (tail + [line])[-60:]
                if (rec := read_record(line)) is not None:
                    records.append(rec)
                elif "PROGRESS " in line:
                    print(f"[probe {time.monotonic() - started:5.1f} s] {line.split('PROGRESS ', 1)[1].rstrip()}",
                          file=sys.stderr, flush=True)
                if time.monotonic() - started > timeout:
                    raise subprocess.TimeoutExpired(cmd, timeout)
            rc = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        kill_job(proc, config)
        raise RuntimeError(f"the probe job passed {timeout:g} s; its last lines:\n{''.join(tail)}") from None
    except Terminated as e:
        kill_job(proc, config)
        raise RuntimeError(f"the probe received {e}: its job was ended") from None
    except BaseException:
        kill_job(proc, config)
        raise
    if rc != 0:
        raise RuntimeError(f"the probe job failed (horovodrun rc {rc}); its last lines:\n{''.join(tail)}")
    return records


def default_out(hardware: str) -> str:
    return f"pipelines/hardware/model/{hardware}-probed.yaml"


def cmd_probe(args) -> int:
    from ..layout import output_path
    from ..resolve import parse_set, resolve

    if args.np is not None and not 2 <= args.np <= 64:
        raise BenchError(f"--np must be in [2, 64] (a probe measures pairs of hosts), got {args.np}")
    for name, low, high in (("steps", 5, 10000), ("pings", 3, 10000)):
        value = getattr(args, name)
        if not low <= value <= high:
            raise BenchError(f"--{name} must be in [{low}, {high}], got {value}")
    if not 0.2 <= args.stream_s <= 60:
        raise BenchError(f"--stream-s must be in [0.2, 60] seconds, got {short(args.stream_s)}")
    from ..predict import calibrate, hardware as hw_mod
    from ..resolve import hardware_profiles

    if args.hardware not in hardware_profiles():
        raise BenchError(f"unknown hardware {short(args.hardware)}; valid: {', '.join(hardware_profiles())}")
    calibration = hw_mod.load_calibration()
    # the workload timed: the one the model is calibrated on (its forecasts know that one's parameters and relation)
    profile = args.profile or calibration.get("profile")
    sets = parse_set(args.set or [])
    cfg = resolve("sync", np=args.np, profile=profile, hardware=args.hardware, overrides=sets)
    hardware = cfg.launch.hardware
    out = output_path(args.out or default_out(hardware), "--out", folder=False)
    out = out if out.is_absolute() else Path.cwd() / out
    from ..launch import check_launch
    from ..launch.command import horovodrun_command, job_environment
    from ..placement import cluster_held, emulated_cluster

    check_launch([cfg])
    made = calibrate.made()
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp, cluster_held([cfg], [Path(tmp)]):
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(cfg.to_dict()))
        os.chmod(tmp, 0o755)
        emulated = emulated_cluster(cfg)
        check_answer(_hosts(cfg, emulated))
        cmd = horovodrun_command(cfg, config, emulated)
        cmd = cmd[:cmd.index("bench.worker")] + ["bench.probe.rank", "--config", str(config), "--steps",
                                                  str(args.steps), "--pings", str(args.pings), "--stream-s",
                                                  str(args.stream_s), "--sizes", ",".join(map(str, _sizes(cfg)))]
        env = job_environment(cfg, emulated, None)  # a run's: Horovod's settings of the profile included
        print(f"probe: {cfg.launch.np} hosts of {hardware} ({cfg.train.model}@{cfg.train.batch_size}); about a minute",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            records = run_job(_with_start_timeout(cmd), env, config)
            m = describe.reduce(records, made, cfg.launch.np, calibration["wire_efficiency"])
        except RuntimeError as e:  # the job failed, timed out or was ended: said, nothing written, exit 1
            print(f"error: {e}; nothing written", file=sys.stderr, flush=True)
            return 1
    m = describe.with_model(m, calibration.get("transport"))
    d = describe.description(m, hardware, hardware, cfg.profile, bool(cfg.launch.emulated_hosts), sets)
    _write_yaml(out, d, f"# written by `python -m bench probe --hardware {hardware} --np {cfg.launch.np}` in "
                        f"{time.monotonic() - started:.0f} s")
    print(summary(m, out), flush=True)
    return 0


def _with_start_timeout(cmd: list[str]) -> list[str]:
    """horovodrun's own wait for its hosts, at :data:`ANSWER_S` (its first option, after the command that starts it:
    :func:`bench.system.horovodrun_launch`)."""
    from ..system import horovodrun_launch

    prefix = horovodrun_launch()
    assert cmd[:len(prefix)] == prefix, cmd
    return [*prefix, "--start-timeout", str(ANSWER_S), *cmd[len(prefix):]]


def _sizes(cfg) -> list[int]:
    """Message sizes around the workload's gradient: 4 KiB, and 1x and 4x the model's bytes (from the footprint the
    launcher's memory check computes, without running the model)."""
    from ..supports import rank_bytes

    params = rank_bytes(cfg)[1]["weights and gradients"] // 8
    return sorted({4096, params * 4, params * 16})


def _write_yaml(path: Path, d: dict, header: str) -> None:
    import yaml

    from ..results import write_text_atomic

    write_text_atomic(path, header + "\n" + yaml.safe_dump(d, sort_keys=False, width=120))


def summary(m: dict, out: Path) -> str:
    rate = describe.rate_text(m["rate_bps"]) if m["rate_bps"] else "CPU-bound (no rate)"
    lines = [f"link: {rate} (goodput {m['goodput_bps'] / 1e6:.1f} Mbit/s), one-way {m['one_way_s'] * 1e3:.2f} ms; "
             f"hosts: CPU share {m['cpu_share']:.3f}, {m['workload']} step {m['step_s'] * 1e3:.2f} ms of CPU, "
             f"{m['step_s_mean'] * 1e3:.2f} ms of wall time (mean)"]
    for c in m["collectives"]:
        err = "" if c["model_s"] is None else f"; model {c['model_s'] * 1e3:.2f} ms ({c['model_error']:+.0%})"
        lines.append(f"  {c['op']:<14} {c['bytes']:>9} B: {c['median_s'] * 1e3:8.2f} ms{err}")
    lines.append(f"written: {out}")
    return "\n".join(lines)


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="measure a cluster's hosts and links; write a hardware description for predict")
    p.add_argument("--hardware", required=True, help="a launch profile (emu, emu-*, a hostfile or Slurm profile)")
    p.add_argument("--np", type=int, help="hosts to probe (one rank a host; default: the profile's np)")
    p.add_argument("--profile", help="training profile whose workload's step is timed (default: the calibrated one, regimes)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a launch or training setting, as bench run")
    p.add_argument("--out", help="the hardware file to write (default pipelines/hardware/model/<H>-probed.yaml)")
    p.add_argument("--steps", type=int, default=60, help="workload steps timed on each host (default 60)")
    p.add_argument("--pings", type=int, default=30, help="round trips timed on each pair (default 30)")
    p.add_argument("--stream-s", type=float, default=1.5, help="counted seconds of each pair's stream (default 1.5)")
    p.set_defaults(func=cmd_probe)
