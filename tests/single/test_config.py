"""Configuration strictness and CLI errors (one process, nothing launched)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from bench import BenchError
from bench.algorithms import get_algorithm, names
from bench.config import LaunchConfig, TrainConfig
from bench.resolve import parse_set, resolve
from bench.runconfig import config_from_dict
from bench.typed import field_types
from support import bench_cli


def test_defaults_resolve_from_params_yaml():
    cfg = resolve("sync", np=2, profile="laptop")
    assert cfg.train.dataset == "mnist5k" and cfg.launch.np == 2 and cfg.launch.hardware == "local"
    assert config_from_dict(cfg.to_dict()) == cfg  # config.json round-trip
    assert dataclasses.is_dataclass(cfg.params) and isinstance(cfg.params, get_algorithm("sync").Params)


@pytest.mark.parametrize("overrides, fragment", [
    ({"lr": -0.1}, "lr must be >= 0"),
    ({"lr": "fast"}, "expected a number"),
    ({"batch_size": 2.5}, "expected an integer"),
    ({"nesterov": "True"}, "expected true or false"),
    ({"optimizer": "rmsprop"}, "valid choices: adam, sgd"),
    ({"dataset": "imagenet21k"}, "valid choices: cifar10, digits, imagefolder, mnist, mnist5k, pydoc_topics, synthetic"),
    ({"model": "vgg"}, "valid choices:"),
    ({"no_such_key": 1}, "unknown --set key 'no_such_key'"),
    ({"nesterov": True}, "nesterov needs momentum > 0"),
])
def test_bad_values_are_named_with_valid_choices(overrides, fragment):
    with pytest.raises(BenchError, match=None) as e:
        resolve("sync", np=1, profile="laptop", overrides=overrides)
    assert fragment in str(e.value)


def test_unknown_algorithm_profile_and_hardware():
    with pytest.raises(BenchError, match="unknown algorithm 'nope'; valid: .*sync"):
        resolve("nope")
    with pytest.raises(BenchError, match="unknown profile 'huge'; valid: .*laptop"):
        resolve("sync", profile="huge")
    with pytest.raises(BenchError, match="unknown hardware profile 'moon'; valid: .*local"):
        resolve("sync", hardware="moon")
    with pytest.raises(BenchError, match="--np must be >= 1, got 0"):
        resolve("sync", np=0)


def test_every_setting_name_belongs_to_one_section():
    """A bare --set key names one field of exactly one of train, launch or the algorithm's Params."""
    train, launch = set(field_types(TrainConfig)), set(field_types(LaunchConfig))
    assert not train & launch
    for name in names():
        params = set(field_types(get_algorithm(name).Params))
        assert not params & (train | launch), (name, params & (train | launch))


def test_hyperparameters_are_typed_and_reach_the_algorithm():
    cfg = resolve("eamsgd", np=2, overrides={"nesterov_momentum": 0.5, "momentum": 0.0})
    assert cfg.params.nesterov_momentum == 0.5 and cfg.train.momentum == 0.0
    assert cfg.params.communication_window == 4  # params.yaml's algorithms: section
    with pytest.raises(BenchError, match="invalid delayed parameter 'delay' 1.5: expected an integer"):
        resolve("delayed", overrides={"delay": 1.5})


def test_hardware_profile_with_unknown_key_is_refused(tmp_path):
    (tmp_path / "pipelines" / "hardware").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text("profiles: {laptop: {}}\n")
    (tmp_path / "pipelines" / "hardware" / "odd.yaml").write_text("description: x\nenvv: {A: b}\n")
    (tmp_path / "pipelines" / "hardware" / "ok.yaml").write_text("description: x\nenv: {HOROVOD_CYCLE_TIME: '0.5'}\n")
    with pytest.raises(BenchError, match="odd.yaml: unknown key 'envv'; valid: .*env"):
        resolve("sync", hardware="odd", params_file=tmp_path / "params.yaml")
    cfg = resolve("sync", hardware="ok", params_file=tmp_path / "params.yaml")
    assert cfg.launch.env == {"HOROVOD_CYCLE_TIME": "0.5"} and cfg.launch.hardware == "ok"


