"""Calibrations per machine (bench/predict/machines.py): which machine a published study ran on, a machine's record from
the calibration runs its studies made, and the constants a cell of that machine is predicted with."""

import json

import pytest

from bench import BenchError
from bench.predict import machines
from bench.predict.cells import study_machine

FAST = "AMD EPYC, Linux-6.18.44-fc-v669-x86_64-with-glibc2.36"
SLOW = "AMD EPYC, Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"


def system_md(platforms: list[str]) -> str:
    lines = ["# System of study `s`", ""]
    for p in platforms:
        lines += ["## `emu`", "", f"- machine: AMD EPYC (2 cores), 23.5 GiB, {p}, GPUs: 0", "- code: commit abc", ""]
    return "\n".join(lines)


def study(root, name, platforms, median=None, mean=None):
    (root / name).mkdir(parents=True)
    (root / name / "system.md").write_text(system_md(platforms))
    if median is not None:
        (root / name / "calibration.json").write_text(json.dumps({"compute_s_median": median,
                                                                  "compute_s_per_step": mean, "steps": 620}))


def test_a_study_runs_on_the_machine_its_system_md_names(tmp_path):
    study(tmp_path, "one", ["Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"] * 2)
    study(tmp_path, "two", ["Linux-6.18.44-fc-v782-x86_64-with-glibc2.36", "Linux-6.18.44-fc-v669-x86_64-with-glibc2.36"])
    assert study_machine("one", tmp_path) == SLOW
    assert study_machine("two", tmp_path) == "mixed"
    assert study_machine("absent", tmp_path) == ""


def test_a_record_from_the_studies_calibration_runs_takes_their_medians(tmp_path):
    plat = "Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"
    for name, median, mean in (("a", 0.010, 0.030), ("b", 0.014, 0.040), ("c", 0.012, 0.050)):
        study(tmp_path, name, [plat], median, mean)
    out = machines.from_studies(["a", "b", "c"], 0.36, folder=tmp_path / "machines", root=tmp_path)
    rec = json.loads(out.read_text())
    assert rec["machine"] == SLOW and rec["compute_s_median"] == 0.012 and rec["compute_s_per_step"] == 0.040
    k = machines.load(0.36, tmp_path / "machines")[SLOW]
    assert k["c_full_s"] == 0.012 and k["eta"] == pytest.approx(0.012 / (0.040 * 0.36))
    assert "transport" not in k  # no collectives named: the default transport stays


def test_a_record_needs_one_machine_and_every_calibration_run(tmp_path):
    study(tmp_path, "a", ["Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"], 0.01, 0.03)
    study(tmp_path, "b", ["Linux-6.18.44-fc-v669-x86_64-with-glibc2.36"], 0.004, 0.012)
    study(tmp_path, "c", ["Linux-6.18.44-fc-v782-x86_64-with-glibc2.36"])
    with pytest.raises(BenchError, match="one machine"):
        machines.from_studies(["a", "b"], 0.36, folder=tmp_path / "m", root=tmp_path)
    with pytest.raises(BenchError, match="no calibration run"):
        machines.from_studies(["a", "c"], 0.36, folder=tmp_path / "m", root=tmp_path)
    assert not (tmp_path / "m").exists()


def test_a_cell_is_predicted_with_its_own_machine_constants_where_they_exist():
    calibration = {"machine": FAST, "c_full_s": 0.004, "eta": 0.93, "hop_s": 0.001, "transport": {"h_s": 1.0},
                   "machines": {SLOW: {"c_full_s": 0.0145, "eta": 1.02, "transport": {"h_s": 2.0}, "source": "x"}}}
    k, own = machines.for_machine(calibration, SLOW)
    assert own and (k["c_full_s"], k["eta"], k["transport"], k["hop_s"]) == (0.0145, 1.02, {"h_s": 2.0}, 0.001)
    assert "source" not in k or k["source"] == calibration.get("source")
    assert machines.for_machine(calibration, FAST) == (calibration, True)
    other = "Intel(R) Xeon(R) Processor, Linux-6.18.44-fc-v669-x86_64-with-glibc2.36"
    assert machines.for_machine(calibration, other) == (calibration, False)
    assert machines.for_machine(calibration, "") == (calibration, False)


def test_a_malformed_record_is_refused_naming_its_file(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"machine": SLOW, "compute_s_median": 0.0, "compute_s_per_step": 1}))
    with pytest.raises(BenchError, match="must be > 0"):
        machines.load(0.36, tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(BenchError, match="bad.json: not a machine record"):
        machines.load(0.36, tmp_path)


def test_a_forecast_on_the_emulated_cluster_takes_this_machines_record(monkeypatch):
    """`bench predict` here: with a record of this machine, its compute (a step twice as long) and says so."""
    from bench.predict import hardware, query

    base = hardware.load_calibration()
    here = machines.this_machine()
    plain = {**base, "machine": "elsewhere", "machines": {}}
    slow = {**plain, "machines": {here: {"c_full_s": 2 * base["c_full_s"], "eta": base["eta"]}}}
    rows = {}
    for name, k in (("plain", plain), ("slow", slow)):
        monkeypatch.setattr(hardware, "load_calibration", lambda k=k: k)
        rows[name] = query.predict_many(["localsgd"], [1], "emu", None, {})[0]
    assert rows["slow"]["throughput"] < 0.6 * rows["plain"]["throughput"]
    assert f"this machine ({machines.slug(here)}.json)" in rows["slow"]["calibration"]
    assert "this machine" not in rows["plain"]["calibration"]


def test_a_calibration_run_whose_median_step_is_throttled_is_refused():
    """The trial of 2026-11-30 07:19: steps of 20 ms at full speed and 85 ms when a quota period throttled the host,
    most of them throttled; its median (85 ms) would have made the machine's compute look 4 x slower."""
    full, throttled = [0.020] * 40, [0.085] * 60
    with pytest.raises(BenchError, match="median step 85.0 ms is over 1.5 x its 10th percentile"):
        machines.check_full_speed(full + throttled)
    machines.check_full_speed([0.0145] * 90 + [0.06] * 10)  # the 05:30 run's shape: most steps inside the quota
