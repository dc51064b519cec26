"""Calibration: thresholds set from a healthy population, by one fixed rule.

`healthy_ranges` measures every named quantity on healthy histories (every healthy zoo
run and the lab's baselines) and keeps each one's range; `calibrate` moves each
signature threshold clear of that range (`signatures.Condition.calibrated`: the
healthy edge moved out by a fixed factor, never inside the physical threshold).
Being a function, it can be redone without any family, which is how the benchmark
scores a family on thresholds that never saw it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

import pandas as pd

from .quantities import measure

Ranges = dict[str, tuple[float, float]]


def healthy_ranges(histories: Iterable[pd.DataFrame]) -> Ranges:
    """{quantity: (lowest, highest)} over the finite values of every history."""
    return merge_ranges(measured_ranges(measure(h)) for h in histories)


def measured_ranges(values: dict[str, float]) -> Ranges:
    """One history's measured values as degenerate ranges (finite values only)."""
    return {q: (v, v) for q, v in values.items() if v is not None and math.isfinite(v)}


def merge_ranges(parts: Iterable[Ranges]) -> Ranges:
    out: Ranges = {}
    for part in parts:
        for q, (lo, hi) in part.items():
            old = out.get(q)
            out[q] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return out


def calibrate(faults: dict, ranges: Ranges) -> dict:
    """The faults with their signatures' thresholds moved clear of `ranges`."""
    return {name: replace(f, signature=f.signature.calibrated(ranges),
                          also=tuple(s.calibrated(ranges) for s in f.also))
            for name, f in faults.items()}