def test_parse_set_reads_yaml_scalars():
    assert parse_set(["lr=0.1", "hidden=[8, 4]", "nesterov=true", "dataset=digits"]) == {
        "lr": 0.1, "hidden": [8, 4], "nesterov": True, "dataset": "digits"}
    with pytest.raises(BenchError, match="key=value"):
        parse_set(["lr"])


def test_yaml_integers_are_read_as_yaml_1_2_reads_them():
    """A leading zero is decimal (YAML 1.1 read epochs=010 as 8, seed=0777 as 511); octal only as 0o, hex as 0x;
    YAML 1.1's sexagesimal, binary and underscored integers stay text (a numeric setting then refuses them)."""
    from bench.yamlfile import load_text

    assert parse_set(["epochs=010", "seed=0777", "threads=-0", "batch_size=0o17", "max_steps=0x1F"]) == {
        "epochs": 10, "seed": 777, "threads": 0, "batch_size": 15, "max_steps": 31}
    assert load_text("[1:20, 0b11, 1_000, 1.5, 5e-2]", "x") == ["1:20", "0b11", "1_000", 1.5, "5e-2"]
    with pytest.raises(BenchError, match="expected an integer"):
        resolve("sync", profile="tiny", overrides=parse_set(["epochs=1_000"]), check=False)



def test_a_yaml_file_read_again_is_its_current_text_and_a_caller_cannot_change_what_others_read(tmp_path):
    """read_mapping keeps parsed files (bench predict reads params.yaml some 800 times): a file rewritten between two
    reads is read anew, a refusal is refused again, and changing a returned mapping changes nothing for the next."""
    from bench.yamlfile import read_mapping

    f = tmp_path / "p.yaml"
    f.write_text("a: {b: 1}\n")
    first = read_mapping(f)
    first["a"]["b"] = 99
    assert read_mapping(f) == {"a": {"b": 1}}
    f.write_text("a: {b: 2}\n")
    assert read_mapping(f) == {"a": {"b": 2}}
    f.write_text("a: 1\na: 2\n")
    for _ in range(2):
        with pytest.raises(BenchError, match="p.yaml:2"):
            read_mapping(f)
    f.write_text("a: {b: 2}\n")
    assert read_mapping(f) == {"a": {"b": 2}}

def test_config_json_rejects_unknown_keys():
    d = resolve("sync").to_dict()
    d["train"]["learning_rate"] = 0.1
    with pytest.raises(BenchError, match="unknown train setting 'learning_rate'"):
        config_from_dict(d)


@pytest.mark.parametrize("args, fragment", [
    (["run", "nope", "--np", "2"], "unknown algorithm 'nope'"),
    (["run", "sync", "--np", "0"], "--np must be >= 1"),
    (["run", "sync", "--profile", "huge"], "unknown profile 'huge'"),
    (["run", "sync", "--set", "lr=-1"], "lr must be >= 0"),
    (["run", "sync", "--set", "lr=abc"], "'abc'"),
    (["run", "sync", "--set", "bogus=1"], "unknown --set key 'bogus'"),
])
def test_cli_errors_exit_2_and_write_nothing(tmp_path, args, fragment):
    out = tmp_path / "run"
    proc = bench_cli(*args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert not out.exists()


def test_existing_run_directory_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "ok"}')
    proc = bench_cli("run", "sync", "--np", "1", "--out", str(out))
    assert proc.returncode == 2 and "already exists" in proc.stderr and "--force" in proc.stderr
    assert (out / "summary.json").read_text() == '{"status": "ok"}'


