"""The performance model (bench/predict): its terms on known cases, the parameter server's serialisation, the CFS
quota, the pattern table's coverage of the registry, the published validation table, and the CLI."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bench.algorithms import KEYS
from bench.predict import hardware
from bench.predict.calibrate import calibration_keys
from bench.predict.hardware import Hardware, Level
from bench.predict.model import Model, p2p_cost, ring_cost
from bench.predict.patterns import PATTERNS
from bench.predict.queue import Visit, simulate_server
from bench.predict.sim import CfsHost, Client, Op, simulate_collective
from bench.resolve import resolve
from support import REPO, bench_cli

RESULTS = REPO / "docs" / "results" / "predict"
MB = 1e6


def flat(bytes_per_s: float, latency_s: float) -> Hardware:
    return Hardware("test", "", False, (Level("link", None, bytes_per_s, latency_s),), None, 0.0, 0.0, {}, {}, "", "", {})


def nodes(per_node: int, intra: float, inter: float) -> Hardware:
    return Hardware("test", "", False, (Level("nvlink", per_node, intra, 1e-6), Level("ib", None, inter, 5e-6)), None,
                    0.0, 0.0, {}, {}, "", "", {})


def test_every_registered_algorithm_has_a_pattern():
    assert set(PATTERNS) == set(KEYS), (f"bench/predict/patterns.py and the registry differ by "
                                        f"{sorted(set(PATTERNS) ^ set(KEYS))}: see docs/architecture.md#extending")
    wl = hardware.Workload("lenet", 32, 107786, 10, 0.004, 4000, "")
    for key in KEYS:
        cfg = resolve(key, np=4, profile="regimes", hardware="emu", check=False)
        pat = PATTERNS[key](cfg, wl)
        assert pat.exchanges, key
        assert pat.family == cfg_family(key)


def cfg_family(key: str) -> str:
    from bench.algorithms import get_algorithm

    return get_algorithm(key).family


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_ring_allreduce_sends_2_n_minus_1_over_n_of_the_model_in_2_n_minus_1_hops(n):
    wire, lat = ring_cost(flat(100 * MB, 1e-3), n, 10 * MB)
    assert wire == pytest.approx(2 * (n - 1) / n * 10 * MB / (100 * MB))
    assert lat == pytest.approx(2 * (n - 1) * 1e-3)
    assert ring_cost(flat(100 * MB, 1e-3), 1, 10 * MB) == (0.0, 0.0)


def test_ring_over_nodes_is_paced_by_the_slower_link_once_it_leaves_the_node():
    hw = nodes(8, 100e9, 10e9)
    inside, _ = ring_cost(hw, 8, 1e9)
    across, lat = ring_cost(hw, 16, 1e9)
    assert inside == pytest.approx(2 * 7 / 8 * 1e9 / 100e9)
    assert across == pytest.approx(2 * 15 / 16 * 1e9 / 10e9)
    assert lat == pytest.approx(2 * 15 * 5e-6)


def test_gossip_round_crossing_a_node_carries_min_group_distance_messages():
    hw = nodes(8, 100e9, 10e9)
    near, _ = p2p_cost(hw, 16, 1e9, distance=1, peers=1)
    far, _ = p2p_cost(hw, 16, 1e9, distance=8, peers=1)
    assert near == pytest.approx(max(1e9 / 100e9, 1 * 1e9 / 10e9))
    assert far == pytest.approx(8 * 1e9 / 10e9)


@pytest.mark.parametrize("kappa", [0.0, 0.5, 1.0])
def test_parameter_server_link_serialises_every_workers_push_and_kappa_of_its_pull(kappa):
    n, nbytes, bw = 4, 1e6, 1e8
    clients = [Client(1, 0.0, None) for _ in range(n)]
    res = simulate_server(clients, [Visit(nbytes, nbytes, 0.0, 0.0)], bw, kappa, 0.0, None, 0.1, windows=200)
    per_visit = (1 + kappa) * nbytes / bw
    assert sum(1 / s for s in res.step_s) == pytest.approx(1 / per_visit, rel=0.02)
    assert res.server_busy > 0.95
    # a saturated FIFO server turns equal workers into a round robin: every commit n - 1 stale
    assert res.staleness.most_common(1)[0][0] == n - 1
    assert res.mean_staleness == pytest.approx(n - 1, abs=0.05)


def test_parameter_server_with_idle_server_lets_workers_run_at_their_own_pace():
    clients = [Client(4, 0.01, None) for _ in range(3)]
    res = simulate_server(clients, [Visit(1e3, 1e3, 0.0, 0.0)], 1e9, 0.0, 0.0, None, 0.1)
    assert all(s == pytest.approx(0.01, rel=0.01) for s in res.step_s)



def test_capping_a_large_servers_windows_moves_its_throughput_by_a_fraction_of_a_percent():
    """At 256 workers a parameter server's queue plays 150 windows a worker (server_windows), not 1,200: the
    throughput it settles at is the same within 0.5 %, the round robin's staleness too (its warm-up is 10 windows)."""
    from bench.predict.model import SERVER_STEPS, server_windows

    n = 256
    assert server_windows(1, 32) == SERVER_STEPS and server_windows(1, n) == 150 and server_windows(64, n) == 60
    clients = [Client(1, 0.05, None, jitter_s=0.002) for _ in range(n)]
    visits = [Visit(4e5, 4e5, 3e-4, 1e-4)]
    full = simulate_server(clients, visits, 1e10, 0.5, 1e-5, None, 0.1, windows=SERVER_STEPS)
    capped = simulate_server(clients, visits, 1e10, 0.5, 1e-5, None, 0.1, windows=server_windows(1, n))
    rate = lambda r: sum(1 / s for s in r.step_s)  # noqa: E731
    assert full.server_busy > 0.9  # saturated: the regime of the forecasts at 64-256 workers
    assert rate(capped) == pytest.approx(rate(full), rel=0.005)
    assert capped.mean_staleness == pytest.approx(full.mean_staleness, rel=0.02)

