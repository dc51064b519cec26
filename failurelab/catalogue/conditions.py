"""Conditions that several faults' signatures share."""

from __future__ import annotations

from ..signatures import Condition as C

UNHEALTHY = C("unhealthy_curve", True, 0.5, "loss curve unhealthy",
              "the generic effect: the loss curve has one of the course's failure shapes "
              "(diverging, plateau, oscillating, ...), decided by the same rules the "
              "diagnosis names the shape with", log=False, unit=0.5, role="effect")
STUCK = C("loss_progress", False, 0.1, "loss progress",
          "a training run that removes less than 10% of its starting loss has not "
          "learned; healthy runs of every family remove most of theirs", log=False,
          unit=0.1, role="effect")
LEARNS = C("loss_progress", True, 0.5, "loss progress",
           "the loss still falls by half: the model itself can learn", log=False, unit=0.1)
MOVING = C("update_ratio_median", True, 5e-4, "median update ratio",
           "the optimizer changes the weights by a healthy share each step; 5e-4 is 10x "
           "above a too-small rate", role="guard")
GRADIENTS_FLOW = C("zero_grad_median", False, 0.9, "median share of zero gradients",
                   "below 90% exactly-zero gradient entries, units are not dead; ReLU "
                   "networks have 20-40% from units that are off for a batch", log=False,
                   unit=0.05, role="guard")
INPUTS_SCALED = C("input_scale_spread", False, 100, "input std spread",
                  "features within a factor of 100 of each other in spread: the cause "
                  "is not the inputs' scale", role="guard")
CALM = C("loss_peak_ratio", False, 1.5, "loss peak over start",
         "the loss never rose by half above where it started (a run that jumps there "
         "first is a different failure)", role="guard")
FINITE = C("nonfinite_losses", False, 0.5, "non-finite losses", "the loss stayed finite",
           log=False, role="guard")
TOKENS = C("input_is_tokens", True, 0.5, "token-id inputs",
           "padding exists only in token sequences (checked when inputs were recorded)",
           log=False, required=False, role="guard")
WEIGHTS_KEPT = C("weight_norm_change", True, 0.5, "final over initial weight norm",
                 "the weights keep their size: nothing is pulling them to zero",
                 role="guard")
FLOAT16 = C("float16_share", True, 0.5, "share of steps with float16 logit gradients",
            "the output and its gradient live in float16 (its numbers have 10 mantissa "
            "bits and nothing under 2^-24; float32 values almost never fit that grid)",
            log=False, role="guard")
ALL_OPTIMIZED = C("unoptimized_max", False, 0.5, "parameters outside the optimizer",
                  "every parameter that gets a gradient is in the optimizer (checked when "
                  "recorded): otherwise that alone explains weights that do not move",
                  log=False, required=False, role="guard")
ALL_CONNECTED = C("param_no_grad_share", False, 0.05, "share of parameters never given "
                  "a gradient", "every parameter tensor gets some gradient: none is cut "
                  "off from the loss (a .detach() or an unused branch would explain a "
                  "stall by itself)", log=False, required=False, role="guard")
STEPS_SANE = C("update_ratio_start", False, 0.3, "update ratio of the first steps",
               "the first steps moved the weights by under 30% of their norm (healthy "
               "runs of every optimizer stay under 14%): what follows was not made by "
               "oversized updates", role="guard")
