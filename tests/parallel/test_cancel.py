"""A cancelled, timed-out or oversized job: refused before launch, or ended with no process left and the run marked failed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.results import load_run, read_json
from support import REPO, bench_cli


def job_processes(run_dir: Path) -> list[psutil.Process]:
    """Every live process whose command line names the run's config.json (horovodrun and its ranks)."""
    needle = str(run_dir / "config.json")
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if needle in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            pass
    return found


def start(run_dir: Path, *sets: str) -> subprocess.Popen:
    """`python -m bench run` in its own process group (as a shell, Slurm or DVC starts it), with SIGINT ignored as a
    shell's background job (`cmd &`, nohup) inherits it: the launcher must still end its job on SIGINT."""
    args = [sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--profile", "tiny", "--out", str(run_dir),
            "--quiet", "--set", "max_steps=100000", "--set", "epochs=1000", "--set", "eval_every=0"]
    for s in sets:
        args += ["--set", s]
    env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")
    return subprocess.Popen(args, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def wait_for_steps(run_dir: Path, timeout_s: float = 120.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        ranks = list(run_dir.glob("rank*.jsonl"))
        if len(ranks) == 2 and all(r.stat().st_size > 0 for r in ranks):
            return
        time.sleep(0.5)
    pytest.fail(f"the job in {run_dir} did not start stepping within {timeout_s} s")


def wait_gone(run_dir: Path, timeout_s: float) -> list[psutil.Process]:
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        left = job_processes(run_dir)
        if not left:
            return []
        time.sleep(0.5)
    return job_processes(run_dir)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_launchers_group_ends_every_process_and_marks_the_run_failed(tmp_path, sig):
    run_dir = tmp_path / "cancelled"
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "summary.json").write_text('{"status": "ok"}\n')
    launcher = start(run_dir)
    wait_for_steps(run_dir)
    assert len(job_processes(run_dir)) >= 3  # horovodrun and two ranks
    os.killpg(launcher.pid, sig)  # what Slurm (scancel), DVC or a terminal's Ctrl-C send
    launcher.wait(timeout=60)
    left = wait_gone(run_dir, 30)
    assert not left, f"processes of the job survived {sig.name}: {[p.pid for p in left]}"
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed"
    assert (sig.name in summary["reason"]) or ("Ctrl-C" in summary["reason"]), summary["reason"]
    assert load_run(run_dir).steps["step"].max() >= 1  # what was written before is kept
    assert (earlier / "summary.json").read_text() == '{"status": "ok"}\n'


BATCH = """
import sys
from pathlib import Path
from bench import launch
from bench.resolve import parse_set, resolve
out = Path(sys.argv[1])
cfgs = [resolve("sync", np=2, profile="tiny", overrides=parse_set(["max_steps=100000", "epochs=1000", "eval_every=0",
        f"seed={s}"]), study="cancel", tag=f"s{s}") for s in (1, 2, 3)]
done = launch.run_many([(c, out / c.tag, None) for c in cfgs], echo=False, max_runs_per_job=1, progress=None)
sys.exit(max(rc for _, rc in done))
"""


def test_sigterm_to_a_batch_ends_its_job_and_starts_no_later_one(tmp_path):
    """run_many over three one-run jobs (a study's run stage, advise-validation): SIGTERM during the first job cancels
    it and the batch; the later runs are marked failed, not started, and the launcher exits 128 + 15."""
    env = dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0")
    launcher = subprocess.Popen([sys.executable, "-c", BATCH, str(tmp_path)], cwd=REPO, env=env,
                                start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_steps(tmp_path / "s1")
    os.killpg(launcher.pid, signal.SIGTERM)
    out, _ = launcher.communicate(timeout=90)
    assert launcher.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert "SIGTERM: 2 run(s) of later jobs not started" in out, out[-3000:]
    assert not [p for d in ("s1", "s2", "s3") for p in job_processes(tmp_path / d)]
    first = read_json(tmp_path / "s1" / "summary.json")
    assert first["status"] == "failed" and first["reason"].startswith("the launcher received SIGTERM"), first
    for later in ("s2", "s3"):
        summary = read_json(tmp_path / later / "summary.json")
        assert summary["status"] == "failed" and summary["reason"].startswith(
            "not started: the launcher received SIGTERM during job 1 of 3"), summary
        assert not list((tmp_path / later).glob("rank*.jsonl"))  # no rank of it ever ran


def test_killed_launcher_is_noticed_by_the_ranks(tmp_path):
    run_dir = tmp_path / "orphaned"
    launcher = start(run_dir)
    wait_for_steps(run_dir)
    os.kill(launcher.pid, signal.SIGKILL)  # no clean-up possible in the launcher itself; horovodrun lives on
    launcher.wait(timeout=30)
    left = wait_gone(run_dir, 30)
    assert not left, f"ranks kept running after their launcher died: {[p.pid for p in left]}"
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed" and "launcher" in summary["reason"] and "gone" in summary["reason"]


def test_timeout_ends_every_process(tmp_path):
    run_dir = tmp_path / "slow"
    launcher = start(run_dir, "timeout_s=25")
    out, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == 1, out[-2000:]
    assert not wait_gone(run_dir, 30)
    assert read_json(run_dir / "summary.json")["reason"].startswith("timeout: job still running after timeout_s=25")


CAP = 4 * (os.cpu_count() or 1)  # processes this machine holds without --oversubscribe (bench.resolve)


@pytest.mark.parametrize("args, fragment", [
    (["--np", "100000"], f"100000 processes (sync with np=100000) exceed the {CAP} that this machine"),
    (["--np", str(CAP + 1)], "lower --np or pass --oversubscribe"),
    (["--np", "2", "--set", "dataset=mnist", "--set", "data_dir=/nonexistent"],
     "missing data file '/nonexistent/mnist/train-images-idx3-ubyte'"),
    (["--np", "2", "--set", "slow_ranks=[2]"], "slow_ranks [2] are not workers: valid worker indices are 0..1 for np=2"),
    (["--np", "2", "--set", "slow_factor=0.5"], "slow_factor must be >= 1"),
])
def test_bad_launches_are_refused_before_anything_is_written(tmp_path, args, fragment):
    out = tmp_path / "run"
    proc = bench_cli("run", "sync", *args, "--profile", "tiny", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr, proc.stderr
    assert not out.exists()


def test_as_many_processes_as_the_machine_holds_or_more_when_asked(tmp_path):
    ok = bench_cli("run", "sync", "--np", str(CAP), "--profile", "tiny", "--out", str(tmp_path / "a"), "--prepare-only")
    assert ok.returncode == 0, ok.stderr
    more = bench_cli("run", "sync", "--np", str(CAP + 1), "--oversubscribe", "--profile", "tiny", "--out",
                     str(tmp_path / "b"), "--prepare-only")
    assert more.returncode == 0, more.stderr
    assert load_run(tmp_path / "b").config["launch"]["oversubscribe"] is True