def test_cfs_host_throttles_a_burst_longer_than_its_budget():
    host = CfsHost(0.5, 0.1, phase=0.0)
    assert host.run(0.0, 0.08) == pytest.approx(0.13)  # 50 ms in the first period, the rest after it
    assert CfsHost(None, 0.1).run(1.0, 0.08) == pytest.approx(1.08)


def test_cpu_burnt_beside_a_hosts_work_comes_out_of_its_budget_without_holding_it():
    host = CfsHost(0.5, 0.1, phase=0.0)
    host.burn(0.0, 0.05, 0.03)  # a wait's polls: 30 ms of the first period's 50
    assert host.run(0.05, 0.03) == pytest.approx(0.11)  # 20 ms left in the period, then 10 ms in the next
    full = CfsHost(0.5, 0.1, phase=0.0)
    full.burn(0.0, 0.2, 0.5)  # more than the budgets: each period's use stops at its budget
    assert full.run(0.2, 0.01) == pytest.approx(0.21)
    free = CfsHost(None, 0.1)
    free.burn(0.0, 0.05, 0.03)  # no quota: nothing to take from
    assert free.run(0.05, 0.03) == pytest.approx(0.08)


def test_the_sleeping_waits_polls_are_counted_as_its_loop_makes_them(monkeypatch):
    """``wait_polls`` against ``Comm.wait_sleeping`` itself, with an operation that completes after a set time: the
    loop asks for the sleeps the model counts (every one of them, recorded as it calls ``time.sleep``, which still
    sleeps), polls once after each, and never polls more than the model counts for the wait (a sleep is never short;
    on a loaded machine it is long, and the loop polls fewer times: how many fewer is the machine's)."""
    import time

    from bench.comm import Comm
    from bench.config import FIRST_SLEEP_S
    from bench.predict.model import wait_polls

    assert [wait_polls(w, 250e-6) for w in (0, 1e-5, 3e-4, 1e-3)] == [1, 3, 7, 10]
    assert wait_polls(0.1, 250e-6) == 7 + math.ceil((0.1 - 315e-6) / 250e-6)  # 6 sleeps to 160 us, then 250 us each
    real_sleep, asked = time.sleep, []

    def sleep(seconds):
        asked.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    for wait_s in (0.002, 0.02):
        at, done = [], time.perf_counter() + wait_s
        asked.clear()

        class Waiting:
            wait_sleep_s, wait_spin_s = 250e-6, 0.0

            def poll(self, handle):
                at.append(time.perf_counter())
                return at[-1] >= done
        Comm.wait_sleeping(Waiting(), ["handle"])
        assert asked == pytest.approx([min(FIRST_SLEEP_S * 2 ** i, 250e-6) for i in range(len(asked))], rel=1e-12)
        assert len(at) == len(asked) + 1 and at[-1] >= done > at[-2]
        assert len(at) <= wait_polls(wait_s, 250e-6) + 1, len(at)


