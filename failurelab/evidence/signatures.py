"""Signatures: the measured telemetry that proves a fault, as data.

A signature is a few `Condition`s on named quantities (see `quantities`), each with a
threshold and the physical reason for it, and a role:

* `"mechanism"`: graded evidence of how the fault works (gradients that stay parallel,
  outputs that are probabilities, a gradient that is exactly zero);
* `"effect"`: the run is measurably unhealthy (the loss curve is not healthy);
* `"guard"`: a pass/fail precondition (the outputs are float16, the inputs are
  tokens); it gates but never adds to the score.

A signature fires when every condition holds.  Its score is the weakest *graded*
mechanism margin: how far past its threshold the value lies, in units of the distance
between the threshold and the healthy population's edge, capped at `CAP`, so that the
scores of different faults compare like with like.  `calibrated` moves each threshold
out of the healthy population's range by a fixed rule (see `calibration`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from ..basics.text import Text, language
from .quantities import BINARY, LAB_ONLY, QUANTITIES

ROLES = ("mechanism", "effect", "guard")
CAP = 3.0  # a graded margin counts up to 3 healthy-edge distances past the threshold
LOG_MARGIN = 2.0  # calibration: a ratio threshold sits >= 2x beyond the healthy edge
#                   (0.3 decades: more than the seed-to-seed spread of any healthy run)


AT_LEAST, AT_MOST = ">=", "<="  # a condition's direction, written as it reads
SIGNS = {AT_LEAST: "≥", AT_MOST: "≤"}


@dataclass(frozen=True)
class Condition:
    """`quantity` must be at least (">=") or at most ("<=") `threshold`:
    `Condition("grad_growth", ">=", 1.5, "gradient norm", why)`."""

    quantity: str  # a name in quantities.QUANTITIES
    direction: str  # AT_LEAST or AT_MOST
    threshold: float  # as calibrated (see `physical` for the one written in the code)
    label: str  # how the evidence sentence names the quantity, e.g. "gradient cosine"
    why: str  # the physical reason for the threshold and its margin
    log: bool = True  # margins in decades (ratios, norms) rather than in units of `unit`
    unit: float = 1.0  # for linear margins: the resolution; calibration keeps one unit clear
    required: bool = True  # False: a veto that only counts when its columns exist
    role: str = "mechanism"  # mechanism | effect | guard (see the module docstring)
    suffix: str = ""  # printed after the value, e.g. "x its step-0 value"
    healthy: float | None = None  # the healthy population's edge facing the threshold
    physical: float | None = None  # the threshold before calibration moved it
    label_zh: str = ""  # `label` in Chinese (tests/test_text.py: every catalogue entry)
    why_zh: str = ""  # `why` in Chinese
    suffix_zh: str = ""  # `suffix` in Chinese

    def __post_init__(self):
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {self.quantity!r}")
        if self.direction not in SIGNS:
            raise ValueError(f"direction must be one of {tuple(SIGNS)}, got {self.direction!r}")
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if self.log and not self.threshold > 0:
            raise ValueError(f"a log-scale threshold must be positive, got {self.threshold}")

    @property
    def above(self) -> bool:
        """True for an "at least" condition."""
        return self.direction == AT_LEAST

    @property
    def sign(self) -> str:
        return SIGNS[self.direction]

    def margin(self, value: float) -> float:
        """How far past the threshold `value` lies (>= 0: the condition holds).

        An unmeasurable value fails a required condition and passes an optional one
        (with an infinite margin, so it never decides the score)."""
        if value is None or math.isnan(value):
            return -math.inf if self.required else math.inf
        m = self._distance(value, self.threshold)
        return m if self.above else -m

    def graded(self, value: float) -> float:
        """The margin in units of the threshold's distance from the healthy edge
        (1 = as far past the threshold as the threshold is past every healthy run),
        capped at CAP."""
        m = self.margin(value)
        if not math.isfinite(m):
            return m if m < 0 else CAP
        span = 0.0 if self.healthy is None else abs(self._distance(self.threshold,
                                                                   self.healthy))
        span = span if math.isfinite(span) and span > 0 else (1.0 if self.log else
                                                              self.unit)
        return min(CAP, m / span)

    def _distance(self, value: float, reference: float) -> float:
        if not self.log:
            return (value - reference) / self.unit
        if reference <= 0:
            return math.inf if value > 0 else 0.0
        return math.log10(value / reference) if value > 0 else -math.inf

    def calibrated(self, low: float, high: float) -> "Condition":
        """This condition with its threshold moved clear of a healthy range [low, high]:
        the healthy edge moved out by LOG_MARGIN (ratios) or one unit (linear
        quantities), never inside the physical threshold.  Guards are facts, not
        measurements of degree, and stay as they are; so do yes/no quantities (a healthy
        run that reads "yes" is a defect of the rule that measured it, not a reason to
        demand 1.5 of a 0/1 value)."""
        if self.role == "guard" or self.quantity in BINARY or not (math.isfinite(low) and math.isfinite(high)):
            return self
        physical = self.threshold if self.physical is None else self.physical
        if self.above:
            edge = high
            moved = edge * LOG_MARGIN if self.log else edge + self.unit
            threshold = max(physical, moved) if not self.log or edge > 0 else physical
        else:
            edge = low
            moved = edge / LOG_MARGIN if self.log else edge - self.unit
            threshold = min(physical, moved) if not self.log or edge > 0 else physical
        return replace(self, threshold=threshold, healthy=edge, physical=physical)

    def text(self, part: str, lang: str | None = None) -> str:
        """`label`, `why` or `suffix` in `lang` (English where no Chinese was written)."""
        chinese = getattr(self, f"{part}_zh")
        return chinese if language(lang) == "zh" and chinese else getattr(self, part)

    def describe(self, value: float, lang: str | None = None) -> str:
        label = self.text("label", lang)
        if self.quantity in BINARY and value == value:
            return BINARY_VALUE.say(lang, label=label,
                                    answer=(YES if value >= 0.5 else NO).say(lang))
        return f"{label} {fmt(value, lang)}{self.text('suffix', lang)} ({self.bound(lang)})"

    def bound(self, lang: str | None = None) -> str:
        """"≥ 0.266" as used, with the threshold written in the code beside it where
        calibration moved it: "≥ 0.266, written 0.1"."""
        used = f"{self.sign} {fmt(self.threshold, lang)}"
        if self.physical is None or self.physical == self.threshold:
            return used
        return WRITTEN.say(lang, used=used, written=fmt(self.physical, lang))


@dataclass(frozen=True)
class Evidence:
    """What a history says about one fault's signature."""

    fault: str
    fired: bool  # every condition holds
    score: float  # the weakest graded mechanism margin (comparable across faults)
    values: dict[str, float]  # the measured quantities
    sentence: str  # the measurements, in words, with the verdict when it fired
    missing: tuple[str, ...] = ()  # required quantities that could not be measured
    latent: bool = False  # the route that fired sees the mechanism, not yet its harm
    by_elimination: bool = False  # the route names what is left, not what it measured


