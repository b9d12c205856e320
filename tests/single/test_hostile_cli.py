"""The fourth hostile-user sweep's cases on the newer command lines (issue 48, items 1-3), kept as a table in the shape
of test_hostile_inputs.py: ``python -m bench predict`` (its values and the model's own files), ``python -m bench.perf
...`` (every benchmark's options) and the one guard of every entry point (a closed or full stdout). Each refused case
ends with exit code 2, exactly one ``error: ...`` line on stderr holding the fragment, no traceback, nothing on stdout
and nothing written. Before issue 48 each row ran for minutes, printed a traceback or exited 0/1.

Each row: an id (``category/what``), a function of a scratch folder returning the command (the module and its
arguments) and the repository it runs in (the real one, or a copy whose model files a case damages), and the fragment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forked import run_module
from support import REPO

CALIBRATION = Path("docs/results/predict/calibration.json")
SUMMARY = Path("docs/results/predict/tables/validation_summary.csv")
BY_BAND = Path("docs/results/predict/tables/validation_by_band.csv")
TTT_ERRORS = Path("docs/results/predict/tables/validation_time_to_target.csv")
RELATION = Path("docs/results/regimes-speedup/tables/regimes.csv")
DGX1 = Path("pipelines/hardware/model/dgx1.yaml")


def predict(*args: str):
    return lambda t: (["bench", "predict", *args], REPO)


def cmd(*args: str):
    return lambda t: (["bench", *args], REPO)


def perf(*args: str):
    return lambda t: (["bench.perf", *args], REPO)


def repo_copy(t: Path) -> Path:
    """The parts of the repository a prediction reads (the package, params.yaml, pipelines/, the published model),
    copied under ``t`` so that a case may damage the model's files."""
    r = t / "repo"
    shutil.copytree(REPO / "bench", r / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "pipelines", r / "pipelines")
    shutil.copytree(REPO / "docs" / "results" / "predict", r / CALIBRATION.parent)
    for study in ("regimes-speedup",):  # the time-to-target relation's published runs (bench.predict.target)
        shutil.copytree(REPO / "docs" / "results" / study / "tables", r / "docs" / "results" / study / "tables")
    shutil.copy(REPO / "params.yaml", r / "params.yaml")
    return r


def damaged(path: Path, edit, *args: str):
    """``bench predict`` in a repository copy whose ``path`` was rewritten by ``edit(text) -> text``."""
    def case(t: Path):
        r = repo_copy(t)
        (r / path).write_text(edit((r / path).read_text()))
        return ["bench", "predict", *args], r
    return case


def calibration(edit):
    def rewrite(text: str) -> str:
        data = json.loads(text)
        edit(data)
        return json.dumps(data)
    return damaged(CALIBRATION, rewrite, "sync", "--np", "2", "--hardware", "emu")