def test_a_waiting_ranks_polls_slow_a_rationed_host_and_nothing_else():
    cal = {**hardware.load_calibration(), "c_full_s": 0.0145}  # this machine's step: the quota is what binds
    cfg = resolve("sync", np=4, profile="regimes", hardware="emu", check=False,
                  overrides={"link": "118mbit", "link_delay": "1ms", "lr": 0.2})
    hw, wl = hardware.for_config(cfg, cal)
    polling, silent = (Model({**cal, "wake_s": w}).predict(cfg, hw, wl).step_s for w in (20e-6, 0.0))
    assert polling > 1.01 * silent  # 1.5 % with Horovod's own h (h_hvd_s), 2.8 % before, 4.8 % with the delays fitted
    spinning = resolve("sync", np=4, profile="regimes", hardware="emu", check=False,
                       overrides={"link": "118mbit", "link_delay": "1ms", "lr": 0.2, "horovod": {}})
    assert spinning.launch.horovod.wait_sleep_us is None  # Horovod's own wait: not modelled, no change
    a, b = (Model({**cal, "wake_s": w}).predict(spinning, hw, wl).step_s for w in (20e-6, 0.0))
    assert a == b
    gossip = resolve("sgp", np=4, profile="regimes", hardware="emu", check=False, overrides={"link_delay": "1ms"})
    a, b = (Model({**cal, "wake_s": w}).predict(gossip, *hardware.for_config(gossip, cal)).step_s for w in (20e-6, 0.0))
    assert a == b  # torch.distributed's waits block: no polls


def test_collective_waits_for_the_slowest_worker():
    fast, slow = Client(1, 0.01, None), Client(1, 0.03, None)
    res = simulate_collective([fast, slow, fast], [Op(1, 0.005, 0.0)], 0.1)
    assert max(res.step_s) == pytest.approx(0.035)
    assert res.step_s[0] == pytest.approx(res.step_s[1])


def test_behind_overlap_hides_communication_shorter_than_the_compute():
    hidden = simulate_collective([Client(1, 0.01, None)] * 2, [Op(1, 0.008, 0.0, behind=True)], 0.1)
    exposed = simulate_collective([Client(1, 0.01, None)] * 2, [Op(1, 0.008, 0.0)], 0.1)
    assert max(hidden.step_s) == pytest.approx(0.01)
    assert max(exposed.step_s) == pytest.approx(0.018)


def test_the_delay_a_link_adds_follows_the_hosts_cpu_work_where_the_rest_of_the_wire_overlaps_it():
    # 12 ms on the wire, 10 of them the link's delay, against 20 ms of the hosts' CPU for the operation
    workers = [Client(1, 0.01, None)] * 2
    added = simulate_collective(workers, [Op(1, 0.012, 0.02, delay_s=0.01)], 0.1)
    assert max(added.step_s) == pytest.approx(0.01 + 0.02 + 0.01)
    overlapped = simulate_collective(workers, [Op(1, 0.012, 0.02)], 0.1)
    assert max(overlapped.step_s) == pytest.approx(0.01 + 0.02)


