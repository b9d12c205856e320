"""bench.metrics.stats on figures whose answer is known: intervals over repeats, paired and censored ratios, Holm."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.metrics import stats
from support import noisy


def test_bootstrap_interval_of_a_paired_ratio_covers_the_known_ratio():
    rng = np.random.default_rng(1)
    base = noisy(rng, 8, 100.0, sd=0.3)  # repeats differ a lot from each other...
    r = stats.paired_ratio(base * noisy(rng, 8, 1.5, sd=0.05), base)  # ...the pairing removes it
    assert r["n"] == 8 and r["ci_low"] < 1.5 < r["ci_high"] and r["ci_high"] - r["ci_low"] < 0.15
    assert r["outcome"] == "faster" and r["effect"] == pytest.approx(1.5, rel=0.05)
    assert r["sign_p"] == pytest.approx(2 * 0.5**8)  # every ratio above 1: the exact sign test's smallest p
    # a time is better when smaller: the ratio is the reference's over the algorithm's
    t = stats.paired_ratio(base / 2, base, higher_is_better=False)
    assert t["effect"] == pytest.approx(2.0) and t["outcome"] == "faster"


@pytest.mark.parametrize("values, expected", [
    ([1.5, 1.6, 1.55, 1.7], "faster"),         # an interval above 1
    ([0.5, 0.6, 0.55], "slower"),              # below
    ([0.8, 1.3, 1.0, 0.9, 1.2], "inconclusive"),  # across 1
    ([1.4, 1.2], "faster"),                    # no interval with 2 values: the side of the median
    ([0.7], "slower"),
    ([1.0, 1.0], "tie"),
    ([math.nan, math.nan], "undefined"),
])
def test_the_side_of_a_summary_uses_its_interval_and_with_few_values_its_median(values, expected):
    assert stats.side(stats.describe(values)) == expected


def test_identical_runs_are_inconclusive_and_a_2x_effect_with_small_noise_is_faster():
    rng = np.random.default_rng(2)
    runs = noisy(rng, 5, 50.0, sd=0.1)
    same = stats.paired_ratio(runs, runs.copy())
    assert same["effect"] == pytest.approx(1.0) and same["outcome"] == "inconclusive"
    assert same["ci_low"] <= 1.0 <= same["ci_high"]
    double = stats.paired_ratio(2 * runs * noisy(rng, 5, 1.0), runs)
    assert double["outcome"] == "faster" and double["ci_low"] > 1.8
    assert stats.paired_ratio(runs, 2 * runs)["outcome"] == "slower"


def test_fewer_than_three_repeats_have_no_interval():
    for values in ([1.0], [1.0, 2.0]):
        d = stats.describe(values)
        assert math.isnan(d["ci_low"]) and math.isnan(d["ci_high"]) and d["n"] == len(values)
        assert stats.paired_ratio(values, [1.0] * len(values))["outcome"] == "inconclusive"
    d = stats.describe([1.0, 2.0, 3.0, 100.0, np.nan])
    assert d["n"] == 4 and d["median"] == 2.5 and d["olympic_mean"] == 2.5
    assert d["ci_low"] <= d["median"] <= d["ci_high"]


def test_holm_adjusts_step_down_and_keeps_order():
    # m = 4: 0.01*4, 0.02*3, 0.03*2 -> 0.06, 0.04*1 -> max(0.06, 0.04)
    assert stats.holm([0.03, 0.01, 0.04, 0.02]).tolist() == pytest.approx([0.06, 0.04, 0.06, 0.06])
    out = stats.holm([0.5, np.nan, 0.001])
    assert out[0] == pytest.approx(0.5) and math.isnan(out[1]) and out[2] == pytest.approx(0.002)


def test_a_censored_time_to_target_bounds_the_comparison_one_way_only():
    """A run that never reached the target has only a lower bound for its time: against a reference that reached it
    sooner it may be ``slower`` but never ``faster``, even when its bound is short; a pair censored on both sides is
    left out; a censored reference can be beaten but not lost to."""
    from bench.metrics.stats import censored_ratio

    def pairs(alg, ref, alg_c, ref_c):
        return pd.DataFrame({"repeat": range(len(alg)), "time_to_target_s": alg, "time_to_target_s_ref": ref,
                             "censored": alg_c, "censored_ref": ref_c})

    # the algorithm's runs were cut short at 1 s (censored) while sync needed 4 s: its bound looks 4x faster
    r = censored_ratio(pairs([1.0, 1.01, 0.99, 1.0], [4.0, 4.1, 3.9, 4.0], [True] * 4, [False] * 4))
    assert r["ci_low"] > 1 and r["outcome"] == "inconclusive" and math.isnan(r["p_above"])
    # censored at 8 s where sync reached the target at 4 s: slower, whatever the true time
    r = censored_ratio(pairs([8.0, 8.1, 7.9, 8.0], [4.0, 4.1, 3.9, 4.0], [True] * 4, [False] * 4))
    assert r["outcome"] == "slower" and r["p_below"] < 0.05
    # sync censored at 8 s, the algorithm reached the target at 2 s: faster
    assert censored_ratio(pairs([2.0, 2.1, 1.9, 2.0], [8.0] * 4, [False] * 4, [True] * 4))["outcome"] == "faster"
    # both censored in every repeat: nothing to compare
    r = censored_ratio(pairs([2.0] * 4, [8.0] * 4, [True] * 4, [True] * 4))
    assert r["n"] == 0 and r["outcome"] == "inconclusive"


def test_repeats_for_gives_the_n_whose_simulated_power_reaches_the_aim_and_no_fewer():
    """The n a registered cell needs (stats.repeats_for): simulated paired log ratios of a true effect x1.5 with the
    pilot's spread 0.2, tested one-sided against the 5 % bar at Holm's first level over 2 tests, reject with power
    >= 0.8 at n and below it at n - 1; a noisier pilot needs more repeats; an effect under the bar has no n."""
    from scipy import stats as sps

    n = stats.repeats_for(0.2, 1.5, 1.05, alpha=0.025, tests=2)
    rng = np.random.default_rng(11)

    def power(k: int) -> float:
        logs = rng.normal(math.log(1.5), 0.2, (20000, k))
        return float(np.mean(sps.ttest_1samp(logs, math.log(1.05), axis=1, alternative="greater").pvalue < 0.0125))

    assert power(n) >= 0.79 and power(n - 1) < 0.8
    assert stats.repeats_for(0.3, 1.5, 1.05, tests=2) > n > stats.repeats_for(0.2, 2.0, 1.05, tests=2)
    assert stats.repeats_for(0.01, 3.0) == stats.MIN_N  # never fewer than an interval needs
    with pytest.raises(ValueError, match="does not exceed the bar"):
        stats.repeats_for(0.2, 1.04, 1.05)
    with pytest.raises(ValueError, match="sd_log"):
        stats.repeats_for(float("nan"), 1.5)
