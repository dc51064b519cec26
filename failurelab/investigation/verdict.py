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

SEEN = ("present", "all")  # a check's outcome that observed a mechanism (not a guard's "absent")
PASSIVE_TOP = 3  # the passive causes taken as hypotheses
STRONG = 2 * CLEAR  # an effect this many spreads past "clearly" names a cause with high confidence


@dataclass(frozen=True)
class Hypothesis:
    fault: str
    source: str  # "diagnosis" (a fired signature), "premise" (a check showed its
    #              mechanism) or "shape" (the shape's usual suspect)
    passive_score: float = math.nan


@dataclass(frozen=True)
class Judgement:
    fault: str
    status: str  # confirmed | refuted | not supported | not tested | undecided
    outcome: Outcome | None  # the deciding outcome (the strongest confirming one)
    value: float = math.nan  # its measured effect
    source: str = "shape"
    premise: bool = False  # the confirming route holds a check that observed the cause's
    #                        mechanism (grads carried over, dead units, unscaled inputs...)
    arms: tuple[str, ...] = ()  # the arms whose effects the confirming route read


# Premises that, measured before any arm runs, propose their causes even on a curve that
# looks healthy (a run on raw pixels may still converge; a loop that hides its real
# tokens learns a little from where the padding sits): healthy loops show none of them.
PROPOSING = ("inputs_unscaled", "weights_above_default", "weights_below_default",
             "nonfinite_inputs", "batches_unmixed", "padding_hides_tokens",
             "evaluates_in_train_mode", "dropout_strong", "decay_strong", "step_climbs_loss")
# Premises that propose their causes only on a curve that is not healthy: a batch of a
# few samples is a choice many healthy loops make (a loop on batches of 8 that learns
# learns better from batches of 64, as any loop does from more samples per step); it is
# a suspect when the run fails.
SUSPECTING = ("batch_small",)


def hypotheses(diagnosis, faults: dict, premises: dict | None = None) -> list[Hypothesis]:
    """The passive causes first (best first), then the faults whose premise the parts or
    the baseline show (`premises`: check -> value), then the shape's usual suspects."""
    out: list[Hypothesis] = []
    for name, score, _ in diagnosis.causes[:PASSIVE_TOP]:
        out.append(Hypothesis(name, "diagnosis", score))
    for name in diagnosis.lookalikes:
        if name in faults and name not in {h.fault for h in out}:
            out.append(Hypothesis(name, "diagnosis"))
    proposing = PROPOSING + (SUSPECTING if diagnosis.shape != "healthy" else ())
    for name, fault in faults.items():
        if name not in {h.fault for h in out} and _premise_seen(fault, premises or {},
                                                                 proposing):
            out.append(Hypothesis(name, "premise"))
    if diagnosis.shape != "healthy":
        for name, fault in faults.items():
            shows = diagnosis.shape in (fault.shape, *fault.other_shapes)
            if shows and fault.confirm and name not in {h.fault for h in out}:
                out.append(Hypothesis(name, "shape"))
    return out


