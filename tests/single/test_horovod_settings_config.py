"""Horovod's run-time settings (launch.horovod): typed, per hardware profile, overridable, passed to the job and
recorded in system.json (one process; nothing launched)."""

from __future__ import annotations

import dataclasses

import pytest

from bench import BenchError
from bench.config import HOROVOD_DEFAULTS, HorovodSettings
from bench.launch import prepare
from bench.launch.command import horovod_environment, horovod_record
from bench.resolve import hardware_profiles, load_hardware, resolve
from bench.runconfig import config_from_dict
from bench.results import read_json
from bench.typed import build, field_types


def test_each_setting_is_one_horovod_variable():
    # every setting is a Horovod variable, except the suite's own way of waiting (wait_sleep_us, wait_spin_us) and
    # groups, an argument of Horovod's DistributedOptimizer
    assert set(HorovodSettings.ENV) | {"wait_sleep_us", "wait_spin_us", "groups"} == set(field_types(HorovodSettings))
    assert HorovodSettings(groups=1).env() == {}
    assert set(HorovodSettings.ENV) == set(HOROVOD_DEFAULTS)
    assert HorovodSettings().env() == {}  # nothing set: Horovod's own defaults
    s = HorovodSettings(cycle_time_ms=0.5, fusion_threshold_bytes=0, cache_capacity=1024, autotune=False,
                        thread_affinity="0,1", disable_group_fusion=True)
    assert s.env() == {"HOROVOD_CYCLE_TIME": "0.5", "HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_CACHE_CAPACITY": "1024",
                       "HOROVOD_AUTOTUNE": "0", "HOROVOD_THREAD_AFFINITY": "0,1", "HOROVOD_DISABLE_GROUP_FUSION": "1"}
    assert HorovodSettings(cycle_time_ms=2.0).env() == {"HOROVOD_CYCLE_TIME": "2"}


def test_set_overrides_one_setting_on_top_of_the_hardware_profile():
    base = resolve("sync", np=1, profile="tiny").launch.horovod
    cfg = resolve("sync", np=1, profile="tiny", overrides={"horovod.cycle_time_ms": 0.25})
    assert cfg.launch.horovod == dataclasses.replace(base, cycle_time_ms=0.25)
    assert cfg.launch.horovod.env()["HOROVOD_CYCLE_TIME"] == "0.25"
    assert config_from_dict(cfg.to_dict()) == cfg  # config.json round-trip keeps the settings
    # the whole block: Horovod's defaults, whatever the hardware profile chose
    assert resolve("sync", np=1, profile="tiny", overrides={"horovod": {}}).launch.horovod == HorovodSettings()


@pytest.mark.parametrize("overrides, fragment", [
    ({"horovod.cycle_time": 1}, "unknown horovod setting 'cycle_time'; valid: autotune, cache_capacity, cycle_time_ms, "
                                "disable_group_fusion, fusion_threshold_bytes, groups, thread_affinity, wait_sleep_us, wait_spin_us"),
    ({"horovod": {"fusion": 0}}, "unknown horovod setting 'fusion'; valid: autotune, cache_capacity"),
    ({"horovod.cycle_time_ms": 0}, "horovod.cycle_time_ms must be > 0"),
    ({"horovod.cycle_time_ms": "fast"}, "invalid horovod setting 'cycle_time_ms' 'fast'"),
    ({"horovod.cache_capacity": -1}, "horovod.cache_capacity must be >= 0"),
    ({"horovod.autotune": 1}, "invalid horovod setting 'autotune' 1"),
    ({"horovod.thread_affinity": "a,b"}, "comma-separated core numbers"),
    ({"horovod": {"wait_spin_us": 20}}, "horovod.wait_spin_us=20.0 is the first phase of the sleeping wait: set "
                                        "horovod.wait_sleep_us too"),
    ({"horovod.wait_spin_us": -1}, r"horovod.wait_spin_us must be in [0, 10000] microseconds, got -1"),
    ({"horovod": 5}, "horovod settings must be a mapping"),
    ({"horovod.groups": 0}, "horovod.groups must be >= 1 (or unset: Horovod's per-gradient allreduces), got 0"),
])
def test_bad_settings_are_refused_naming_the_valid_ones(overrides, fragment):
    with pytest.raises(BenchError) as e:
        resolve("sync", np=1, profile="tiny", overrides=overrides)
    assert fragment in str(e.value)


