"""``python -m bench study calibrate``: results/<study>/calibration.json, written before the study is planned: its
target accuracy and the rates of its ``share<s>`` links, from one run of ``sync`` at np 1 (:func:`calibrate`)."""

from __future__ import annotations

from typing import Any

from .. import BenchError
from ..launch import run as launch_run
from ..metrics.selection import timed_steps
from ..resolve import resolve
from ..results import load_run, read_json, write_json_atomic
from .spec import LINK_SHARE, Study, aimed_shares, worker_counts

CALIBRATION_UNSET = ("slow_ranks", "slow_factor", "slow_mode", "step_jitter_s", "link", "link_delay")
"""``sets`` of a study that its calibration run leaves out (a straggler needs more than one worker; the calibration
runs on the hardware profile's own link)."""


def link_rate(share: float, compute_s: float, payload_bytes: float, n: int) -> float:
    """Bits per second of a link on which ``sync``'s ring allreduce takes ``share`` of a step whose compute takes
    ``compute_s``: each of n workers sends 2 (n - 1) / n of the ``payload_bytes`` a step, so the allreduce takes
    t = 2 (n - 1) / n x 8 x bytes / rate, and t / (t + compute) = share gives
    rate = 2 (n - 1) / n x 8 x bytes x (1 - share) / (share x compute). Bandwidth only (no latency, no per-message
    cost: the measured share is higher where those matter, and is reported beside the aimed one)."""
    if not (0 < share < 1 and compute_s > 0 and payload_bytes > 0 and n >= 2):
        raise BenchError(f"a link rate needs 0 < share < 1, compute > 0, bytes > 0 and n >= 2; got share={share!r}, "
                         f"compute_s={compute_s!r}, bytes={payload_bytes!r}, n={n!r}")
    return 2 * (n - 1) / n * 8 * payload_bytes * (1 - share) / (share * compute_s)


def rate_text(bits_per_s: float) -> str:
    """A tbf rate for ``bits_per_s``, in whole mbit (at least 1)."""
    return f"{max(1, round(bits_per_s / 1e6))}mbit"


def step_seconds(steps) -> dict:
    """What a calibration run's timed steps (:func:`bench.metrics.selection.timed_steps`) say of the host's compute:
    ``compute_s_per_step``, the mean step (a throttled CPU-quota period counts), and ``compute_s_median``, the median
    step (the compute at full speed: most steps run inside the quota). The performance model reads both
    (:mod:`bench.predict.machines`)."""
    return {"compute_s_per_step": float(steps["step_s"].mean()), "compute_s_median": float(steps["step_s"].median())}


def calibrate(study: Study) -> dict:
    """Write results/<study>/calibration.json, fixed before the study's other runs are planned: its target accuracy
    and the rates of its ``share<s>`` links.

    One run of ``sync`` at np 1 on the study's profile and ``sets`` (stragglers and the link left out:
    :data:`CALIBRATION_UNSET`) on its first hardware profile (on an emulated cluster: one host, at the share of a
    core every host gets), in results/<study>/calibration/, unless the study fixes ``target_accuracy`` and has no
    ``share<s>`` link (then no run). The derived target is ``target_fraction`` x its final held-out accuracy (the
    plateau sync reaches on this workload in this budget of steps). The link rates: ``compute`` = the run's mean step
    time over its timed steps (the mean, not the median, so that a host's throttled CPU-quota periods count), ``bytes``
    = the payload its allreduce hands over a step, n = the study's largest worker count; each ``share<s>`` link gets
    :func:`link_rate`. It depends on that run only, never on the runs it judges."""
    layout = study.layout
    spec = study.spec
    info: dict[str, Any] = {"study": study.name, "target_fraction": spec.target_fraction}
    shares = aimed_shares(spec)
    if spec.target_accuracy is not None:
        info.update(target_accuracy=spec.target_accuracy, source=f"{study.file} (fixed target)")
    if spec.target_accuracy is not None and not shares:
        # the stage's output folder exists either way (DVC requires it): it says why it holds no run
        (layout.dir / "calibration").mkdir(parents=True, exist_ok=True)
        (layout.dir / "calibration" / "README.txt").write_text(
            f"No calibration run: study {study.name!r} fixes target_accuracy = {spec.target_accuracy:g} in "
            f"{study.file} and has no share<s> link.\n")
    else:
        hardware = study.hardware[0]
        sets = {k: v for k, v in study.overrides("sync", 1, hardware).items() if k not in CALIBRATION_UNSET}
        cfg = resolve("sync", np=1, profile=study.profile, hardware=hardware, overrides=sets, study=study.name,
                      tag="calibration", params_file=study.params_file)
        run_dir, rc = launch_run(cfg, layout.dir / "calibration", force=True, echo=False)
        summary = read_json(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else {}
        plateau = summary.get("final_accuracy")
        if summary.get("status") != "ok" or plateau is None:
            raise BenchError(f"calibration run {run_dir} did not finish ({summary.get('status', 'incomplete')}: "
                             f"{summary.get('reason', 'no summary')}); the study's target and link rates cannot be "
                             f"derived")
        info.update(run=str(run_dir.relative_to(layout.dir)), steps=summary.get("steps_per_worker"),
                    plateau_accuracy=float(plateau), hardware=hardware)
        if spec.target_accuracy is None:
            info.update(target_accuracy=spec.target_fraction * float(plateau),
                        source=f"{spec.target_fraction:g} x the final held-out accuracy of sync np 1 (calibration run)")
        if shares:
            steps = timed_steps(load_run(run_dir).steps)
            compute = step_seconds(steps)
            compute_s, payload = compute["compute_s_per_step"], float(steps["bytes_sent"].median())
            n = max(worker_counts(spec))
            info.update(**compute, bytes_per_step=payload, link_np=n, links={
                            f"{LINK_SHARE}{s:g}": {"share": s, "bits_per_s": bps, "rate": rate_text(bps)}
                            for s in shares for bps in [link_rate(s, compute_s, payload, n)]})
    write_json_atomic(layout.dir / "calibration.json", info)
    return info


def main(study: Study, args) -> None:
    print(f"[calibrate] {calibrate(study)}")
