"""The hosts horovodrun is given (issue 40, items 2 and 4): cut to the run's processes, checked before launch.

horovodrun's gloo launcher starts a rank on every slot of ``-H``/``--hostfile``, whatever ``-np`` says: before issue 40
a Slurm allocation of 2 nodes x 2 tasks started 4 ranks for a run of 2 and failed at run time.
"""

from __future__ import annotations

import pytest

from bench import BenchError
from bench.launch import check_launch
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
