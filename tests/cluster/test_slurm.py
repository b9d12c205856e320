"""Slurm for real on the emulated cluster: munged, slurmctld and a slurmd per namespace host (``cluster up --slurm``),
jobs submitted with ``pipelines/slurm/run-blocking.sh`` exactly as on a real cluster.

Everything runs in a copy of the repository (``results/`` of the copy receives the study's runs and the jobs' logs).
Skipped (one line) where an emulated cluster cannot exist (not root, no network namespaces) or where Slurm and
munge cannot be installed; the module installs them with ``scripts/setup-cluster.sh`` (like the other cluster tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support import REPO, copy_repository
from cluster_support import cluster, skip_reason

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
SLURM_DIR = "/run/distbench/dbemu/slurm"
TINY = ["--profile", "tiny", "--quiet", "--set", "eval_every=0", "--set", "save_model=false"]


def _slurm_missing() -> str | None:
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(b, path=path)]
    return f"Slurm and munge are not installed ({', '.join(missing)}; scripts/setup-cluster.sh)" if missing else None


def suite_slurm_processes() -> list[str]:
    """munged, slurmctld, slurmd and slurmstepd processes of the suite's Slurm, looked up directly in /proc."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            netns = os.readlink(p / "ns" / "net")
        except OSError:
            continue
        ours = SLURM_DIR in cmd and re.match(r"\S*(munged|slurmctld|slurmd)\b", cmd)
        step = cmd.startswith("slurmstepd") and netns != os.readlink("/proc/self/ns/net")
        if ours or step:
            found.append(f"{p.name}: {cmd}")
    return found


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Slurm up on 2 emulated hosts, and a copy of the repository to submit from (torn down after the module)."""
    subprocess.run(["bash", str(REPO / "scripts" / "setup-cluster.sh")], check=True, timeout=900)
    reason = _slurm_missing()
    if reason:
        pytest.skip(reason)
    cluster("down")
    out = cluster("up", "--hosts", "2", "--slurm").stdout
    assert "node dbemu-h0: idle" in out and "node dbemu-h1: idle" in out, out
    copy = copy_repository(tmp_path_factory.mktemp("slurm") / "repo")
    (copy / "results").mkdir(exist_ok=True)
    yield copy
    cluster("down", check=False)


def env() -> dict:
    """The user's shell: the suite's Python first on PATH, no SLURM_CONF (run-blocking.sh finds the cluster)."""
    e = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", BENCH_PROGRESS="0")
    for k in ("SLURM_CONF", "PYTHONPATH", "BENCH_PARAMS", "SLURM_JOB_ID"):
        e.pop(k, None)
    return e


def blocking(repo: Path, sbatch: list[str], *cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``pipelines/slurm/run-blocking.sh SBATCH -- CMD`` from the copy, as a user runs it."""
    return subprocess.run(["pipelines/slurm/run-blocking.sh", *sbatch, "--", *cmd], cwd=repo, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def job_id(proc: subprocess.CompletedProcess) -> str:
    m = re.search(r"Submitted batch job (\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return m.group(1)


def job_log_path(repo: Path, proc: subprocess.CompletedProcess) -> Path:
    """The job's log, as run-blocking.sh names it (results/slurm-<submission time>-<job id>.log)."""
    m = re.search(r"Submitted batch job (\d+) \(log: (results/slurm-\d{8}T\d{6}-\1\.log)\)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return repo / m.group(2)


def job_log(repo: Path, proc: subprocess.CompletedProcess) -> str:
    return job_log_path(repo, proc).read_text()


def job_hostfiles(repo: Path) -> list[Path]:
    """The jobs' hostfiles left in the checkout (bench.sbatch removes its job's when the command ends)."""
    return sorted((repo / "pipelines" / "hosts").glob("slurm*.txt"))


def unfinished_output(proc: subprocess.Popen) -> str:
    """What run-blocking.sh has printed, if it has ended (read to its end), with its exit code."""
    return f"exit {proc.returncode}: {proc.stdout.read()}" if proc.poll() is not None else "(still running)"


def squeue() -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %T"], env=dict(os.environ, SLURM_CONF=f"{SLURM_DIR}/slurm.conf"),
                          capture_output=True, text=True, timeout=30).stdout.strip()


def test_outside_an_allocation_and_too_small_an_allocation_are_refused(repo):
    out = repo / "results" / "refused"
    proc = subprocess.run([sys.executable, "-m", "bench", "run", "sync", "--np", "2", "--hardware", "slurm", "--out",
                           str(out), *TINY], cwd=repo, env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "inside a Slurm allocation" in proc.stderr and "SLURM_JOB_ID" in proc.stderr
    assert not out.exists()
    # downpour --np 2 is 3 processes (2 workers + its server): a 2-node allocation is too small, refused in the job
    small = blocking(repo, ["--nodes=2", "--ntasks-per-node=1"], "python", "-m", "bench", "run", "downpour", "--np", "2",
                     "--hardware", "slurm", "--out", str(out), *TINY)
    assert small.returncode == 2, small.stdout + small.stderr
    error = [line for line in job_log(repo, small).splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "has 2 task(s)" in error[0] and "3 process(es)" in error[0], error
    assert not out.exists()


def test_hostfile_expands_the_compressed_task_counts(repo):
    """The job's own hostfile (pipelines/hosts/slurm-<job id>.txt), gone with its job."""
    proc = blocking(repo, ["--nodes=2", "--ntasks-per-node=2"], "sh", "-c",
                    "echo tasks=$SLURM_TASKS_PER_NODE; cat pipelines/hosts/slurm-$SLURM_JOB_ID.txt")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tasks=2(x2)\ndbemu-h0 slots=2\ndbemu-h1 slots=2\n" in job_log(repo, proc)
    assert job_hostfiles(repo) == []


def test_sync_runs_on_both_allocated_hosts_into_the_study(repo):
    proc = blocking(repo, ["--nodes=2", "--ntasks-per-node=1"], "python", "-m", "bench", "run", "sync", "--np", "2",
                    "--hardware", "slurm", "--study", "slurm-test", *TINY, "--set", "max_steps=8")
    log = job_log(repo, proc)
    assert proc.returncode == 0, log[-4000:]
    assert squeue() == ""  # sbatch --wait returned after the job ended
    run = repo / "results" / "slurm-test" / "runs" / "sync" / "slurm" / "sync-np2"
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
    system = json.loads((run / "system.json").read_text())
    assert system["hosts_by_rank"] == ["dbemu-h0", "dbemu-h1"]  # the allocation's nodes, one rank on each
    command = system["launch_command"]
    assert command[command.index("-H") + 1] == "dbemu-h0:1,dbemu-h1:1"  # the job's hostfile, read by the launcher


def test_dvc_stage_waits_on_a_parameter_server_job(repo):
    """``run-blocking.sh -- dvc repro run@downpour``: the study's downpour run (1 worker + its server) on 2 nodes."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    (repo / "pipelines" / "studies" / "slurm-smoke.yaml").write_text(yaml.safe_dump(
        {"description": "downpour through Slurm (tests/cluster/test_slurm.py)", "profile": "tiny",
         "algorithms": ["downpour"], "np": [1], "sets": {"max_steps": 8, "eval_every": 0}, "target_accuracy": 0.1},
        sort_keys=False))
    params.update(study="slurm-smoke", hardware="slurm")
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc = str(Path(sys.executable).parent / "dvc")
    proc = blocking(repo, ["--nodes=2", "--ntasks-per-node=1"], dvc, "repro", "run@downpour", timeout=400)
    log = job_log(repo, proc)
    assert proc.returncode == 0, log[-5000:]
    assert squeue() == ""
    assert "Running stage 'run@downpour'" in log
    run = repo / "results" / "slurm-smoke" / "runs" / "downpour" / "slurm" / "downpour-np1"
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
    assert json.loads((run / "system.json").read_text())["hosts_by_rank"] == ["dbemu-h0", "dbemu-h1"]  # server: own node
    assert "run@downpour" in (repo / "dvc.lock").read_text()


def test_scancel_ends_every_process_and_fails_the_run(repo):
    out = repo / "results" / "cancelled"
    args = ["pipelines/slurm/run-blocking.sh", "--nodes=2", "--ntasks-per-node=1", "--", "python", "-m", "bench", "run",
            "sync", "--np", "2", "--hardware", "slurm", "--out", str(out), *TINY, "--set", "max_steps=1000000",
            "--set", "epochs=100000", "--set", "timeout_s=600"]
    proc = subprocess.Popen(args, cwd=repo, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    try:
        while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
            assert proc.poll() is None and time.time() - t0 < 180, f"the job did not start:\n{unfinished_output(proc)}"
            time.sleep(0.5)
        job = squeue().split()[0]
        subprocess.run(["scancel", job], env=dict(os.environ, SLURM_CONF=f"{SLURM_DIR}/slurm.conf"), check=True, timeout=30)
        cancelled = time.time()
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    started = (out / "rank0.jsonl").read_text().count("\n")
    assert proc.returncode != 0, f"run-blocking.sh exit {proc.returncode} after the cancel ({started} steps of rank 0):\n{output}"
    needle = str(out / "config.json")
    while subprocess.run(["pgrep", "-f", needle], capture_output=True).returncode == 0:
        assert time.time() - cancelled < 60, "processes of the cancelled job outlived it by 60 s"
        time.sleep(0.5)
    assert squeue() == ""
    summary = json.loads((out / "summary.json").read_text())
    # the launcher ended the job and marked the run before the batch shell ended (slurmstepd SIGKILLs what is left of
    # a job once its batch shell has ended: bench.sbatch waits for its command), and the shell removed the hostfile
    assert summary["status"] == "failed" and "SIGTERM" in summary["reason"], summary
    assert "ended CANCELLED" in output
    assert (out / "rank0.jsonl").stat().st_size > 0  # what was written before the cancel stays
    assert job_hostfiles(repo) == []


def test_an_allocation_larger_than_the_run_runs_it(repo):
    """2 nodes of 2 tasks, a run of 2 processes: horovodrun is given the run's processes only (it starts a rank on
    every slot it is given: before issue 40 this run started 4 ranks and failed)."""
    out = repo / "results" / "larger"
    proc = blocking(repo, ["--nodes=2", "--ntasks-per-node=2"], "python", "-m", "bench", "run", "sync", "--np", "2",
                    "--hardware", "slurm", "--out", str(out), *TINY, "--set", "max_steps=8")
    assert proc.returncode == 0, job_log(repo, proc)[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok", summary
    system = json.loads((out / "system.json").read_text())
    assert system["hosts_by_rank"] == ["dbemu-h0", "dbemu-h0"]  # the first node's 2 slots
    command = system["launch_command"]
    assert command[command.index("-H") + 1] == "dbemu-h0:2"


def test_a_controller_that_does_not_answer_for_a_while_does_not_end_the_wait(repo):
    """slurmctld stopped (SIGSTOP) for 22 s while run-blocking.sh waits on a running job: its squeue fails after 20 s
    ("Socket timed out on send/recv operation", nothing on stdout) and is asked again; the wait ends when the job has,
    with the job's exit code. Before, a failed squeue read as "the job has ended": run-blocking.sh returned 1 while
    the job ran on (a CI run under load, test_a_node_that_dies_fails_the_run_without_a_hang)."""
    ctld = int((Path(SLURM_DIR) / "slurmctld.pid").read_text())
    cmd = ["pipelines/slurm/run-blocking.sh", "--nodes=1", "--", "sh", "-c", "sleep 20; echo done"]
    proc = subprocess.Popen(cmd, cwd=repo, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = proc.stdout.readline()
        job = re.search(r"Submitted batch job (\d+)", first).group(1)
        t0 = time.time()
        while f"{job} RUNNING" not in squeue():
            assert proc.poll() is None and time.time() - t0 < 60, f"the job did not start:\n{unfinished_output(proc)}"
            time.sleep(0.5)
        os.kill(ctld, signal.SIGSTOP)
        try:
            time.sleep(22)
            assert proc.poll() is None, f"the wait ended while the controller did not answer:\n{unfinished_output(proc)}"
        finally:
            os.kill(ctld, signal.SIGCONT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(ctld, signal.SIGCONT)
            proc.kill()
    assert proc.returncode == 0, first + output
    log = job_log(repo, subprocess.CompletedProcess(cmd, 0, first, ""))
    assert log.strip() == "done", log
    assert squeue() == ""
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=dict(os.environ, SLURM_CONF=f"{SLURM_DIR}/slurm.conf"),
                           capture_output=True, text=True, timeout=30).stdout.strip().split("\n")
    assert sorted(nodes) == ["dbemu-h0 idle", "dbemu-h1 idle"], nodes  # the stall cost no node


def test_two_jobs_from_one_checkout_each_run_on_their_own_node(repo):
    """Two jobs at once from one checkout, a node each: each launcher reads its own job's hostfile (before issue 40
    both jobs wrote pipelines/hosts/slurm.txt, and the first job's run went to the second job's node). Each job waits
    5 s before its run, so that both hostfiles exist when either is read."""
    procs = {}
    for name in ("first", "second"):
        cmd = ["pipelines/slurm/run-blocking.sh", "--nodes=1", "--ntasks-per-node=1", "--exclusive", "--", "sh", "-c",
               f"echo node=$SLURM_JOB_NODELIST; sleep 5; python -m bench run sync --np 1 --hardware slurm "
               f"--out results/{name} {' '.join(TINY)} --set max_steps=8"]
        procs[name] = subprocess.Popen(cmd, cwd=repo, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
        time.sleep(1)
    nodes = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=300)
        log = job_log(repo, subprocess.CompletedProcess(p.args, p.returncode, out, err))
        assert p.returncode == 0, log[-3000:] + err
        nodes[name] = re.search(r"node=(\S+)", log).group(1)
        system = json.loads((repo / "results" / name / "system.json").read_text())
        assert system["hosts_by_rank"] == [nodes[name]], (name, log[-3000:])  # its own node, not the other job's
    assert sorted(nodes.values()) == ["dbemu-h0", "dbemu-h1"]
    assert job_hostfiles(repo) == []


def test_an_impossible_request_is_refused_at_once(repo):
    """More nodes than the cluster has: one line, exit 2, nothing queued (before issue 40 Slurm queued the job, pending
    for ever, and run-blocking.sh waited on it)."""
    t0 = time.time()
    proc = blocking(repo, ["--nodes=5"], "true", timeout=60)
    assert proc.returncode == 2 and time.time() - t0 < 30, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Slurm cannot run this request (--nodes=5)" in proc.stderr, proc.stderr
    assert "2 node(s) idle" in proc.stderr, proc.stderr  # what the cluster has
    assert "Submitted" not in proc.stdout and squeue() == ""


def test_injection_through_the_environment_is_refused_and_values_stay_inert(repo, tmp_path):
    """Through sbatch, bench.sbatch and horovodrun's ssh to the other node: an env name that is not an identifier is
    refused in the job before launch (exit 2, the job's exit code); a value of shell metacharacters reaches the ranks
    as text (the file it names is never created)."""
    marker = tmp_path / "injected"
    bad = blocking(repo, ["--nodes=2", "--ntasks-per-node=1"], "python", "-m", "bench", "run", "sync", "--np", "2",
                   "--hardware", "slurm", "--out", str(repo / "results" / "inject"), *TINY,
                   "--set", f"env={{'A;touch {marker};B': x}}")
    assert bad.returncode == 2 and "is not an environment variable's name" in job_log(repo, bad), bad.stderr
    ok = blocking(repo, ["--nodes=2", "--ntasks-per-node=1"], "python", "-m", "bench", "run", "sync", "--np", "2",
                  "--hardware", "slurm", "--out", str(repo / "results" / "inert"), *TINY, "--set", "max_steps=4",
                  "--set", f"env={{'BENCH_PROBE': 'x;touch {marker};$(touch {marker})`touch {marker}`'}}")
    assert ok.returncode == 0, job_log(repo, ok)[-3000:]
    assert json.loads((repo / "results" / "inert" / "system.json").read_text())["hosts_by_rank"] == ["dbemu-h0",
                                                                                                    "dbemu-h1"]
    assert not marker.exists() and not (repo / "results" / "inject").exists()


def test_job_logs_are_not_overwritten_when_slurm_starts_anew(repo):
    """A new controller starts its job ids again (the emulated cluster's, after ``cluster down`` and ``up --slurm``):
    two jobs with one id keep a log each (before issue 40 both wrote results/slurm-<id>.log, the second over the
    first)."""
    procs = []
    for text in ("first job", "second job"):
        cluster("down")
        cluster("up", "--hosts", "2", "--slurm")
        procs.append(blocking(repo, ["--nodes=1"], "sh", "-c", f"echo {text}"))
        assert procs[-1].returncode == 0, procs[-1].stdout + procs[-1].stderr
    assert job_id(procs[0]) == job_id(procs[1])  # Slurm anew: the same job id
    assert job_log_path(repo, procs[0]) != job_log_path(repo, procs[1])
    assert [job_log(repo, p).strip() for p in procs] == ["first job", "second job"]


def test_a_node_that_dies_fails_the_run_without_a_hang(repo):
    """Host 1 dies: its slurmd and its rank are killed; the job ends, the run is failed, nothing of it is left.
    (Slurm then marks the node down: this test comes last.)"""
    out = repo / "results" / "node-lost"
    args = ["pipelines/slurm/run-blocking.sh", "--nodes=2", "--ntasks-per-node=1", "--", "python", "-m", "bench", "run",
            "sync", "--np", "2", "--hardware", "slurm", "--out", str(out), *TINY, "--set", "max_steps=1000000",
            "--set", "epochs=100000", "--set", "timeout_s=600"]
    proc = subprocess.Popen(args, cwd=repo, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    try:
        while not all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
            assert proc.poll() is None and time.time() - t0 < 180, f"the job did not start:\n{unfinished_output(proc)}"
            time.sleep(0.5)
        needle, slurmd = str(out / "config.json"), f"slurmd -N dbemu-h1 -f {SLURM_DIR}/slurm.conf"
        h1 = subprocess.run(["ip", "netns", "pids", "dbemu-h1"], capture_output=True, text=True).stdout.split()
        doomed = [int(p) for p in h1 if any(s in Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                                            for s in (needle, slurmd))]
        assert len(doomed) >= 2, doomed  # host 1's slurmd and its rank
        subprocess.run(["kill", "-9", *map(str, doomed)], check=False)
        died = time.time()
        output, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, output
    assert time.time() - died < 180, "the run took more than 3 minutes to notice the lost node"
    while subprocess.run(["pgrep", "-f", needle], capture_output=True).returncode == 0:
        assert time.time() - died < 240, "processes of the run outlived the lost node by 4 minutes"
        time.sleep(0.5)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["reason"], summary


def test_down_removes_slurm_and_nothing_else(repo):
    assert suite_slurm_processes()
    assert "removed" in cluster("down").stdout
    assert suite_slurm_processes() == []
    assert not Path(SLURM_DIR).exists()