def test_reductions_in_flight_go_through_one_at_a_time():
    # delayed allreduce with d = 3: three reductions in flight, but the link carries one at a time
    res = simulate_collective([Client(1, 0.01, None)] * 2, [Op(1, 0.03, 0.0, behind=True, lag=3)], 0.1)
    assert max(res.step_s) == pytest.approx(0.03)


def test_horovods_loop_fuses_the_reductions_queued_during_an_empty_negotiation_or_runs_them_one_a_cycle():
    # delayed allreduce (d = 1) through Horovod's loop: a negotiation T, then the data of 1 or 2 fused reductions
    T, one, two = 0.18, 0.40, 0.42
    op = Op(1, 2 * T + one, 0.0, behind=True, lag=1, cycle_s=T, fused_s=(one, two))
    # two 8 ms steps are queued within one empty negotiation: pairs, each after an empty cycle
    fused = simulate_collective([Client(1, 0.008, None)] * 4, [op], 0.1)
    assert max(fused.step_s) == pytest.approx((2 * T + two) / 2, rel=1e-9)
    # a host's quota may hold a worker for 0.64 of a 0.3 s period, longer than the negotiation: the loop settles in
    # one reduction a cycle, each queued while the one before runs (no empty negotiation between them)
    held = simulate_collective([Client(1, 0.008, 0.36)] * 4, [op], 0.3)
    assert max(held.step_s) == pytest.approx(T + one, rel=0.02)
    # without the loop's terms the same reduction costs its whole blocking time, one at a time
    plain = simulate_collective([Client(1, 0.008, None)] * 4, [Op(1, 2 * T + one, 0.0, behind=True, lag=1)], 0.1)
    assert max(plain.step_s) == pytest.approx(2 * T + one, rel=1e-9)


def test_delayed_allreduce_at_25ms_pays_half_a_blocking_allreduce_a_step_as_measured():
    # regimes-latency: delayed's steps at 25 ms one way were 347-349 ms against sync's 689-694 (one Horovod allreduce
    # a step); the loop's fusion of two steps' reductions is what the model gives it, within 10 %
    cal = hardware.load_calibration()
    for link in ("", "118mbit"):
        cfg = resolve("delayed", np=4, profile="regimes", hardware="emu", check=False,
                      overrides={"link": link, "link_delay": "25ms", "lr": 0.1})
        sync = resolve("sync", np=4, profile="regimes", hardware="emu", check=False,
                       overrides={"link": link, "link_delay": "25ms", "lr": 0.2})
        d, s = (Model(cal).predict(c, *hardware.for_config(c, cal)).step_s for c in (cfg, sync))
        assert d == pytest.approx(0.348, rel=0.10) and 0.45 < d / s < 0.6


def test_one_emulated_worker_runs_at_the_calibration_runs_mean_step():
    cal = hardware.load_calibration()
    cfg = resolve("sync", np=1, profile="regimes", hardware="emu", check=False)
    p = Model(cal).predict(cfg, *hardware.for_config(cfg, cal))
    study = json.loads((REPO / "docs/results/regimes-v1/calibration.json").read_text())
    assert p.step_s == pytest.approx(study["compute_s_per_step"], rel=0.03)


def test_published_validation_covers_the_studies_without_the_calibration_cells():
    df = pd.read_csv(RESULTS / "tables" / "validation.csv")
    assert {"study", "cell", "algorithm", "np", "link", "measured", "predicted", "error"} <= set(df.columns)
    assert len(df) >= 100
    named = df[df["study"].isin(("regimes-v1", "regimes", "regimes-speedup", "regimes-quota"))]  # the four
    assert len(named) >= 100
    assert (df["error"] - (df["predicted"] / df["measured"] - 1)).abs().max() < 1e-9
    from bench.layout import run_name

    held = {(s, run_name(a, n, p)) for s, a, n, p in calibration_keys()}
    assert not held & set(zip(df["study"], df["cell"]))


