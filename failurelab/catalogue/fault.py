"""A fault as data: teaching text, a pure edit of a recipe, its fix, its distinguishing
experiment and its signature.  The entries live in the `catalogue` package; looking
one up by name is `faults`' job, so the arrows point one way: faults -> catalogue ->
fault."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..basics.recipes import Edit, Recipe, Scale, Set, apply
from ..basics.text import Text, language
from ..evidence.experiments import Outcome
from ..evidence.shapes import SHAPES
from ..evidence.signatures import Evidence, Signature

FAMILIES = ("data", "optimization", "numerics", "activation", "implementation",
            "evaluation", "performance")
PHENOMENON_TEXTS = {"A": Text("loss diverges", "损失发散"),
                    "B": Text("loss does not go down", "损失不下降"),
                    "C": Text("NaN", "出现 NaN"),
                    "D": Text("training is unbearably slow", "训练慢得无法忍受")}
PHENOMENA = {key: text.en for key, text in PHENOMENON_TEXTS.items()}
TEXTS = ("title", "symptom", "cause", "experiment", "fix", "why_several_fields")
# The course's four worksheet columns, named once for every page that shows them.
COLUMN_NAMES = {"symptom": Text("symptom", "现象"), "cause": Text("cause", "可能原因"),
                "experiment": Text("distinguishing experiment", "区分实验"),
                "fix": Text("fix", "修复动作")}


def phenomenon(key: str | None, lang: str | None = None) -> str:
    """"A: loss diverges" (or its Chinese); "" for a fault without a field phenomenon."""
    return f"{key}: {PHENOMENON_TEXTS[key].say(lang)}" if key else ""


@dataclass(frozen=True)
class Chinese:
    """A fault's teaching texts in Chinese, written in the entry beside the English ones
    (same numbers, same code names: tests/test_text.py compares them)."""

    title: str
    symptom: str
    cause: str
    experiment: str
    fix: str
    why_several_fields: str = ""


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
    why_several_fields: str = ""  # set when the injection changes more than one field
    fixed_accuracy: float = 0.9  # validation accuracy the fixed run reaches in every seed
    other_shapes: tuple[str, ...] = ()  # shapes its curve honestly shows on some seeds or
    #   optimizers instead; read through `accepted_shapes`, never on its own
    instrument: str | None = None  # the plot that shows the cause, if not the signature's
    also: tuple[Signature, ...] = ()  # other routes to the same cause, for loops that
    #   record other columns (a validation loss); the strongest route that fires counts
    explains: tuple[str, ...] = ()  # faults whose evidence this one's mechanism produces
    #   (a summed loss makes every step too large): when both fire, this one ranks first
    zh: Chinese | None = None  # the teaching texts in Chinese
    # The experiments on a user's own loop (`fl.investigate`) that decide it: each route
    # of `confirm` is an Outcome, or a tuple of Outcomes that must all hold; any outcome
    # of `refute` rules it out.  Empty: no experiment of `investigate` can test it.
    confirm: tuple = ()
    refute: tuple[Outcome, ...] = ()

    def text(self, part: str, lang: str | None = None) -> str:
        """One of the teaching texts (see TEXTS) in `lang`; English where no Chinese
        was written (a test makes sure every catalogue entry has it)."""
        if part not in TEXTS:
            raise ValueError(f"unknown text {part!r}; choose one of {', '.join(TEXTS)}")
        if language(lang) == "zh" and self.zh is not None:
            return getattr(self.zh, part)
        return getattr(self, part)

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

    @property
    def signatures(self) -> tuple[Signature, ...]:
        """The main signature, then the other routes to the same cause."""
        return (self.signature, *self.also)

    def evidence(self, history: pd.DataFrame, cache: dict | None = None,
                 lang: str | None = None) -> Evidence:
        """The strongest route that fires; the main signature's evidence if none does.
        `lang`: the language of its sentence."""
        cache = {} if cache is None else cache
        routes = [s.evaluate(self.name, history, cache, lang) for s in self.signatures]
        fired = [e for e in routes if e.fired]
        return max(fired, key=lambda e: e.score) if fired else routes[0]

    @property
    def confirm_routes(self) -> tuple[tuple[Outcome, ...], ...]:
        """Each route of `confirm` as a tuple of the outcomes that must all hold."""
        return tuple(r if isinstance(r, tuple) else (r,) for r in self.confirm)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES}")
        if self.shape not in SHAPES or not set(self.other_shapes) <= set(SHAPES):
            raise ValueError(f"{self.name}: shape and other_shapes must be in {SHAPES}")
        if self.phenomenon not in (None, *PHENOMENA):
            raise ValueError(f"{self.name}: phenomenon must be one of {tuple(PHENOMENA)}")
        for role in ("edit", "repair", "probe"):
            if not all(isinstance(c, (Set, Scale)) for c in getattr(self, role)):
                raise TypeError(f"{self.name}: {role} must be a tuple of Set/Scale changes")
        outcomes = [o for route in self.confirm_routes for o in route] + list(self.refute)
        if not all(isinstance(o, Outcome) for o in outcomes):
            raise TypeError(f"{self.name}: confirm/refute must hold experiments.Outcome values")


def accepted_shapes(fault: Fault) -> tuple[str, ...]:
    """The one shape rule: every loss-curve shape a run of `fault` can honestly show --
    its documented shape first, then its `other_shapes` (a seed or an optimizer whose
    curve crosses one of `shapes`' thresholds).  What a worksheet and a mystery accept
    as a predicted shape, what the diagnosis calls "the curve this fault makes", and
    what the report and the notebooks say a fault's curve may look like."""
    return (fault.shape, *(s for s in fault.other_shapes if s != fault.shape))
