"""Hypotheses in, verdicts out.

The passive diagnosis of the baseline proposes hypotheses: its ranked causes (top 3
and their look-alikes), then every catalogue fault that makes the baseline's shape.
Each fault declares, beside its signature, which experiment outcomes confirm it and
which refute it (`Fault.confirm`, `Fault.refute`); the arms to run are exactly those
the hypotheses' outcomes name.  A cause is named only when an experiment's effect
supports it beyond the run-to-run spread the investigation measured; otherwise the
answer is "no catalogue cause fits", with what the experiments showed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..evidence.experiments import CHECKS, CLEAR, Outcome
from .arms import SEEDS

PASSIVE_TOP = 3  # the passive causes taken as hypotheses
STRONG = 2 * CLEAR  # an effect this many spreads past "clearly" names a cause with high confidence


@dataclass(frozen=True)
class Hypothesis:
    fault: str
    source: str  # "diagnosis" (a fired signature) or "shape" (the shape's usual suspect)
    passive_score: float = math.nan


@dataclass(frozen=True)
class Judgement:
    fault: str
    status: str  # confirmed | refuted | not supported | not tested | undecided
    outcome: Outcome | None  # the deciding outcome (the strongest confirming one)
    value: float = math.nan  # its measured effect
    source: str = "shape"


def hypotheses(diagnosis, faults: dict) -> list[Hypothesis]:
    """The passive causes first (best first), then the shape's usual suspects."""
    out: list[Hypothesis] = []
    for name, score, _ in diagnosis.causes[:PASSIVE_TOP]:
        out.append(Hypothesis(name, "diagnosis", score))
    for name in diagnosis.lookalikes:
        if name in faults and name not in {h.fault for h in out}:
            out.append(Hypothesis(name, "diagnosis"))
    if diagnosis.shape != "healthy":
        for name, fault in faults.items():
            shows = diagnosis.shape in (fault.shape, *fault.other_shapes)
            if shows and fault.confirm and name not in {h.fault for h in out}:
                out.append(Hypothesis(name, "shape"))
    return out


def arms_needed(hyps: list[Hypothesis], faults: dict) -> list[str]:
    """The arms the hypotheses' outcomes name, the seeds' arms first (they measure the
    spread every effect is read against); checks run without training."""
    arms: list[str] = []
    for h in hyps:
        fault = faults[h.fault]
        outcomes = [o for route in fault.confirm_routes for o in route] + list(fault.refute)
        for o in outcomes:
            if o.arm not in CHECKS and o.arm not in arms:
                arms.append(o.arm)
    return [*SEEDS, *arms] if arms else list(SEEDS)


def judge(h: Hypothesis, fault, effects: dict[str, float]) -> Judgement:
    """Refuted when a refuting outcome holds; confirmed when every outcome of one route
    holds; not supported when every route was measured and none holds."""
    if not fault.confirm:
        return Judgement(h.fault, "not tested", None, source=h.source)
    for o in fault.refute:
        if o.holds(effects.get(o.effect, math.nan)):
            return Judgement(h.fault, "refuted", o, effects[o.effect], h.source)
    best, measured_all = None, True
    for route in fault.confirm_routes:
        held = [o.holds(effects.get(o.effect, math.nan)) for o in route]
        if all(held):
            lead = route[0]
            value = effects[lead.effect]
            if best is None or _strength(value) > _strength(best[1]):
                best = (lead, value)
        elif any(x is None for x in held) and not any(x is False for x in held):
            measured_all = False
    if best is not None:
        return Judgement(h.fault, "confirmed", best[0], best[1], h.source)
    return Judgement(h.fault, "not supported" if measured_all else "undecided", None,
                     source=h.source)


def _strength(value: float) -> float:
    return abs(value) if value == value else 0.0


def decide(judgements: list[Judgement], diagnosis, reproducible: bool):
    """(top fault or None, confidence, the judgement that named it or None)."""
    confirmed = [j for j in judgements if j.status == "confirmed"]
    if confirmed:
        j = confirmed[0]  # hypotheses are in the passive ranking's order
        strong = (j.outcome.expect in ("present", "all") or _strength(j.value) >= STRONG)
        return j.fault, "high" if strong and reproducible else "medium", j
    # No experiment confirmed a cause: a passive cause that no experiment can test
    # keeps its passive confidence (said "not tested"); any other stays unnamed.
    untested = [j for j in judgements if j.status == "not tested" and j.source == "diagnosis"]
    if untested and diagnosis.top == untested[0].fault:
        return untested[0].fault, diagnosis.confidence, untested[0]
    if diagnosis.shape == "healthy" and not diagnosis.causes:
        return None, "high" if reproducible else "medium", None
    return None, "low", None