@dataclass(frozen=True)
class Signature:
    conditions: tuple[Condition, ...]
    verdict: str  # what the evidence means, e.g. "gradients are accumulating"
    verdict_zh: str = ""  # the verdict in Chinese
    latent: bool = False  # True: the mechanism is measured but its harm is not (yet), so
    #                       a cause it names is at most medium confidence
    by_elimination: bool = False  # True: no condition measures the cause itself; it is
    #                               what remains when every mechanism the guards check is
    #                               ruled out.  A bug the catalogue does not know leaves
    #                               the same trace, so the cause it names is low confidence

    def says(self, lang: str | None = None) -> str:
        """The verdict in `lang` (English where no Chinese was written)."""
        return self.verdict_zh if language(lang) == "zh" and self.verdict_zh else self.verdict

    def evaluate(self, fault: str, history: pd.DataFrame,
                 cache: dict[str, float] | None = None, lang: str | None = None) -> Evidence:
        cache = {} if cache is None else cache
        values = {}
        for c in self.conditions:
            if c.quantity not in cache:
                cache[c.quantity] = QUANTITIES[c.quantity](history)
            values[c.quantity] = cache[c.quantity]
        margins = [c.margin(values[c.quantity]) for c in self.conditions]
        fired = all(m >= 0 for m in margins)
        graded = [c.graded(values[c.quantity]) for c in self.conditions
                  if c.role == "mechanism"]
        graded = graded or [c.graded(values[c.quantity]) for c in self.conditions
                            if c.role == "effect"] or [min(CAP, min(margins))]
        score = min(graded)
        parts = [c.describe(values[c.quantity], lang) + ("" if fired or m >= 0 else " ✗")
                 for c, m in zip(self.conditions, margins, strict=True) if _worth_saying(c, m, values)]
        measured = AND.pick(lang).join(parts)
        sentence = VERDICT.say(lang, measured=measured, verdict=self.says(lang)) if fired \
            else measured
        missing = tuple(c.quantity for c in self.conditions
                        if c.required and math.isnan(values[c.quantity]))
        return Evidence(fault, fired, score, values, sentence, missing, self.latent,
                        self.by_elimination)

    def guards_hold(self, values: dict[str, float]) -> bool:
        """Every guard passes on these measured values: a run this signature could fire
        on, which calibration must keep its thresholds clear of."""
        return all(c.margin(values.get(c.quantity, math.nan)) >= 0
                   for c in self.conditions if c.role == "guard")

    def calibrated(self, ranges: dict[str, tuple[float, float]]) -> "Signature":
        """Every condition moved clear of the healthy `ranges` ({quantity: (lo, hi)})."""
        nan = (math.nan, math.nan)
        return replace(self, conditions=tuple(c.calibrated(*ranges.get(c.quantity, nan))
                                              for c in self.conditions))

    @property
    def lab_only(self) -> bool:
        """Needs a column that a plain Monitor does not record (validation, timing,
        batch labels, attention on pads): checkable in the lab's own loop only."""
        return any(c.required and c.role != "guard" and c.quantity in LAB_ONLY
                   for c in self.conditions)


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
                 healthy: pd.DataFrame, lang: str | None = None
                 ) -> tuple[tuple[Row, ...], bool, bool]:
    """Every condition on both histories: (rows, fault fired, baseline fired), from the
    same evaluation `fl.check` and `fl.diagnose` use, so no report can disagree."""
    mine = signature.evaluate(fault, faulty)
    base = signature.evaluate(fault, healthy)
    rows = tuple(Row(c.text("label", lang), c.quantity,
                     c.bound(lang),
                     fmt(mine.values[c.quantity], lang), fmt(base.values[c.quantity], lang),
                     c.margin(mine.values[c.quantity]) >= 0,
                     c.margin(base.values[c.quantity]) >= 0, c.text("why", lang))
                 for c in signature.conditions)
    return rows, mine.fired, base.fired


