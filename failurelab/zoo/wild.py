"""One fault in training loops unlike the lab's: what changes, and what stays.

`in_the_wild("no_zero_grad")` plants the zoo's version of a catalogue fault, written
the way users write it, in several architecture families, runs each beside the
healthy control of the same family, optimizer and seed, and diagnoses both.  The loss
curve changes from loop to loop; the mechanism's evidence (the quantities the
signature reads) is what should stay.  The notebooks show it in "in the wild".
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .. import zoo
from ..catalogue.diagnosis import Diagnosis, diagnose
from ..evidence.signatures import fmt

# Families in the order the default picks them: as unlike each other as the zoo has.
PREFERRED = ("cnn_bn", "gru", "regressor", "attention", "bag", "resmlp", "binary",
             "autoencoder")
DEFAULT_COUNT = 3


@dataclass(frozen=True)
class Sighting:
    """The fault in one family, beside that family's healthy control."""

    case: zoo.Case
    faulty: pd.DataFrame
    healthy: pd.DataFrame
    diagnosis: Diagnosis
    healthy_diagnosis: Diagnosis


@dataclass(frozen=True)
class Wild:
    fault: str
    sightings: tuple[Sighting, ...]

    @property
    def table(self) -> pd.DataFrame:
        """One row per family: the loop, its loss, what the diagnosis said of the faulty
        run and of the healthy control, and the evidence it quoted."""
        return pd.DataFrame([_row(s) for s in self.sightings])

    def plot(self):
        """The loss of each family's control (grey) and faulty run, one panel each."""
        from ..views.plots import _pyplot, loss

        n = len(self.sightings)
        fig, axes = _pyplot().subplots(1, n, figsize=(4.2 * n, 3.4), layout="constrained",
                                       squeeze=False)
        for s, ax in zip(self.sightings, axes[0], strict=False):
            loss({"healthy control": s.healthy, f"{self.fault} (as users write it)": s.faulty},
                 ax=ax)
            ax.set_title(f"{s.case.family} / {s.case.optimizer}", fontsize=10)
        fig.suptitle(f"{self.fault} in {n} loops unlike the lab's")
        _pyplot().close(fig)
        return fig


def in_the_wild(fault: str, families=None, seed: int = 0, severity=None) -> Wild:
    """Plant zoo fault `fault` in `families` (default: three unlike ones it applies to)
    at `severity` (default: its mildest), with the optimizer and habits the zoo's
    population gives that family and seed."""
    if fault not in zoo.FAULTS:
        raise KeyError(f"unknown zoo fault {fault!r}; known: {', '.join(zoo.FAULTS)}")
    chosen = _families(fault, families)
    sightings = []
    for family in chosen:
        case = _case(fault, family, seed, severity)
        faulty, healthy = zoo.run(case), zoo.run(zoo.control(case))
        sightings.append(Sighting(case, faulty, healthy, diagnose(faulty), diagnose(healthy)))
    return Wild(fault, tuple(sightings))


def _families(fault: str, families) -> tuple[str, ...]:
    spec = zoo.FAULTS[fault]
    usable = [f for f in PREFERRED if any(spec.applies(f, o) for o in zoo.OPTIMIZERS)]
    if families is None:
        return tuple(usable[:DEFAULT_COUNT])
    wrong = [f for f in families if f not in usable]
    if wrong:
        raise ValueError(f"{fault} does not apply to {', '.join(wrong)}; it applies to "
                         f"{', '.join(usable)}")
    return tuple(families)


def _case(fault: str, family: str, seed: int, severity) -> zoo.Case:
    population = zoo.cases(families=[family], seeds=[seed], healthy=False, faults=[fault])
    if severity is None:
        return population[0]
    for case in population:
        if case.severity == severity:
            return case
    known = ", ".join(str(c.severity) for c in population)
    raise ValueError(f"{fault} on {family} has severities {known}, got {severity!r}")


def _row(s: Sighting) -> dict:
    losses = s.faulty["loss"]
    top = s.diagnosis.causes[0] if s.diagnosis.causes else None
    return {
        "family": s.case.family,
        "optimizer": s.case.optimizer,
        "severity": s.case.severity,
        "loss": f"{fmt(float(losses.iloc[0]))} -> {fmt(float(losses.iloc[-1]))}",
        "shape": s.diagnosis.shape,
        "diagnosed cause": s.diagnosis.top or "none fits",
        "confidence": s.diagnosis.confidence,
        "control diagnosed": s.healthy_diagnosis.shape,
        "evidence": top[2] if top else s.diagnosis.shape_evidence,
    }
