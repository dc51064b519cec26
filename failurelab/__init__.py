"""failurelab: reproducible training-failure experiments on tiny PyTorch models.

`import failurelab as fl` imports neither torch, matplotlib nor pandas: every public
name is imported from its module on first use (PEP 562), so `failurelab --help`, a
usage error or a command's first progress line does not wait for them.  To export a new
name, add it to `_LAZY` and to `__all__` (a test checks that the two agree).
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it, relative to this package
_LAZY = {
    "Alert": "evidence.alerts", "alerts": "evidence.alerts",
    "Mystery": "course.mystery", "Reveal": "course.mystery", "mystery": "course.mystery",
    "reveal": "course.mystery",
    "plots": "views.plots",  # the module itself (see _MODULES)
    "FAULTS": "catalogue",
    "Diagnosis": "catalogue.diagnosis", "diagnose": "catalogue.diagnosis",
    "Fault": "catalogue.faults", "check": "catalogue.faults", "inject": "catalogue.faults",
    "answer_key": "course.grading", "grade": "course.grading",
    "Experiment": "course.experiment", "Followup": "course.experiment",
    "experiment": "course.experiment",
    "LRRangeResult": "lab.lr_range", "lr_range_test": "catalogue.faults",
    "Monitor": "telemetry.monitor", "MonitorWarning": "telemetry.misuse",
    "Recipe": "basics.recipes", "baseline": "basics.recipes", "diff": "basics.recipes",
    "format_diff": "basics.recipes", "parse_seeds": "basics.recipes",
    "Run": "evidence.runs", "read_history": "evidence.runs", "save_history": "evidence.runs",
    "read_log": "evidence.logs", "write_scalars": "evidence.logs",
    "Parts": "lab.train", "build": "lab.train", "run": "catalogue.faults",
    "Investigation": "investigation.study", "investigate": "investigation.study",
    "Wild": "zoo.wild", "in_the_wild": "zoo.wild",
    "NotObservedYet": "course.worksheet", "PredictionLocked": "course.worksheet",
    "Worksheet": "course.worksheet",
    "PredictionBlank": "course.worksheet",
}
_MODULES = ("plots",)  # public names that are modules, not names defined in one

__all__ = [
    "FAULTS", "Alert", "Diagnosis", "Experiment", "Fault", "Followup", "Investigation",
    "LRRangeResult", "Monitor", "MonitorWarning", "Mystery", "NotObservedYet", "Parts",
    "PredictionBlank", "PredictionLocked",
    "Recipe", "Reveal", "Run", "Wild", "Worksheet", "alerts", "answer_key", "baseline",
    "build", "check", "diagnose", "diff", "experiment", "format_diff", "grade",
    "in_the_wild", "inject", "investigate", "lr_range_test", "mystery", "parse_seeds", "plots",
    "read_history", "read_log", "reveal", "run", "save_history", "write_scalars",
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
