"""bench.study.plan: a study's repeats (single process: the plan, the data split and the model initialisation of its
repeats), sets by worker count, share links and per-cell repeats."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bench import BenchError


@pytest.fixture
def params_file(tmp_path):
    """A copy of params.yaml beside the repository's hardware profiles and one study, ``rep`` (:func:`rep_file`)."""
    from bench.resolve import params_path

    path = tmp_path / "params.yaml"
    path.write_text(params_path().read_text())
    (tmp_path / "pipelines" / "studies").mkdir(parents=True)
    (tmp_path / "pipelines" / "hardware").symlink_to(params_path().resolve().parent / "pipelines" / "hardware")
    (tmp_path / "pipelines" / "studies" / "rep.yaml").write_text(
        "profile: tiny\nalgorithms: [sync]\nnp: [1, 2]\nrepeats: 3\nsets: {max_steps: 5}\n")
    return path


@pytest.fixture
def rep_file(params_file):
    """The study file of ``rep``: pipelines/studies/rep.yaml beside ``params_file``."""
    return params_file.parent / "pipelines" / "studies" / "rep.yaml"


def test_repeats_share_the_split_differ_in_initialisation_and_are_planned_repeat_major(params_file):
    from bench.data import Shard, load_dataset
    from bench.models import build_model
    from bench.study import load_study
    from bench.study.plan import planned_runs

    study = load_study("rep", params_file)
    runs = planned_runs(study, "sync")
    assert [(c.repeat, c.launch.np, c.tag) for c in runs] == [(0, 1, "r0"), (0, 2, "r0"), (1, 1, "r1"), (1, 2, "r1"),
                                                              (2, 1, "r2"), (2, 2, "r2")]
    first, second = runs[0].train, runs[2].train
    assert second.seed == first.seed + 1 and second.split_seed == first.split_seed
    a, b = load_dataset(first), load_dataset(second)
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)  # the same split
    ma, mb = build_model(first, a.input_shape, a.num_classes), build_model(second, b.input_shape, b.num_classes)
    assert not torch.equal(next(ma.parameters()), next(mb.parameters()))  # another initialisation
    sa, sb = Shard(a, 2, 0, 16, first.seed), Shard(b, 2, 0, 16, second.seed)
    assert not np.array_equal(sa.order(0), sb.order(0))  # another shard order


def test_sets_by_np_apply_per_worker_count_before_an_algorithms_own_and_name_only_counts_the_study_runs(params_file, rep_file):
    from bench.study import load_study
    from bench.study.plan import planned_runs

    text = rep_file.read_text()
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {2: {lr: 0.4}}\n", 1))
    runs = planned_runs(load_study("rep", params_file), "sync")
    assert {(c.launch.np, c.train.lr) for c in runs} == {(1, 0.05), (2, 0.4)}  # tiny's lr 0.05 at np 1
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {2: {lr: 0.4}}\n"
                                        "sets_by_algorithm: {sync: {lr: 0.2}}\n", 1))
    assert {c.train.lr for c in planned_runs(load_study("rep", params_file), "sync")} == {0.2}
    rep_file.write_text(text.replace("sets: {max_steps: 5}\n", "sets: {max_steps: 5}\nsets_by_np: {4: {lr: 0.4}}\n", 1))
    with pytest.raises(BenchError, match="sets_by_np names worker counts 4, which the study does not run; valid: 1, 2"):
        load_study("rep", params_file)


def test_repeats_must_be_positive(params_file, rep_file):
    from bench.study import load_study

    rep_file.write_text(rep_file.read_text().replace("repeats: 3", "repeats: 0"))
    with pytest.raises(BenchError, match=r"repeats must be in \[1, 1000\] \(each repeat is one more run of every cell\), got 0"):
        load_study("rep", params_file)


