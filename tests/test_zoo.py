"""The zoo: its API, bitwise reproducibility, healthy runs that learn in every family,
and faults that are physically present in the loop (not just named)."""

import math
import time

import pandas as pd
import pytest
import torch

from failurelab import zoo
from failurelab.zoo.parts import build

LEARNS = 0.6  # healthy: the last 10 steps' mean loss under 60% of the first 10 steps'
SLOW_RUN_S = 30.0  # generous bound for one run on a loaded 2-core machine (not a speed test)


def _run(case):
    started = time.perf_counter()
    history = zoo.run(case)
    assert time.perf_counter() - started < SLOW_RUN_S, case.id
    return history


def _case(family, fault, severity, optimizer=None, habits=()):
    fault_ = zoo.FAULTS[fault]
    optimizer = optimizer or next(o for o in zoo.OPTIMIZERS if fault_.applies(family, o))
    habits = tuple(h for h in zoo.HABITS if h in set(habits) | set(fault_.habits))
    return zoo.Case(family, optimizer, fault, severity, seed=0, habits=habits)


def test_api_has_the_contracts_names():
    assert len(zoo.FAMILIES) >= 6
    assert set(zoo.OPTIMIZERS) >= {"sgd", "momentum", "adam", "adamw", "rmsprop"}
    for name, fault in zoo.FAULTS.items():
        assert fault.name == name and fault.cause == zoo.EXPECTED_CAUSE[name]
        # a deliberate freeze has one form (its optimizer form is params_not_in_optimizer)
        assert len(fault.severities) >= 2 or name == "frozen_params", name
        assert any(fault.applies(f, o) for f in zoo.FAMILIES for o in zoo.OPTIMIZERS), name
    case = zoo.Case("gru", "adam", "huge_lr", 30.0, seed=1, habits=("val",))
    assert case.expected == "huge_lr" and "gru" in case.id and "huge_lr" in case.id
    assert zoo.Case("gru", "adam", "frozen_params", "requires_grad").expected == "outside"
    assert zoo.Case("gru", "adam").expected == "healthy"
    loop = build(case)
    x, y = loop.next_batch(0)
    assert len(x) == len(y) and loop.steps > 0 and loop.val is not None


def test_bad_cases_are_refused_with_the_known_names():
    with pytest.raises(ValueError, match="known"):
        zoo.Case("resnet", "adam")
    with pytest.raises(ValueError, match="severities"):
        zoo.Case("gru", "adam", "huge_lr", 7.0)
    with pytest.raises(ValueError, match="does not apply"):
        zoo.Case("autoencoder", "adam", "shuffled_labels", 1.0)
    with pytest.raises(ValueError, match="only observable"):
        zoo.Case("bag", "adam", "dropout_too_strong", 0.75)
    with pytest.raises(ValueError, match="float16"):
        zoo.Case("attention", "adam", habits=("amp",))
    with pytest.raises(ValueError, match="healthy control"):
        zoo.Case("gru", "sgd", "fp16_no_scaling", "autocast", habits=("amp",))


def test_population_holds_every_faults_healthy_control():
    population = zoo.cases()
    ids = {c.id for c in population}
    faulty = [c for c in population if c.fault is not None]
    assert {c.fault for c in faulty} == set(zoo.FAULTS)
    assert all(zoo.control(c).id in ids for c in faulty)
    healthy = [c for c in population if c.fault is None]
    assert len({(c.family, c.optimizer, c.seed) for c in healthy}) >= 7 * 3 * 3


def test_same_case_gives_a_bitwise_identical_history():
    case = zoo.Case("binary", "adam", seed=2, habits=("val", "clip", "cosine", "accum", "extras"))
    torch.manual_seed(123)
    first = zoo.run(case)
    torch.rand(5)  # the caller's RNG state must not matter
    pd.testing.assert_frame_equal(first, zoo.run(case), check_exact=True)
    assert {"val_loss", "val_acc", "lr", "batch_acc"} <= set(first.columns)


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_every_family_learns_when_healthy(family):
    optimizer = zoo.OPTIMIZERS[zoo.FAMILIES.index(family) % len(zoo.OPTIMIZERS)]
    loss = _run(zoo.Case(family, optimizer, seed=1)).loss
    assert loss.iloc[-10:].mean() < LEARNS * loss.iloc[:10].mean()


def test_misplaced_zero_grad_leaves_every_gradient_zero_at_the_step():
    for severity in zoo.FAULTS["zero_grad_misplaced"].severities:
        h = _run(_case("regressor", "zero_grad_misplaced", severity))
        assert (h.zero_grad_frac == 1).all() and (h.update_norm == 0).all()


