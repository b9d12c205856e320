"""Malformed or incomplete run directories are one-line errors naming the file; a lost rank's reason reads right.

An ``ok`` run must hold a non-empty record file for every worker and a non-empty ``eval.jsonl``
(:class:`bench.results.ResultsError` naming the file otherwise); ``bench te`` on a malformed results file
is one ``error:`` line and exit 2; a rank lost over ssh (exit code 255) is not "killed by signal 127".
"""

from __future__ import annotations

import pytest

from bench.__main__ import main
from bench.launch.lost_rank import lost_rank, lost_rank_reason, name_killed_rank
from bench.resolve import resolve
from bench.results import (JsonlWriter, ResultsError, load_run, load_runs, mark_failed, read_json, write_json_atomic,
                           write_summary)


def make_run(path, np_=2, status="ok"):
    """A small run directory as a real run writes it: config, one record file per worker, eval.jsonl, summary."""
    path.mkdir(parents=True)
    write_json_atomic(path / "config.json", resolve("sync", np=np_, profile="tiny").to_dict())
    for r in range(np_):
        w = JsonlWriter(path / f"rank{r}.jsonl")
        for s in (1, 2, 3):
            w.write({"step": s, "epoch": s / 10, "t": 0.1 * s, "samples": 16, "loss": 1.0 / s, "accuracy": 0.1 * s,
                     "step_s": 0.01, "compute_s": 0.008, "comm_s": 0.002, "wait_s": 0.0, "staleness": None,
                     "bytes_sent": 100, "warmup": s == 1})
        w.close()
    w = JsonlWriter(path / "eval.jsonl")
    w.write({"step": 3, "epoch": 0.3, "t": 0.3, "samples_seen": 96, "loss": 0.5, "accuracy": 0.8, "final": True})
    w.close()
    if status == "ok":
        write_summary(path, "ok", final_accuracy=0.8, final_loss=0.5, throughput=100.0)
    return path


@pytest.mark.parametrize("damage, file, what", [
    (lambda d: (d / "rank0.jsonl").write_text(""), "rank0.jsonl", "empty"),
    (lambda d: (d / "rank1.jsonl").unlink(), "rank1.jsonl", "missing"),
    (lambda d: (d / "eval.jsonl").unlink(), "eval.jsonl", "missing"),
    (lambda d: (d / "eval.jsonl").write_text(""), "eval.jsonl", "empty"),
])
def test_ok_run_missing_or_empty_file_is_an_error_naming_it(tmp_path, damage, file, what):
    run = make_run(tmp_path / "a")
    assert load_run(run).status == "ok"
    damage(run)
    with pytest.raises(ResultsError, match=rf"{file}: {what}"):
        load_run(run)
    with pytest.raises(ResultsError, match=file):
        load_runs(tmp_path)
    mark_failed(run, "rank 1: killed")  # a failed run may lack files: loaded as it is
    assert load_run(run).status == "failed"


