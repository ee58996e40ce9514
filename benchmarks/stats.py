"""Percentiles and summaries of a benchmark's samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None if empty."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


def summarize(values: Iterable[float | None]) -> dict:
    """n, mean, p50, p90, p99, min, max of the non-None values (None fields if empty)."""
    xs = [float(v) for v in values if v is not None]
    return {
        "n": len(xs),
        "mean": statistics.fmean(xs) if xs else None,
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "min": min(xs) if xs else None,
        "max": max(xs) if xs else None,
    }