def test_share_links_are_planned_at_their_calibrated_rate_and_repeats_where_chooses_each_cells_repeats(params_file, rep_file):
    from bench.study import load_study
    from bench.study.plan import plan, planned_runs

    text = rep_file.read_text().replace(
        "np: [1, 2]\nrepeats: 3\nsets: {max_steps: 5}\n",
        "np: [2]\nrepeats: 1\nhardware: emu\nsets: {max_steps: 5}\n"
        "grid: {link: ['', share0.5], slow_factor: [1.0, 3.0]}\nsets_by_np: {2: {slow_ranks: [1]}}\n"
        "repeats_where:\n  - {sets: {link: [share0.5], slow_factor: [3.0]}, repeats: 0}\n"
        "  - {algorithms: [sync], sets: {link: ['']}, repeats: 3}\n", 1)
    rep_file.write_text(text)
    study = load_study("rep", params_file)
    with pytest.raises(BenchError, match="needs its calibration .* run `python -m bench study calibrate`"):
        planned_runs(study, "sync")
    study.layout.dir.mkdir(parents=True)
    (study.layout.dir / "calibration.json").write_text(json.dumps(
        {"target_accuracy": 0.5, "links": {"share0.5": {"share": 0.5, "rate": "37mbit", "bits_per_s": 3.7e7}}}))
    runs = planned_runs(study, "sync")
    got = [(c.tag, c.launch.link, c.launch.link_share_aimed, c.repeat) for c in runs]
    assert got == [("linknone-slow_factor1.0-r0", "", 0.0, 0), ("linknone-slow_factor3.0-r0", "", 0.0, 0),
                   ("linkshare0.5-slow_factor1.0-r0", "37mbit", 0.5, 0),
                   ("linknone-slow_factor1.0-r1", "", 0.0, 1), ("linknone-slow_factor3.0-r1", "", 0.0, 1),
                   ("linknone-slow_factor1.0-r2", "", 0.0, 2), ("linknone-slow_factor3.0-r2", "", 0.0, 2)]
    assert plan(study)["sync"] == 7
    ones = "sets: {link: ['']}, repeats: 3}"
    for old, bad, error in (  # each bad study is refused when loaded, naming the value and the valid choices
            ("slow_factor: [3.0]}, repeats: 0", "slow_factor: [3.0]}, repeats: -1",
             r"repeats_where\[0\]: repeats must be in \[0, 1000\] \(0: not run\), got -1"),
            ("algorithms: [sync], sets", "algorithms: [ddp], sets",
             r"repeats_where\[1\] names ddp, which the study does not run; valid: sync"),
            (ones, "sets: {link: ['']}, repeat: 3}",
             r"unknown study 'rep' key 'repeats_where' 'repeat'; valid: algorithms, np, repeats, sets"),
            (ones, "sets: {link: ['']}}", r"repeats_where\[1\] has no repeats; give one, an integer >= 0"),
            (ones, "sets: {link: ''}, repeats: 3}", r"invalid study 'rep' key 'repeats_where' 'sets' '': expected a list"),
            ("share0.5]", "share1.5]", "'share1.5' aims at a communication share outside")):
        assert old in text
        rep_file.write_text(text.replace(old, bad))
        with pytest.raises(BenchError, match=error):
            load_study("rep", params_file)


def test_a_grid_over_one_setting_of_a_block_keeps_the_rest_of_the_block(params_file, rep_file):
    """``grid: {horovod.cycle_time_ms: [...]}`` plans one run per value with that Horovod setting only changed: the
    hardware profile's other settings (the sleeping wait, the fusion threshold, the groups) stay."""
    from bench.study import load_study
    from bench.study.plan import planned_runs

    plain = "profile: tiny\nalgorithms: [sync]\nnp: [2]\nsets: {max_steps: 5}\n"
    rep_file.write_text(plain)
    (base,) = planned_runs(load_study("rep", params_file), "sync")
    rep_file.write_text(plain + "grid: {horovod.cycle_time_ms: [1.0, 10.0], horovod.cache_capacity: [0]}\n")
    runs = planned_runs(load_study("rep", params_file), "sync")
    assert [c.tag for c in runs] == ["horovod.cycle_time_ms1.0-horovod.cache_capacity0",
                                     "horovod.cycle_time_ms10.0-horovod.cache_capacity0"]
    assert [(c.launch.horovod.cycle_time_ms, c.launch.horovod.cache_capacity) for c in runs] == [(1.0, 0), (10.0, 0)]
    kept = ("wait_sleep_us", "fusion_threshold_bytes", "groups")
    assert base.launch.horovod.cache_capacity is None and base.launch.horovod.wait_sleep_us == 250
    assert all(getattr(c.launch.horovod, k) == getattr(base.launch.horovod, k) for c in runs for k in kept)
