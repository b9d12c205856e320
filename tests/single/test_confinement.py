"""Bad input to ``python -m bench run``: one ``error:`` line, exit 2, nothing written outside what the suite owns.

Run in-process (``bench.__main__.main``): plain names for study, tag and hardware (a run directory never lands
outside its study's folder), ``--force`` only on an unheld run directory, non-finite numbers, keys named as
the user gave them, malformed params.yaml and ``--out`` at a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import BenchError
from bench.__main__ import main
from bench.launch.lock import LOCK_NAME
from bench.layout import StudyLayout, check_name
from support import REPO


def cli(capsys, *args: str) -> tuple[int, str]:
    """``python -m bench ARGS`` in this process: (exit code, the one stderr line, which must be an error line)."""
    rc = main(list(args))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return rc, lines[0]


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (hidden ones too) with its content."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- names and confinement (case 3)


@pytest.mark.parametrize("args, bad", [
    (["--study", "../../etc"], "'../../etc'"),
    (["--study", "/tmp/distbench-abs-study"], "'/tmp/distbench-abs-study'"),
    (["--study", ".hidden"], "'.hidden'"),
    (["--tag", "a/../../b"], "'a/../../b'"),
    (["--set", "hardware=../../../../../x"], "'../../../../../x'"),
    (["--hardware", "../emu"], "'../emu'"),
])
def test_study_tag_and_hardware_must_be_plain_names(capsys, args, bad):
    before = tree(REPO / "results") if (REPO / "results").is_dir() else {}
    rc, line = cli(capsys, "run", "sync", "--profile", "tiny", "--prepare-only", *args)
    assert rc == 2 and bad in line and "plain name" in line, line
    assert not Path("/tmp/distbench-abs-study").exists() and not (REPO.parent / "etc").exists()
    assert not Path("/x").exists() and (tree(REPO / "results") if (REPO / "results").is_dir() else {}) == before


def test_layout_refuses_names_that_are_not_plain(tmp_path):
    with pytest.raises(BenchError, match=r"invalid study name '\.\./x'"):
        StudyLayout("../x", tmp_path)
    layout = StudyLayout("s", tmp_path)
    with pytest.raises(BenchError, match="invalid tag name 'a/b'"):
        layout.run_dir("sync", "local", 2, "a/b")
    with pytest.raises(BenchError, match="invalid hardware name '..'"):
        layout.plan_file("sync", "..", 2)
    assert layout.run_dir("sync", "emu-1gbit", 2, "lr0.1-r0") == tmp_path / "s/runs/sync/emu-1gbit/sync-np2-lr0.1-r0"
    assert check_name("tag", "", empty_ok=True) == "" and not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- --force and --out (cases 2, 7)


def test_force_replaces_only_a_run_directory(capsys, tmp_path):
    x = tmp_path / "x"
    (x / "sub").mkdir(parents=True)
    (x / "sub" / "f").write_text("precious")
    for force in ([], ["--force"]):
        rc, line = cli(capsys, "run", "sync", "--profile", "tiny", "--out", str(x), "--prepare-only", *force)
        assert rc == 2 and str(x) in line, line
        assert ("replaces only a run directory" if force else "already exists") in line, line
        assert tree(x) == {"sub/f": b"precious"}  # nothing removed, nothing added (not even the lock file)
    run = tmp_path / "run"  # a run directory of the suite's is replaced by --force, and its lock is gone after
    assert main(["run", "sync", "--profile", "tiny", "--out", str(run), "--prepare-only"]) == 0
    (run / "rank0.jsonl").write_text("{}\n")
    assert main(["run", "sync", "--profile", "tiny", "--out", str(run), "--prepare-only", "--force"]) == 0
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "system.json"] and not (run / LOCK_NAME).exists()
    capsys.readouterr()


def test_out_at_a_file_is_one_line(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f, f / "below"):
        rc, line = cli(capsys, "run", "sync", "--profile", "tiny", "--out", str(out), "--prepare-only")
        assert rc == 2 and str(f) in line, line
    assert f.read_text() == "x"


# ----------------------------------------------------------------------------- non-finite numbers, keys (cases 5, 6)


@pytest.mark.parametrize("setting", ["lr=.nan", "momentum=.inf", "slow_factor=.nan", "timeout_s=-.inf",
                                     "step_jitter_s=.nan", "horovod.cycle_time_ms=.nan"])
def test_non_finite_numbers_are_refused_naming_the_key(capsys, tmp_path, setting):
    key = setting.split("=")[0].split(".")[-1]
    out = tmp_path / "run"
    rc, line = cli(capsys, "run", "sync", "--profile", "tiny", "--set", setting, "--out", str(out), "--prepare-only")
    assert rc == 2 and f"'{key}'" in line and "finite" in line, line
    assert not out.exists()


def test_emulated_cpu_is_checked_before_anything_is_written_naming_the_key(capsys, tmp_path):
    out = tmp_path / "run"
    rc, line = cli(capsys, "run", "sync", "--np", "2", "--profile", "tiny", "--set", "emulated_hosts=2",
                   "--set", "emulated_cpu={9: 0.5}", "--out", str(out), "--prepare-only")
    assert rc == 2 and "emulated_cpu" in line and "9" in line and "--cpu" not in line, line
    assert not out.exists()


# ----------------------------------------------------------------------------- malformed params.yaml (case 7)


@pytest.mark.parametrize("content, fragment", [
    (b"profiles: [\n  tiny: {}\n", "YAML syntax error"),
    (b"profiles:\n\ttiny: {}\n", "YAML syntax error"),
    (b"profile: tiny\nprofiles: {tiny: {lr: 0.1}}\n# \xff\xfe\n", "not UTF-8"),
    (b"profiles: [tiny, laptop]\n", "profiles must be a mapping"),
    (b"profiles: {tiny: [1, 2]}\n", "profile 'tiny' must be a mapping"),
    (b"- 1\n- 2\n", "expected a mapping at the top level"),
])
def test_malformed_params_yaml_is_one_line(capsys, tmp_path, content, fragment):
    params = tmp_path / "params.yaml"
    params.write_bytes(content)
    out = tmp_path / "run"
    rc, line = cli(capsys, "run", "sync", "--profile", "tiny", "--params", str(params), "--out", str(out))
    assert rc == 2 and str(params) in line and fragment in line, line
    assert not out.exists()