def test_every_hardware_profile_has_valid_settings():
    for hw in hardware_profiles():
        block = load_hardware(hw).get("horovod") or {}
        settings = build(HorovodSettings, block, what="horovod setting")
        settings.validate()
        # resolved (on the local hardware: the others need a cluster) the block reaches the launch settings as it is
        assert resolve("sync", np=1, profile="tiny", overrides={"horovod": block}).launch.horovod == settings, \
            f"hardware profile {hw}: see docs/architecture.md#extending"


def test_hardware_profile_block_and_its_unknown_keys(tmp_path):
    (tmp_path / "pipelines" / "hardware").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text("profiles: {laptop: {}}\n")
    (tmp_path / "pipelines" / "hardware" / "ok.yaml").write_text("horovod: {cycle_time_ms: 0.5, cache_capacity: 0}\n")
    (tmp_path / "pipelines" / "hardware" / "odd.yaml").write_text("horovod: {cycle_ms: 0.5}\n")
    cfg = resolve("sync", hardware="ok", params_file=tmp_path / "params.yaml")
    assert cfg.launch.horovod.env() == {"HOROVOD_CYCLE_TIME": "0.5", "HOROVOD_CACHE_CAPACITY": "0"}
    cfg = resolve("sync", hardware="ok", params_file=tmp_path / "params.yaml", overrides={"horovod.cache_capacity": 8})
    assert cfg.launch.horovod.env() == {"HOROVOD_CYCLE_TIME": "0.5", "HOROVOD_CACHE_CAPACITY": "8"}
    with pytest.raises(BenchError, match="unknown horovod setting 'cycle_ms'; valid: autotune, cache_capacity"):
        resolve("sync", hardware="odd", params_file=tmp_path / "params.yaml")


def test_a_workload_block_sits_between_the_hardware_profile_and_set(tmp_path):
    """Precedence, lowest first: the hardware profile's horovod: block, the training profile's (key by key), then
    --set horovod={...} (the whole block) and --set horovod.KEY=VALUE."""
    (tmp_path / "pipelines" / "hardware").mkdir(parents=True)
    (tmp_path / "pipelines" / "hardware" / "hw.yaml").write_text("horovod: {cycle_time_ms: 0.5, cache_capacity: 0}\n")
    (tmp_path / "params.yaml").write_text("profiles:\n  plain: {}\n  fast: {horovod: {cycle_time_ms: 0.1}}\n"
                                          "  odd: {horovod: {cycle: 1}}\n  bad: {horovod: 3}\n")
    def settings(profile, **overrides):
        return resolve("sync", hardware="hw", profile=profile, params_file=tmp_path / "params.yaml",
                       overrides=overrides).launch.horovod
    assert settings("plain") == HorovodSettings(cycle_time_ms=0.5, cache_capacity=0)
    assert settings("fast") == HorovodSettings(cycle_time_ms=0.1, cache_capacity=0)  # the workload's key wins
    assert settings("fast", **{"horovod.cycle_time_ms": 2}) == HorovodSettings(cycle_time_ms=2, cache_capacity=0)
    assert settings("fast", horovod={}) == HorovodSettings()  # --set horovod={}: Horovod's defaults, whatever the profiles
    assert "horovod" not in dataclasses.asdict(resolve("sync", hardware="hw", profile="fast",
                                                       params_file=tmp_path / "params.yaml").train)
    with pytest.raises(BenchError, match="unknown horovod setting 'cycle'; valid: autotune"):
        settings("odd")
    with pytest.raises(BenchError, match="profile 'bad''s horovod must be a mapping"):
        settings("bad")


