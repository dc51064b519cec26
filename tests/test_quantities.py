"""One test per declared quantity, on a small synthetic history built here: its value,
computed again in this file with numpy (never by calling the quantity), and its NaN
policy (a history without the columns it declares gives NaN, so a renamed column fails
here rather than turning a signature silently off).

The history: 60 steps of a loss falling along a zig-zag line, gradients growing
linearly, evaluations every 10 steps, and every other column a constant or a ramp,
so that each expected value below can be checked by hand.
"""

import math

import numpy as np
import pandas as pd
import pytest

from failurelab.evidence import columns
from failurelab.evidence.quantities import QUANTITIES

N = 60
STEP = np.arange(N, dtype=float)
LOSS = 2.0 - 0.02 * STEP + 0.01 * (-1) ** STEP  # 2.01 -> 0.81, zig-zagging by 0.02
GRAD = 1.0 + 0.05 * STEP  # 1.0 -> 3.95
RATIO = 0.001 * (1 + STEP)  # 0.001 -> 0.060
COSINE = 0.2 + 0.01 * STEP
LR = np.where(STEP < 10, 0.1, 0.05)
DEAD = 0.1 + 0.005 * STEP
EVALS = [0, 10, 20, 30, 40, 50, 59]  # rows with a validation
VAL_LOSS = [2.0, 1.2, 1.0, 0.9, 1.0, 1.3, 1.6]
VAL_ACC = [0.5, 0.8, 0.95, 0.97, 0.96, 0.9, 0.85]
LABEL_MEAN = 1.0 + 0.01 * STEP  # drifting: a little of the spread lies between batches
TAIL = 12  # the last 20% of 60 steps
HEAD = 5  # the first 5% of 60 steps is 3: MIN_WINDOW (5) instead


def _at_evals(values):
    out = np.full(N, np.nan)
    out[EVALS] = values
    return out


def synthetic() -> pd.DataFrame:
    const = np.ones(N)
    eval_shift = np.full(N, np.nan)
    eval_shift[-1] = 0.1
    return pd.DataFrame({
        "step": STEP, "loss": LOSS, "grad_norm": GRAD, "weight_norm": 10 + 0.1 * STEP,
        "update_norm": 0.01 * GRAD, "update_ratio": RATIO, "grad_cosine": COSINE,
        "nonfinite": 0 * const, "zero_grad_frac": 0.25 * const, "grad_carried": 0 * const,
        "lr": LR, "param_lowp_frac": 0 * const, "unoptimized_params": 0 * const,
        "step_skipped": 0 * const, "dropout_rate": 0.2 * const, "loss_scaled": 0 * const,
        "batchnorm_train": const, "frozen_frac": 0 * const, "train_mode": const,
        "grad_norm/a.weight": 0.5 * GRAD, "grad_norm/b.weight": GRAD,
        "grad_norm/b.bias": 0 * const,
        "act_mean/relu": const, "dead_frac/relu": DEAD,
        "act_mean/sig": const, "saturated_frac/sig": 0.05 * const,
        # the model's output is the ReLU's for the first half, the sigmoid's after
        "act_std/relu": np.where(STEP < 30, 0.5, 0.7), "act_std/sig": np.where(STEP < 30, 0.3, 0.5),
        "input_absmax": 3 * const, "input_std_ratio": 2 * const, "input_nonfinite": 0 * const,
        "batch_size": 32 * const, "eval_input_shift": eval_shift,
        "output_std": 0.5 * const, "output_grad_zero_frac": 0.03 * const,
        "output_grad_min": 1e-9 * const, "output_prob_frac": 0 * const,
        "output_logprob_frac": 0 * const, "output_nonfinite": 0 * const,
        "loss_weight": const, "output_backwards": const, "output_soft_target_frac": 0 * const,
        "output_ce": LOSS, "output_ce_twice": 2 * LOSS, "target_grad_share": 0.9 * const,
        "val_loss": _at_evals(VAL_LOSS), "val_acc": _at_evals(VAL_ACC),
        "val_min_recall": _at_evals([0.4] * 7), "val_jitter": _at_evals([0.0] * 7),
        "label_purity": 0.5 * const, "batch_acc": 0.9 * const,
        "output_sigmoid_logits": np.where(STEP < 15, 1.0, 0.0),
        "output_label_mean": LABEL_MEAN, "output_label_std": 0.8 * const,
        "output_zero_frac": np.where(STEP < 40, 0.5, 0.0),
        "t_data": 0.1 * const, "t_forward": 0.2 * const, "t_backward": 0.3 * const,
        "t_step": 0.4 * const, "pad_attention": 0 * const, "pad_sensitivity": 0.002 * const,
    })


