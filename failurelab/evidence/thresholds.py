"""Thresholds that more than one reader uses, each declared once with its reason.

Quantities, loss-curve shapes, signatures, live alerts and plots import these names;
none of them writes the number again (tests/test_vocabulary.py greps the package).
A catalogue condition states the *physical* value written here; calibration may move
it clear of the healthy population, and every page that shows a threshold shows both.
"""

from __future__ import annotations

# The healthy band of the update ratio ‖Δw‖ / ‖w‖ per step.  Under 1e-4 the weights
# need more than 10^4 steps to move by their own size; over 1e-1 a step moves them by a
# tenth of their norm and overshoots any curvature the model has.
UPDATE_RATIO_LOW, UPDATE_RATIO_HIGH = 1e-4, 1e-1

# A final loss 10x its start has blown up, NaN or not: the loss-curve shape "diverging"
# (healthy runs end below their start and peak under 1.3x it).
LOSS_DIVERGED = 10.0

# A loss a thousand times its start has wrecked the model: gradients after that measure
# the wreckage (weights and activations in overflow territory, directions set by a few
# huge entries), not the training that led there.  Not lower: a forgotten zero_grad
# passes 100x with its gradients still parallel (the lab's tabular run reaches 386x
# with a cosine of 1).
LOSS_WRECKED = 1000.0

# A loss half again above its start has risen: no healthy run of any family or
# optimizer peaks past 1.3 times its start.
LOSS_ROSE = 1.5

# Consecutive gradients that turn by less than this (cosine >= 0.95) are a running sum,
# not fresh minibatch gradients: a sum of t gradients changes by one term in t, so it
# turns by ~1/t^2 per step (0.01 by step 10), while fresh minibatch gradients turn by
# 0.22 or more in every healthy run.  The diagnosis and the live alert read this one.
ACCUMULATING_TURN = 0.05

# A label mix read from fewer samples than this says little: of batches of 8 drawn
# from 3 balanced classes, one in 17 is three-quarters one class; of batches of 16, one
# in 440.  The share of a batch's main class is read from 16 samples or more.
LABEL_MIX_MIN_SAMPLES = 16
