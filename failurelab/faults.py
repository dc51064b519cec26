"""Faults as data: teaching text, a pure edit of a recipe, its fix, its distinguishing
experiment and its signature.  The catalogue itself lives in the `catalogue` package."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import pandas as pd

from .recipes import Edit, Recipe, Scale, Set, apply, baseline
from .runs import history_of
from .signatures import Evidence, Signature

FAMILIES = ("data", "optimization", "numerics", "activation", "implementation",
            "evaluation", "performance")
SHAPES = ("diverging", "oscillating", "plateau", "stepwise", "degrading", "nonfinite",
          "healthy")  # "healthy": the loss looks fine; only a dedicated measurement shows it
PHENOMENA = {"A": "loss diverges", "B": "loss does not go down", "C": "NaN",
             "D": "training is unbearably slow"}


@dataclass(frozen=True)
class Fault:
    """One single-factor fault of the catalogue."""

    name: str  # registry key, e.g. "huge_lr"
    title: str
    family: str  # one of FAMILIES
    task: str  # the task whose baseline it is injected into by name
    shape: str  # the loss-curve shape it produces (one of SHAPES)
    phenomenon: str | None  # A-D of the course's field phenomena, where one applies
    symptom: str  # what the instruments show
    cause: str  # the violated premise and the mechanism
    experiment: str  # the single-factor experiment that tells it apart, and its outcome
    fix: str  # what a practitioner changes
    edit: Edit  # the injection, as data: the Set/Scale changes it makes to a recipe
    repair: Edit  # the fix, applied to the faulty recipe
    probe: Edit  # the distinguishing experiment, applied to the faulty recipe
    signature: Signature  # what a run with this fault measurably shows
    outcome: Signature  # what the distinguishing experiment's run measurably shows
    why_two_fields: str = ""  # set when the injection must change two fields
    fixed_accuracy: float = 0.9  # validation accuracy the fixed run reaches in every seed
    other_shapes: tuple[str, ...] = ()  # shapes some seeds show instead (said honestly)
    instrument: str | None = None  # the plot that shows the cause, if not the signature's

    def inject(self, recipe: Recipe) -> Recipe:
        return apply(recipe, self.edit)

    def apply_fix(self, faulty: Recipe) -> Recipe:
        """The repair a practitioner would make (not necessarily the baseline)."""
        return apply(faulty, self.repair)

    def distinguishing(self, faulty: Recipe) -> Recipe:
        """The single-factor experiment that tells this fault from its look-alikes."""
        return apply(faulty, self.probe)

    @property
    def fields(self) -> tuple[str, ...]:
        """The recipe fields the injection changes: where the fault enters the loop."""
        return tuple(change.field for change in self.edit)

    def evidence(self, history: pd.DataFrame, cache: dict | None = None) -> Evidence:
        return self.signature.evaluate(self.name, history, cache)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES}")
        if self.shape not in SHAPES:
            raise ValueError(f"{self.name}: shape must be one of {SHAPES}")
        if self.phenomenon not in (None, *PHENOMENA):
            raise ValueError(f"{self.name}: phenomenon must be one of {tuple(PHENOMENA)}")
        for role in ("edit", "repair", "probe"):
            if not all(isinstance(c, (Set, Scale)) for c in getattr(self, role)):
                raise TypeError(f"{self.name}: {role} must be a tuple of Set/Scale changes")


def get(name: str) -> Fault:
    """The fault called `name`; a KeyError lists the known ones and the closest match."""
    from .catalogue import FAULTS

    if not isinstance(name, str) or name not in FAULTS:
        close = difflib.get_close_matches(str(name).lower(), FAULTS, n=1)  # names are lower case
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown fault {name!r}.{hint} Known faults: {', '.join(FAULTS)}")
    return FAULTS[name]


def inject(recipe: Recipe, *names: str) -> Recipe:
    """A new recipe with the named faults applied, in order (the recipe is unchanged)."""
    for name in names:
        recipe = get(name).inject(recipe)
    return recipe


def resolve(recipe_or_name: Recipe | str) -> Recipe:
    """A recipe as is, a task name's baseline, or a fault injected into its baseline."""
    if isinstance(recipe_or_name, Recipe):
        return recipe_or_name
    if isinstance(recipe_or_name, str):
        if recipe_or_name in ("tabular", "sequence"):
            return baseline(recipe_or_name)
        fault = get(recipe_or_name)
        return fault.inject(baseline(fault.task))
    raise TypeError(f"expected a Recipe or a fault name, got {type(recipe_or_name).__name__}")


def check(run_or_history, name: str) -> Evidence:
    """Assert that a run shows the documented signature of fault `name`.

    Raises AssertionError quoting every measured quantity against its threshold when it
    does not; returns the evidence when it does.
    """
    fault = get(name)
    evidence = fault.evidence(history_of(run_or_history, "check"))
    if not evidence.fired:
        raise AssertionError(f"{name}: signature not shown: {evidence.sentence}")
    return evidence
