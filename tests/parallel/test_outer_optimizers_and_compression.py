"""Outer optimizers over local SGD and compression baselines (diloco, slowmo, sync's compression, ddp's comm hooks) under real horovodrun, np=2.

Most checks share ONE horovodrun job (scripts/outer_optimizers_and_compression.py): exact rules on a quadratic with known
gradients (diloco's outer Nesterov step, slowmo's slow momentum, Streaming DiLoCo's fragment schedule),
then real runs of the worker loop (tiny profile for the equalities with localsgd, laptop profile for
convergence) into run directories that the tests below read. Adasum is refused before launch on this
gloo-only build (checked through the CLI, nothing launched).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.algorithms.diloco import fragment_offsets, fragment_slices
from bench.results import load_run
from support import bench_cli, check_converged_run, horovod_job, max_diff, saved_model as model

SCRIPTS = Path(__file__).parent / "scripts"
LAPTOP_STEPS = 120  # scripts/outer_optimizers_and_compression.py LAPTOP["max_steps"]
LAPTOP_RUNS = ("diloco", "diloco-streaming", "slowmo", "sync-fp16", "ddp-allreduce", "ddp-fp16", "ddp-powersgd",
               "ddp-post_localsgd")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return horovod_job(tmp_path_factory, 2, SCRIPTS / "outer_optimizers_and_compression.py")


def rank0_bytes(run):
    return run.steps[run.steps["rank"] == 0].set_index("step")["bytes_sent"]


@pytest.mark.parametrize("rule", ["diloco", "slowmo", "streaming", "streaming-as-diloco"])
def test_exact_rules_on_a_quadratic_with_known_gradients(job, rule):
    # diloco: Δ = mean(θ̃ − θᵏ), Nesterov outer step (lr 0.7, momentum 0.9), workers restart from θ̃; evaluated θ̃
    # slowmo: u ← βu + (x0 − x̄)/γ, x0 ← x0 − αγu, and equal to diloco with a heavy-ball outer step
    # streaming: P=2 fragments at offsets 0 and H/2, exchanged every H=4 steps, applied τ=1 step later, α=0.5 merge
    # streaming-as-diloco: P=1, τ=0 is plain DiLoCo
    _, stdout = job
    for rank in (0, 1):
        assert f"RULE {rule} ok rank {rank}" in stdout


@pytest.mark.parametrize("name, why", [
    ("diloco3-lr1-mom0", "outer lr 1, no momentum: θ̃ − mean(θ̃ − θᵏ) = mean θᵏ"),
    ("slowmo3-b0-a1", "β=0, α=1: x0 − γ(x0 − x̄)/γ = x̄"),
])
def test_equals_localsgd_with_the_same_window(job, name, why):
    out, _ = job
    run, ref = load_run(out / name), load_run(out / "localsgd3")
    assert run.status == "ok" and ref.status == "ok"
    assert run.steps.groupby("rank")["step"].max().tolist() == [7, 7]
    a = run.steps.sort_values(["rank", "step"])["loss"].to_numpy()
    b = ref.steps.sort_values(["rank", "step"])["loss"].to_numpy()
    assert abs(a - b).max() < 1e-5, why  # the same data in the same order, the same trajectory
    assert max_diff(model(run.path), model(ref.path)) <= 1e-6, why
    # the comparison is meaningful: the paper defaults (outer Nesterov 0.7/0.9, slow momentum 0.5) end far away
    assert max_diff(model(out / "diloco3-default"), model(ref.path)) > 1e-3
    assert max_diff(model(out / "slowmo3-b05"), model(ref.path)) > 1e-3


def test_slowmo_equals_diloco_with_a_heavy_ball_outer_step(job):
    out, _ = job
    assert max_diff(model(out / "slowmo3-b05"), model(out / "diloco3-heavyball")) <= 1e-6


@pytest.mark.parametrize("name", LAPTOP_RUNS)
def test_converges_on_laptop(job, name):
    check_converged_run(load_run(job[0] / f"laptop-{name}"), LAPTOP_STEPS, name)


def test_diloco_and_slowmo_communicate_every_window(job):
    out, _ = job
    for name, window in (("diloco", 8), ("slowmo", 4)):  # params.yaml communication_window
        run = load_run(out / f"laptop-{name}")
        assert run.summary["outer_steps"] == LAPTOP_STEPS // window, name  # 120 is a multiple: no finalize step
        sent = rank0_bytes(run)
        assert (sent[sent.index % window == 0] > 0).all() and (sent[sent.index % window != 0] == 0).all(), name


def test_streaming_fragments_are_exchanged_on_their_schedule(job):
    run = load_run(job[0] / "laptop-diloco-streaming")
    H, P = 8, 4
    sizes = run.summary["fragment_sizes"]
    numel = sum(sizes)
    assert sizes == [s.stop - s.start for s in fragment_slices(numel, P)]
    offsets = fragment_offsets(H, P)  # 0, 2, 4, 6
    due = {p: [t for t in range(1, LAPTOP_STEPS + 1) if t >= o and (t - o) % H == 0] for p, o in enumerate(offsets)}
    assert run.summary["fragment_exchanges"] == [len(due[p]) for p in range(P)]
    # each step sends exactly the fragments due then (float32: 4 bytes per element), the others none
    sent = rank0_bytes(run)
    for t in range(1, LAPTOP_STEPS + 1):
        assert sent[t] == 4 * sum(sizes[p] for p in range(P) if t in due[p]), t
    # one fragment (about a quarter of the model) per exchange, never the whole model
    assert sent.max() < 0.3 * 4 * numel
    assert (run.steps["wait_s"] >= 0).all()


def test_compressed_payloads(job):
    out, _ = job
    full = rank0_bytes(load_run(out / "laptop-ddp-allreduce"))
    assert (full == full.iloc[0]).all()
    grads = int(full.iloc[0])  # 4 bytes per gradient element
    assert (rank0_bytes(load_run(out / "laptop-sync-fp16")) == grads // 2).all()
    assert (rank0_bytes(load_run(out / "laptop-ddp-fp16")) == grads // 2).all()
    psgd = load_run(out / "laptop-ddp-powersgd")
    sent = rank0_bytes(psgd)
    start = 10  # ddp powersgd_start_iter default: plain allreduce for the first 10 steps
    assert (sent[sent.index <= start] == grads).all()
    assert (sent[sent.index > start] < grads / 20).all() and (sent[sent.index > start] > 0).all()
    assert psgd.summary["powersgd_compression_rate"] > 20
    plsgd = load_run(out / "laptop-ddp-post_localsgd")
    sent = rank0_bytes(plsgd)
    warm, period = 10, 4  # post_localsgd_start_iter, post_localsgd_period defaults
    # steps are 1-based here: warm-up steps 1..10 allreduce gradients; then parameters averaged after steps 11, 15, ...
    averaged = [t for t in range(warm + 1, LAPTOP_STEPS + 1) if (t - 1 - warm) % period == 0]
    assert (sent[sent.index <= warm] == grads).all()
    assert all(sent[t] == grads for t in averaged)  # parameters: as many bytes as the gradients
    assert (sent[(sent.index > warm) & ~sent.index.isin(averaged)] == 0).all()
    assert plsgd.summary["post_localsgd_averagings"] == len(averaged)
    assert (plsgd.steps.set_index("step").loc[averaged, "comm_s"] > 0).all()


def test_adasum_is_refused_before_launch_on_a_gloo_build(tmp_path):
    out = tmp_path / "adasum"
    proc = bench_cli("run", "sync", "--np", "2", "--profile", "tiny", "--out", str(out), "--quiet", "--set", "op=adasum")
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "op=adasum cannot run" in lines[0] and "MPI" in lines[0] and "controller: mpi" in lines[0]
    assert not (out / "summary.json").exists()
