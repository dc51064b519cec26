"""One experiment of the course, as the notebooks use it: a fault beside its baseline.

`experiment("01-2")` (or `experiment("huge_lr")`) runs the healthy baseline and the faulty recipe with the same
seed; its methods run the distinguishing experiment and the fix and report what the
telemetry measured, so that every notebook section is a handful of one-line cells.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pandas as pd

from ..basics.recipes import Recipe, baseline, diff, format_diff
from ..basics.text import Text
from ..catalogue.faults import Fault, check, get, run
from ..evidence.runs import Run
from ..evidence.signatures import Evidence, Signature, fmt, side_by_side
from ..views.tables import TextTable
from .keys import EXPERIMENTS, fault_of


@functools.lru_cache(maxsize=128)
def _cached(recipe: Recipe, seed: int) -> Run:
    """Runs are deterministic, so a notebook's baselines are computed once (and, through
    `fl.run`, a verification session's Chinese edition reads the runs its English
    edition computed: see `lab.runcache`)."""
    return run(recipe, seed=seed)


FOLLOWUP = {
    "fix": Text("fix", "修复"), "distinguishing experiment": Text("distinguishing experiment", "区分实验"),
    "healed": Text("✓ healed, the fault's signature is gone", "✓ 已修好，故障的特征消失了"),
    "not_healed": Text("✗ NOT healed, the fault's signature is still there",
                       "✗ 没有修好，故障的特征仍然存在"),
    "documented": Text("✓ as documented", "✓ 与文档一致"),
    "not_documented": Text("✗ NOT as documented", "✗ 与文档不一致"),
    "line": Text("{kind} ({change}): {verdict}\n  measured on the new run: {measured}",
                 "{kind}（{change}）：{verdict}\n  新运行的实测：{measured}"),
    "gone": Text(" ✓ gone", " ✓ 已消失"), "separator": Text("; ", "；"),
    "against": Text("{label} {value} (fault: {sign} {threshold}){gone}",
                    "{label} {value}（故障：{sign} {threshold}）{gone}"),
}


@dataclass(frozen=True)
class Followup:
    """A single-factor follow-up run (distinguishing experiment or fix) and its verdict."""

    kind: str  # "distinguishing experiment" or "fix"
    change: dict[str, tuple]  # recipe fields changed from the faulty recipe
    run: Run
    evidence: Evidence  # what the follow-up's run measurably showed
    passed: bool  # did it show what the catalogue says it should?
    measured: str = ""  # the measurements in words; default: the evidence sentence

    def __str__(self) -> str:
        return self.text()

    def text(self, lang: str | None = None) -> str:
        if self.kind == "fix":  # the evidence is the fault's signature: gone means healed
            verdict = "healed" if self.passed else "not_healed"
        else:
            verdict = "documented" if self.passed else "not_documented"
        return FOLLOWUP["line"].say(lang, kind=FOLLOWUP[self.kind].say(lang),
                                    change=format_diff(self.change),
                                    verdict=FOLLOWUP[verdict].say(lang),
                                    measured=self.measured or self.evidence.sentence)


def _against_signature(signature: Signature, evidence: Evidence) -> str:
    """A fix's measurements beside the fault's thresholds: which conditions are gone."""
    parts = []
    for c in signature.conditions:
        value = evidence.values[c.quantity]
        if not c.required and math.isnan(value):
            continue  # a veto this task cannot measure (padding, on the tabular task)
        gone = "" if c.margin(value) >= 0 else FOLLOWUP["gone"].say()
        parts.append(FOLLOWUP["against"].say(label=c.text("label"), value=fmt(value),
                                             sign="≥" if c.above else "≤",
                                             threshold=fmt(c.threshold), gone=gone))
    return FOLLOWUP["separator"].pick().join(parts)


@dataclass(frozen=True)
class Experiment:
    """A fault's run beside the healthy baseline of its task, with the same seed."""

    fault: Fault
    seed: int
    baseline: Run
    faulty: Run
    key: str | None = None  # the course key it was opened by: its plots name that instead

    def check(self) -> Evidence:
        """Assert the fault's signature on the faulty run (AssertionError otherwise)."""
        return check(self.faulty, self.fault.name)

    def signature(self) -> pd.DataFrame:
        """Each signature condition: threshold, the faulty run's and the baseline's value
        (a TextTable: its headers are shown in the notebook's language)."""
        rows, _, _ = side_by_side(self.fault.name, self.fault.signature, self.faulty.history,
                                  self.baseline.history)
        return TextTable({"quantity": [r.label for r in rows],
                          "threshold": [r.threshold for r in rows],
                          "faulty": [r.fault_value for r in rows],
                          "baseline": [r.baseline_value for r in rows]})

    def plot(self, instrument: str | None = None):
        """Loss and the instrument that proves the cause, baseline and fault overlaid
        (a Figure; in a notebook it shows once, as the cell's value)."""
        from ..views.plots import compare

        return compare(self.baseline, self.faulty, fault=self.fault.name,
                       instrument=instrument, key=self.key)

    def distinguish(self) -> Followup:
        """Run the distinguishing experiment and measure its documented outcome."""
        probe = self.fault.distinguishing(self.faulty.recipe)
        result = _cached(probe, self.seed)
        outcome = self.fault.outcome.evaluate(self.fault.name, result.history)
        return Followup("distinguishing experiment", diff(self.faulty.recipe, probe), result,
                        outcome, outcome.fired)

    def fix(self) -> Followup:
        """Apply the fix: the fault's signature must be gone from the new run."""
        repaired = self.fault.apply_fix(self.faulty.recipe)
        result = _cached(repaired, self.seed)
        evidence = self.fault.evidence(result.history)
        return Followup("fix", diff(self.faulty.recipe, repaired), result, evidence,
                        not evidence.fired, _against_signature(self.fault.signature, evidence))


def experiment(name: str, seed: int = 0) -> Experiment:
    """Run experiment `name` (a course key such as "01-2", or a fault's name) and its
    task's healthy baseline with the same seed."""
    fault = get(fault_of(name) or name)
    base = baseline(fault.task)
    return Experiment(fault, seed, _cached(base, seed), _cached(fault.inject(base), seed),
                      key=name if name in EXPERIMENTS else None)