@pytest.mark.parametrize("damage, fragment", [
    (lambda d: (d / "summary.json").write_text("[]\n"), "summary.json: expected a JSON object, got list"),
    (lambda d: (d / "config.json").write_text("3\n"), "config.json: expected a JSON object, got int"),
    (lambda d: (d / "rank1.jsonl").write_bytes(b"\x80\x81\xfe\xff" * 64), "rank1.jsonl: not a JSONL text file"),
    (lambda d: (d / "summary.json").write_bytes(b"\xff\xfe{}"), "summary.json: not a JSON text file"),
])
def test_malformed_results_files_are_one_line_errors(tmp_path, capsys, damage, fragment):
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    assert main(["te", str(a), str(b)]) == 0
    capsys.readouterr()
    damage(a)
    with pytest.raises(ResultsError, match=fragment):
        load_runs(tmp_path)
    assert main(["te", str(a), str(b)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines


HOROVOD_TAIL = ["Traceback (most recent call last):", "RuntimeError: Horovod detected that one or more processes "
                "exited with non-zero status, thus causing the job to be terminated. The first process to do so was:",
                "Process name: 1", "Exit code: {code}"]


@pytest.mark.parametrize("code, over_ssh, expected", [
    (255, True, "rank 1: lost over ssh (ssh exit code 255"),
    (137, True, "rank 1: killed by signal 9 (exit code 137)"),
    (137, False, "rank 1: killed by signal 9 (exit code 137)"),
    (255, False, None),  # locally 255 is a plain exit code, not 128 + signal 127
    (1, True, None),
])
def test_a_lost_rank_reads_right(tmp_path, code, over_ssh, expected):
    run = make_run(tmp_path / "a", status="failed")
    mark_failed(run, "rank 0: RuntimeError: Horovod has been shut down")
    name_killed_rank(run, [line.format(code=code) for line in HOROVOD_TAIL], over_ssh=over_ssh)
    reason = read_json(run / "summary.json")["reason"]
    assert "signal 127" not in reason
    if expected is None:
        assert reason == "rank 0: RuntimeError: Horovod has been shut down" and lost_rank_reason(code, over_ssh) is None
    else:
        assert reason.startswith(expected) and reason.endswith("then: rank 0: RuntimeError: Horovod has been shut down")


# horovodrun's own lines (horovod/runner/gloo_run.py) on how the ranks of a job ended, and gloo's transport error
EXIT, TERMINATING = "Process {} exit with status code {}.", "Terminating remaining workers after failure of Process {}."
CLOSED = "[{}]<stderr>:[...] gloo/transport/tcp/pair.cc:598] Connection closed by peer [{}]:47498"
HOSTS = ["198.18.0.2", "198.18.0.3", "198.18.0.4"]


@pytest.mark.parametrize("lines, hosts, expected", [
    # rank 1 lost, and its ssh reported it before anything else ended
    ([CLOSED.format(0, HOSTS[1]), EXIT.format(1, 255), TERMINATING.format(1), EXIT.format(0, 1)], HOSTS,
     (1, "lost over ssh (ssh exit code 255", False)),
    # the race: rank 0's secondary error reached horovodrun first; rank 0 saw rank 1's connection close
    ([CLOSED.format(0, HOSTS[1]), EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 255)], HOSTS,
     (1, "lost over ssh (ssh exit code 255", True)),
    # two lost before horovodrun terminated anyone: the first to end is named
    ([EXIT.format(2, 137), EXIT.format(1, 255), TERMINATING.format(2), EXIT.format(0, 1)], HOSTS,
     (2, "killed by signal 9 (exit code 137)", False)),
    # rank 0 failed by itself; horovodrun then terminated rank 1's ssh (255 too): nobody was lost
    ([CLOSED.format(1, HOSTS[0]), EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 255)], HOSTS, None),
    # a closed connection to a host of two ranks names neither
    ([CLOSED.format(0, HOSTS[1]), EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 255), EXIT.format(2, 255)],
     [HOSTS[0], HOSTS[1], HOSTS[1]], None),
    # the race, and horovodrun ended the job before reporting rank 1's exit at all (seen in a fresh-clone run)
    ([CLOSED.format(0, HOSTS[1]), EXIT.format(0, 1), TERMINATING.format(0)], HOSTS,
     (1, "its connection closed first (rank 0 saw it close; horovodrun ended the job before", False)),
    # the race, and the exit horovodrun reported for rank 1 is its own SIGTERM of the stalled ssh client (143, seen
    # in CI): the connection closing names rank 1, the signal is not how it was lost
    ([CLOSED.format(0, HOSTS[1]), EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 143)], HOSTS,
     (1, "its connection closed first (rank 0 saw it close; its exit code 143 came after horovodrun began", False)),
    # ... and the same SIGTERM with no connection seen closing before it names nobody
    ([EXIT.format(0, 1), TERMINATING.format(0), CLOSED.format(0, HOSTS[1]), EXIT.format(1, 143)], HOSTS, None),
    # ... but a connection seen closing only after horovodrun began terminating is its doing: nobody is named,
    # though the peer that saw it (rank 2) has its exit reported
    ([EXIT.format(0, 1), TERMINATING.format(0), CLOSED.format(2, HOSTS[1]), EXIT.format(2, 1)], HOSTS, None),
])
def test_the_lost_rank_is_read_from_every_exit_horovodrun_reports(lines, hosts, expected):
    found = lost_rank(lines, over_ssh=True, hosts_by_rank=hosts)
    if expected is None:
        assert found is None, found
    else:
        rank, how, via_peer = expected
        assert found is not None and found[0] == rank and found[1].startswith(how), found
        assert found[1].endswith("saw its connection close first") == via_peer, found


def test_loaded_times_count_from_the_first_steps_start(tmp_path):
    """Whatever the job did between its common start and its first step (the broadcast of rank 0's clock) is not
    counted in a loaded `t`: the earliest first step starts at 0, and the ranks keep their offsets."""
    import json

    path = make_run(tmp_path / "a")
    later = {0: 0.73, 1: 0.75}  # every record of rank r this much later; rank 0's first step starts first
    for r, dt in later.items():
        recs = [json.loads(line) for line in (path / f"rank{r}.jsonl").read_text().splitlines()]
        (path / f"rank{r}.jsonl").write_text("".join(json.dumps({**rec, "t": rec["t"] + dt}) + "\n" for rec in recs))
    ev = json.loads((path / "eval.jsonl").read_text())
    (path / "eval.jsonl").write_text(json.dumps({**ev, "t": ev["t"] + 0.73}) + "\n")
    run = load_run(path)
    assert run.extra["t_origin_s"] == pytest.approx(0.1 + 0.73 - 0.01)  # rank 0's first step ended at 0.83, took 0.01
    assert (run.steps["t"] - run.steps["step_s"]).min() == pytest.approx(0.0)
    assert run.evals["t"].tolist() == pytest.approx([0.3 + 0.01 - 0.1])
    assert run.steps.loc[run.steps["rank"] == 1, "t"].tolist() == pytest.approx([0.03, 0.13, 0.23])


def test_a_rank_its_shell_saw_killed_first_is_named_though_a_peer_was_reported_first():
    """A local rank killed by SIGKILL: its shell prints "Killed" at once, but under load horovodrun may report the
    peer's secondary failure first (CI, test_killed_worker_fails_the_run_without_hanging); a "Killed" printed only
    after horovodrun began terminating is its own doing and names nobody."""
    killed = "[1]<stderr>:Killed"
    found = lost_rank([killed, EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 137)], over_ssh=False)
    assert found == (1, "killed by signal 9 (exit code 137)"), found
    assert lost_rank([EXIT.format(0, 1), TERMINATING.format(0), killed, EXIT.format(1, 137)], over_ssh=False) is None
    assert lost_rank([killed, EXIT.format(0, 1), TERMINATING.format(0), EXIT.format(1, 1)], over_ssh=False) is None
