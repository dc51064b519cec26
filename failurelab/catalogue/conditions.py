"""Conditions that several faults' signatures share, and small recipe edits."""

from __future__ import annotations

from ..signatures import Condition as C

STUCK = C("loss_progress", False, 0.1, "loss progress",
          "a training run that removes less than 10% of its starting loss has not "
          "learned; the baseline removes 88% or more", log=False, unit=0.1)
LEARNS = C("loss_progress", True, 0.5, "loss progress",
           "the loss still falls by half: the model itself can learn", log=False, unit=0.1)
MOVING = C("update_ratio_median", True, 5e-4, "median update ratio",
           "the optimizer changes the weights by a healthy share each step (baseline "
           "~1e-2); 5e-4 is 20x below that and 10x above a too-small rate")
GRADIENTS_FLOW = C("zero_grad_median", False, 0.9, "median share of zero gradients",
                   "below 90% exactly-zero gradient entries, units are not dead; the "
                   "baseline has 20-40% from ReLUs that are off for a batch", log=False,
                   unit=0.05)
INPUTS_SCALED = C("input_scale_spread", False, 100, "input std spread",
                  "features within a factor of 100 of each other in spread")
CALM = C("loss_peak_ratio", False, 1.5, "loss peak over start",
         "the loss never rose by half above where it started (baseline <= 1.03; a "
         "run that jumps there first is a different failure)")
FINITE = C("nonfinite_losses", False, 0.5, "non-finite losses", "the loss stayed finite",
           log=False)
TOKENS = C("input_is_tokens", True, 0.5, "token-id inputs",
           "padding exists only in token sequences (checked when inputs were recorded)",
           log=False, required=False)
WEIGHTS_KEPT = C("weight_norm_change", True, 0.5, "final over initial weight norm",
                 "the weights keep their size: nothing is pulling them to zero")
ACCURATE = C("val_acc_best", True, 0.85, "best validation accuracy",
             "the model reaches high accuracy: what is wrong is not what it learns",
             log=False, unit=0.05)
