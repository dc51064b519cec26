"""Experiments' effects: the named quantities `investigate` measures, defined once.

An experiment changes one factor of a user's run (an "arm") and compares it with the
baseline run.  Its effect is a named quantity, like the history quantities the
signatures read:

* `gain[<arm>]`: how much lower the arm's final loss is than the baseline's, in units
  of the run-to-run spread the investigation measured itself (reseeded runs).  +3 means
  the arm ended three spreads below the baseline; a run that turned non-finite has an
  infinite final loss.
* checks of the parts themselves (no training): `nonfinite_inputs` (share of the
  training batches whose inputs hold NaN/Inf), `no_grad_at_step` (share of trainable
  parameters with no or an all-zero gradient when the user's step calls
  `optimizer.step()`), `grad_not_optimized` (share holding a gradient that the
  optimizer does not hold), `grads_carried` (share of the baseline's steps whose
  gradient was never emptied since the step before), and three facts of the baseline's
  history that a route needs beside its experiment: `lr_decayed` (1 when the rate fell
  below a tenth of where it started within the first quarter of the steps),
  `dead_units` and `saturated_units` (the largest share of dead ReLU / saturated
  sigmoid-tanh units at the first step; 0 for a model without such layers),
  `inputs_unscaled` (1 when the baseline's inputs are not on a standardised scale:
  feature spreads 100x apart or values in the hundreds, the
  thresholds of no_input_norm's signature), and `weights_above_default` /
  `weights_below_default` (share of the weight tensors whose initial RMS is more than
  INIT_OFF times above / below what PyTorch's own `reset_parameters()` gives them),
  `val_inputs_shifted` (1 when the validation inputs sit as far from the training
  inputs as val_not_normalized's signature asks, in training standard deviations: a
  different preparation or population, not sampling noise), and `samples_mixed` (1
  when a fresh model's outputs for the other samples of a batch move as one sample
  changes: a reshape that mixes samples; no catalogue fault has that mechanism),
  `targets_misshaped` (1 when the targets hold the output's entries in another shape
  that only size-1 dimensions tell apart, (B,) against (B, 1): the pair an elementwise
  loss broadcasts to (B, B)), `output_activation` / `output_probabilities` (1 when the
  model's output is the output of an activation module: a rectifier or squashing
  function such as ReLU or Tanh / a softmax or sigmoid, probabilities),
  `batches_unmixed` (1 when the median batch holds less than half the label diversity
  that batches dealt at random hold: the data's order, one class or two per batch),
  and `steps_in_eval` (1 when the baseline took as large a share of its steps in eval
  mode as train_mode_not_restored's signature asks), and
  `padding_hides_tokens` (1 when the key-padding mask one step of the user's loop hands
  an attention module hides varied tokens and lets one repeated token through: the
  padding attended, the text hidden; 0 when it hides one repeated token), and
  `loss_takes_logits` (1 when your `loss` equals, on the model's output, the loss that
  reads the output as logits: cross-entropy, or binary cross-entropy with logits),
  `batch_small` (1 when the median training batch holds 8 samples or fewer:
  batch_too_small's own threshold), and `evaluates_in_train_mode` (1 when the user's own
  evaluation, handed in as `evaluate`, runs a model that holds dropout or batch norm in
  training mode), and `dropout_strong` (1 when a dropout module drops 60% of its units
  or more: dropout_too_strong's own threshold), and `decay_strong` (1 when the
  optimizer's weight decay alone, lr x weight_decay per step, would halve the weights
  within the investigated steps: weight_decay_too_large's own threshold on the weights'
  final over initial norm), and `step_climbs_loss` (1 when the gradient the user's step
  hands `optimizer.step()` points against the gradient of the user's own `loss`, cosine
  -0.5 or below: the step minimises the loss negated), and `normalised_over_batch` (1
  when a fresh model's output is a softmax or log-softmax taken across the samples of
  the batch, dim 0, not across the classes: no catalogue fault has that mechanism).

A route's check is the *premise* of its cause (the mechanism, observed): an arm such
as standardised inputs or a re-initialisation helps many broken runs, so by itself it
says "something here helps", not which cause; together with the premise it names one.

A fault of the catalogue says which outcomes confirm it and which refute it
(`Fault.confirm`, `Fault.refute`, beside its signature) in this vocabulary.
Torch-free: the effects are computed from numbers the runner measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .quantities import loss_start, nonfinite_losses

# The arms whose effect is a gain, by the short name the outcomes use.
GAIN_ARMS = ("lr/10", "lr*10", "lr*100", "overfit_batch", "labels_permuted", "inputs_standardised",
             "float32", "reinit_defaults", "reference_step", "targets_shaped",
             "output_identity", "reshuffled", "train_mode", "mask_inverted", "batches_merged",
             "dropout_off", "weight_decay_off")
CHECKS = ("nonfinite_inputs", "no_grad_at_step", "grad_not_optimized", "grads_carried",
          "lr_decayed", "dead_units", "saturated_units", "inputs_unscaled",
          "weights_above_default", "weights_below_default", "val_inputs_shifted",
          "samples_mixed", "targets_misshaped", "output_activation", "output_probabilities",
          "batches_unmixed", "steps_in_eval", "padding_hides_tokens", "loss_takes_logits",
          "batch_small", "evaluates_in_train_mode", "dropout_strong", "decay_strong",
          "step_climbs_loss", "normalised_over_batch")
EFFECTS = tuple(f"gain[{arm}]" for arm in GAIN_ARMS) + CHECKS

# "Clearly" better or worse: the arm's final loss differs from the baseline's by more
# than CLEAR spreads.  The spread is the range of the final losses of the baseline and
# two reseeded runs (three samples); an arm that changed nothing lands outside twice
# that range in few cases (the range of three draws covers most of the population).
CLEAR = 2.0
# Within one spread: the factor made no difference the runs can resolve.
SAME = 1.0
# The spread is never taken below 5% of the loss scale (the baseline's first loss, or
# the distance it travelled when larger): a loop deterministic enough that three seeds
# end within a hair of each other must still move the loss by a visible share of its
# scale before a change is called an effect, not a rounding of the same outcome.
FLOOR = 0.05
# A weight tensor starts "off the default scale" when its RMS is more than INIT_OFF
# times above or below what `reset_parameters()` gives it: every standard initializer
# (Kaiming normal with the ReLU gain, Xavier, orthogonal) lands within 2.5x of PyTorch's
# default for the same layer, so 4x is a deliberate (or mistaken) scale.
INIT_OFF = 4.0
LATE = 0.2  # the final loss is the mean of the last 20% of the steps (as `loss_end`)

EXPECTS = ("better", "worse", "changed", "unchanged", "not_worse", "present", "absent", "all")


@dataclass(frozen=True)
class Outcome:
    """One measured outcome of one experiment: `effect` (a name in EFFECTS) and what
    it is expected to show."""

    effect: str
    expect: str  # better | worse | changed | unchanged | not_worse (gains); present |
    #              absent | all (checks)

    def __post_init__(self):
        if self.effect not in EFFECTS:
            raise ValueError(f"unknown effect {self.effect!r}; choose one of {EFFECTS}")
        if self.expect not in EXPECTS:
            raise ValueError(f"unknown expectation {self.expect!r}; choose one of {EXPECTS}")

    @property
    def arm(self) -> str:
        """The arm (or check) that measures it."""
        return self.effect[5:-1] if self.effect.startswith("gain[") else self.effect

    def holds(self, value: float) -> bool | None:
        """Does the measured value show it?  None when it was not measured."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return {"better": value > CLEAR, "worse": value < -CLEAR, "changed": abs(value) > CLEAR,
                "unchanged": abs(value) < SAME, "not_worse": value > -SAME,
                "present": value > 0, "absent": value == 0, "all": value >= 1}[self.expect]