def test_forgotten_zero_grad_sums_the_gradients():
    h = _run(_case("autoencoder", "no_zero_grad", "never", optimizer="sgd"))
    assert h.grad_cosine.iloc[20:].median() > 0.95  # a running sum changes by 1 term in t
    assert h.grad_norm.iloc[-1] > 5 * h.grad_norm.iloc[0]


def test_undivided_micro_batches_weigh_each_step_their_number():
    """Healthy accumulation (habit "accum": two micro-batches, each loss divided by 2)
    weighs a step 1; the fault's k micro-batch means, never divided, weigh it k."""
    from failurelab.evidence.quantities import step_loss_weight

    habits = ("accum",)
    healthy = _run(zoo.Case("gru", "adam", None, None, seed=0, habits=habits))
    assert step_loss_weight(healthy) == pytest.approx(1, rel=1e-4)
    for k in zoo.FAULTS["accumulation_not_divided"].severities:
        h = _run(_case("gru", "accumulation_not_divided", k, habits=habits))
        read = h.output_backwards.dropna()  # the steps the forward schedule reads
        assert len(read) and (read == k).all()
        assert step_loss_weight(h) == pytest.approx(k, rel=1e-4)


def test_clipping_scaled_gradients_pins_the_step_at_the_threshold_over_the_scale():
    """With unscale_() first (habits "amp" and "clip") the clip leaves true gradients at
    their own norms or at the threshold itself; clipped while still scaled, every step
    gets the threshold divided by the GradScaler's scale (2^15 after the first step,
    which float16 overflow makes the scaler skip)."""
    from failurelab.evidence.quantities import clipped_grad_norm

    healthy = _run(zoo.Case("bag", "sgd", None, None, seed=0, habits=("clip", "amp")))
    assert not clipped_grad_norm(healthy) < 1e-3  # NaN (not pinned) or the threshold 1
    for threshold in zoo.FAULTS["clip_before_unscale"].severities:
        h = _run(_case("bag", "clip_before_unscale", threshold, optimizer="sgd"))
        assert clipped_grad_norm(h) == pytest.approx(threshold / 2**15, rel=1e-3)


def test_raw_units_spread_the_input_scales_over_decades():
    for severity in zoo.FAULTS["no_input_norm"].severities:
        h = _run(_case("regressor", "no_input_norm", severity, optimizer="adam"))
        assert h.input_std_ratio.median() > 10 ** (severity - 1)


def test_validation_left_in_raw_units_shifts_only_the_evaluation_inputs():
    from failurelab.evidence.quantities import eval_input_shift

    healthy = _run(zoo.Case("resmlp", "adam", None, None, seed=0, habits=("val",)))
    h = _run(_case("resmlp", "val_not_normalized", 3.0, optimizer="adam"))
    assert eval_input_shift(healthy) < 0.5 < 2 < eval_input_shift(h)
    assert h["loss"].equals(healthy["loss"])  # training itself is the control's, bit for bit


def test_nan_rows_reach_the_model():
    h = _run(_case("gru", "nan_in_data", 0.01))
    assert h.input_nonfinite.sum() > 0 and not math.isfinite(h.loss.iloc[-1])


def test_half_model_has_float16_parameters_and_autocast_float16_outputs():
    loop = build(_case("resmlp", "fp16_no_scaling", "half"))
    assert all(p.dtype == torch.float16 for p in loop.model.parameters())
    assert loop.next_batch(0)[0].dtype == torch.float16
    h = _run(_case("gru", "fp16_no_scaling", "autocast"))
    assert h.output_grad_min.min() >= 5.9e-8  # nothing below float16's smallest subnormal


def test_amp_habit_scales_the_loss_and_is_a_float16_control():
    case = zoo.Case("gru", "momentum", seed=0, habits=("val", "cosine", "amp"))
    assert case in zoo.cases(seeds=(0,), faulty=False)
    h = _run(case)
    assert h.step_skipped.iloc[0] == 1  # 65536 x the first loss overflows float16: skipped
    assert (h.loc[h.step_skipped == 0, "loss_scaled"] == 1).all()
    assert h.output_grad_min.min() > 1e-4  # scaled: far above float16's subnormals
    unscaled = _run(zoo.Case("gru", "momentum", "fp16_no_scaling", "autocast", 0, ("val",)))
    assert unscaled.output_grad_min.min() < 6.1e-5  # the same gradients, unscaled
    assert (unscaled.loss_scaled == 0).all()


