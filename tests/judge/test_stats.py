"""Confidence intervals and their formatting."""

import math

import pytest

from c4jax.judge import stats


def test_wilson_interval():
    low, high = stats.wilson_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-3) and high == pytest.approx(0.5962, abs=1e-3)
    low, high = stats.wilson_interval(100, 100)
    assert high == 1.0 and low == pytest.approx(0.963, abs=1e-3)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


def test_rate_with_interval_and_format():
    rate, (low, high) = stats.rate_with_interval(1, 4)
    assert rate == 0.25 and low < 0.25 < high
    rate, ci = stats.rate_with_interval(0, 0)
    assert math.isnan(rate) and ci == (0.0, 1.0)
    assert stats.format_rate(0.25, (0.1, 0.5)) == " 25.0%  [ 10.0,  50.0]"