# A rate "decayed early" is below a tenth of its first value within the first quarter of
# the steps.  Schedules written for the run decay later: a cosine over the run reaches a
# tenth at 80% of it, the classic step schedule (/10 at epochs 30, 60 of 90) at a third,
# a linear decay at 90%; a per-epoch schedule stepped every batch gets there within a
# few "epochs" of batches.
EARLY = 0.25


def lr_decayed(history: pd.DataFrame) -> float:
    """1 when the baseline's learning rate fell below a tenth of its first value within
    the first `EARLY` share of the recorded steps (0 when it did so later or never):
    the mechanism of a schedule that decays too early, not of one that decays."""
    if "lr" not in history or history["lr"].notna().sum() < 2:
        return math.nan
    lrs = history["lr"].dropna().astype(float)
    if not lrs.iloc[0] > 0:
        return math.nan
    early = lrs.iloc[:max(2, math.ceil(EARLY * len(lrs)))]
    return float(early.min() < 0.1 * lrs.iloc[0])


def final_loss(history: pd.DataFrame) -> float:
    """Mean training loss of the last 20% of the steps; +inf once any loss was
    non-finite (the run broke), NaN for an empty history."""
    if history is None or "loss" not in history or history.empty:
        return math.nan
    if nonfinite_losses(history) > 0:
        return math.inf
    losses = history["loss"].astype(float)
    tail = losses.iloc[-max(1, int(round(LATE * len(losses)))):]
    return float(tail.mean())