def dgx1(old: str, new: str):
    def rewrite(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return damaged(DGX1, rewrite, "sync", "--np", "2", "--hardware", "dgx1")


def out_in(make_target):
    """``--forecast-study`` into ``--out`` = what ``make_target(t)`` returns (after making what it needs)."""
    return lambda t: (["bench", "predict", "--forecast-study", "seed", "--out", str(make_target(t))], REPO)


def a_file(t: Path) -> Path:
    (t / "afile").write_text("")
    return t / "afile"


def loop(t: Path) -> Path:
    os.symlink(t / "b", t / "a")
    os.symlink(t / "a", t / "b")
    return t / "a" / "x.csv"


def timeline(text: str):
    def case(t: Path):
        (t / "timeline.json").write_text(text)
        return ["bench.perf", "horovod_knobs", "--timeline", str(t / "timeline.json")], REPO
    return case


EMU = ("sync", "--hardware", "emu")
CASES = [
    # predict: values the model's work grows with
    ("predict/np a million", predict(*EMU, "--np", "1000000"), "--np must be integers in [1, 1024]"),
    ("predict/np 10**12", predict(*EMU, "--np", str(10**12)), "--np must be integers in [1, 1024]"),
    ("predict/np 2**63", predict(*EMU, "--np", str(2**63)), "--np must be integers in [1, 1024]"),
    ("predict/np 0", predict(*EMU, "--np", "0"), "--np must be integers in [1, 1024]"),
    ("predict/link of a nanobit", predict(*EMU, "--set", "link=0.000000001kbit"), "below the slowest link modelled, 100kbit"),
    ("predict/cpu_per_host tiny", predict(*EMU, "--set", "cpu_per_host=0.000000001"), "below the smallest CPU share modelled"),
    ("predict/emulated_cpu share tiny", predict(*EMU, "--np", "2", "--set", "emulated_cpu={1: 1e-12}"),
     "emulated_cpu[1] 1e-12 is below the smallest CPU share modelled"),
    ("predict/slow_factor 1e300", predict(*EMU, "--set", "slow_factor=1e300"), "slow_factor must be in [1, 1000]"),
    ("predict/step_jitter_s 1e300", predict(*EMU, "--set", "step_jitter_s=1e300"), "step_jitter_s must be in [0, 60]"),
    ("predict/negative link delay", predict(*EMU, "--set", "link_delay=-5ms"), "bad delay '-5ms'"),
    ("predict/unparseable link delay", predict(*EMU, "--set", "link_delay=soon"), "bad delay 'soon'"),
    # predict: a machine record (bench.predict.machines), refused before its calibration run
    ("predict/collectives without --measure-machine", predict("--collectives", "docs/results/collectives/cells.jsonl"),
     "--collectives goes with --measure-machine"),
    ("predict/collectives missing", predict("--measure-machine", "--collectives", "no/such.jsonl"),
     "--collectives 'no/such.jsonl': no such file"),
    ("predict/collectives not the benchmark's output", predict("--measure-machine", "--collectives", "README.md"),
     "--collectives 'README.md': not a `python -m bench.perf collectives --jsonl` output"),
    ("predict/machine-from unknown study", predict("--machine-from", "no-such-study"),
     "unknown study 'no-such-study'; valid (a published calibration run): "),
    ("predict/machine-from two machines", predict("--machine-from", "regimes,regimes-v1"),
     "a machine record needs one machine"),
    # predict: the model's own files
    ("files/hardware zero bandwidth", dgx1("busbw_GBps: ", "busbw_GBps: 0 #"), "levels[0].busbw_GBps is 0, not a finite number > 0"),
    ("files/hardware text bandwidth", dgx1("busbw_GBps: ", "busbw_GBps: fast #"), "levels[0].busbw_GBps is 'fast'"),
    ("files/hardware list latency", dgx1("latency_us: ", "latency_us: [1, 2] #"), "levels[0].latency_us is [1, 2]"),
    ("files/hardware unknown collectives", dgx1("collectives: nccl", "collectives: mpi"),
     "collectives is 'mpi'; valid: nccl, ring"),
    ("files/calibration truncated", damaged(CALIBRATION, lambda s: s[: len(s) // 2], *EMU), "calibration.json: corrupt JSON"),
    ("files/calibration without a key", calibration(lambda d: d.pop("hop_s")), "calibration.json: no key 'hop_s'"),
    ("files/calibration text constant", calibration(lambda d: d.update(c_full_s="slow")), "calibration.json: c_full_s is 'slow'"),
    ("files/validation summary truncated", damaged(SUMMARY, lambda s: s.splitlines()[0][:12] + "\n1,\"2", *EMU),
     "validation_summary.csv: "),
    ("files/validation summary without a column", damaged(SUMMARY, lambda s: s.replace("max_abs_error", "other"), *EMU),
     "validation_summary.csv: no column 'max_abs_error'"),
    ("files/errors by delay band without a column", damaged(BY_BAND, lambda s: s.replace("delay_band", "other"), *EMU),
     "validation_by_band.csv: no column 'delay_band'"),
    ("files/time-to-target errors garbled", damaged(TTT_ERRORS, lambda s: '"\n1,"2', *EMU), "validation_time_to_target.csv: "),
    ("files/time-to-target runs deleted", damaged(RELATION, lambda s: "", *EMU), "regimes.csv: "),
    ("files/time-to-target runs without a column", damaged(RELATION, lambda s: s.replace("censored", "other"), *EMU),
     "regimes.csv: no column 'censored'"),
    # predict: where it writes
    ("out/publish to an existing file", lambda t: (["bench", "predict", "--publish", str(a_file(t))], REPO),
     "is a file: give a folder"),
    ("out/forecast under /proc", out_in(lambda t: Path("/proc/forecast.csv")), "is under /proc"),
    ("out/forecast on a folder", out_in(lambda t: t), "is a folder: give a file name"),
    ("out/forecast inside a file", out_in(lambda t: a_file(t) / "x.csv"), "is a file, not a folder"),
    ("out/forecast through a symlink loop", out_in(loop), "cannot be resolved"),
    ("out/forecast name over 255 bytes", out_in(lambda t: t / ("x" * 300 + ".csv")), "longer than 255 bytes"),
    # perf: every benchmark's options, before anything runs
    ("perf/overhead np 0", perf("overhead", "--np", "0"), "--np must be in [1, 10000]"),
    ("perf/overhead unknown profile", perf("overhead", "--profile", "nosuch"), "unknown profile 'nosuch'"),
    ("perf/overhead empty profile", perf("overhead", "--profile", ""), "--profile '' has an empty name"),
    ("perf/overhead lr nan", perf("overhead", "--set", "lr=nan"), "'lr' 'nan': expected a number"),
    ("perf/overhead unknown hardware", perf("overhead", "--hardware", "nosuch"), "unknown hardware profile 'nosuch'"),
    ("perf/overhead unknown algorithm", perf("overhead", "--algorithms", "nosuch"), "--algorithms has 'nosuch'"),
    ("perf/allreduce unknown profile", perf("allreduce", "--profile", "nosuch"), "unknown profile 'nosuch'"),
    ("perf/gossip np 0", perf("gossip", "--np", "0"), "--np must be in [1, 10000]"),
    ("perf/repeats 0", perf("overhead", "--repeats", "0"), "--repeats must be in [1, 10000]"),
    ("perf/repeats -1", perf("harness", "--repeats", "-1"), "--repeats must be in [1, 10000]"),
    ("perf/link hosts abc", perf("link", "--hosts", "abc"), "--hosts must be host counts"),
    ("perf/ps sizes abc", perf("ps", "--sizes", "abc"), "--sizes must be tensor sizes"),
    ("perf/quiet-below nan", perf("overhead", "--quiet-below", "nan"), "--quiet-below must be a fraction"),
    ("perf/timeline missing", perf("horovod_knobs", "--timeline", "/nonexistent/timeline.json"), "not a file"),
    ("perf/timeline not JSON", timeline("not json at all"), "not a Horovod timeline"),
    ("perf/pipeline results missing", perf("pipeline", "--results", "/nonexistent/results"), "is not a folder"),
    ("perf/wakeup waits abc", perf("wakeup", "--waits-ms", "abc"), "--waits-ms 'abc': give at least two waits"),
    ("perf/wakeup one wait", perf("wakeup", "--waits-ms", "5"), "--waits-ms '5': give at least two waits"),
    ("perf/wakeup np 1", perf("wakeup", "--np", "1"), "--np must be in [2, 64]"),
    ("perf/wakeup emulated share 5", perf("wakeup", "--emulated", "5"), "--emulated must be a share of a core"),
    ("perf/wakeup json under /proc", perf("wakeup", "--json", "/proc/wakeup.json"), "is under /proc, not a place for results"),
    ("perf/overhead json on a folder", lambda t: (["bench.perf", "overhead", "--json", str(t)], REPO),
     "is a folder: give a file name"),
    ("perf/collectives jsonl inside a file", lambda t: (["bench.perf", "collectives", "--jsonl", str(a_file(t) / "x")],
                                                       REPO), "is a file, not a folder"),
    ("perf/unknown benchmark", perf("nosuch"), "unknown benchmark 'nosuch'"),
    ("predict/loop takes no argument", lambda t: (["bench.predict.loop", "--np", "5"], REPO),
     "unrecognized arguments: --np 5"),
    # probe and advise (issue 46): refused before a cluster is touched or a forecast runs
    ("probe/unknown hardware", cmd("probe", "--hardware", "nosuch"), "unknown hardware 'nosuch'; valid: "),
    ("probe/np 1", cmd("probe", "--hardware", "emu", "--np", "1"), "--np must be in [2, 64]"),
    ("probe/steps 0", cmd("probe", "--hardware", "emu", "--steps", "0"), "--steps must be in [5, 10000]"),
    ("probe/stream-s nan", cmd("probe", "--hardware", "emu", "--stream-s", "nan"), "--stream-s must be in [0.2, 60]"),
    ("probe/negative delay", cmd("probe", "--hardware", "emu", "--set", "link_delay=-5ms"), "bad link_delay '-5ms'"),
    ("probe/unknown profile", cmd("probe", "--hardware", "emu", "--profile", "nosuch"), "unknown profile 'nosuch'"),
    ("probe/out under /proc", cmd("probe", "--hardware", "emu", "--out", "/proc/x.yaml"), "is under /proc"),
    ("advise/unknown hardware", cmd("advise", "--hardware", "nosuch"), "unknown hardware 'nosuch'; valid: "),
    ("advise/np 0", cmd("advise", "--hardware", "emu", "--np", "0"), "--np must be in [1, 1024]"),
    ("advise/confirm -1", cmd("advise", "--hardware", "emu", "--confirm", "-1"), "--confirm must be in [0, 21]"),
    ("advise/confirm past the algorithms", cmd("advise", "--hardware", "emu", "--algorithms", "sync,sgp", "--confirm",
                                               "3"), "--confirm must be in [0, 2]"),
    ("advise/repeats 1", cmd("advise", "--hardware", "emu", "--confirm", "1", "--repeats", "1"), "--repeats must be in [2, 20]"),
    ("advise/target of no relation", cmd("advise", "--hardware", "emu", "--target", "0.9"),
     "measured at accuracy 0.85 only"),
    ("advise/unknown algorithm", cmd("advise", "--hardware", "emu", "--algorithms", "sync,nosuch"), "nosuch"),
    ("advise/map-np abc", cmd("advise", "--hardware", "emu", "--map-np", "abc"), "--map-np must be worker counts"),
    ("advise/profile without a workload", cmd("advise", "--hardware", "dgx1", "--profile", "regimes", "--algorithms",
                                              "sync,sgp"), "has no compute time for lenet@32"),
    ("advise/out is a file", lambda t: (["bench", "advise", "--hardware", "emu", "--out", str(a_file(t))], REPO),
     "is a file: give a folder"),
    # the advise-validation studies' runner
    ("advise-validation/unknown study",
     lambda t: (["bench.advise.validate", "report", "--study", "advise-validation-3"], REPO),
     "unknown study 'advise-validation-3'; valid: advise-validation, advise-validation-2"),
    ("advise-validation/until 25:00",
     lambda t: (["bench.advise.validate", "run", "--study", "advise-validation-2", "--until", "25:00"], REPO),
     "bad --until '25:00': give a UTC time HH:MM"),
    # the guard: usage errors of every entry point in one line
    ("cli/perf usage error", perf("overhead", "--np", "abc"), "argument --np: invalid int value: 'abc'"),
    ("cli/cluster usage error", lambda t: (["bench.cluster", "explode"], REPO), "invalid choice: 'explode'"),
]


def run(module_args: list[str], repo: Path) -> subprocess.CompletedProcess:
    return run_module(module_args[0], module_args[1:], repo, dict(os.environ, PYTHONPATH=str(repo), BENCH_PROGRESS="0"),
                      timeout=300)


@pytest.mark.parametrize("case_id, make, fragment", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_with_nothing_written(tmp_path, case_id, make, fragment):
    args, repo = make(tmp_path)
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    watched = REPO / "docs" / "results" / "predict"
    stamp = {p: p.stat().st_mtime_ns for p in watched.rglob("*")}
    proc = run(args, repo)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) < 1000, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert fragment in lines[0], lines[0]
    assert proc.stdout == ""
    assert {p.relative_to(tmp_path) for p in tmp_path.rglob("*")} == before, "a file written"
    assert {p: p.stat().st_mtime_ns for p in watched.rglob("*")} == stamp, "the published model rewritten"


@pytest.mark.parametrize("args", [["bench", "list"], ["bench", "predict", "sync", "--np", "1,2", "--hardware", "dgx1"],
                                  ["bench", "--help"]], ids=["list", "predict", "help"])
def test_a_closed_stdout_ends_quietly(args):
    """``... | head -1``: the reader goes away; no traceback, no "Exception ignored" line, SIGPIPE's code or 0."""
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(REPO), BENCH_PROGRESS="0"))
    proc.stdout.close()  # closed before the command writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, 141), err
    assert err == "", err


def test_a_full_stdout_is_one_line():
    """``bench list > /dev/full``: one line naming the failure, a non-zero code, no traceback."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "bench", "list"], cwd=REPO, stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == ["error: cannot write the output: No space left on device"], proc.stderr
