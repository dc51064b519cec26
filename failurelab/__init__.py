"""failurelab: reproducible training-failure experiments on tiny PyTorch models.

`import failurelab as fl` does not import torch or matplotlib: the names that need them
are imported from their modules on first use (PEP 562), so `failurelab --help`, a
usage error or `fl.FAULTS` does not wait seconds for torch.  To export a new name, add
it to `_LAZY` and to `__all__` (a test checks that the two agree).

`alerts` and `mystery` are imported here at once; both are free of torch (a mystery
imports the training loop when it runs).  Their modules live in wings, so importing
them binds `evidence.alerts` and `course.mystery`, never `fl.alerts` or `fl.mystery`.
"""

from __future__ import annotations

import importlib

from .course.mystery import Mystery, Reveal, mystery, reveal
from .evidence.alerts import Alert, alerts

# public name -> the module that defines it, relative to this package
_LAZY = {
    "plots": "views.plots",  # the module itself (see _MODULES)
    "FAULTS": "catalogue",
    "Diagnosis": "catalogue.diagnosis", "diagnose": "catalogue.diagnosis",
    "Fault": "catalogue.faults", "check": "catalogue.faults", "inject": "catalogue.faults",
    "answer_key": "course.grading", "grade": "course.grading",
    "Experiment": "course.experiment", "Followup": "course.experiment",
    "experiment": "course.experiment",
    "LRRangeResult": "lab.lr_range", "lr_range_test": "lab.lr_range",
    "Monitor": "telemetry.monitor", "MonitorWarning": "telemetry.misuse",
    "Recipe": "basics.recipes", "baseline": "basics.recipes", "diff": "basics.recipes",
    "format_diff": "basics.recipes", "parse_seeds": "basics.recipes",
    "Run": "evidence.runs", "read_history": "evidence.runs", "save_history": "evidence.runs",
    "Parts": "lab.train", "build": "lab.train", "run": "lab.train",
    "Investigation": "investigation.study", "investigate": "investigation.study",
    "Wild": "zoo.wild", "in_the_wild": "zoo.wild",
    "NotObservedYet": "course.worksheet", "PredictionLocked": "course.worksheet",
    "Worksheet": "course.worksheet",
}
_MODULES = ("plots",)  # public names that are modules, not names defined in one

__all__ = [
    "FAULTS", "Alert", "Diagnosis", "Experiment", "Fault", "Followup", "Investigation",
    "LRRangeResult",
    "Monitor", "MonitorWarning", "Mystery", "NotObservedYet", "Parts", "PredictionLocked",
    "Recipe", "Reveal", "Run", "Wild", "Worksheet", "alerts", "answer_key", "baseline",
    "build", "check", "diagnose", "diff", "experiment", "format_diff", "grade",
    "in_the_wild", "inject", "investigate", "lr_range_test", "mystery", "parse_seeds", "plots",
    "read_history", "reveal", "run", "save_history",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'failurelab' has no attribute {name!r}")
    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if name in _MODULES else getattr(loaded, name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
