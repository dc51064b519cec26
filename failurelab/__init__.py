"""failurelab: reproducible training-failure experiments on tiny PyTorch models."""

from .catalogue import FAULTS
from . import plots
from .diagnosis import Diagnosis, diagnose
from .faults import Fault, check, inject
from .monitor import Monitor
from .recipes import Recipe, baseline, diff, parse_seeds
from .runs import Run, read_history, save_history
from .train import Parts, build, run

__all__ = ["FAULTS", "Diagnosis", "Fault", "Monitor", "Parts", "Recipe", "Run", "baseline", "build",
           "check", "diagnose", "diff", "inject", "parse_seeds", "plots", "read_history", "run", "save_history"]
