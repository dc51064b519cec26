"""failurelab: reproducible training-failure experiments on tiny PyTorch models."""

from .catalogue import FAULTS
from .faults import Fault, check, inject
from .monitor import Monitor
from .recipes import Recipe, baseline, diff, parse_seeds
from .runs import Run, read_history, save_history
from .train import Parts, build, run

__all__ = ["FAULTS", "Fault", "Monitor", "Parts", "Recipe", "Run", "baseline", "build",
           "check", "diff", "inject", "parse_seeds", "read_history", "run", "save_history"]
