"""Run-directory schema: atomic writes, round-trip, corrupt files named with file and line."""

from __future__ import annotations

import json

import pytest

from bench import SCHEMA_VERSION
from bench.resolve import resolve
from bench.results import (JsonlWriter, ResultsError, StepRecord, load_run, load_runs, mark_failed, read_json,
                           record_line, steps_frame, summaries_frame, write_json_atomic, write_summary)


def make_run(path, status="ok", n_steps=3):
    path.mkdir(parents=True)
    write_json_atomic(path / "config.json", resolve("sync", np=2, profile="tiny").to_dict())
    for r in range(2):
        w = JsonlWriter(path / f"rank{r}.jsonl")
        for s in range(1, n_steps + 1):
            w.write(StepRecord(step=s, epoch=s / 10, t=0.1 * s, samples=16, loss=1.0 / s, accuracy=0.5, step_s=0.01,
                               compute_s=0.008, comm_s=0.002, wait_s=0.0, injected_s=0.0, staleness=None,
                               bytes_sent=100, warmup=s == 1).line())
        w.close()
    w = JsonlWriter(path / "eval.jsonl")
    w.write({"step": n_steps, "epoch": 1.0, "t": 1.0, "samples_seen": 96, "loss": 0.5, "accuracy": 0.8})
    w.close()
    if status == "ok":
        write_summary(path, "ok", final_accuracy=0.8, final_loss=0.5, throughput=100.0)
    return path


def test_a_step_record_is_one_line_with_its_keys_in_order():
    rec = StepRecord(step=3, epoch=0.3, t=1.5, samples=16, loss=0.25, accuracy=0.5, step_s=0.01, compute_s=0.008,
                     comm_s=0.002, wait_s=0.0, injected_s=0.0, staleness=None, bytes_sent=100, warmup=False)
    # the format of rank<r>.jsonl: these keys, in this order (what the worker wrote before StepRecord)
    assert record_line(rec.line()) == ('{"step":3,"epoch":0.3,"t":1.5,"samples":16,"loss":0.25,"accuracy":0.5,'
                                       '"step_s":0.01,"compute_s":0.008,"comm_s":0.002,"wait_s":0.0,"injected_s":0.0,'
                                       '"staleness":null,"bytes_sent":100,"warmup":false}\n')


def test_round_trip_to_tidy_frames(tmp_path):
    make_run(tmp_path / "a")
    make_run(tmp_path / "b")
    run = load_run(tmp_path / "a")
    assert run.status == "ok" and len(run.steps) == 6 and set(run.steps["rank"]) == {0, 1}
    assert list(run.steps.columns) == ["rank", *StepRecord.keys()]
    assert run.summary["schema_version"] == SCHEMA_VERSION
    runs = load_runs(tmp_path)
    df = steps_frame(runs)
    assert len(df) == 12 and {"algorithm", "np", "hardware", "status", "rank", "step", "loss"} <= set(df.columns)
    assert summaries_frame(runs)["final_accuracy"].tolist() == [0.8, 0.8]


def test_corrupt_line_is_reported_with_file_and_line(tmp_path):
    run = make_run(tmp_path / "a")
    lines = (run / "rank1.jsonl").read_text().splitlines()
    lines[1] = '{"step": 2, "loss": '
    (run / "rank1.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError, match=r"rank1\.jsonl:2: corrupt record"):
        load_run(run)


def test_torn_last_line_of_a_failed_run_is_tolerated(tmp_path):
    run = make_run(tmp_path / "a", status="none")
    with open(run / "rank0.jsonl", "a") as f:
        f.write('{"step": 4, "lo')
    mark_failed(run, "rank 1: killed")
    loaded = load_run(run)
    assert loaded.status == "failed" and (loaded.steps["rank"] == 0).sum() == 3


def test_mark_failed_keeps_the_first_reason_and_earlier_fields(tmp_path):
    run = make_run(tmp_path / "a", status="none")
    mark_failed(run, "rank 1: RuntimeError: boom")
    mark_failed(run, "horovodrun exited with code 1", exit_code=1)
    s = read_json(run / "summary.json")
    assert s["status"] == "failed" and s["reason"] == "rank 1: RuntimeError: boom" and s["exit_code"] == 1


def test_atomic_write_leaves_no_partial_file(tmp_path):
    write_json_atomic(tmp_path / "s.json", {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "s.json", {"a": object()})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_incompatible_schema_is_an_error(tmp_path):
    run = make_run(tmp_path / "a")
    cfg = read_json(run / "config.json")
    cfg["schema_version"] = 999
    write_json_atomic(run / "config.json", cfg)
    with pytest.raises(ResultsError, match="schema_version 999"):
        load_run(run)


def test_records_are_strict_json_and_non_finite_floats_are_cleaned(tmp_path):
    w = JsonlWriter(tmp_path / "r.jsonl")
    w.write({"step": 1, "loss": float("nan"), "step_s": float("inf"), "comm_s": -float("inf"), "staleness": None,
             "warmup": True, "accuracy": 0.25})
    w.write({"step": 2, "loss": 0.5})
    w.close()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"step": 1, "loss": None, "step_s": 1e308, "comm_s": -1e308, "staleness": None,
                                    "warmup": True, "accuracy": 0.25}
    assert "NaN" not in lines[0] and "Infinity" not in lines[0]
    assert json.loads(lines[1]) == {"step": 2, "loss": 0.5}


def test_buffered_records_reach_the_file_at_the_first_line_every_interval_and_at_close(tmp_path):
    path = tmp_path / "rank0.jsonl"
    w = JsonlWriter(path, exclusive=True, flush_s=3600.0)
    w.write({"step": 1})
    assert path.read_text() == '{"step":1}\n'  # the first line at once: a reader sees the rank has started
    w.write({"step": 2})
    w.write({"step": 3})
    assert path.read_text() == '{"step":1}\n'  # kept in memory within the interval
    w.next_flush = 0.0  # the interval has passed
    w.write({"step": 4})
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2, 3, 4]
    w.write({"step": 5})
    w.close()
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2, 3, 4, 5]
    with pytest.raises(FileExistsError, match="already holds results"):
        JsonlWriter(path, exclusive=True, flush_s=1.0)