def loss_scale(baseline: pd.DataFrame) -> float:
    """The baseline's loss scale: its first loss, or the distance it travelled when
    that is larger (a loss that starts near 0 and ends far below it)."""
    start, end = loss_start(baseline), final_loss(baseline)
    travelled = abs(start - end) if math.isfinite(end) else 0.0
    scale = max(abs(start), travelled) if math.isfinite(start) else math.nan
    return scale if scale == scale and scale > 0 else 1.0


def on_log_scale(ends: list[float]) -> bool:
    """Compare final losses as logarithms when every finite one is positive: a loss
    that blew up ends decades away from where a reseeded run of the same blow-up ends,
    and only a ratio says how far apart two such runs are.  A loss that can be zero or
    negative (one without a floor) is compared as it is."""
    finite = [e for e in ends if math.isfinite(e)]
    return bool(finite) and min(finite) > 0


def spread(ends: list[float], scale: float, baseline_end: float, log: bool) -> float:
    """Run-to-run spread: the range of the finite final losses of runs that differ only
    in their seed (as logarithms when `log`), never below FLOOR x the loss scale (as a
    ratio to the baseline's final loss when `log`)."""
    finite = [e for e in ends if math.isfinite(e)]
    if log:
        finite = [math.log(e) for e in finite]
    measured = max(finite) - min(finite) if len(finite) > 1 else 0.0
    floor = FLOOR * scale
    if log:
        level = baseline_end if math.isfinite(baseline_end) else max(
            [e for e in ends if math.isfinite(e)], default=scale)
        floor = math.log1p(floor / level)
    return max(measured, floor)


def gain(baseline_end: float, arm_end: float, spread_: float, log: bool) -> float:
    """`gain[arm]`: (baseline final loss - arm final loss) / spread, as logarithms when
    `log`.  A run that broke (inf) loses to one that did not by an infinite margin;
    two broken runs tie."""
    if math.isnan(baseline_end) or math.isnan(arm_end):
        return math.nan
    if math.isinf(baseline_end) and math.isinf(arm_end):
        return 0.0
    if math.isinf(baseline_end):
        return math.inf
    if math.isinf(arm_end):
        return -math.inf
    if log:
        return (math.log(baseline_end) - math.log(arm_end)) / spread_
    return (baseline_end - arm_end) / spread_
