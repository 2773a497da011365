"""Confidence intervals for the rates that the judge reports (host-side, pure Python)."""

from __future__ import annotations

import math


def wilson_interval(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a proportion (95% by default).

    Args:
        successes: number of successes (may be fractional, e.g. wins + draws/2).
        n: number of trials.
        z: normal quantile of the two-sided level.

    Returns:
        (low, high) in [0, 1]; (0, 1) when ``n == 0``.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / denom
    # The interval contains p; min/max keep that true under rounding at p = 0 or 1.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def rate_with_interval(k: int, n: int) -> tuple[float, tuple[float, float]]:
    """``(k / n, 95% Wilson interval)``; the rate is NaN when ``n == 0``."""
    return (k / n if n else float("nan")), wilson_interval(k, n)


def format_rate(rate: float, ci: tuple[float, float] | list[float]) -> str:
    """``" 12.5%  [  8.1,  18.7]"``: a rate and its interval in percent, fixed width."""
    return f"{100 * rate:5.1f}%  [{100 * ci[0]:5.1f}, {100 * ci[1]:5.1f}]"
