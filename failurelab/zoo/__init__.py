"""A zoo of training loops unlike the lab's: procedurally varied, seeded, tiny plain
PyTorch loops (conv nets with BatchNorm, GRUs, attention encoders, regressors,
residual stacks, BCE classifiers, embedding bags, autoencoders) under several
optimizers and loop habits, observed by `fl.Monitor` exactly as a user's loop is,
with catalogue faults (and failures outside the catalogue) written the way users
write them.  Everything is generated from the seed: no files, no downloads.

>>> from failurelab import zoo
>>> case = zoo.Case("gru", "adam", "huge_lr", 30.0, seed=0)
>>> history = zoo.run(case)          # Monitor.history of the plain loop
>>> case.expected                    # what fl.diagnose should name
'huge_lr'
"""

from .cases import HABITS, Case, cases, control
from .families import FAMILIES, OPTIMIZERS
from .faults import EXPECTED_CAUSE, FAULTS, ZooFault
from .knobs import Knobs
from .loop import VAL_EVERY, run
from .parts import Loop, build

__all__ = ["EXPECTED_CAUSE", "FAMILIES", "FAULTS", "HABITS", "OPTIMIZERS", "VAL_EVERY", "Case",
           "Knobs", "Loop", "ZooFault", "build", "cases", "control", "run"]