def _quantile(x, q):
    return float(np.quantile(x, q))  # linear interpolation, as pandas


def _expected() -> dict[str, float]:
    loss, tail = LOSS, LOSS[-TAIL:]
    end = tail.mean()
    smooth3 = (loss[:-2] + loss[1:-1] + loss[2:]) / 3
    half3 = smooth3[len(smooth3) // 2:]
    smooth5 = np.convolve(loss, np.ones(5) / 5, mode="valid")
    half5 = smooth5[len(smooth5) // 2:]
    val_smooth = np.convolve(VAL_LOSS, np.ones(3) / 3, mode="valid")
    # the evaluations in the last 20% (rows 50 and 59) against the mean training loss of
    # the 5 steps up to each; the noise: consecutive late losses differ by sigma * sqrt 2
    gap = np.median([loss[46:51].mean() - VAL_LOSS[-2], loss[55:60].mean() - VAL_LOSS[-1]])
    sigma = np.diff(tail).std(ddof=1) / math.sqrt(2)
    late = loss[N // 2:]
    rolling_median = [np.median(RATIO[i - 4:i + 1]) for i in range(4, N)]
    return {
        "loss_start": loss[0], "loss_end": end,
        "loss_peak_ratio": max(smooth5) / loss[0],
        "loss_progress": 1 - end / loss[0], "negative_loss_growth": math.nan,
        "loss_end_spread": tail.std(ddof=1) / end, "nonfinite_losses": 0.0,
        # steps 24-35 are the middle fifth: a linear decline brings 0.44 of its fall there
        "loss_late_fall": (loss[24:36].mean() - end) / (loss[0] - end),
        "first_nonfinite": math.inf,
        "loss_swing": (_quantile(half3, .75) - _quantile(half3, .25))
        / max(np.median(half3), loss[0]),
        "loss_spikiness": _quantile(half5, .9) / np.median(half5),
        "loss_persistence": np.corrcoef(late[:-1], late[1:])[0, 1],
        # validation rose 0.33 above its smoothed minimum (17% of its first value) while
        # training halved its loss: the shape "degrading" (shapes.DEGRADING is 0.15 and
        # DEGRADING_SHARE 6%), not healthy
        "unhealthy_curve": 1.0 if val_smooth[-1] - val_smooth.min() > 0.15 else 0.0,
        "grad_norm_max": GRAD.max(), "grad_cosine_end": np.median(COSINE[-TAIL:]),
        "grad_turn_end": 1 - np.median(COSINE[-TAIL:]),
        "grad_cosine_start": np.median(COSINE[:HEAD]),
        "grad_growth": np.median(GRAD[-TAIL:]) / GRAD[0], "grad_norm_rising": 1.0,
        "update_ratio_median": np.median(RATIO), "update_ratio_start": np.median(RATIO[:5]),
        "update_ratio_peak": max(rolling_median), "zero_grad_median": 0.25,
        "grad_zero_steps": 0.0, "grad_carried_share": 0.0, "loss_weight_median": 1.0,
        "output_backwards_median": 1.0, "step_loss_weight": 1.0,
        "batchnorm_batch_median": 32.0, "unoptimized_max": 0.0, "frozen_share": 0.0,
        "param_no_grad_share": 1 / 3, "first_layer_grad_share": 0.5,
        "weight_norm_change": (10 + 0.1 * 59) / 10, "saturation_median": 0.05,
        "saturation_start": 0.05, "dead_start": DEAD[0], "dead_end": np.median(DEAD[-TAIL:]),
        "input_absmax": 3.0, "input_magnitude": 3.0, "input_scale_spread": 2.0,
        "eval_input_shift": 0.1, "batch_size_median": 32.0, "input_is_tokens": 0.0,
        "output_scale_start": 0.5, "output_gain_start": 0.5 / 3.0, "output_grad_zero_median": 0.03,
        "output_grad_floor": 1e-9, "output_prob_share": 0.0, "output_logprob_share": 0.0,
        "soft_target_share": 0.0, "loss_vs_output_ce": 0.0, "loss_vs_softmax_twice": 1.0,
        "softmax_twice_fit": 2.0 ** -23,  # exactly the plain CE: its distance is rounding
        "output_relu_share": 0.5, "output_saturated_end": 0.05, "output_softmax_share": 1.0,
        "output_std_end": 0.5, "target_share": 0.9,
        "output_zero_share": 0.5,  # 40 of 60 steps at 0.5: the median's
        "logit_loss_share": 1.0,  # every step's gradient was read as a softmax's

        "float16_share": 0.0,  # 1e-9 is under float16's smallest number: not on its grid
        "loss_scaled_share": 0.0, "input_nonfinite_total": 0.0,
        "val_acc_best": max(VAL_ACC), "val_acc_end": VAL_ACC[-1], "val_loss_end": VAL_LOSS[-1],
        "val_loss_start": VAL_LOSS[0], "val_loss_progress": 1 - np.mean(VAL_LOSS[-3:]) / VAL_LOSS[0],
        "val_min_recall_end": 0.4, "val_loss_rise": val_smooth[-1] - val_smooth.min(),
        "val_jitter_max": 0.0, "train_val_acc_gap": 0.9 - VAL_ACC[-1],
        "train_eval_loss_gap": gap,
        "train_eval_gap_z": gap / (1.2533 * sigma / math.sqrt(5 * 2)),
        "dropout_rate": 0.2, "eval_mode_share": 0.0, "label_purity_median": 0.5,
        "sigmoid_twice_share": 0.25,  # 15 of 60 steps
        "label_mixing": math.sqrt(0.64 / (0.64 + LABEL_MEAN.var())),
        "data_time_share": 0.1, "pad_attention_median": 0.0, "pad_sensitivity_max": 0.002,
        "val_acc_early": max(VAL_ACC[:2]),  # steps 0 and 10 are in the first 20% (<= 11.8)
        "step_size_change": 1.0, "step_size_change_early": 1.0,
        "lr_change_early": 0.5, "first_layer_grad_share_start": 0.5,
        "clipped_grad_norm": math.nan,  # no two steps share a norm: nothing was clipped
        "nonfinite_from_backward": math.nan,  # nothing went non-finite
        "backward_skip_share": 0.0,
        "nonfinite_steps": 0.0, "first_nonfinite_step": math.nan, "nonfinite_values": 0.0,
        "grad_norm_first": GRAD[0], "grad_norm_last": GRAD[-1], "grad_or_loss_rose": 1.0,
        "grad_norm_jump": GRAD[-1] / np.median(GRAD[:-1]),
        "grad_norm_before_last": np.median(GRAD[:-1]),
        "grad_norm_trend": GRAD[30:].mean() / GRAD[:30].mean(),
        "loss_spread": LOSS.std() / LOSS.mean(), "loss_level": LOSS.mean(),
        "steps_seen": float(N),
    }


EXPECTED = _expected()


def test_every_declared_quantity_has_an_expected_value_here():
    assert set(EXPECTED) == set(QUANTITIES)


@pytest.mark.parametrize("name", list(QUANTITIES))
def test_quantity_value_on_the_synthetic_history(name):
    value, expected = QUANTITIES[name](synthetic()), EXPECTED[name]
    if math.isnan(expected):
        assert math.isnan(value)
    else:
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", list(QUANTITIES))
def test_quantity_is_nan_without_the_columns_it_declares(name):
    quantity = QUANTITIES[name]
    h = synthetic()
    gone = [c for c in h.columns if any(c == r or (r.endswith("/") and c.startswith(r))
                                        for r in quantity.requires)]
    assert gone, f"{name} declares columns the synthetic history lacks: {quantity.requires}"
    assert math.isnan(quantity(h.drop(columns=gone)))


@pytest.mark.parametrize("name", list(QUANTITIES))
def test_quantity_needs_nothing_beyond_what_it_declares(name):
    """Its declared columns (required and optional; and the step index) alone give the
    same value."""
    quantity = QUANTITIES[name]
    h = synthetic()
    kept = [c for c in h.columns if c == "step" or any(
        c == r or (r.endswith("/") and c.startswith(r))
        for r in quantity.requires + quantity.optional)]
    value = quantity(h[kept])
    if math.isnan(EXPECTED[name]):
        assert math.isnan(value)
    else:
        assert value == pytest.approx(EXPECTED[name], rel=1e-9, abs=1e-12)


def test_the_synthetic_history_holds_only_declared_columns():
    assert [c for c in synthetic().columns if columns.group_of(c) is None] == []


def test_input_scale_spread_reads_only_batches_large_enough_to_estimate_a_spread():
    """A per-feature std from 2 samples is one difference: thousands of features of one
    scale read 100x apart by chance.  Such batches are left out; none left: NaN."""
    from failurelab.evidence.quantities import SPREAD_BATCH, input_scale_spread

    h = synthetic()
    h["input_std_ratio"] = np.where(STEP < 30, 5000.0, 2.0)
    h["batch_size"] = np.where(STEP < 30, SPREAD_BATCH - 1, SPREAD_BATCH)
    assert input_scale_spread(h) == 2.0
    h["batch_size"] = 2.0
    assert math.isnan(input_scale_spread(h))
