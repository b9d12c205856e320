"""The second hostile-user sweep's inputs, kept as a table (issue 40, items 2, 6 and 7): each case is what a hostile or
careless user types, and each must end with exit code 2, exactly one line on stderr naming the value, nothing
written under the output folder and nothing left running. The next sweep starts from here: add a row.

Each row: an id (``category/what``), a function of a scratch folder that writes what the case needs and returns the
command line (``python -m bench ...`` arguments) and the environment, and a fragment the one line must hold. Before
issue 40 every row but a few ran a job (or printed a traceback, or printed ``nan`` with exit 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.system import horovod_build
from hostile_support import MARKER, RUN, a_run, check_refused, params_copy, records, te  # noqa: F401 (cases)


def with_params(extra: str = "", replace=None):
    return lambda t: (RUN + ["--out", str(t / "out"), "--params", str(params_copy(t, extra, replace))], {})


def run_with(*args: str):
    return lambda t: (RUN + ["--out", str(t / "out"), *args], {})


def lm_with(*args: str):
    return lambda t: (RUN + ["--profile", "tiny-lm", "--out", str(t / "out"), *args], {})


def alias_bomb(levels: int = 9) -> str:
    lines = ["bomb0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"bomb{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def study(body: str):
    """``study plan`` of a study file with ``body`` (beside a params.yaml copy)."""
    def case(t: Path):
        params = params_copy(t)
        (params.parent / "pipelines" / "studies" / "hostile.yaml").write_text("description: the sweep's study\n" + body)
        return ["study", "plan", "--study", "hostile"], {"BENCH_PARAMS": str(params)}
    return case


def hostfile_profile(t: Path):
    params = params_copy(t)
    (t / "hosts.txt").write_text(f"localhost;touch {t / 'injected'} slots=2\n")
    (params.parent / "pipelines" / "hardware" / "hostile.yaml").write_text(f"hostfile: {t / 'hosts.txt'}\n")
    return RUN + ["--out", str(t / "out"), "--params", str(params), "--hardware", "hostile"], {}


def publish_corrupt(t: Path):
    params = params_copy(t)
    root = params.parent / "results" / "hostile"
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "speedup.csv").write_text("a,b\n1,2\n")
    a_run(root / "runs" / "sync" / "local", records(lambda r: r.update(t="soon")))
    (params.parent / "pipelines" / "studies" / "hostile.yaml").write_text("description: the sweep's study\n")
    return ["study", "publish", "--study", "hostile", "--to", str(t / "out")], {"BENCH_PARAMS": str(params)}


def publish_to_file(t: Path):
    (t / "afile").write_text("")
    return ["study", "publish", "--study", "laptop", "--to", str(t / "afile")], {}


def out_is_a_file(t: Path):
    (t / "afile").write_text("")
    return ["run", "sync", "--np", "1", "--profile", "tiny", "--out", str(t / "afile")], {}


def out_symlink_loop(t: Path):
    (t / "loop").symlink_to(t / "loop")
    return RUN + ["--out", str(t / "loop" / "run")], {}


def out_in_git(t: Path):
    (t / "repo" / ".git").mkdir(parents=True)
    return RUN + ["--out", str(t / "repo" / ".git" / "run")], {}


def force_beside_own_files(t: Path):
    """A folder holding a config.json of this suite beside the user's own file: --force must not delete that."""
    (t / "mine").mkdir()
    (t / "mine" / "config.json").write_text('{"schema_version": 1}')
    (t / "mine" / "thesis.tex").write_text("two years of work\n")
    return RUN + ["--force", "--out", str(t / "mine")], {}


