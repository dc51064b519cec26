"""Signatures: the measured telemetry that proves a fault, as data.

A signature is a few `Condition`s on named quantities (see `quantities`), each with a
threshold and the physical reason for it.  One mechanism serves three purposes:
`fl.check` asserts that every condition holds, `fl.diagnose` ranks faults by how
clearly their conditions hold, and a worksheet quotes the evidence sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .quantities import QUANTITIES


@dataclass(frozen=True)
class Condition:
    """`quantity` must be at least (`above`) or at most `threshold`."""

    quantity: str  # a name in quantities.QUANTITIES
    above: bool
    threshold: float
    label: str  # how the evidence sentence names the quantity, e.g. "gradient cosine"
    why: str  # the physical reason for the threshold and its margin
    log: bool = True  # margins in decades (ratios, norms) rather than in units of `unit`
    unit: float = 1.0  # for linear margins: how far past the threshold counts as 1
    required: bool = True  # False: a veto that only counts when its columns exist
    role: str = "mechanism"  # "mechanism" (evidence of the cause), "effect" or "guard"

    def __post_init__(self):
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {self.quantity!r}")
        if self.log and not self.threshold > 0:
            raise ValueError(f"a log-scale threshold must be positive, got {self.threshold}")

    def margin(self, value: float) -> float:
        """How far past the threshold `value` lies (>= 0: the condition holds).

        An unmeasurable value fails a required condition and passes an optional one
        (with an infinite margin, so it never decides the score)."""
        if value is None or math.isnan(value):
            return -math.inf if self.required else math.inf
        if self.log:  # a value of 0 is infinitely many decades below any threshold
            m = math.log10(value / self.threshold) if value > 0 else -math.inf
        else:
            m = (value - self.threshold) / self.unit
        return m if self.above else -m

    def describe(self, value: float) -> str:
        sign = "≥" if self.above else "≤"
        if not self.required and (value is None or math.isnan(value)):
            return f"{self.label} not measured"
        return f"{self.label} {fmt(value)} ({sign} {fmt(self.threshold)})"


@dataclass(frozen=True)
class Evidence:
    """What a history says about one fault's signature."""

    fault: str
    fired: bool  # every condition holds
    score: float  # the smallest margin: how clearly the weakest condition holds
    values: dict[str, float]  # the measured quantities
    sentence: str  # the measurements, in words, with the verdict when it fired
    missing: tuple[str, ...] = ()  # required quantities that could not be measured


@dataclass(frozen=True)
class Signature:
    conditions: tuple[Condition, ...]
    verdict: str  # what the evidence means, e.g. "gradients are accumulating"

    def evaluate(self, fault: str, history: pd.DataFrame,
                 cache: dict[str, float] | None = None) -> Evidence:
        cache = {} if cache is None else cache
        values = {}
        for c in self.conditions:
            if c.quantity not in cache:
                cache[c.quantity] = QUANTITIES[c.quantity](history)
            values[c.quantity] = cache[c.quantity]
        margins = [c.margin(values[c.quantity]) for c in self.conditions]
        score = min(margins)
        fired = score >= 0
        parts = [c.describe(values[c.quantity]) + ("" if fired or m >= 0 else " ✗")
                 for c, m in zip(self.conditions, margins)]
        measured = " and ".join(parts)
        sentence = f"{measured}: {self.verdict}" if fired else measured
        missing = tuple(c.quantity for c in self.conditions
                        if c.required and math.isnan(values[c.quantity]))
        return Evidence(fault, fired, score, values, sentence, missing)


@dataclass(frozen=True)
class Row:
    """One signature condition, measured on the faulty run and on the baseline."""

    label: str
    quantity: str
    threshold: str  # e.g. "≥ 0.1"
    fault_value: str
    baseline_value: str
    fault_holds: bool
    baseline_holds: bool
    why: str


def side_by_side(fault: str, signature: Signature, faulty: pd.DataFrame,
                 healthy: pd.DataFrame) -> tuple[tuple[Row, ...], bool, bool]:
    """Every condition on both histories: (rows, fault fired, baseline fired), from the
    same evaluation `fl.check` and `fl.diagnose` use, so no report can disagree."""
    mine = signature.evaluate(fault, faulty)
    base = signature.evaluate(fault, healthy)
    rows = tuple(Row(c.label, c.quantity, f"{'≥' if c.above else '≤'} {fmt(c.threshold)}",
                     fmt(mine.values[c.quantity]), fmt(base.values[c.quantity]),
                     c.margin(mine.values[c.quantity]) >= 0,
                     c.margin(base.values[c.quantity]) >= 0, c.why)
                 for c in signature.conditions)
    return rows, mine.fired, base.fired


def fmt(x: float) -> str:
    """A measured number as evidence quotes it: 3 significant digits, 'never' for +inf."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "never" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.2g}"
    return f"{x:.3g}"