def test_list_names_every_algorithm_with_its_paper():
    proc = bench_cli("list")
    assert proc.returncode == 0
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(names())
    for name, line in zip(names(), lines):
        assert line.split()[0] == name and get_algorithm(name).paper in line


# What a rank runs on its config.json (bench.runconfig.load_config) checks values only: an emulated-cluster run's
# config loads where the launcher's machine check (root, namespaces, this machine's cores) refuses it.
RANK_LOADS = """
import json, pathlib, sys, tempfile
from bench import BenchError
from bench.resolve import check_machine
from bench.runconfig import load_config
path = pathlib.Path(tempfile.mkdtemp()) / "config.json"
path.write_text(sys.stdin.read())
cfg = load_config(path)
print("loaded", cfg.launch.hardware, cfg.launch.emulated_hosts, cfg.launch.network_interface)
try:
    check_machine(cfg)
except BenchError as e:
    print("machine check:", e)
"""


def emulated_config(**launch) -> dict:
    from bench.resolve import load_hardware

    d = resolve("sync", np=2, profile="tiny").to_dict()
    d["launch"] = {**load_hardware("emu"), "np": 2, **launch}
    return d


def test_a_rank_loads_an_emulated_config_that_the_machine_check_refuses_as_non_root():
    import json
    import os
    import subprocess
    import sys

    from support import REPO

    cmd = [sys.executable, "-c", RANK_LOADS]
    if os.geteuid() == 0:  # as root here: the same check as a user who is not (the emulated cluster needs root)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME="/tmp", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(cmd, input=json.dumps(emulated_config()), capture_output=True, text=True, env=env,
                          cwd="/", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "loaded emu 4 dbemu0" in proc.stdout  # typed, its values checked (the interface set to the cluster's)
    assert "machine check: the emulated cluster needs root" in proc.stdout  # what load_config did not run


def test_the_launcher_refuses_a_loaded_config_its_machine_cannot_run_before_writing_anything(tmp_path):
    from bench.launch import run_many
    from bench.resolve import check_machine
    from bench.runconfig import load_config
    from bench.results import write_json_atomic

    cores = os.cpu_count() or 1
    path = tmp_path / "plan" / "config.json"
    write_json_atomic(path, emulated_config(emulated_cpu={0: float(cores + 1)}))
    cfg = load_config(path)  # a share of more cores than this machine has: a value only this machine refuses
    assert cfg.launch.emulated_cpu == {0: float(cores + 1)}
    with pytest.raises(BenchError, match=rf"emulated_cpu share of host 0 must be in \(0, {cores}\] cores"):
        check_machine(cfg)
    out = tmp_path / "runs" / "sync-np2"
    with pytest.raises(BenchError, match="emulated_cpu share of host 0"):
        run_many([(cfg, out, path)], echo=False, progress=None)
    assert not out.exists() and not (tmp_path / "runs").exists()  # refused before anything was written
    with pytest.raises(BenchError, match="emulated_cpu share of host 0"):  # and where it is resolved
        config_from_dict(emulated_config(emulated_cpu={0: -1.0}))


def test_a_number_in_exponent_notation_without_a_dot_is_a_number():
    """``--set lr=5e-2``: YAML 1.1 (PyYAML) reads 5e-2 as a string; the suite takes it as the number it is (it refused
    it, "expected a number", until the third hostile sweep), and still refuses what is no number or no finite one."""
    cfg = resolve("sync", np=1, profile="tiny", overrides=parse_set(["lr=5e-2", "timeout_s=1e3", "step_jitter_s=1E-4"]))
    assert (cfg.train.lr, cfg.train.timeout_s, cfg.train.step_jitter_s) == (0.05, 1000.0, 1e-4)
    for bad, fragment in (("lr=5e", "expected a number"), ("lr=1e999", "expected a finite number"), ("lr=e5", "expected a number")):
        with pytest.raises(BenchError, match=fragment):
            resolve("sync", np=1, profile="tiny", overrides=parse_set([bad]))