def test_shuffled_rows_keep_labels_but_move_inputs():
    healthy = build(zoo.Case("bag", "adam"))
    shuffled = build(_case("bag", "shuffled_labels", 0.5, optimizer="adam"))
    (x0, y0), (x1, y1) = healthy.next_batch(0), shuffled.next_batch(0)
    assert torch.equal(y0, y1)
    moved = (x0 != x1).any(1).float().mean()
    assert 0.3 < moved < 0.7  # half of the rows, less the few that drew themselves


def test_dead_and_saturated_units_at_the_start():
    dead = _run(_case("resmlp", "dead_relu", -10.0))
    column = next(c for c in dead.columns if c.startswith("dead_frac/"))
    assert dead[column].iloc[0] > 0.9
    saturated = _run(_case("binary", "saturated_sigmoid", 30.0))
    column = next(c for c in saturated.columns if c.startswith("saturated_frac/"))
    assert saturated[column].iloc[0] > 0.5


def test_outside_failures_are_physically_there():
    stale = _run(_case("regressor", "stale_optimizer", "rebuilt"))
    assert (stale.update_norm == 0).all()  # the monitored model's weights never move
    frozen = build(_case("cnn_bn", "frozen_params", "requires_grad"))
    trainable = [n for n, p in frozen.model.named_parameters() if p.requires_grad]
    assert trainable and all(n.startswith("head.") for n in trainable)


def _weight_norm(model):
    return float(sum(p.detach().float().square().sum() for p in model.parameters()
                     if p.dim() >= 2)) ** 0.5


def test_optimizer_faults_set_what_they_say():
    healthy = build(zoo.Case("cnn_bn", "momentum"))
    for factor in zoo.FAULTS["huge_lr"].severities:
        assert build(_case("cnn_bn", "huge_lr", factor, "momentum")).lr == factor * healthy.lr
    for shrink in zoo.FAULTS["weight_decay_too_large"].severities:
        loop = build(_case("cnn_bn", "weight_decay_too_large", shrink, "adamw"))
        group = loop.optimizer.param_groups[0]
        assert group["lr"] * group["weight_decay"] == pytest.approx(shrink)
    for p in zoo.FAULTS["dropout_too_strong"].severities:
        loop = build(_case("bag", "dropout_too_strong", p))
        assert [m.p for m in loop.model.modules() if isinstance(m, torch.nn.Dropout)] == [p]
        assert loop.val is not None  # only observable beside an eval-mode loss


def test_bad_init_scales_every_weight_matrix():
    healthy = _weight_norm(build(zoo.Case("regressor", "adam")).model)
    for scale in zoo.FAULTS["bad_init"].severities:
        faulty = _weight_norm(build(_case("regressor", "bad_init", scale, "adam")).model)
        assert faulty == pytest.approx(scale * healthy, rel=1e-4)


def test_wrong_loss_feeds_probabilities_to_the_loss():
    for severity in zoo.FAULTS["wrong_loss"].severities:
        loop = build(_case("bag", "wrong_loss", severity))
        with torch.no_grad():
            out = loop.model(loop.next_batch(0)[0])
        assert torch.allclose(out.sum(1), torch.ones(len(out))) and (out >= 0).all()


def test_output_activation_mismatch_clips_the_logits_at_zero():
    for severity in zoo.FAULTS["output_activation_mismatch"].severities:
        loop = build(_case("bag", "output_activation_mismatch", severity))
        with torch.no_grad():
            out = loop.model(loop.next_batch(0)[0])
        assert (out >= 0).all() and (out == 0).any()


def test_unsafe_loss_and_the_deep_unnormalised_stack_turn_the_loss_non_finite():
    for severity in zoo.FAULTS["unsafe_log_loss"].severities:
        h = _run(_case("bag", "unsafe_log_loss", severity))
        assert h.nonfinite.iloc[-1] > 0 and h.input_nonfinite.sum() == 0
    healthy = _run(zoo.Case("resmlp", "sgd"))
    for depth in zoo.FAULTS["deep_unscaled_residual"].severities:
        h = _run(_case("resmlp", "deep_unscaled_residual", depth))
        assert h.grad_norm.iloc[0] > 10 * healthy.grad_norm.iloc[0]
        assert h.output_std.iloc[0] > 10 * healthy.output_std.iloc[0]  # already at init


def test_detached_graph_stops_gradients_before_the_cut():
    h = _run(_case("cnn_bn", "detached_graph", 1.0))
    body = [c for c in h.columns if c.startswith("grad_norm/body.")]
    assert body and (h[body] == 0).all().all()
    assert (h["grad_norm/head.weight"] > 0).all()