def test_published_predictions_are_what_the_model_predicts_now():
    from bench.predict.cells import study_cells

    df = pd.read_csv(RESULTS / "tables" / "validation.csv").set_index(["study", "cell"])
    cal = hardware.load_calibration()
    model = Model(cal)
    for cell in study_cells("regimes-quota"):
        p = model.predict(cell.cfg, *hardware.for_config(cell.cfg, cal))
        assert p.throughput == pytest.approx(df.loc[(cell.study, cell.key), "predicted"], rel=1e-6)


def test_horovod_anchor_is_published_with_its_error_and_vgg_scales_worst():
    df = pd.read_csv(RESULTS / "tables" / "anchors.csv")
    hv = df[df["hardware"] == "horovod-p100"].set_index("workload")
    assert set(hv.index) == {"inception3@64", "resnet101@64", "vgg16@64"}
    assert hv.loc["vgg16@64", "predicted_efficiency"] < hv.loc["inception3@64", "predicted_efficiency"]
    assert ((hv["predicted_efficiency"] / hv["published_efficiency"] - 1) - hv["error"]).abs().max() < 1e-9


def test_cli_json_gives_one_throughput_per_algorithm():
    proc = bench_cli("predict", "sync,sgp,downpour,diloco", "--np", "4", "--hardware", "emu", "--set", "link=250mbit",
                     "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["algorithm"] for r in rows] == ["sync", "sgp", "downpour", "diloco"]
    assert all(r["throughput"] > 0 and math.isfinite(r["speedup"]) for r in rows)
    assert rows[2]["staleness_mean"] == pytest.approx(3, abs=0.2)  # four workers: n - 1


@pytest.mark.parametrize("args, fragment", [
    (["nosuch", "--np", "4", "--hardware", "emu"], "unknown algorithm 'nosuch'"),
    (["sync", "--np", "4", "--hardware", "nosuch"], "unknown hardware 'nosuch'; valid:"),
    (["sync", "--np", "0", "--hardware", "emu"], "--np must be integers in [1, 1024]"),
    (["sync", "--np", "4", "--hardware", "local"], "has no model description"),
    (["sync", "--np", "4", "--hardware", "emu", "--profile", "laptop"], "no compute time for mlp@32"),
    (["sync", "--np", "4", "--hardware", "emu", "--set", "nosuch=1"], "unknown --set key 'nosuch'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, fragment, capsys):
    from bench.__main__ import main

    assert main(["predict", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and fragment in err


def test_a_link_delay_slows_the_step_and_an_unplanned_study_cannot_be_forecast(tmp_path):
    """The model's one-way link delay slows sync at 4 workers more than gossip (its terms, one per operation:
    tests/single/test_transport.py). A study is forecast from its plan, before it runs."""
    from bench.predict import hardware
    from bench.predict.forecast import planned
    from bench.predict.model import Model
    from bench.predict.query import resolve_run

    cal = hardware.load_calibration()
    step = {}
    for delay in ("0ms", "25ms"):
        for algo in ("sync", "sgp"):
            cfg, _ = resolve_run(algo, 4, "emu", None, {"link_delay": delay})
            step[algo, delay] = Model(cal).predict(cfg, *hardware.for_config(cfg, cal)).step_s
    assert step["sync", "25ms"] - step["sync", "0ms"] > 4 * (step["sgp", "25ms"] - step["sgp", "0ms"]) > 0
    assert planned("laptop", cal, root=tmp_path).empty
    proc = bench_cli("predict", "--forecast-study", "no-plan-here", "--out", str(tmp_path / "f.csv"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "has no plan" in proc.stderr
    assert not (tmp_path / "f.csv").exists()