def _worth_saying(condition: Condition, margin: float, values: dict[str, float]) -> bool:
    """A sentence names the measured evidence for a fault and whatever blocks it.  A
    guard that passes only rules a look-alike out; listing every one ("non-finite losses
    0 and parameters outside the optimizer 0 and ...") buries the mechanism, so a guard
    is said only when it fails.  `check`, `signature()` and the report show them all."""
    if condition.role == "guard" and margin >= 0:
        return False
    return condition.required or not math.isnan(values[condition.quantity])


YES, NO = Text("yes", "是"), Text("no", "否")
AND = Text(" and ", "，且 ")
VERDICT = Text("{measured}: {verdict}", "{measured}：{verdict}")
WRITTEN = Text("{used}, written {written}", "{used}，代码中写的是 {written}")
BINARY_VALUE = Text("{label}: {answer}", "{label}：{answer}")
NOT_MEASURED, NEVER = Text("n/a", "无数据"), Text("never", "从未")


def fmt(x: float, lang: str | None = None) -> str:
    """A measured number as evidence quotes it: 3 significant digits, 'never' for +inf."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return NOT_MEASURED.say(lang)
    if math.isinf(x):
        return NEVER.say(lang) if x > 0 else "-inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.2g}"
    return f"{x:.3g}"
