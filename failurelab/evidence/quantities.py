"""Quantities: named scalar measurements of a history, the vocabulary of signatures.

Each is a plain function `history -> float` that returns NaN when the columns it needs
are missing (a plain `Monitor` history has no validation or timing columns), so a
signature that depends on it simply cannot fire.  Windows are fractions of the run,
not fixed step counts, so the same quantity means the same thing on a 50-step loop
and a 5000-step one.  Per-module columns (`saturated_frac/<module>`, ...) are
aggregated over every module that has them.

Rows with `step_skipped == 1` (a GradScaler skipped the step because the scaled
gradients overflowed) carry no optimizer physics: gradient and update quantities read
only the rows where a step ran.  Columns that a history lacks (an old one, a lab run
without the newer Monitor columns) make their quantities NaN, never an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from . import columns, shapes
from .thresholds import LABEL_MIX_MIN_SAMPLES, LOSS_ROSE, LOSS_WRECKED

NAN = math.nan
EARLY = 0.05  # the first 5% of the steps (at least MIN_WINDOW) is "the start"
LATE = 0.2  # the last 20% of the steps is "the end"
OUTPUT_SAME = 1e-3  # relative: two instruments' std of one tensor agree to float rounding
MIN_WINDOW = 5
# A loss this many times its first value has outputs ~10x further from their targets than
# at the start: an MSE's targets then make under ~1% of its gradient's variance, and
# target_share can no longer tell a broadcast loss from a diverging one.
TARGETS_VISIBLE = 100.0
FLOAT32_ROUNDING = 2.0 ** -23  # float32's relative rounding: two equal losses differ by this
# A feature's std estimated from n samples falls below a tenth of its true value with a
# chance of order 10^-(n-1): from a batch of 2 (one difference) a few features in every
# thousand do, so thousands of features of one scale (pixels) read 100x or more apart
# by chance alone (a simulation: median 1.4e4 at 3072 features); from 8 samples the
# ratio among 3072 equally scaled features stays under 15.  Smaller batches say nothing
# about the features' relative scales.
SPREAD_BATCH = 8


def _finite(s: pd.Series) -> pd.Series:
    return s[np.isfinite(s.to_numpy(dtype=float))]


def _window(n: int, share: float) -> int:
    return max(MIN_WINDOW, int(round(share * n)))


def _head(s: pd.Series, share: float = EARLY) -> pd.Series:
    return s.iloc[:_window(len(s), share)]


def _tail(s: pd.Series, share: float = LATE) -> pd.Series:
    return s.iloc[-_window(len(s), share):]


def _column(h: pd.DataFrame, name: str) -> pd.Series | None:
    return h[name] if name in h.columns and h[name].notna().any() else None


def _values(h: pd.DataFrame, name: str) -> pd.Series | None:
    """The finite values of a column, or None when it is missing or all NaN."""
    col = _column(h, name)
    return None if col is None else _finite(col)


def _modules(h: pd.DataFrame, prefix: str) -> list[pd.Series]:
    return [h[c] for c in h.columns if c.startswith(prefix + "/") and h[c].notna().any()]


def _median(s: pd.Series | None) -> float:
    if s is None:
        return NAN
    s = _finite(s)
    return float(s.median()) if len(s) else NAN


def _stat(s: pd.Series | None, how: Callable[[pd.Series], float]) -> float:
    """`how(s)` as a float; NaN when the column is missing or empty."""
    return float(how(s)) if s is not None and len(s) else NAN


def _first(s: pd.Series) -> float:
    return s.iloc[0]


def _last(s: pd.Series) -> float:
    return s.iloc[-1]


def _stepped(h: pd.DataFrame) -> pd.DataFrame:
    """The rows where an optimizer step ran (all rows when nothing says otherwise)."""
    if "step_skipped" not in h:
        return h
    return h[h["step_skipped"].fillna(0).to_numpy() != 1]


def _losses(h: pd.DataFrame) -> pd.Series:
    return _finite(h["loss"]) if "loss" in h else pd.Series(dtype=float)


# --- the loss curve -------------------------------------------------------------------

def loss_start(h):
    """The first finite training loss: the initialised model, before any update."""
    s = _losses(h)
    return float(s.iloc[0]) if len(s) else NAN


def loss_end(h):
    """Mean training loss over the last 20% of the finite steps."""
    s = _losses(h)
    return float(_tail(s).mean()) if len(s) else NAN


def loss_peak_ratio(h):
    """Highest 5-step mean of the loss over the initial loss: > 1 means it rose.  A run
    with fewer finite losses (one that overflowed within five steps) is read on the
    mean of all of them: 2.3 then 31 then inf rose before it overflowed."""
    s = _losses(h)
    if len(s) < 2:
        return NAN
    return float(s.rolling(min(MIN_WINDOW, len(s))).mean().max() / loss_start(h))


def loss_progress(h):
    """Share of the initial loss that training removed by the end (1 = all of it)."""
    start, end = loss_start(h), loss_end(h)
    return 1 - end / start if start > 0 else NAN


def negative_loss_growth(h):
    """How many times its (negative) start the loss ended below zero: NaN unless both
    are negative.  A loss with a floor at 0 (cross-entropy, MSE, BCE, ...) is never
    negative; one that falls ever further below zero is being minimised without a
    floor."""
    start, end = loss_start(h), loss_end(h)
    return end / start if start < 0 and end < 0 else NAN


def loss_end_spread(h):
    """Relative spread (std / mean) of the loss over the last 20%: the course's
    plateau test is a spread below 1%; large values mean swings."""
    tail = _tail(_losses(h))
    return float(tail.std() / tail.mean()) if len(tail) > 1 and tail.mean() > 0 else NAN


def loss_late_fall(h):
    """Share of the loss's whole fall that came in the second half of the run: the mean
    over the middle fifth (40-60% of the steps) minus the end's mean (the last 20%),
    over the start minus the end.  A loss that settled reads ~0 (healthy converged runs
    of every zoo family 0.27 at most); a steady, linear decline reads 0.44 and one that
    slows like the square root of time 0.25: the loss was still going when the run
    stopped.  NaN when the loss did not fall."""
    s = _losses(h)
    if len(s) < 20:
        return NAN
    n = len(s)
    start, end = loss_start(h), loss_end(h)
    middle = float(s.iloc[int(0.4 * n):int(0.6 * n)].mean())
    return (middle - end) / (start - end) if start > end else NAN


def nonfinite_losses(h):
    """How many recorded losses are NaN or Inf (fl.run stops at the first)."""
    if "loss" not in h:
        return NAN
    return float((~np.isfinite(h["loss"].to_numpy(dtype=float))).sum())


def loss_swing(h):
    """Spread of the smoothed loss over the second half: the interquartile range of a
    3-step moving average over max(its median, the initial loss).  Minibatch noise
    around a converged loss gives ~0.1; swings that neither settle nor blow up give
    several tenths.  Quartiles, not the 10th/90th percentiles: a healthy run on small
    batches has rare hard batches whose loss is 5-10x the median, and they should not
    read as swings of the whole curve."""
    s = _losses(h)
    if len(s) < 20:
        return NAN
    smooth = s.rolling(3).mean().dropna()
    half = smooth.iloc[len(smooth) // 2:]
    scale = max(float(half.median()), loss_start(h))
    return float(half.quantile(0.75) - half.quantile(0.25)) / scale if scale > 0 else NAN


def loss_spikiness(h):
    """90th percentile over median of the 5-step-smoothed loss in the second half:
    about 1-2 for noise around a level or a slow drift, large when the loss sits low
    and now and then jumps far up (the stepwise pattern)."""
    s = _losses(h)
    if len(s) < 20:
        return NAN
    smooth = s.rolling(5).mean().dropna()
    half = smooth.iloc[len(smooth) // 2:]
    median = float(half.median())
    return float(half.quantile(0.9)) / median if median > 0 else NAN


def loss_persistence(h):
    """Lag-1 autocorrelation of the loss over the second half: near 0 when each batch's
    loss is an independent draw around a level, high when high and low stretches last
    several steps (jumps that then recover, or a steady drift)."""
    s = _losses(h)
    if len(s) < 20:
        return NAN
    half = s.iloc[len(s) // 2:].reset_index(drop=True)
    value = half.autocorr(1)
    return float(value) if value == value else 0.0


def unhealthy_curve(h):
    """1 when the loss curve's shape (see `shapes`) is anything but healthy, else 0:
    the generic effect of a fault that breaks training (NaN without a loss)."""
    if "loss" not in h:
        return NAN
    shape, _, _ = shapes.classify({n: QUANTITIES[n](h) for n in shapes.INPUTS})
    return 0.0 if shape == "healthy" else 1.0


def first_nonfinite(h):
    """Step of the first NaN/Inf loss, or +inf if the loss stayed finite."""
    if "loss" not in h:
        return NAN
    bad = ~np.isfinite(h["loss"].to_numpy(dtype=float))
    return float(h["step"].to_numpy()[bad.argmax()]) if bad.any() else math.inf


def nonfinite_from_backward(h):
    """1 when the run's first non-finite values were gradients of a finite loss: the
    backward pass made them (0 x inf, or 0/0 in the derivative of log, sqrt or a division
    at 0), not the data or the forward pass; 0 when the loss itself went first; NaN when
    nothing went non-finite or the counts were not recorded (steps a GradScaler skipped,
    on purpose, are not counted)."""
    if "nonfinite" not in h or "loss" not in h:
        return NAN
    h = _stepped(h)
    bad = h["nonfinite"].to_numpy(dtype=float) > 0
    if not bad.any():
        return NAN
    return float(np.isfinite(float(h["loss"].iloc[bad.argmax()])))


# --- gradients and updates ------------------------------------------------------------

def grad_cosine_end(h):
    """Median cosine of consecutive gradients over the last 20% of the steps before the
    loss blew up (`_before_blowup`): ~1 when every step repeats the previous direction
    (accumulating), ~0.3 for healthy SGD noise.  Steps after a blow-up measure the
    wreckage, not the training."""
    h = _stepped(_before_blowup(h))
    return _median(_tail(h["grad_cosine"])) if "grad_cosine" in h else NAN


def grad_cosine_start(h):
    """Median cosine of consecutive gradients over the first MIN_WINDOW steps that have
    one: which way the initialised model's first steps went.  A step too large for the
    curvature lands past the valley floor, and the next gradient points back (a negative
    cosine); minibatch noise around one direction gives about 0-0.3; steps still
    travelling down one long slope (weights that must grow far, a bias climbing to
    targets on a raw scale) keep pointing the same way, toward 1."""
    cosines = _values(_stepped(h), "grad_cosine")  # the first has no predecessor: NaN
    return _median(cosines.iloc[:MIN_WINDOW]) if cosines is not None else NAN


def _before_blowup(h: pd.DataFrame) -> pd.DataFrame:
    """The rows before the loss blew up: its first non-finite value, or the first 5-step
    mean above LOSS_WRECKED times the initial loss (all rows if neither happened, or if the
    first loss already was non-finite)."""
    before = _before_loss(h, LOSS_WRECKED, MIN_WINDOW)
    return before if len(before) else h


def _before_loss(h: pd.DataFrame, factor: float, window: int = 1) -> pd.DataFrame:
    """The rows before the loss first turned non-finite or its `window`-step mean first
    passed `factor` times the initial loss (all rows if neither happened)."""
    if "loss" not in h:
        return h
    loss = h["loss"].to_numpy(dtype=float)
    bad = ~np.isfinite(loss)
    start = loss_start(h)
    if start > 0:
        bad |= pd.Series(loss).rolling(window).mean().to_numpy() > factor * start
    return h.iloc[:int(bad.argmax())] if bad.any() else h


def grad_turn_end(h):
    """1 - grad_cosine_end: how far consecutive gradients turn.  A running sum of t
    gradients turns by about 1/t^2 per step (1e-4 after 100 steps), fresh minibatch
    gradients by 0.35 or more, so the evidence lives in decades, not in the cosine's
    last digits."""
    cosine = grad_cosine_end(h)
    return max(1.0 - cosine, 1e-9) if cosine == cosine else NAN

def grad_growth(h):
    """Median gradient norm over the last 20% over the gradient norm of the first step
    (the initialised model): a gradient that piles up grows from the very first step."""
    if "grad_norm" not in h:
        return NAN
    g = _finite(_stepped(h)["grad_norm"])
    if not len(g):
        return NAN
    start, end = float(g.iloc[0]), _median(_tail(g))
    return end / start if start > 0 else NAN


def grad_norm_rising(h):
    """Share of steps in the second half whose gradient norm exceeds the previous
    step's: ~0.5 for noise around a level, ~1 when the gradient keeps piling up."""
    if "grad_norm" not in h:
        return NAN
    h = _stepped(h)
    g = _finite(h["grad_norm"].iloc[len(h) // 2:])
    return float((g.diff().dropna() > 0).mean()) if len(g) > 2 else NAN


def grad_norm_max(h):
    """Largest finite gradient norm of the run (steps a GradScaler skipped excluded)."""
    return _stat(_values(_stepped(h), "grad_norm"), pd.Series.max)


PINNED = 1e-4  # relative change under which two steps' gradient norms are the same value


def clipped_grad_norm(h):
    """The gradient norm the steps were pinned at: its median over the steps whose norm
    repeats the previous step's to PINNED, NaN unless half the steps repeat.  A clip
    returns every gradient above its threshold at exactly that norm (a few float
    roundings apart); gradients left alone change norm from batch to batch."""
    if "grad_norm" not in h:
        return NAN
    g = _finite(_stepped(h)["grad_norm"])
    g = g[g > 0]  # a clip leaves a positive norm; gradients that are all 0 have no scale
    if len(g) < MIN_WINDOW:
        return NAN
    previous = g.shift(1).iloc[1:]
    repeats = (g.iloc[1:] - previous).abs() <= PINNED * previous
    return _median(g.iloc[1:][repeats]) if repeats.mean() >= 0.5 else NAN


def update_ratio_median(h):
    """Median ‖Δw‖/‖w‖ per step; the usual healthy range is about 1e-4 to 1e-1."""
    return _median(_column(_stepped(h), "update_ratio"))


def update_ratio_start(h):
    """Median update ratio of the first MIN_WINDOW steps: what the rate does to the
    initialised model, before anything else has had time to build up."""
    ratios = _values(_stepped(h), "update_ratio")  # the first recorded ones (economy)
    return _median(ratios.iloc[:MIN_WINDOW]) if ratios is not None else NAN


def update_ratio_peak(h):
    """Largest MIN_WINDOW-step median of the update ratio before the loss first rose by
    half above its start: the biggest steps the run took, wherever its schedule put them
    (a warm-up reaches its peak rate late; a rectified Adam adapts after a few steps of
    plain SGD), and only those that could have made a rise, not those a rise made (a
    batch of another class after a run of one class).  A loss that rose within its
    first MIN_WINDOW steps was raised by them: they are read."""
    before = _before_loss(h, LOSS_ROSE)
    ratios = _values(_stepped(before if len(before) >= MIN_WINDOW else h.iloc[:MIN_WINDOW]),
                     "update_ratio")
    if ratios is None or len(ratios) < MIN_WINDOW:
        return NAN
    return float(ratios.rolling(MIN_WINDOW).median().max())


def zero_grad_median(h):
    """Median share of gradient entries that are exactly zero."""
    return _median(_column(_stepped(h), "zero_grad_frac"))


def grad_zero_steps(h):
    """Share of the steps whose whole gradient was exactly 0 when the optimizer used
    it: a zero_grad() placed between backward() and step().  Dead units or a frozen
    layer leave other parameters (an output bias) with a gradient; only an erased
    gradient is exactly 0 everywhere."""
    g = _column(_stepped(h), "grad_norm")
    g = None if g is None else g.dropna()
    return float((g == 0).mean()) if g is not None and len(g) else NAN


def grad_carried_share(h):
    """Share of the steps after the first whose gradient never started from an empty
    `.grad` (the Monitor's `grad_carried`): 0 in every loop that zeroes its gradients
    each step, whatever else it does to them; about 1 when `zero_grad` is forgotten,
    1 - 1/(steps per epoch) when it runs once per epoch.  The first step is left out:
    set-up code (a test backward pass) may leave a gradient before the loop begins."""
    s = _values(h, "grad_carried")
    if s is None:
        return NAN
    later = s[h.loc[s.index, "step"] > 0] if "step" in h else s.iloc[1:]
    return float(later.mean()) if len(later) >= MIN_WINDOW else NAN


def batchnorm_batch_median(h):
    """Median number of samples a BatchNorm layer normalised over per forward pass in
    training mode (the step's batch over its backward passes); NaN when the model has
    no BatchNorm layer in training mode.  Under 16, batch statistics are noisy enough to
    cost accuracy and to make the training-mode loss differ from the evaluation loss
    (Wu & He, Group Normalization, 2018: BatchNorm's error climbs below 16 per batch)."""
    if "batchnorm_train" not in h or "batch_size" not in h:
        return NAN
    rows = h[h["batchnorm_train"] == 1]
    if not len(rows):
        return NAN
    passes = rows["output_backwards"] if "output_backwards" in rows else None
    per_pass = rows["batch_size"] / (passes.where(passes >= 1).fillna(1) if passes is not None
                                     else 1)
    return _median(per_pass)


def _unscaled(h, name: str) -> pd.Series | None:
    """A column on the steps an optimizer took without a GradScaler (`loss_scaled` 0):
    a scaler's scale multiplies every gradient, also on the steps it skips (NaN)."""
    col = _column(h, name)
    if col is None or "loss_scaled" not in h:
        return col
    return col[h["loss_scaled"] == 0]


def loss_weight_median(h):
    """Median total weight one backward pass's loss gave the rows of the model's output
    (the Monitor's `loss_weight`): 1 for a loss averaged over its batch, B for a sum over
    B samples, 1/k for each of k micro-batches divided by k.  NaN unless the output is
    trained by a softmax cross-entropy."""
    return _median(_unscaled(h, "loss_weight"))


def output_backwards_median(h):
    """Median number of backward passes through the output per optimizer step: 1
    without gradient accumulation, k for k micro-batches."""
    return _median(_column(h, "output_backwards"))


def step_loss_weight(h):
    """Median total weight the loss gave one optimizer step's samples: backward passes
    per step times each one's loss weight.  Exactly 1 when the step's gradient is the
    mean over its samples, whatever the micro-batching; k when each of k micro-batches
    is averaged but never divided by k."""
    weights, passes = _unscaled(h, "loss_weight"), _column(h, "output_backwards")
    if weights is None or passes is None:
        return NAN
    return _median(weights * passes.reindex(weights.index))


def unoptimized_max(h):
    """Most trainable parameters that received a gradient but sat in no optimizer param
    group (a model re-created after its optimizer, a layer added later): they never
    change, whatever their gradient says."""
    return _stat(_values(h, "unoptimized_params"), pd.Series.max)


def frozen_share(h):
    """Share of the model's weights with requires_grad=False when the Monitor was made
    (NaN for histories without the column)."""
    return _median(_column(h, "frozen_frac"))


def param_no_grad_share(h):
    """Share of the parameter tensors whose gradient was exactly 0 at every step: cut
    off from the loss (a .detach(), a branch that is never used, units dead from the
    start).  Healthy training gives every tensor some gradient."""
    h = _stepped(h)
    cols = [h[c].dropna() for c in h.columns if c.startswith("grad_norm/")]
    cols = [c for c in cols if len(c)]
    return float(np.mean([(c == 0).all() for c in cols])) if cols else NAN


def first_layer_grad_share(h):
    """Median over the run of (gradient norm of the first weight matrix) / (that of the
    last): far below 1 when gradients vanish on their way back (AUTOTRAINER's rule)."""
    h = _stepped(h)
    cols = [c for c in h.columns if c.startswith("grad_norm/") and c.endswith("weight")]
    if len(cols) < 2:
        return NAN
    first, last = h[cols[0]], h[cols[-1]]
    return _median(first / last.where(last > 0))


def weight_norm_change(h):
    """Weight norm at the end over the weight norm at the start."""
    if "weight_norm" not in h:
        return NAN
    w = _finite(h["weight_norm"])
    return float(w.iloc[-1] / w.iloc[0]) if len(w) and w.iloc[0] > 0 else NAN


# --- activations and inputs -----------------------------------------------------------

def _none_of_that_kind(h) -> float:
    """0 when activations were recorded but the model has no module of the kind asked
    about (nothing can saturate or die); NaN when activations were not recorded."""
    return 0.0 if any(c.startswith("act_mean/") for c in h.columns) else NAN


def saturation_median(h):
    """Largest, over sigmoid/tanh modules, of the median saturated share."""
    cols = _modules(h, "saturated_frac")
    return max(_median(c) for c in cols) if cols else _none_of_that_kind(h)


def saturation_start(h):
    """Largest, over sigmoid/tanh modules, saturated share at the first recorded step:
    what the initialisation (or the inputs) did, before any update could."""
    firsts = [float(f.iloc[0]) for f in map(_finite, _modules(h, "saturated_frac")) if len(f)]
    return max(firsts) if firsts else _none_of_that_kind(h)


def dead_start(h):
    """Largest, over ReLU modules, dead share at the first step."""
    cols = _modules(h, "dead_frac")
    return max(float(c.iloc[0]) for c in cols) if cols else _none_of_that_kind(h)


def dead_end(h):
    """Largest, over ReLU modules, median dead share over the last 20%."""
    cols = _modules(h, "dead_frac")
    return max(_median(_tail(c)) for c in cols) if cols else _none_of_that_kind(h)


def input_absmax(h):
    """Largest absolute input value seen in any batch."""
    return _stat(_values(h, "input_absmax"), pd.Series.max)


def input_magnitude(h):
    """Largest absolute input value of a model fed numbers (NaN for token ids, whose
    size is a vocabulary's): standardised features stay within a few tens (a
    100-sigma value is not sampling), raw units (pixels 0-255, years, prices) reach
    the hundreds and more."""
    return NAN if input_is_tokens(h) != 0 else input_absmax(h)


def input_scale_spread(h):
    """Median ratio of the largest to the smallest per-feature std in a batch (1 for
    token ids, which have no feature scales to mismatch), over the batches of at least
    SPREAD_BATCH samples; NaN when there are none (see SPREAD_BATCH).  The spread that
    does harm is the one the weights see: where the model transforms its input before
    its first layer with weights (a normalisation layer in front), a batch reads the
    smaller of the two (`first_layer_std_ratio`)."""
    if input_is_tokens(h) == 1.0:
        return 1.0
    ratio = _column(h, "input_std_ratio")
    seen = _column(h, "first_layer_std_ratio")
    if ratio is not None and seen is not None:
        ratio = np.fmin(ratio, seen)  # NaN where neither was read
    sizes = _column(h, "batch_size")
    if ratio is not None and sizes is not None:
        ratio = ratio[sizes.to_numpy(dtype=float) >= SPREAD_BATCH]
    return _median(ratio)


def eval_input_shift(h):
    """At the last evaluation, the largest standardised difference between a feature's
    mean over the evaluation inputs and over every training input seen so far (the
    Monitor's `eval_input_shift`): sampling noise, ~sqrt(2 ln F / n), when both come
    from one population prepared one way; whole standard deviations when not."""
    return _stat(_values(h, "eval_input_shift"), _last)


def batch_size_median(h):
    """Median number of samples per batch (from the input batch's first dimension)."""
    return _median(_column(h, "batch_size"))


def output_scale_start(h):
    """Std of the model's outputs (logits) on the first batch: a well-scaled
    initialisation starts near neutral predictions, std ~1 or less."""
    return _stat(_column(h, "output_std"), _first)


def output_gain_start(h):
    """Std of the model's outputs on the first batch over the largest |input| of the run
    (NaN for token ids, whose size is a vocabulary's): a fan-in scaled initialisation
    (PyTorch's default, Kaiming, Xavier) keeps each layer's output within the scale of
    its input, and the largest |input| bounds the inputs' scale from above, so an output
    std beyond it was made by the weights; one under it may have been carried in by
    inputs in raw units (55 F temperatures give a fresh forecaster outputs of std 10)."""
    out, largest = output_scale_start(h), input_magnitude(h)
    return out / largest if largest > 0 else NAN


def output_grad_zero_median(h):
    """Median share of exactly-zero entries in the gradient arriving at the model's
    output.  In float32 only perfectly fitted samples give exact zeros (~3%); in
    float16 every entry below 6e-8 flushes to zero."""
    return _median(_column(h, "output_grad_zero_frac"))


def output_grad_floor(h):
    """Smallest non-zero |gradient| that reached the model's output in the whole run.
    Float16 holds nothing between 0 and 6e-8 (2^-24), so a float16 gradient never goes
    lower; float32 gradients of well-fitted samples reach 1e-13 and below."""
    return _stat(_values(h, "output_grad_min"), pd.Series.min)


def output_prob_share(h):
    """Median share of output rows that are probabilities (entries in [0, 1] summing to
    1): a model that ends in softmax.  Fed to a loss that expects logits (cross-entropy
    applies log-softmax itself) they cap how confident any prediction can be."""
    return _median(_column(h, "output_prob_frac"))


def _as_output(h, failure: str) -> list[tuple[pd.Series, pd.Series]]:
    """For each activation module with a `failure` column ("dead_frac" for ReLU,
    "saturated_frac" for sigmoid/tanh): on the steps where both are measured, whether
    the model's output is that module's own output (its std equals the module's, to
    float rounding: the same tensor, read by two instruments), and the failure share.
    A layer's input read as an activation (`<layer>.input`) cannot be the output."""
    out = _column(h, "output_std")
    if out is None:
        return []
    pairs = []
    for c in h.columns:
        name = c.split("/", 1)[1] if c.startswith(failure + "/") else ""
        if not name or name.endswith(".input") or f"act_std/{name}" not in h:
            continue
        std, failed = h[f"act_std/{name}"], h[c]
        both = np.isfinite(out.to_numpy(dtype=float)) & np.isfinite(std.to_numpy(dtype=float))
        if both.any():
            same = (std[both] - out[both]).abs() <= OUTPUT_SAME * out[both].abs() + 1e-7
            pairs.append((same, failed[both]))
    return pairs


def output_relu_share(h):
    """Share of the steps on which the model's output is a ReLU module's own output
    (largest over ReLU modules): every entry >= 0, every negative value clipped to 0.
    Logits cannot say "unlikely" that way; 0 for a model whose output is no ReLU's."""
    pairs = _as_output(h, "dead_frac")
    if not pairs:
        return _none_of_that_kind(h) if _column(h, "output_std") is not None else NAN
    return max(float(same.mean()) for same, _ in pairs)


def output_saturated_end(h):
    """Median, over the last 20% of the steps, of the share of the model's output
    entries within 1% of a bound of its sigmoid/tanh range, read on the steps where the
    output is that module's own output (largest over such modules; 0 for a model whose
    output is none)."""
    pairs = _as_output(h, "saturated_frac")
    if not pairs:
        return _none_of_that_kind(h) if _column(h, "output_std") is not None else NAN
    tails = [_median(_tail(failed[same])) for same, failed in pairs if same.any()]
    return max(tails) if tails else 0.0


def output_softmax_share(h):
    """Share of the steps whose gradient at the output is a softmax cross-entropy's: its
    rows sum to 0, as softmax's p - y does whatever the label (`output_soft_target_frac`
    is measured exactly on those steps); a regression loss's gradient, or one logit's,
    does not.  NaN when the output's gradient was not recorded."""
    return _share_read(h, ("output_soft_target_frac",))


def _share_read(h, columns: tuple[str, ...]) -> float:
    """Share of the steps whose output was measured on which any of `columns` (each
    measured only where its gradient form was read) holds a value; NaN when the output
    was not recorded or none of `columns` is in the history."""
    present = [c for c in columns if c in h]
    if not present or _column(h, "output_std") is None:
        return NAN
    measured = np.isfinite(h["output_std"].to_numpy(dtype=float))
    if not measured.any():
        return NAN
    read = np.logical_or.reduce([h[c].notna().to_numpy() for c in present])
    return float(read[measured].mean())


def output_zero_share(h):
    """Median share of the model's output entries that are exactly 0: a logit is
    exactly 0 only where something clipped it (a ReLU or a clamp after the last layer,
    written as a module or as a function); healthy logits read 0."""
    return _median(_column(h, "output_zero_frac"))


def logit_loss_share(h):
    """Share of the steps whose gradient at the output is a loss on logits: a softmax
    cross-entropy's (rows summing to 0, `output_softmax_share`) or one logit's binary
    cross-entropy (w (sigmoid(z) - y), read by `output_sigmoid_logits`).  Both need
    logits below 0 to say "unlikely"; a regression loss needs neither.  NaN when the
    output's gradient was not recorded."""
    return _share_read(h, ("output_soft_target_frac", "output_sigmoid_logits"))


def output_std_end(h):
    """Median std of the model's output entries over the last 20% of the steps: 0 when
    every entry of every row is the same number (the output ignores its input)."""
    s = _values(h, "output_std")
    return float(_tail(s).median()) if s is not None and len(s) else NAN


def output_logprob_share(h):
    """Median share of output rows that are log-probabilities (<= 0, exp sums to 1)."""
    return _median(_column(h, "output_logprob_frac"))


def soft_target_share(h):
    """Median share of the output rows trained on soft targets: a softmax row whose
    gradient has more than one negative entry (mixup, label smoothing, distillation; a
    hard label, right or wrong, makes exactly one).  NaN when not recorded, or when the
    loss is not a softmax cross-entropy."""
    return _median(_column(h, "output_soft_target_frac"))


def _loss_misfit(h, implied: str) -> float:
    """Median, over the last fifth of the steps, of |loss - implied| / |loss|: how far
    the recorded loss is from a loss the output and its gradient imply (`implied`, a
    column).  NaN when that column is not recorded."""
    if _column(h, implied) is None or "loss" not in h:
        return NAN
    misfit = _finite((h["loss"] - h[implied]).abs() / h["loss"].abs())
    return float(_tail(misfit).median()) if len(misfit) else NAN


def loss_vs_output_ce(h):
    """How far the loss is from its output's own cross-entropy at the labels the
    gradient shows (`output_ce`): 0 to float rounding for a plain mean cross-entropy;
    label smoothing, class weights, extra loss terms and a transformed output move it."""
    return _loss_misfit(h, "output_ce")


def loss_vs_softmax_twice(h):
    """How far the loss is from the cross-entropy of softmax(softmax(output))
    (`output_ce_twice`): 0 to float rounding where softmax is applied to the output
    before a cross-entropy that applies it again, far from 0 once a plain
    cross-entropy has learned anything."""
    return _loss_misfit(h, "output_ce_twice")


def softmax_twice_fit(h):
    """How many times closer the loss is to the cross-entropy of softmax(softmax(output))
    than to the output's own cross-entropy: the median, over the last fifth of the
    steps, of |loss - output_ce| / |loss - output_ce_twice| (each relative to the loss;
    a distance below float32's rounding counts as that rounding, FLOAT32_ROUNDING).

    Which of the two the loss *is* shows before the model has learned anything, when
    both are near ln C and a threshold on either distance alone cannot tell them apart
    (a loop with softmax written before its cross-entropy barely learns at all): the
    loss equals one of them to float rounding.  Noise common to both (an output read on
    a sample of its rows) leaves the ratio near 1."""
    if _column(h, "output_ce") is None or _column(h, "output_ce_twice") is None:
        return NAN
    loss = h["loss"].abs()
    plain = (h["loss"] - h["output_ce"]).abs() / loss
    twice = ((h["loss"] - h["output_ce_twice"]).abs() / loss).clip(lower=FLOAT32_ROUNDING)
    fit = _finite(plain.clip(lower=FLOAT32_ROUNDING) / twice)
    return float(_tail(fit).median()) if len(fit) else NAN


def target_share(h):
    """Median share of the output gradient's variance that the output does not explain
    (`target_grad_share`, see telemetry.probes.target_shares): under an MSE, the part
    its targets make.  Float rounding (1e-6 and below) when every output is pulled to
    one common value, as when MSELoss broadcasts (B, 1) outputs against (B,) targets.

    Read only on steps whose loss is within TARGETS_VISIBLE of the first: once a
    diverging MSE's outputs dwarf its targets, its gradient is affine in the outputs
    whatever the loss compares (the targets sink below float32's rounding), so those
    steps say "diverged", not "broadcast"."""
    share = _column(h, "target_grad_share")
    loss = _column(h, "loss")
    if share is None or loss is None or not np.isfinite(loss.iloc[0]):
        return _median(share)
    bound = TARGETS_VISIBLE * abs(float(loss.iloc[0]))
    return _median(share[(loss.abs() <= bound).to_numpy()])


def float16_share(h):
    """Share of the recorded steps whose smallest non-zero logit gradient is a float16
    number (float16 keeps 10 mantissa bits and nothing under 2^-24): 1 when the output
    and its gradient live in float16, ~0 in float32 (an arbitrary float32 value is a
    float16 number once in 8192) or bfloat16 (its tiny values fall under float16's
    range).  Or the share of parameters held in float16/bfloat16, when recorded.
    Where the output's dtype was recorded (`output_float16`), the share of steps whose
    output was a float16 tensor, instead of the grid: in float32, a regression's
    residual on targets near 100 is a difference of nearly equal numbers whose few
    significant bits land on float16's grid about one step in two."""
    half = _values(h, "output_float16")
    if half is not None and len(half):
        return float(half.mean())
    lowp = _median(_column(h, "param_lowp_frac"))
    floor = _values(h, "output_grad_min")
    if floor is None:
        return lowp
    floor = floor[(floor > 0) & (floor < 65504)].to_numpy(dtype=float)
    if not len(floor):
        return lowp
    share = float(np.mean(floor.astype(np.float16).astype(float) == floor))
    return share if lowp != lowp else max(share, lowp)


def backward_skip_share(h):
    """Share of the steps from a GradScaler's first taken one on that it skipped while
    their loss was finite: the backward pass alone put inf/NaN in the scaled gradients
    (NaN when skips were not recorded).  The skips before the first taken step are the
    scaler finding its scale (each halves it); from then on a healthy scaler skips about
    one step per growth interval (2000 steps by default), when it tries a doubled scale.
    A run in which no step was ever taken counts all of its steps."""
    if "step_skipped" not in h or "loss" not in h or h["step_skipped"].isna().all():
        return NAN
    skipped = h["step_skipped"].fillna(0).to_numpy() == 1
    taken = np.flatnonzero(~skipped)
    settled = slice(taken[0] if len(taken) else 0, None)
    return float(np.mean((skipped & np.isfinite(h["loss"].to_numpy(dtype=float)))[settled]))


def loss_scaled_share(h):
    """Share of the steps taken by an enabled GradScaler (skipped steps not counted):
    1 for mixed precision with loss scaling, 0 without; NaN when not recorded."""
    return _stat(_values(h, "loss_scaled"), pd.Series.mean)


def input_is_tokens(h):
    """1 when the model was fed integer token ids (no feature scales to compare), 0 for
    real-valued features, NaN when inputs were not recorded."""
    if "input_absmax" not in h or h["input_absmax"].isna().all():
        return NAN
    return 1.0 if "input_std_ratio" not in h or h["input_std_ratio"].isna().all() else 0.0


def input_nonfinite_total(h):
    """NaN/Inf input values summed over the run."""
    col = _column(h, "input_nonfinite")
    return float(col.sum()) if col is not None else NAN


# --- validation, data and timing (recorded by fl.run, or by you as extra columns) -----

def val_acc_best(h):
    return _stat(_values(h, "val_acc"), pd.Series.max)


def val_acc_end(h):
    return _stat(_values(h, "val_acc"), _last)


def val_loss_end(h):
    return _stat(_values(h, "val_loss"), _last)


def val_min_recall_end(h):
    """Recall of the worst class at the last evaluation: 0 when one class is never
    predicted."""
    return _stat(_values(h, "val_min_recall"), _last)


def val_loss_start(h):
    """The first recorded validation loss: its scale before training shaped it."""
    return _stat(_values(h, "val_loss"), _first)


def val_loss_progress(h):
    """Share of the first validation loss that training removed by the end (the last
    3 evaluations' mean): how much the model learned, on data it does not train on."""
    s = _values(h, "val_loss")
    if s is None or len(s) < 4 or s.iloc[0] <= 0:
        return NAN
    return float(1 - s.iloc[-3:].mean() / s.iloc[0])


def val_loss_rise(h):
    """How far (in nats) the validation loss ended above its lowest point, both
    smoothed over 3 evaluations: single evaluations of a healthy run jump by ~0.2."""
    s = _values(h, "val_loss")
    if s is None or len(s) < 4:
        return NAN
    smooth = s.rolling(3).mean().dropna()
    return float(smooth.iloc[-1] - smooth.min())


def val_jitter_max(h):
    """Largest logit difference between two identical validation passes."""
    return _stat(_values(h, "val_jitter"), pd.Series.max)


def train_val_acc_gap(h):
    """Batch accuracy over the last 20% minus the final validation accuracy."""
    if "batch_acc" not in h:
        return NAN
    return float(_tail(h["batch_acc"]).mean()) - val_acc_end(h)


def train_eval_loss_gap(h):
    """Training minus validation loss at the same point of training: each validation in
    the last 20% of the steps against the mean training loss of the MIN_WINDOW steps up
    to it, the median over those validations.  Training runs in train mode (dropout on,
    the labels as given), validation without: a gap says the training batches are
    harder than held-out data.  (The whole late window's mean against the last
    validation alone measured how far a curve that still moves falls within the window:
    a forgotten zero_grad's swings read as a gap.)"""
    train, val = _losses(h), _values(h, "val_loss")
    if val is None or not len(train):
        return NAN
    late = val[val.index >= _tail(train).index[0]]
    if not len(late):
        late = val.iloc[-1:]
    recent = train.rolling(MIN_WINDOW, min_periods=1).mean()
    gaps = recent.reindex(late.index, method="ffill") - late  # the last step at or before
    return _median(gaps)



def train_eval_gap_z(h):
    """The train-minus-validation gap (`train_eval_loss_gap`) over its standard error:
    how far it stands out of the batch-to-batch noise of the training losses it
    averages.  That noise, sigma, is read from consecutive late losses (their
    differences have std sigma * sqrt 2, whatever slow fall the curve still has); a
    median over v validations of means of MIN_WINDOW losses has a standard error of
    about 1.25 sigma / sqrt(MIN_WINDOW v).  A batch of 8 makes it large."""
    gap = train_eval_loss_gap(h)
    if gap != gap:
        return NAN
    train, val = _losses(h), _values(h, "val_loss")
    tail = _tail(train)
    validations = max(1, int((val.index >= tail.index[0]).sum()))
    sigma = float(tail.diff().std()) / math.sqrt(2)
    if not sigma > 0:
        return math.copysign(math.inf, gap) if gap else 0.0
    return gap / (1.2533 * sigma / math.sqrt(MIN_WINDOW * validations))


def dropout_rate(h):
    """Median of the largest drop probability among the model's dropout layers in
    training mode (0: no dropout); NaN when the history does not record it."""
    return _median(_column(h, "dropout_rate"))

def eval_mode_share(h):
    """Share of the optimizer steps taken with the model in eval mode (`train_mode` 0):
    dropout off and BatchNorm normalising with its running statistics, a model other
    than the one written.  Exactly 0 in a loop that trains in training mode, and for a
    model that no layer makes compute differently in eval mode (the column is NaN
    there: no step can be taken in a mode that matters); NaN for a history that does
    not record the column."""
    if "train_mode" not in h:
        return NAN
    mode = _values(h, "train_mode")
    return 0.0 if mode is None else float((mode == 0).mean())


def sigmoid_twice_share(h):
    """Share of the steps read whose binary cross-entropy on logits was given only
    values strictly between 0 and 1 (`output_sigmoid_logits`): a sigmoid's output used
    as logits.  NaN where no such loss was read."""
    return _stat(_values(h, "output_sigmoid_logits"), pd.Series.mean)


def label_mixing(h):
    """How much of the labels' spread over the run a batch holds: the root of the
    batches' mean within-batch variance of class indices over the run's total variance
    (within plus between the batch means, from `output_label_mean` and
    `output_label_std`).  Batches drawn at random hold nearly all of it (about
    sqrt((n - 1) / n)), whatever the class balance; batches cut from data stored class by
    class hold almost none, however many classes there are (a batch of 32 straddling
    two of 100 classes: about 0.02).  NaN under 4 batches read or for one class only."""
    means, stds = _column(h, "output_label_mean"), _column(h, "output_label_std")
    if means is None or stds is None:
        return NAN
    both = pd.concat([means, stds], axis=1).dropna()
    if len(both) < 4:
        return NAN
    within = float((both.iloc[:, 1] ** 2).mean())
    total = within + float(both.iloc[:, 0].var(ddof=0))
    return math.sqrt(within / total) if total > 0 else NAN


def label_purity_median(h):
    """Median share of a batch taken by its most common label (1 = one class only);
    NaN for batches under LABEL_MIX_MIN_SAMPLES samples, whose label mix says little.
    Where the loop records no labels, the labels that a classifier's cross-entropy
    gradient names (`output_label_purity`: a softmax's or a single logit's binary
    cross-entropy, over the samples it names one for) stand in."""
    sizes = _column(h, "batch_size")
    if sizes is not None and _median(sizes) < LABEL_MIX_MIN_SAMPLES:
        return NAN
    labelled = _column(h, "label_purity")
    return _median(labelled if labelled is not None else _column(h, "output_label_purity"))


def data_time_share(h):
    """Median share of each step spent waiting for the batch (NaN under 20 steps:
    the first steps include one-off warm-up costs)."""
    parts = ["t_data", "t_forward", "t_backward", "t_step"]
    if not all(p in h for p in parts) or len(h) < 20:
        return NAN
    total = h[parts].sum(axis=1)
    return _median(h["t_data"] / total.where(total > 0))


def pad_attention_median(h):
    """Median attention mass the model puts on pad positions."""
    return _median(_column(h, "pad_attention"))


def pad_sensitivity_max(h):
    """Largest mean change of the predicted probability when pads are appended."""
    return _stat(_values(h, "pad_sensitivity"), pd.Series.max)


# --- schedules, shortcuts and the backward pass ----------------------------------------

def val_acc_early(h):
    """Best validation accuracy over the first 20% of the steps: a model that is nearly
    perfect this early found a shortcut (a healthy run climbs for hundreds of steps)."""
    s = _values(h, "val_acc")
    if s is None or "step" not in h:
        return NAN
    steps = h.loc[s.index, "step"]
    early = s[steps <= LATE * float(h["step"].max())]
    return float(early.max()) if len(early) else NAN


def _step_per_gradient(h) -> pd.Series | None:
    """Update norm over gradient norm per step: the effective learning rate."""
    if "update_norm" not in h or "grad_norm" not in h:
        return None
    g = h["grad_norm"]
    return _finite(h["update_norm"] / g.where(g > 0))


def step_size_change(h):
    """How the step per unit of gradient changed: its median over the last 20% over its
    median over the first 5%.  About 1 at a constant rate; a decayed rate shows as the
    decay factor."""
    per_gradient = _step_per_gradient(h)
    if per_gradient is None or len(per_gradient) < 2 * MIN_WINDOW:
        return NAN
    start, end = _median(_head(per_gradient)), _median(_tail(per_gradient))
    return end / start if start > 0 else NAN


def step_size_change_early(h):
    """step_size_change, but at 30-40% of the run instead of the end: a schedule that
    anneals over the whole run (cosine: still 0.73 of its start at 35%) has barely
    begun there, while one that decays far too early has already shrunk the steps."""
    per_gradient = _step_per_gradient(h)
    if per_gradient is None or len(per_gradient) < 10 * MIN_WINDOW:
        return NAN
    start = _median(_head(per_gradient))
    n = len(per_gradient)
    middle = _median(per_gradient.iloc[int(0.3 * n):int(0.4 * n)])
    return middle / start if start > 0 else NAN


def lr_change_early(h):
    """The learning rate the optimizer was set to (the Monitor's `lr` column) at 30-40%
    of the run over its start: step_size_change_early's cause, read directly.  An
    adaptive optimizer shrinks its step per unit of gradient by itself when the
    gradients grow, at a constant rate; a schedule changes this."""
    lr = _values(h, "lr")
    if lr is None or len(lr) < 10 * MIN_WINDOW:
        return NAN
    start, n = _median(_head(lr)), len(lr)
    return _median(lr.iloc[int(0.3 * n):int(0.4 * n)]) / start if start > 0 else NAN


def first_layer_grad_share_start(h):
    """first_layer_grad_share over the first 5% of the steps: how the initialised
    network passes gradient back, before training (or dying units) changes it."""
    return first_layer_grad_share(h.iloc[:_window(len(h), EARLY)])


# --- the trailing window of a run in progress (live alerts, see `alerts`) -------------

def nonfinite_steps(h):
    """How many steps had a non-finite loss or non-finite gradient entries."""
    if "loss" not in h:
        return NAN
    return float(_nonfinite_rows(h).sum())


def _nonfinite_rows(h) -> np.ndarray:
    bad = ~np.isfinite(h["loss"].to_numpy(dtype=float))
    if "nonfinite" in h:
        bad |= h["nonfinite"].fillna(0).to_numpy() > 0
    return bad


def first_nonfinite_step(h):
    """The step of the first non-finite loss or gradient (NaN when there is none)."""
    if "loss" not in h:
        return NAN
    bad = _nonfinite_rows(h)
    if not bad.any():
        return NAN
    steps = h["step"].to_numpy() if "step" in h else np.arange(len(h))
    return float(steps[bad.argmax()])


def nonfinite_values(h):
    """Non-finite gradient entries summed over the steps that had any."""
    if "loss" not in h:
        return NAN
    if "nonfinite" not in h:
        return 0.0
    return float(np.nansum(h["nonfinite"].to_numpy(dtype=float)[_nonfinite_rows(h)]))


def grad_norm_first(h):
    return _stat(_column(h, "grad_norm"), _first)


def grad_norm_last(h):
    return _stat(_column(h, "grad_norm"), _last)


def grad_or_loss_rose(h):
    """1 when the last gradient norm or the last loss is above the first: a running sum
    of gradients grows, a healthy full-batch run (parallel gradients too) shrinks."""
    if "grad_norm" not in h or "loss" not in h:
        return NAN
    g, loss = h["grad_norm"].to_numpy(dtype=float), h["loss"].to_numpy(dtype=float)
    return 1.0 if g[-1] > g[0] or loss[-1] > loss[0] else 0.0


def grad_norm_jump(h):
    """The last gradient norm over the median of the finite ones before it."""
    if "grad_norm" not in h or len(h) < 2:
        return NAN
    before, last = grad_norm_before_last(h), float(h["grad_norm"].iloc[-1])
    return last / before if math.isfinite(last) and before > 0 else NAN


def grad_norm_before_last(h):
    """Median of the finite gradient norms before the last step (economy rows have none)."""
    return _median(h["grad_norm"].iloc[:-1]) if "grad_norm" in h else NAN


def grad_norm_trend(h):
    """Mean gradient norm of the later half over that of the earlier half."""
    if "grad_norm" not in h:
        return NAN
    g = h["grad_norm"].to_numpy(dtype=float)
    early, late = (float(pd.Series(half).mean()) for half in (g[:len(g) // 2], g[len(g) // 2:]))
    return late / early if early > 0 else NAN


def loss_spread(h):
    """Relative spread (population std / mean) of the finite losses: under 1% the loss
    has stopped moving."""
    loss = _losses(h).to_numpy(dtype=float)
    return float(loss.std() / loss.mean()) if len(loss) and loss.mean() > 0 else NAN


def loss_level(h):
    """Mean of the finite losses."""
    loss = _losses(h)
    return float(loss.mean()) if len(loss) else NAN


def steps_seen(h):
    """How many steps the history holds."""
    return float(len(h)) if "loss" in h else NAN


# --- the declarations: every quantity once ---------------------------------------------

SKIP, COUNT, STOP = "skip", "count", "stop"  # NaN policies (see `Quantity.nan`)
NAN_POLICIES = {
    SKIP: "non-finite entries of its columns are left out",
    COUNT: "non-finite values are what it counts or locates",
    STOP: "reads only the rows before the loss turned non-finite or wrecked (LOSS_WRECKED)",
}


@dataclass(frozen=True)
class Quantity:
    """One named measurement of a history, declared once: how it is computed, the
    columns it reads, how it treats non-finite entries and what shows it.  Signatures,
    the diagnosis, calibration, plots, the docs and tests all read this declaration."""

    name: str
    compute: Callable[[pd.DataFrame], float]
    requires: tuple[str, ...]  # the history columns it reads ("prefix/": per module); it
    #                            is NaN on a history that has none of them
    plot: str  # the views.plots function that shows where it comes from
    nan: str = SKIP  # its NaN policy, a key of NAN_POLICIES
    binary: bool = False  # a yes/no fact (1 or 0), quoted as a word
    optional: tuple[str, ...] = ()  # columns it also reads where they exist (the steps a
    #                                 GradScaler skipped, validation for the curve's shape)

    def __post_init__(self):
        if self.nan not in NAN_POLICIES:
            raise ValueError(f"nan must be one of {tuple(NAN_POLICIES)}, got {self.nan!r}")
        unknown = [c for c in self.requires + self.optional if columns.group_of(c) is None]
        if unknown:
            raise ValueError(f"{self.name} requires undeclared columns {unknown} "
                             "(declare them in evidence.columns)")

    def __call__(self, history: pd.DataFrame) -> float:
        return self.compute(history)

    @property
    def lab_only(self) -> bool:
        """Reads a column that only the lab's loop (or your `record(**extra)`) records."""
        return any(columns.extra(c) for c in self.requires)

    def recorded(self, history_columns) -> bool:
        """Does a history with these columns hold everything this quantity reads?"""
        return all(c in history_columns if not c.endswith("/")
                   else any(h.startswith(c) for h in history_columns)
                   for c in self.requires)


QUANTITIES: dict[str, Quantity] = {}


def declare(compute: Callable[[pd.DataFrame], float], requires: tuple[str, ...], plot: str,
            *, nan: str = SKIP, binary: bool = False, optional: tuple[str, ...] = (),
            name: str | None = None) -> Quantity:
    """Add a quantity to the vocabulary (named after its function unless `name` says
    otherwise).  Other wings declare theirs the same way, e.g. an experiment's effect."""
    quantity = Quantity(name or compute.__name__, compute, tuple(requires), plot, nan, binary,
                        tuple(optional))
    if quantity.name in QUANTITIES:
        raise ValueError(f"quantity {quantity.name!r} is already declared")
    QUANTITIES[quantity.name] = quantity
    return quantity


DECLARED = (
    declare(loss_start, ("loss",), "loss"),
    declare(loss_end, ("loss",), "loss"),
    declare(loss_peak_ratio, ("loss",), "loss"),
    declare(loss_progress, ("loss",), "loss"),
    declare(negative_loss_growth, ("loss",), "loss"),
    declare(loss_end_spread, ("loss",), "loss"),
    declare(loss_late_fall, ("loss",), "loss"),
    declare(nonfinite_losses, ("loss",), "loss", nan=COUNT),
    declare(first_nonfinite, ("step", "loss"), "loss", nan=COUNT),
    declare(loss_swing, ("loss",), "loss"),
    declare(loss_spikiness, ("loss",), "loss"),
    declare(loss_persistence, ("loss",), "loss"),
    declare(unhealthy_curve, ("loss",), "loss", nan=COUNT, binary=True, optional=("val_loss",)),
    declare(grad_norm_max, ("grad_norm",), "gradients", optional=("step_skipped",)),
    declare(grad_cosine_end, ("grad_cosine",), "gradient_cosine", nan=STOP,
            optional=("step_skipped", "loss")),
    declare(grad_turn_end, ("grad_cosine",), "gradient_cosine", nan=STOP,
            optional=("step_skipped", "loss")),
    declare(grad_cosine_start, ("grad_cosine",), "gradient_cosine", optional=("step_skipped",)),
    declare(grad_growth, ("grad_norm",), "gradients", optional=("step_skipped",)),
    declare(grad_norm_rising, ("grad_norm",), "gradients", optional=("step_skipped",)),
    declare(update_ratio_median, ("update_ratio",), "update_ratio", optional=("step_skipped",)),
    declare(update_ratio_start, ("update_ratio",), "update_ratio", optional=("step_skipped",)),
    declare(update_ratio_peak, ("update_ratio",), "update_ratio", nan=STOP,
            optional=("step_skipped", "loss")),
    declare(zero_grad_median, ("zero_grad_frac",), "zero_gradients", optional=("step_skipped",)),
    declare(grad_zero_steps, ("grad_norm",), "zero_gradients", optional=("step_skipped",)),
    declare(grad_carried_share, ("grad_carried",), "gradients", optional=("step",)),
    declare(loss_weight_median, ("loss_weight",), "loss_weight", optional=("loss_scaled",)),
    declare(output_backwards_median, ("output_backwards",), "loss_weight"),
    declare(step_loss_weight, ("loss_weight", "output_backwards"), "loss_weight",
            optional=("loss_scaled",)),
    declare(batchnorm_batch_median, ("batchnorm_train", "batch_size"), "batches",
            optional=("output_backwards",)),
    declare(unoptimized_max, ("unoptimized_params",), "gradients"),
    declare(frozen_share, ("frozen_frac",), "weights"),
    declare(param_no_grad_share, ("grad_norm/",), "gradients", optional=("step_skipped",)),
    declare(first_layer_grad_share, ("grad_norm/",), "gradients", optional=("step_skipped",)),
    declare(weight_norm_change, ("weight_norm",), "weights"),
    declare(saturation_median, ("act_mean/", "saturated_frac/"), "activations"),
    declare(saturation_start, ("act_mean/", "saturated_frac/"), "activations"),
    declare(dead_start, ("act_mean/", "dead_frac/"), "activations"),
    declare(dead_end, ("act_mean/", "dead_frac/"), "activations"),
    declare(input_absmax, ("input_absmax",), "inputs"),
    declare(input_magnitude, ("input_absmax", "input_std_ratio"), "inputs"),
    declare(input_scale_spread, ("input_absmax", "input_std_ratio"), "inputs",
            optional=("batch_size", "first_layer_std_ratio")),
    declare(eval_input_shift, ("eval_input_shift",), "eval_inputs"),
    declare(batch_size_median, ("batch_size",), "batches"),
    declare(input_is_tokens, ("input_absmax", "input_std_ratio"), "inputs", binary=True),
    declare(output_scale_start, ("output_std",), "outputs"),
    declare(output_gain_start, ("output_std", "input_absmax", "input_std_ratio"), "outputs"),
    declare(output_grad_zero_median, ("output_grad_zero_frac",), "output_gradient"),
    declare(output_grad_floor, ("output_grad_min",), "output_gradient"),
    declare(output_prob_share, ("output_prob_frac",), "outputs"),
    declare(output_logprob_share, ("output_logprob_frac",), "outputs"),
    declare(output_relu_share, ("output_std", "act_std/", "dead_frac/"), "outputs"),
    declare(output_saturated_end, ("output_std", "act_std/", "saturated_frac/"), "outputs"),
    declare(output_softmax_share, ("output_soft_target_frac", "output_std"), "output_gradient"),
    declare(output_std_end, ("output_std",), "outputs"),
    declare(output_zero_share, ("output_zero_frac",), "outputs"),
    declare(logit_loss_share, ("output_std",), "output_gradient",
            optional=("output_soft_target_frac", "output_sigmoid_logits")),
    declare(soft_target_share, ("output_soft_target_frac",), "output_gradient"),
    declare(loss_vs_output_ce, ("loss", "output_ce"), "implied_loss"),
    declare(loss_vs_softmax_twice, ("loss", "output_ce_twice"), "implied_loss"),
    declare(softmax_twice_fit, ("loss", "output_ce", "output_ce_twice"), "implied_loss"),
    declare(target_share, ("target_grad_share",), "target_share"),
    declare(float16_share, ("output_grad_min", "param_lowp_frac"), "output_gradient",
            optional=("output_float16",)),
    declare(loss_scaled_share, ("loss_scaled",), "output_gradient"),
    declare(input_nonfinite_total, ("input_nonfinite",), "inputs", nan=COUNT),
    declare(val_acc_best, ("val_acc",), "accuracy"),
    declare(val_acc_end, ("val_acc",), "accuracy"),
    declare(val_loss_end, ("val_loss",), "validation"),
    declare(val_min_recall_end, ("val_min_recall",), "min_recall"),
    declare(val_loss_start, ("val_loss",), "validation"),
    declare(val_loss_progress, ("val_loss",), "validation"),
    declare(val_loss_rise, ("val_loss",), "validation"),
    declare(val_jitter_max, ("val_jitter",), "eval_jitter"),
    declare(train_val_acc_gap, ("batch_acc", "val_acc"), "accuracy"),
    declare(train_eval_loss_gap, ("loss", "val_loss"), "validation"),
    declare(train_eval_gap_z, ("loss", "val_loss"), "validation"),
    declare(dropout_rate, ("dropout_rate",), "validation"),
    declare(eval_mode_share, ("train_mode",), "train_mode"),
    declare(sigmoid_twice_share, ("output_sigmoid_logits",), "outputs"),
    declare(label_mixing, ("output_label_mean", "output_label_std"), "batches"),
    declare(label_purity_median, ("label_purity",), "batches",
            optional=("batch_size", "output_label_purity")),
    declare(data_time_share, ("t_data", "t_forward", "t_backward", "t_step"), "timing"),
    declare(pad_attention_median, ("pad_attention",), "padding"),
    declare(pad_sensitivity_max, ("pad_sensitivity",), "padding"),
    declare(val_acc_early, ("step", "val_acc"), "accuracy"),
    declare(step_size_change, ("update_norm", "grad_norm"), "update_ratio"),
    declare(step_size_change_early, ("update_norm", "grad_norm"), "update_ratio"),
    declare(lr_change_early, ("lr",), "update_ratio"),
    declare(first_layer_grad_share_start, ("grad_norm/",), "gradients", optional=("step_skipped",)),
    declare(clipped_grad_norm, ("grad_norm",), "gradients", optional=("step_skipped",)),
    declare(nonfinite_from_backward, ("loss", "nonfinite"), "loss", nan=COUNT, binary=True,
            optional=("step_skipped",)),
    declare(backward_skip_share, ("loss", "step_skipped"), "output_gradient", nan=COUNT),
    # the trailing window of a run in progress (live alerts)
    declare(nonfinite_steps, ("loss",), "loss", nan=COUNT),
    declare(first_nonfinite_step, ("loss",), "loss", nan=COUNT),
    declare(nonfinite_values, ("loss", "nonfinite"), "loss", nan=COUNT),
    declare(grad_norm_first, ("grad_norm",), "gradients"),
    declare(grad_norm_last, ("grad_norm",), "gradients"),
    declare(grad_or_loss_rose, ("grad_norm", "loss"), "gradients", binary=True),
    declare(grad_norm_jump, ("grad_norm",), "gradients"),
    declare(grad_norm_before_last, ("grad_norm",), "gradients"),
    declare(grad_norm_trend, ("grad_norm",), "gradients"),
    declare(loss_spread, ("loss",), "loss"),
    declare(loss_level, ("loss",), "loss"),
    declare(steps_seen, ("loss",), "loss"),
)

BINARY = frozenset(q.name for q in QUANTITIES.values() if q.binary)  # derived, not written
LAB_ONLY = frozenset(q.name for q in QUANTITIES.values() if q.lab_only)


def measure(history: pd.DataFrame, names=None) -> dict[str, float]:
    """Every named quantity (or those in `names`) of one history."""
    return {n: QUANTITIES[n](history) for n in (names or QUANTITIES)}
