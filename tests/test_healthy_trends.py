"""False alarms on healthy programs: the trend verdict on curves that are not the zoo's
(still falling when the run stops, a training objective with a floor of its own, a
validation loss on a raw scale), two of benchmarks/healthy_trends.py's loops run end to
end (seconds), and causes that a loss fitted to (near) zero rules out."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

import failurelab as fl
from failurelab.evidence import shapes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import healthy_trends  # noqa: E402

# A curve that removed 27% of its start with little noise, no validation: the quantities
# `shapes.classify` reads, each set to what such a run measures.
SLOW = {"nonfinite_losses": 0.0, "first_nonfinite": math.inf, "loss_progress": 0.27,
        "loss_peak_ratio": 1.0, "loss_swing": 0.05, "loss_end_spread": 0.02,
        "val_loss_rise": math.nan, "loss_start": 2.3, "loss_end": 1.68,
        "negative_loss_growth": math.nan, "loss_late_fall": 0.02,
        "val_loss_start": math.nan, "val_loss_progress": math.nan}


def shape(**changes) -> str:
    return shapes.classify({**SLOW, **changes})[0]


def test_a_loss_that_stopped_high_is_a_plateau_and_one_still_falling_is_not():
    assert shape() == "plateau"  # settled: the second half brought 2% of the fall
    # a linear decline brings 0.44 of its fall in the second half: slow, not stalled
    assert shape(loss_late_fall=0.44) == "healthy"


def test_a_training_loss_with_a_floor_beside_a_validation_loss_that_fell_is_healthy():
    # distillation: the training loss keeps 79% (even under the stuck line) while the
    # validation cross-entropy lost 93% of its first value
    assert shape(loss_progress=0.15, val_loss_progress=0.93) == "healthy"
    # the zoo's stalled faults remove at most 59% of their validation loss: still a plateau
    assert shape(val_loss_progress=0.6) == "plateau"


def test_a_validation_rise_counts_on_the_loss_scale():
    trained = {"loss_progress": 0.99, "loss_end_spread": 0.4, "val_loss_rise": 0.2}
    # 0.2 nats on a cross-entropy that started at ln 3: degrading
    assert shape(**trained, val_loss_start=1.1) == "degrading"
    # 0.2 on an MSE that started at 74 (raw targets 0-16): noise
    assert shape(**trained, val_loss_start=74.0) == "healthy"


# distillation on seed 1 removes 32% of its training loss and is still falling (the
# stall rule alone called it a plateau); batch-4 SGD is the noisiest loop of the set
@pytest.mark.parametrize("loop, seed", [("distill_soft_targets", 1), ("small_batch_sgd", 0)])
def test_a_realistic_healthy_loop_reads_healthy(loop, seed):
    r = healthy_trends.reading(loop, seed)
    assert (r["shape"], r["top"]) == ("healthy", None), r["evidence"]


@pytest.mark.parametrize("name", ["target_broadcast", "weight_decay_too_large"])
def test_a_loss_fitted_to_zero_is_neither_a_broadcast_nor_a_decay(name):
    """Targets that are all zero: every output is pulled to one value and the weights
    shrink toward the all-zero function, which is the fit; the loss loses 99.8%."""
    signature = fl.FAULTS[name].signature
    at_threshold = {c.quantity: c.threshold for c in signature.conditions}
    assert signature.evaluate(name, pd.DataFrame(), dict(at_threshold)).fired
    fitted = {**at_threshold, "loss_progress": 0.998}
    assert not signature.evaluate(name, pd.DataFrame(), fitted).fired
