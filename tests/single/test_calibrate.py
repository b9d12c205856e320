"""bench.study.calibrate: a link's rate for the aimed share of a ring allreduce step."""

from __future__ import annotations

import pytest

from bench import BenchError


def test_link_rate_gives_the_aimed_share_of_a_ring_allreduce_step():
    from bench.study.calibrate import link_rate, rate_text

    compute, payload, n = 0.014, 431_144, 4
    for share in (0.1, 0.5, 0.75, 0.9):
        rate = link_rate(share, compute, payload, n)
        t = 2 * (n - 1) / n * 8 * payload / rate  # the allreduce's time on that link, bandwidth only
        assert t / (t + compute) == pytest.approx(share)
    assert link_rate(0.9, compute, payload, n) < link_rate(0.5, compute, payload, n)
    assert rate_text(369.6e6) == "370mbit" and rate_text(2e5) == "1mbit"
    with pytest.raises(BenchError, match="0 < share < 1"):
        link_rate(1.0, compute, payload, n)