CASES = [
    # names: an empty name never means the default
    ("names/empty profile", lambda t: (["run", "sync", "--np", "1", "--quiet", "--profile", "", "--out", str(t / "out")], {}), "--profile is empty"),
    ("names/empty hardware", run_with("--hardware", ""), "--hardware is empty"),
    ("names/empty out", lambda t: (RUN + ["--out", ""], {}), "--out is empty"),
    ("names/empty params", lambda t: (RUN + ["--out", str(t / "out"), "--params", ""], {}), "--params is empty"),
    ("names/empty study", lambda t: (["study", "plan", "--study", ""], {}), "--study is empty"),
    # numbers that passed validation and failed on the ranks, or were never checked
    ("values/negative seed", run_with("--set", "seed=-1"), "seed must be in [0, 9223372036854775807]"),
    ("values/huge seed", run_with("--set", "seed=99999999999999999999"), "seed must be in"),
    ("values/negative split seed", run_with("--set", "split_seed=-3"), "split_seed must be in"),
    ("values/negative ssh port", run_with("--set", "ssh_port=-1"), "ssh_port must be in [0, 65535]"),
    ("values/ssh port past 65535", run_with("--set", "ssh_port=70000"), "ssh_port must be in [0, 65535]"),
    ("values/batch larger than a shard", run_with("--set", "batch_size=100000000"), "larger than a worker's shard"),
    ("values/model too large for memory", run_with("--set", "hidden=[10000000000]"), "do not fit this machine's"),
    ("values/dataset too large for memory", run_with("--set", "dataset=synthetic", "--set", "synthetic_samples=100000000000"),
     "do not fit this machine's"),
    ("values/study target accuracy above 1", study("target_accuracy: 2.5\n"), "target_accuracy must be a held-out accuracy in (0, 1]"),
    ("values/study budget 0", study("budget_s: 0\n"), "budget_s must be > 0"),
    ("values/study target window 0", study("target_window: 0\n"), "target_window must be a whole number of evaluations >= 1"),
    ("values/reread window 0", lambda t: (["study", "reread", "--study", "regimes", "--target-window", "0"], {}),
     "--target-window must be a whole number of evaluations >= 1, got 0"),
    # what the build or this machine lacks
    ("build/controller not built", run_with("--set", "controller=mpi"), "controller 'mpi' is not built into this Horovod"),
    ("build/p2p backend not built", run_with("--set", "p2p_backend=nccl"), "p2p_backend 'nccl' needs torch.distributed built with NCCL"),
    ("build/device missing", run_with("--set", "device=cuda"), "device 'cuda' needs"),
    ("build/model needs torchvision", run_with("--set", "model=resnet18", "--set", "dataset=synthetic", "--set", "synthetic_shape=[3,32,32]"),
     "needs torchvision"),
    # configuration that would reach a shell
    ("shell/env name with a command", run_with("--set", f"env={{'A;touch {MARKER};B': x}}"), "is not an environment variable's name"),
    ("shell/env value with a newline", run_with("--set", f'env={{A: "x\\nrm -rf {MARKER}"}}'), "a value must be printable ASCII"),
    ("shell/hosts with a command", run_with("--set", f"hosts=localhost;touch {MARKER}:1"), "is not host[:slots]"),
    ("shell/interface with a command", run_with("--set", f"network_interface=lo;touch {MARKER}"), "is not an interface name"),
    ("shell/hostfile with a command", hostfile_profile, "is not 'HOST slots=N'"),
    # YAML
    ("yaml/duplicate key", with_params("\nprofile: tiny\n"), "duplicate key 'profile' (first given on line"),
    ("yaml/unknown top-level key", with_params("\nprofiels: {}\n"), "unknown top-level key 'profiels'"),
    ("yaml/deep nesting", with_params("\nx: " + "[" * 5000 + "]" * 5000 + "\n"), "nested deeper than 64 levels"),
    ("yaml/alias bomb", with_params(replace=("profiles:\n", alias_bomb() + "profiles:\n")), "once its aliases are expanded"),
    ("yaml/file over 1 MiB", with_params("\n# " + "x" * (1 << 20) + "\n"), "larger than 1024 KiB of YAML"),
    ("yaml/--set nested deep", run_with("--set", "hidden=" + "[" * 100 + "]" * 100), "nested deeper than 64 levels"),
    ("yaml/--set value shown short", run_with("--set", "lr=[" + ",".join(["1"] * 5000) + "]"), "expected a number"),
    # readers of result files
    ("readers/te record without accuracy", te(records(lambda r: r.pop("accuracy"))), "rank0.jsonl:1: record without 'accuracy'"),
    ("readers/te null accuracy", te(records(lambda r: r.update(accuracy=None))), "rank0.jsonl:1: record without 'accuracy'"),
    ("readers/te non-numeric step", te(records(lambda r: r.update(step="x"))), "rank0.jsonl:1: record's 'step' is 'x'"),
    ("readers/te config without launch", te(lambda d: (d / "config.json").write_text('{"schema_version": 1, "algorithm": "sync"}')),
     "config.json: not a run's configuration"),
    ("readers/te JSON nested deep", te(lambda d: (d / "summary.json").write_text("[" * 100000 + "]" * 100000)),
     "summary.json:1: corrupt JSON (nested too deep"),
    ("readers/te odd status", te(lambda d: (d / "summary.json").write_text('{"status": {"x": 1}}')), "is not ok or failed"),
    ("readers/te stride of a picosecond", te(None, "--stride", "1e-12"), "windows over the"),
    ("readers/publish a corrupt run", publish_corrupt, "record's 't' is 'soon'"),
    # the third sweep (issue 40's tally, run anew against main): what it found not clean
    ("readers/te infinite time", te(records(lambda r: r.update(t=float("inf")))), "rank0.jsonl:1: record's 't' is inf, not a finite number"),
    ("readers/publish to a file", publish_to_file, "is a file: give a folder"),
    ("values/threads beyond any node", run_with("--set", "threads=100000"), "threads must be in [1, 256]"),
    ("yaml/settings of no algorithm", with_params(replace=("\nalgorithms:\n", "\nalgorithms:\n  nosuchalgo: {}\n")),
     "algorithms has 'nosuchalgo', which is no algorithm; valid: "),
    ("cli/a bad value, not the usage block", lambda t: (["run", "sync", "--np", "abc", "--out", str(t / "out")], {}),
     "argument --np: invalid int value: 'abc'"),
    ("cli/no algorithm", lambda t: (["run"], {}), "the following arguments are required: algorithm"),
    ("cli/unknown study action", lambda t: (["study", "explode"], {}), "invalid choice: 'explode' (choose from"),
    ("files/out is a file, refused before a word more", out_is_a_file, "is a file, not a directory"),
    # the third sweep's minor leftovers
    ("names/tag too long for a folder", run_with("--tag", "a" * 300), "(300 characters): a tag name has at most 128"),
    ("values/np given twice", run_with("--set", "np=0"), "np given twice: --np 1 and --set np=0; give one of them"),
    # the fourth sweep (issue 48): values of the run path that made no sense
    ("values/np a bool", run_with("--set", "np=true"), "invalid launch setting 'np' True: expected an integer"),
    ("values/fusion threshold 2**64", run_with("--set", f"horovod.fusion_threshold_bytes={2 ** 64}"),
     "horovod.fusion_threshold_bytes must be in [0, 4294967296]"),
    ("values/weight decay 1e308", run_with("--set", "weight_decay=1e308"), "weight_decay must be in [0, 1]"),
    ("values/momentum 1.5", run_with("--set", "momentum=1.5"), "momentum must be in [0, 1)"),
    ("values/LM classes below its vocabulary", lm_with("--set", "num_classes=10"),
     "num_classes 10: dataset 'pydoc_topics' has 256 classes"),
    ("values/LM width 2**40", lm_with("--set", f"width={2 ** 40}"), "transformer width must be in [1, 65536]"),
    ("values/LM layers 10**6", lm_with("--set", f"layers={10 ** 6}"), "layers in [1, 1024]"),
    ("yaml/leading zero is decimal, not octal", run_with("--set", "threads=0300"),  # YAML 1.1: 192, launched
     "threads must be in [1, 256] (torch threads a worker), got 300"),
    ("files/out a symlink loop", out_symlink_loop, "cannot be resolved: Symlink loop from"),
    ("files/out a name over 255 bytes", run_with("--tag", "x", "--out", "/tmp/" + "a" * 300), "is 300 bytes; a file name has at most 255"),
    ("files/out inside .git", out_in_git, "lies inside a .git folder"),
    ("files/force beside the user's own files", force_beside_own_files, "holds 'thesis.tex', which no run writes"),
    ("env/rank identity in a profile's env", run_with("--set", "env={HOROVOD_RANK: '5'}"),
     "env HOROVOD_RANK: a rank's identity is the launcher's to give"),
]


def unsupported(case_id: str) -> str | None:
    """Why a build/ case cannot be tried here (this machine has what it asks for)."""
    available = horovod_build().get("available") or {}
    if case_id == "build/controller not built" and available.get("MPI"):
        return "this Horovod has MPI"
    if case_id == "build/p2p backend not built" and torch.distributed.is_nccl_available():
        return "this torch has NCCL"
    if case_id == "build/device missing" and torch.cuda.is_available():
        return "this machine has a GPU"
    if case_id == "build/model needs torchvision":
        try:
            import torchvision  # noqa: F401
            return "torchvision imports here"
        except Exception:
            return None
    return None


@pytest.mark.parametrize("case_id, make, fragment", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_with_nothing_written_or_left(tmp_path, case_id, make, fragment):
    if unsupported(case_id):
        pytest.skip(unsupported(case_id))
    check_refused(tmp_path, make, fragment)