def _premise_seen(fault, premises: dict, proposing: tuple = PROPOSING) -> bool:
    """Does a confirming route of `fault` hold a proposing check that the run shows?"""
    return any(o.arm in proposing and o.holds(premises.get(o.effect, math.nan))
               for route in fault.confirm_routes for o in route)


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
    holds (a route with a premise check before one without, then the strongest); not
    supported when every route was measured and none holds."""
    for o in fault.refute:
        if o.holds(effects.get(o.effect, math.nan)):
            return Judgement(h.fault, "refuted", o, effects[o.effect], h.source)
    if not fault.confirm:
        return Judgement(h.fault, "not tested", None, source=h.source)
    best, measured_all = None, True
    for route in fault.confirm_routes:
        held = [o.holds(effects.get(o.effect, math.nan)) for o in route]
        if all(held):
            lead = route[0]
            value = effects[lead.effect]
            premise = any(o.arm in CHECKS and o.expect in SEEN for o in route)
            rank = (premise, _strength(value))
            if best is None or rank > best[0]:
                arms = tuple(o.arm for o in route if o.arm not in CHECKS)
                best = (rank, lead, value, premise, arms)
        elif any(x is None for x in held) and not any(x is False for x in held):
            measured_all = False
    if best is not None:
        _, lead, value, premise, arms = best
        return Judgement(h.fault, "confirmed", lead, value, h.source, premise, arms)
    return Judgement(h.fault, "not supported" if measured_all else "undecided", None,
                     source=h.source)


def _strength(value: float) -> float:
    return abs(value) if value == value else 0.0


# Arms whose lower loss is no remedy for anything: one batch, seen at every step, is
# memorised by any model that can learn at all; dropout off lowers any training-mode
# loss, whatever the rate was.
NOT_A_REMEDY = ("overfit_batch", "dropout_off", "weight_decay_off")

# Why the verdict has the confidence it has (a key of report.WHY).
SPECIFIC = "specific"  # one cause confirmed; the same measurements left no rival standing
TWINS = "twins"  # confirmed, not singled out: a look-alike confirmed by the same
#                  experiment (or, for a premise-backed cause, by another premise)
RIVALS = "rivals"  # another factor helped as well: something here is wrong, not shown which
PASSIVE = "passive"  # the passive reading's confident cause, which no experiment refuted
UNTESTED = "untested"  # the passive reading's cause, not confirmed by any experiment run
SUGGESTED = "suggested"  # only the curve's shape suggested it and only an effect confirms
#                          it: a change that helps, on a run whose telemetry never pointed
#                          there (a higher rate helps a model whose layers are frozen too)
NONE = "none"


def decide(judgements: list[Judgement], diagnosis, reproducible: bool,
           helped: set[str] = frozenset()):
    """(top fault or None, confidence, the judgement that named it or None, why).

    High confidence needs an effect specific to the cause: it is confirmed, and no
    other hypothesis is confirmed as well - not a look-alike by the same experiment
    (`TWINS`: medium), not another factor that helped too (`RIVALS`: low, "something
    here helps" is not a cause).  A confirmation whose route observed the cause's own
    mechanism (a premise check) outranks confirmations by effects alone: accumulated
    gradients explain why a smaller rate helps too.  A cause the passive reading named
    with confidence is kept unless an experiment refuted it, at medium confidence at
    most unless an experiment singled it out (at low when its own experiment ran and
    did not show it), and set aside when a check saw another confirmed cause's
    mechanism and none saw its own.  A cause that only the curve's shape suggested, confirmed by an
    effect alone (no check saw its mechanism), stays low: a model with frozen layers
    learns faster at a higher rate too, and was named a rate too small with confidence."""
    by_name = {j.fault: j for j in judgements}
    lead, why = _lead([j for j in judgements if j.status == "confirmed"], helped)
    kept = _passive_kept(diagnosis, by_name)
    if kept is not None and lead is not None and lead.premise and not kept.premise:
        kept = None  # a check saw another cause's mechanism: stronger than a curve's reading
    if kept is not None and (lead is None or lead.fault != kept.fault):
        # its own experiment ran and did not show it: kept, but no longer confident
        confidence = "low" if kept.status == "not supported" else _lower(diagnosis.confidence)
        return kept.fault, confidence, kept, PASSIVE
    if lead is not None:
        strong = lead.premise and lead.outcome.expect in SEEN or (
            _strength(lead.value) >= STRONG)
        confidence = {SPECIFIC: "high" if strong and reproducible else "medium",
                      TWINS: "medium", RIVALS: "low"}[why]
        if kept is not None:  # the passive reading's own confidence, short of high
            confidence = _higher(confidence, _lower(diagnosis.confidence))
        elif lead.source == "shape" and not lead.premise:
            return lead.fault, "low", lead, SUGGESTED
        return lead.fault, confidence, lead, why
    top = by_name.get(diagnosis.top) if diagnosis.top else None
    if top is not None and top.status != "refuted":
        return top.fault, "low", top, UNTESTED
    if diagnosis.shape == "healthy" and not diagnosis.causes:
        return None, "high" if reproducible else "medium", None, NONE
    return None, "low", None, NONE


def _lead(confirmed: list[Judgement], helped: set[str]) -> tuple[Judgement | None, str]:
    """The confirmed cause to name (premise-backed first, then the passive ranking's
    order) and how specific the evidence for it is.  `helped`: the arms that clearly
    lowered the loss; one outside the lead's own route is another factor that helps,
    which the lead's effect alone does not explain away."""
    if not confirmed:
        return None, NONE
    tier = [j for j in confirmed if j.premise] or confirmed
    lead, others = tier[0], tier[1:]
    elsewhere = {_factor(a) for a in helped} - {_factor(a) for a in lead.arms}
    if elsewhere:
        return lead, RIVALS  # another factor helps as much: which one is the cause?
    if not others:
        return lead, SPECIFIC
    if lead.premise or (lead.arms and all(set(j.arms) == set(lead.arms) for j in others)):
        return lead, TWINS
    return lead, RIVALS


def _factor(arm: str) -> str:
    """The factor an arm changes: lr*10 and lr*100 raise the same one."""
    return "lr up" if arm in ("lr*10", "lr*100") else arm


def _passive_kept(diagnosis, by_name: dict) -> Judgement | None:
    """The passive reading's top cause when it was named with confidence (medium or
    high) and no experiment refuted it."""
    if diagnosis.top is None or diagnosis.confidence not in ("medium", "high"):
        return None
    j = by_name.get(diagnosis.top)
    if j is None:
        return Judgement(diagnosis.top, "not tested", None, source="diagnosis")
    return None if j.status == "refuted" else j


def _lower(passive: str) -> str:
    """A passive confidence as the verdict may keep it: high needs a specific effect."""
    return "medium" if passive == "high" else passive


def _higher(a: str, b: str) -> str:
    order = ("low", "medium", "high")
    return max(a, b, key=order.index)
