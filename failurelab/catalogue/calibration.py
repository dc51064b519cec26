"""Calibration: thresholds set from a healthy population, by one fixed rule.

`healthy_ranges` measures every named quantity on healthy histories (every healthy zoo
run and the lab's baselines) and keeps each one's range.  A signature is calibrated on
the healthy runs it could fire on: those its guards admit (`route_ranges`; a float16
signature is not held to float32 runs, whose exact zeros at the output have other
causes).  `calibrate` moves each threshold clear of those runs' range
(`signatures.Condition.calibrated`: the healthy edge moved out by a fixed factor,
never inside the physical threshold); a route no healthy run passes the guards of
keeps its physical thresholds.
Being a function, it can be redone without any family, which is how the benchmark
scores a family on thresholds that never saw it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

import pandas as pd

from ..evidence.quantities import measure

Ranges = dict[str, tuple[float, float]]
Routes = dict[str, tuple[Ranges, ...]]  # fault -> per signature route, the healthy
#                                         ranges of its quantities over admitted runs


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


def route_ranges(faults: dict, healthy_values: Iterable[dict[str, float]]) -> Routes:
    """For every signature route of every fault, the ranges of its quantities over the
    healthy runs (their measured values) whose guards it passes."""
    values = list(healthy_values)
    return {name: tuple(_admitted_ranges(s, values) for s in f.signatures)
            for name, f in faults.items()}


def _admitted_ranges(signature, values: list[dict[str, float]]) -> Ranges:
    quantities = {c.quantity for c in signature.conditions}
    ranges = merge_ranges(measured_ranges(v) for v in values if signature.guards_hold(v))
    return {q: r for q, r in sorted(ranges.items()) if q in quantities}


def calibrate(faults: dict, routes: Routes) -> dict:
    """The faults with every route's thresholds moved clear of its healthy ranges (a
    fault or route missing from `routes` keeps its physical thresholds)."""
    out = {}
    for name, f in faults.items():
        ranges = tuple(routes.get(name, ())) + ({},) * len(f.signatures)
        calibrated = [s.calibrated(r) for s, r in zip(f.signatures, ranges, strict=False)]
        out[name] = replace(f, signature=calibrated[0], also=tuple(calibrated[1:]))
    return out
