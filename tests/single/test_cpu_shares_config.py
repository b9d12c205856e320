"""CPU shares of emulated hosts and the slower-host straggler: settings, validation and the shares a run asks for
(one process, nothing launched; the kernel side is tested in tests/cluster/test_isolation.py)."""

from __future__ import annotations

import dataclasses

import pytest

from bench import BenchError
from bench.cluster.spec import check_total, host_shares
from bench.launch.job import same_job
from bench.placement import host_shares as run_shares
from bench.resolve import load_hardware, resolve


def emulated(cfg, **launch):
    """``cfg`` (resolved on local, so that no root is needed) as if on an emulated cluster of 4 hosts."""
    cfg.launch = dataclasses.replace(cfg.launch, emulated_hosts=4, **launch)
    return cfg


def test_emu_profiles_give_every_host_a_share_that_fits_a_server_run():
    for name in ("emu", "emu-10gbit", "emu-1gbit", "emu-100mbit"):
        share = load_hardware(name)["cpu_per_host"]
        assert 0 < share and 5 * share <= 1.8  # 4 workers and a server, 0.2 core left to the launcher


@pytest.mark.parametrize("overrides, fragment", [
    ({"slow_mode": "gpu"}, "valid choices: cpu, sleep"),
    ({"slow_mode": "cpu"}, "slow_mode 'cpu'"),  # on local: needs an emulated cluster
    ({"cpu_per_host": 0.5}, "set emulated_hosts > 0"),
    ({"cpu_per_host": "half"}, "expected a number"),
])
def test_bad_settings_are_refused_in_one_line(overrides, fragment):
    with pytest.raises(BenchError) as e:
        resolve("sync", np=2, profile="tiny", overrides=overrides)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_cpu_mode_needs_a_share_and_one_rank_per_host():
    for launch in ({"slow_mode": "cpu"}, {"slow_mode": "cpu", "cpu_per_host": 0.3, "emulated_slots": 2}):
        with pytest.raises(BenchError, match="slow_mode 'cpu'.*valid slow_mode: cpu"):
            emulated(resolve("sync", np=2, profile="tiny"), **launch).launch.validate()
    emulated(resolve("sync", np=2, profile="tiny"), slow_mode="cpu", cpu_per_host=0.3).launch.validate()


def test_every_host_the_server_included_gets_the_share_and_a_cpu_straggler_its_fraction():
    cfg = emulated(resolve("downpour", np=3, profile="tiny", overrides={"slow_ranks": [1], "slow_factor": 4.0}),
                   cpu_per_host=0.36, slow_mode="cpu")
    assert run_shares(cfg) == pytest.approx({0: 0.36, 1: 0.09, 2: 0.36, 3: 0.36})  # host 3: the server's
    cfg.launch.slow_mode = "sleep"  # the straggler sleeps instead: its host is as fast as the others
    assert run_shares(cfg) == pytest.approx({0: 0.36, 1: 0.36, 2: 0.36, 3: 0.36})
    cfg.launch.emulated_cpu = {2: 0.2}  # named hosts win
    assert run_shares(cfg)[2] == 0.2
    assert run_shares(resolve("sync", np=2, profile="tiny")) == {}  # local: no shares


def test_a_cpu_straggler_run_and_a_run_without_it_are_not_one_job():
    base = emulated(resolve("sync", np=2, profile="tiny"), cpu_per_host=0.36, slow_mode="cpu")
    slow = emulated(resolve("sync", np=2, profile="tiny", overrides={"slow_ranks": [1], "slow_factor": 2.0}),
                    cpu_per_host=0.36, slow_mode="cpu")
    assert base.launch == slow.launch and not same_job(base, slow)  # one job has one set of cgroup shares


def test_shares_that_exceed_the_machine_or_the_kernel_minimum_are_refused():
    assert host_shares(3, 0.5, slow={1: 2.0}) == {0: 0.5, 1: 0.25, 2: 0.5}
    assert host_shares(3, 0.0) == {}
    check_total({0: 0.9, 1: 0.9, 2: 5.0}, used=2, cores=2)  # host 2 is not used by the run
    with pytest.raises(BenchError, match=r"3 emulated host\(s\) this run uses need 2.7 cores.*at most 0.667"):
        check_total({0: 0.9, 1: 0.9, 2: 0.9}, used=3, cores=2)
    with pytest.raises(BenchError, match="emulated host 1 would get 0.005 cores, below the smallest share 0.01"):
        check_total({0: 0.5, 1: 0.005}, used=2, cores=2)


def test_isolation_schedule_and_ratios():
    from bench.perf.isolation import ratios, schedule, worst

    windows, per_host = schedule(2, trials=2, seconds=1.0, gap=0.5)
    assert windows == [(0, "alone", 0), (0, "alone", 1), (0, "busy", None),  # odd trials: busy first
                       (1, "busy", None), (1, "alone", 0), (1, "alone", 1)]
    assert [w[2] for w in per_host[0]] == [True, False, True, True, True, False]
    assert per_host[1][1] == [1.5, 2.5, True]  # window 1 starts after window 0 and the gap
    r = ratios({0: {"alone": [0.10, 0.12], "busy": [0.11, 0.11]}, 1: {"alone": [0.2], "busy": [0.25]}})
    assert r[0] == pytest.approx(1.0) and r[1] == pytest.approx(0.8)
    assert worst([1.02, 0.8, 1.1]) == 0.8 and worst([1.2, 0.9]) == 1.2
    assert worst([1.0, float("nan")]) != worst([1.0, float("nan")])  # nan: a host without a figure
