"""failurelab: reproducible training-failure experiments on tiny PyTorch models."""

from . import plots
from .alerts import Alert, alerts
from .catalogue import FAULTS
from .diagnosis import Diagnosis, diagnose
from .faults import Fault, check, inject
from .grading import answer_key, grade
from .lab import Experiment, Followup, experiment
from .lr_range import LRRangeResult, lr_range_test
from .monitor import Monitor
from .mystery import Mystery, Reveal, mystery, reveal
from .recipes import Recipe, baseline, diff, parse_seeds
from .runs import Run, read_history, save_history
from .train import Parts, build, run
from .wild import Wild, in_the_wild
from .worksheet import PredictionLocked, Worksheet

__all__ = [
    "FAULTS", "Alert", "Diagnosis", "Experiment", "Fault", "Followup", "LRRangeResult",
    "Monitor", "Mystery", "Parts", "PredictionLocked", "Recipe", "Reveal", "Run",
    "Wild", "Worksheet", "alerts", "answer_key", "baseline", "build", "check", "diagnose", "diff",
    "experiment", "grade", "in_the_wild", "inject", "lr_range_test", "mystery", "parse_seeds", "plots",
    "read_history", "reveal", "run", "save_history",
]
