"""The hosts horovodrun is given (issue 40, items 2 and 4): cut to the run's processes, checked before launch.

horovodrun's gloo launcher starts a rank on every slot of ``-H``/``--hostfile``, whatever ``-np`` says: before issue 40
a Slurm allocation of 2 nodes x 2 tasks started 4 ranks for a run of 2 and failed at run time; and every Slurm job read
the checkout's one hostfile (``pipelines/hosts/slurm.txt``), which a second job from the same checkout overwrote.
"""

from __future__ import annotations

import pytest

from bench import BenchError
from bench.launch import check_launch, command
from bench.launch.command import horovodrun_command, host_list
from bench.layout import REPO_ROOT
from bench.resolve import resolve


def cfg_of(np_: int = 2, hardware: str | None = None, **overrides):
    return resolve("sync", np=np_, profile="tiny", hardware=hardware, overrides=overrides, check=False)


@pytest.mark.parametrize("np_, expected", [(1, "a:1"), (2, "a:2"), (4, "a:4"), (6, "a:4,b:2"), (8, "a:4,b:4")])
def test_hosts_are_cut_to_the_runs_processes(np_, expected):
    cfg = cfg_of(np_, hosts="a:4,b:4")
    assert host_list(cfg) == expected
    cmd = horovodrun_command(cfg, REPO_ROOT / "config.json")
    assert cmd[cmd.index("-H") + 1] == expected and cmd[cmd.index("-np") + 1] == str(np_)


def test_a_run_on_this_machine_gets_localhost():
    assert host_list(cfg_of(2)) == "localhost:2"


def test_more_processes_than_slots_are_refused_before_launch_unless_oversubscribed(tmp_path):
    with pytest.raises(BenchError, match=r"^3 processes \(sync with np=3\) exceed the 2 slots of hosts 'a:1,b:1'; "):
        check_launch([cfg_of(3, hosts="a:1,b:1")])
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("# two hosts\na slots=1\n\nb\n")
    with pytest.raises(BenchError, match=r"exceed the 2 slots of hostfile '.*hosts.txt'"):
        check_launch([cfg_of(3, hostfile=str(hostfile))])
    assert host_list(cfg_of(3, hostfile=str(hostfile), oversubscribe=True)) == "a:1,b:2"


def test_a_slurm_job_reads_its_own_hostfile(tmp_path, monkeypatch):
    """Two jobs from one checkout: each launcher reads the hostfile bench.sbatch wrote for its job id, never the
    checkout's one file (the last job to start wrote it, before issue 40)."""
    monkeypatch.setattr(command, "REPO_ROOT", tmp_path)  # the checkout the jobs were submitted from
    hosts = tmp_path / "pipelines" / "hosts"
    hosts.mkdir(parents=True)
    (hosts / "slurm.txt").write_text("node-z slots=4\n")
    (hosts / "slurm-990001.txt").write_text("node-a slots=2\nnode-b slots=2\n")
    (hosts / "slurm-990002.txt").write_text("node-c slots=1\n")
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    for job, tasks, np_, expected in (("990001", "2(x2)", 3, "node-a:2,node-b:1"), ("990002", "1", 1, "node-c:1")):
        monkeypatch.setenv("SLURM_JOB_ID", job)
        monkeypatch.setenv("SLURM_TASKS_PER_NODE", tasks)
        cfg = cfg_of(np_, hardware="slurm")
        check_launch([cfg])  # the job's hostfile read and checked: names, slots against the processes
        assert host_list(cfg) == expected
    monkeypatch.setenv("SLURM_JOB_ID", "990003")  # a job whose bench.sbatch wrote no hostfile
    with pytest.raises(BenchError, match=r"^hostfile '.*/pipelines/hosts/slurm-990003.txt' cannot be read"):
        check_launch([cfg_of(1, hardware="slurm")])


@pytest.mark.parametrize("job, message", [
    (None, r"^hardware 'slurm' runs inside a Slurm allocation and SLURM_JOB_ID is not set: submit it with "),
    ("../990001", r"^SLURM_JOB_ID='../990001' is not a Slurm job id \(digits\)$")])
def test_a_slurm_profile_outside_an_allocation_names_no_hostfile(job, message, monkeypatch):
    """The command of a Slurm run (``bench run --prepare-only`` prints it) needs the job's hostfile: outside a job the
    allocation's absence is named, not a file; an id that is not a number never names a path."""
    if job is None:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    else:
        monkeypatch.setenv("SLURM_JOB_ID", job)
    with pytest.raises(BenchError, match=message):
        host_list(cfg_of(1, hardware="slurm"))
