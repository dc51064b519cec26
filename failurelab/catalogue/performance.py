"""Performance faults: correct, but slow (the field's phenomenon D)."""

from __future__ import annotations

from ..fault import Fault
from ..recipes import Set
from ..signatures import Condition as C
from ..signatures import Signature

SLOW_DATA = Fault(
    name="slow_data",
    title="Data loading dominates the step (per-sample Python parsing)",
    family="performance", task="tabular", shape="healthy", phenomenon="D",
    symptom="The loss curve is bitwise identical to the baseline's, but each step "
            "takes several times longer and most of it is spent waiting for the "
            "batch.",
    cause="Each sample is parsed from a text line and standardised in Python, one "
          "at a time, then collated. For a model this small the per-sample Python "
          "work costs more than the forward, backward and optimizer step together.",
    experiment="Time the four segments of a step: data loading is the largest. "
               "Preprocess once, vectorised, and the data share falls to the "
               "baseline's while the losses stay bitwise identical.",
    fix="Parse and standardise the whole dataset once (vectorised) and index "
        "batches from tensors; for expensive per-sample work use DataLoader workers "
        "and prefetching.",
    edit=(Set("loader", "per_sample"),),
    repair=(Set("loader", "batched"),),
    probe=(Set("loader", "batched"),),
    signature=Signature((
        C("data_time_share", True, 0.4, "median share of the step spent loading data",
          "the largest of the four segments; the vectorised loader takes ~15%",
          log=False, unit=0.1),
    ), "the model waits for data most of each step - speed up the input pipeline"),
    outcome=Signature((
        C("data_time_share", False, 0.3, "median share of the step spent loading data",
          "vectorised loading is a minor part of the step", log=False, unit=0.1),
    ), "vectorised loading removes the bottleneck"),
)

FAULTS = (SLOW_DATA,)
