"""failurelab: reproducible training-failure experiments on tiny PyTorch models.

`import failurelab as fl` does not import torch or matplotlib: the names that need them
are imported from their modules on first use (PEP 562), so `failurelab --help`, a
usage error or `fl.FAULTS` does not wait seconds for torch.  To export a new name, add
it to `_LAZY` and to `__all__` (a test checks that the two agree).

`alerts` and `mystery` are imported here at once: each shares its name with its
module, and importing a submodule rebinds the package attribute of that name to the
module, so a lazy `fl.mystery` could turn into the module behind the user's back.
Both modules are free of torch (a mystery imports the training loop when it runs).
"""

from __future__ import annotations

import importlib

from .alerts import Alert, alerts
from .mystery import Mystery, Reveal, mystery, reveal

# public name -> the module that defines it ("plots" is the module itself)
_LAZY = {
    "plots": "plots",
    "FAULTS": "catalogue",
    "Diagnosis": "diagnosis", "diagnose": "diagnosis",
    "Fault": "faults", "check": "faults", "inject": "faults",
    "answer_key": "grading", "grade": "grading",
    "Experiment": "lab", "Followup": "lab", "experiment": "lab",
    "LRRangeResult": "lr_range", "lr_range_test": "lr_range",
    "Monitor": "monitor",
    "Recipe": "recipes", "baseline": "recipes", "diff": "recipes",
    "format_diff": "recipes", "parse_seeds": "recipes",
    "Run": "runs", "read_history": "runs", "save_history": "runs",
    "Parts": "train", "build": "train", "run": "train",
    "Wild": "wild", "in_the_wild": "wild",
    "NotObservedYet": "worksheet", "PredictionLocked": "worksheet", "Worksheet": "worksheet",
}

__all__ = [
    "FAULTS", "Alert", "Diagnosis", "Experiment", "Fault", "Followup", "LRRangeResult",
    "Monitor", "Mystery", "NotObservedYet", "Parts", "PredictionLocked", "Recipe", "Reveal", "Run",
    "Wild", "Worksheet", "alerts", "answer_key", "baseline", "build", "check", "diagnose", "diff",
    "experiment", "format_diff", "grade", "in_the_wild", "inject", "lr_range_test", "mystery",
    "parse_seeds", "plots", "read_history", "reveal", "run", "save_history",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'failurelab' has no attribute {name!r}")
    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if name == module else getattr(loaded, name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
