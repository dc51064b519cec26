"""Diagnosis: the loss-curve shape and the likely cause, from telemetry alone.

`diagnose` never looks at a recipe or a fault name: it reads a history (from `fl.run`
or from a `Monitor` on any loop), names the loss-curve shape of the course's taxonomy,
and ranks the catalogue's faults by their signatures (the same ones `fl.check`
asserts).  Where the telemetry cannot separate causes, it says so and names the
experiment that can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from . import catalogue
from .quantities import measure
from .runs import history_of

# --- shape thresholds (each is checked in the order of `_shape` below) ----------------
BLOWUP = 10.0  # a final loss 10x the initial one has blown up, NaN or not
SWING = 0.35  # smoothed swings of 35% of the loss scale: healthy noise stays under 0.22
STEP_PEAK = 3.0  # swings that reach 3x the initial loss are jumps, not noise
RISE = 1.3  # a loss that peaked 30% above its start and never came back below it diverged
STUCK = 0.2  # removing under 20% of the initial loss: the curve never left its level
DEGRADING = 0.15  # validation loss 0.15 nats above its smoothed minimum (healthy <= 0.07)
TRAINS = 0.5  # ...while training removed half of its initial loss
CONVERGED = 0.85  # healthy runs remove 88% or more of the initial loss
QUIET = 0.35  # a stalled loss is quiet: end-window std under 35% of its level (healthy
#               runs near zero loss fluctuate by 40% or more)
BORDERLINE = 0.15  # within 15% of a deciding threshold, the other side is named too

# --- cause ranking ----------------------------------------------------------------------
LOOKALIKE_GAP = 0.5  # fired causes within this margin of the best one are look-alikes

# What to try first when no signature explains an unhealthy curve (the course's order).
NEXT_STEP = {
    "nonfinite": "look at the batch of the first non-finite step for NaN/Inf inputs, then "
                 "divide the learning rate by 10",
    "diverging": "divide the learning rate by 10 (the cheapest test), then check the "
                 "gradient norms layer by layer",
    "oscillating": "lower the learning rate or raise the batch size, and check that the "
                   "data are shuffled",
    "stepwise": "inspect the batches around the jumps: their label mix, their inputs",
    "plateau": "run the small-batch overfit test: a model that cannot memorise 64 samples "
               "has an implementation bug; one that can needs its data or rate checked",
    "degrading": "compare training and validation data and labels; then regularise or "
                 "get more data",
}

# Instruments a history may lack (a plain Monitor has no validation or timing), each
# by one column it writes: when absent, the diagnosis says so.
INSTRUMENT_COLUMNS = {
    "gradients": "grad_norm", "validation": "val_loss", "batch labels": "label_purity",
    "timing": "t_data", "input statistics": "input_absmax",
    "output gradient": "output_grad_zero_frac", "padding": "pad_attention",
}


@dataclass(frozen=True)
class Diagnosis:
    """What a history says: its shape, the ranked causes and how sure that is."""

    shape: str  # healthy | diverging | oscillating | plateau | stepwise | degrading | nonfinite
    shape_evidence: str  # the measurements that decided the shape
    causes: list[tuple[str, float, str]]  # (fault name, score, evidence), best first
    lookalikes: list[str] = field(default_factory=list)  # causes the telemetry can't separate
    experiment: str | None = None  # the single-factor experiment that would tell
    confidence: str = "high"  # high | medium | low
    missing: list[str] = field(default_factory=list)  # instruments absent from the history
    shape_alternative: str | None = None  # the other side of a borderline shape
    unchecked: list[str] = field(default_factory=list)  # faults this history cannot test

    @property
    def top(self) -> str | None:
        """The best-supported fault, or None when no signature fired."""
        return self.causes[0][0] if self.causes else None

    def __str__(self) -> str:
        shape = self.shape + (f" (borderline {self.shape_alternative})"
                              if self.shape_alternative else "")
        lines = [f"shape: {shape} - {self.shape_evidence}"]
        if not self.causes:
            lines.append("cause: no signature of the catalogue fired")
        for name, score, evidence in self.causes:
            lines.append(f"cause: {name} (margin {score:.2f}) - {evidence}")
        if self.lookalikes:
            lines.append(f"look-alikes: {', '.join(self.lookalikes)}")
        if self.experiment:
            lines.append(f"next experiment: {self.experiment}")
        if self.missing:
            lines.append(f"not recorded: {', '.join(self.missing)}")
        if self.unchecked and not self.causes:
            lines.append(f"not checkable without them: {', '.join(self.unchecked)}")
        lines.append(f"confidence: {self.confidence}")
        return "\n".join(lines)


def diagnose(history) -> Diagnosis:
    """Diagnose a `Run` or a history DataFrame (from `fl.run` or `fl.Monitor`)."""
    history = _history(history)
    values = measure(history)
    shape, evidence, alternative = _shape(values)
    fired, unchecked = _evaluate(history, values)
    causes = [(e.fault, e.score, e.sentence) for e in fired]
    missing = [name for name, col in INSTRUMENT_COLUMNS.items() if col not in history.columns
               and not (name == "padding" and values["input_is_tokens"] == 0)]
    if fired:  # other causes whose evidence is nearly as strong
        lookalikes = [e.fault for e in fired[1:] if fired[0].score - e.score < LOOKALIKE_GAP]
    elif shape != "healthy":  # an unexplained failure: untestable faults that fit it
        lookalikes = [name for name in unchecked if _shows(name, shape)]
    else:
        lookalikes = []
    if causes:
        experiment = catalogue.FAULTS[causes[0][0]].experiment
        confidence = "medium" if lookalikes else "high"
    else:
        experiment = NEXT_STEP.get(shape)
        confidence = "low" if shape != "healthy" else "medium" if unchecked else "high"
    return Diagnosis(shape, evidence, causes, lookalikes, experiment, confidence, missing,
                     alternative, unchecked)


def _history(obj) -> pd.DataFrame:
    history = history_of(obj, "diagnose")
    if "loss" not in history.columns:
        raise ValueError("diagnose needs a history with a 'loss' column (one row per step)")
    if history.empty:
        raise ValueError("diagnose needs at least one recorded step; this history is empty")
    if len(history) < 2 and math.isfinite(float(history["loss"].iloc[0])):
        raise ValueError("diagnose needs at least 2 recorded steps to see a trend; this "
                         "history has 1 (a single finite loss says nothing about training)")
    return history


def _evaluate(history: pd.DataFrame, values: dict[str, float]):
    """Fired signatures (best first), and the names of faults that lack the columns to
    be tested but are contradicted by nothing that was measured."""
    fired, unchecked = [], []
    for fault in catalogue.FAULTS.values():
        ev = fault.evidence(history, dict(values))
        if ev.fired:
            fired.append(ev)
        elif ev.missing and _holds_where_measured(fault, ev):
            unchecked.append(fault.name)
    fired.sort(key=lambda e: -e.score)
    return fired, unchecked


def _shows(name: str, shape: str) -> bool:
    """Does this fault produce the observed loss-curve shape?"""
    fault = catalogue.FAULTS[name]
    return shape in (fault.shape, *fault.other_shapes)


def _holds_where_measured(fault, ev) -> bool:
    """Every condition that could be measured holds."""
    measured = [c for c in fault.signature.conditions if c.quantity not in ev.missing]
    return all(c.margin(ev.values[c.quantity]) >= 0 for c in measured)


def _shape(q: dict[str, float]) -> tuple[str, str, str | None]:
    """The course's loss-curve taxonomy, decided by the first rule that applies."""
    progress, peak = q["loss_progress"], q["loss_peak_ratio"]
    progress = 0.0 if abs(progress) < 0.005 else progress  # no "-0%" in the evidence
    swing, spread, rise = q["loss_swing"], q["loss_end_spread"], q["val_loss_rise"]
    if q["nonfinite_losses"] > 0:
        if peak >= STEP_PEAK:
            return "diverging", f"the loss rose to {peak:.3g}x its start, then turned " \
                                f"non-finite", None
        return "nonfinite", f"the loss turned non-finite at step " \
                            f"{q['first_nonfinite']:.0f} without rising first", None
    if progress <= 1 - BLOWUP:
        return "diverging", f"the loss ended {1 - progress:.3g}x its start", None
    if swing >= SWING:
        kind = "stepwise" if peak >= STEP_PEAK else "oscillating"
        other = "oscillating" if kind == "stepwise" else "stepwise"
        return kind, f"smoothed swings of {swing:.2f} of the loss scale, peaking at " \
                     f"{peak:.3g}x the start", _near(peak, STEP_PEAK, other)
    if peak >= RISE and progress <= 0:
        return "diverging", f"the loss peaked at {peak:.3g}x its start and ended " \
                            f"{-progress:.0%} above it", _near(peak, RISE, "plateau")
    if progress <= STUCK:
        return "plateau", f"the loss stayed at its initial level (progress " \
                          f"{progress:.0%})", None
    if rise >= DEGRADING and progress >= TRAINS:
        return "degrading", f"training removed {progress:.0%} of the loss while validation " \
                            f"loss rose {rise:.2f} above its minimum", \
            _near(rise, DEGRADING, "healthy")
    if progress < CONVERGED and spread < QUIET:
        return "plateau", f"the loss stalled at {1 - progress:.0%} of its start with little " \
                          f"noise (relative std {spread:.2f})", _near(progress, CONVERGED,
                                                                      "healthy")
    alternative = _near(rise, DEGRADING, "degrading") if rise == rise else None
    return "healthy", f"training removed {progress:.0%} of the initial loss", alternative


def _near(value: float, threshold: float, other: str) -> str | None:
    """Name the other shape when the deciding value sits close to its threshold."""
    if value != value or threshold == 0:
        return None
    return other if abs(value - threshold) <= BORDERLINE * abs(threshold) else None