def test_settings_win_over_the_shell_and_are_recorded(monkeypatch):
    monkeypatch.setenv("HOROVOD_CYCLE_TIME", "7")
    monkeypatch.setenv("HOROVOD_FUSION_THRESHOLD", "1024")
    cfg = resolve("sync", np=1, profile="tiny", overrides={"horovod": {"cycle_time_ms": 0.5}})
    env = horovod_environment(cfg)
    assert env["HOROVOD_CYCLE_TIME"] == "0.5" and env["HOROVOD_FUSION_THRESHOLD"] == "1024"  # unset: the shell's passes
    rec = horovod_record(cfg, env)
    assert rec["settings"] == {"cycle_time_ms": 0.5}
    assert rec["effective"]["cycle_time_ms"] == "0.5" and rec["effective"]["fusion_threshold_bytes"] == "1024"
    assert rec["effective"]["cache_capacity"] == "1024 (Horovod default)"
    assert rec["env"]["HOROVOD_CYCLE_TIME"] == "0.5"


def test_prepare_records_the_settings_in_system_json(tmp_path, monkeypatch):
    for var in HorovodSettings.ENV.values():
        monkeypatch.delenv(var, raising=False)
    cfg = resolve("sync", np=1, profile="tiny", overrides={"horovod.cycle_time_ms": 0.5, "horovod.cache_capacity": 0})
    run_dir = prepare(cfg, tmp_path / "run")
    rec = read_json(run_dir / "system.json")["horovod_settings"]
    assert rec["settings"] == {"cycle_time_ms": 0.5, "cache_capacity": 0, "wait_sleep_us": 250.0,  # and the profile's
                               "fusion_threshold_bytes": 1048576, "groups": 1}
    assert rec["effective"]["groups"] == 1
    assert rec["env"]["HOROVOD_CYCLE_TIME"] == "0.5" and rec["env"]["HOROVOD_CACHE_CAPACITY"] == "0"
    assert rec["effective"]["fusion_threshold_bytes"] == "1048576"
    assert rec["effective"]["autotune"].endswith("(Horovod default)")
    assert read_json(run_dir / "config.json")["launch"]["horovod"]["cycle_time_ms"] == 0.5


def test_overhead_benchmark_names_its_runs_through_run_name(tmp_path):
    from bench.layout import run_name
    from bench.perf import overhead

    result = overhead.suite_run("sync", 1, "tiny", {"max_steps": 6, "warmup_steps": 2, "eval_every": 0, "save_model": False}, tmp_path)
    assert result["throughput"] > 0
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]  # one real run, named as the suite names runs
    tag = run_dir.name.removeprefix("sync-np1-")
    assert tag.isdigit() and run_dir.name == run_name("sync", 1, tag), run_dir.name


def test_sleeping_wait_is_the_suites_setting_not_a_horovod_variable():
    cfg = resolve("sync", np=1, profile="tiny", overrides={"horovod": {"wait_sleep_us": 50}})
    assert cfg.launch.horovod.wait_sleep_us == 50
    env = horovod_environment(cfg, base={})
    assert not [k for k in env if k.startswith("HOROVOD_")]  # nothing for Horovod to read
    rec = horovod_record(cfg, env)
    assert rec["settings"] == {"wait_sleep_us": 50} and rec["effective"]["wait_sleep_us"] == 50
    assert "spinning" in horovod_record(resolve("sync", np=1, profile="tiny", overrides={"horovod": {}}), {})["effective"]["wait_sleep_us"]
    with pytest.raises(BenchError, match=r"horovod.wait_sleep_us must be in \(0, 10000\] microseconds, got 0"):
        resolve("sync", np=1, profile="tiny", overrides={"horovod": {"wait_sleep_us": 0}})


@pytest.mark.parametrize("candidate, fragment", [
    ("c0.1", "expected NAME:KEY=VALUE"),
    ("profile:cycle_time_ms=0.1", "with a new NAME"),
    ("c:cycle=1", "unknown horovod setting 'cycle'; valid: autotune"),
    ("c:cycle_time_ms=-1", "horovod.cycle_time_ms must be > 0"),
])
def test_horovod_best_refuses_a_bad_candidate_in_one_line_before_anything_runs(candidate, fragment, capsys):
    from bench.perf import horovod_best

    assert horovod_best.main(["--profile", "tiny", "--candidate", candidate]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1
