"""Diagnosis outside the lab: plain loops of the zoo's families, faults written the way
users write them, failures outside the catalogue, and histories without the newer
Monitor columns.  A few sampled cases each; the whole population is the benchmark's
(benchmarks/diagnosis.py --zoo)."""

import math

import foreign_loops
import pytest
from runs_cache import cached_run

import failurelab as fl
from failurelab import zoo
from failurelab.evidence.quantities import measure


@pytest.mark.parametrize("family", zoo.FAMILIES)
def test_a_healthy_run_of_every_zoo_family_is_called_healthy(family):
    optimizer = zoo.OPTIMIZERS[zoo.FAMILIES.index(family) % len(zoo.OPTIMIZERS)]
    d = fl.diagnose(zoo.run(zoo.Case(family, optimizer, seed=5)))
    assert d.shape == "healthy" and d.top is None, str(d)


@pytest.mark.parametrize("family, optimizer, fault, severity", [
    ("gru", "adam", "frozen_params", "requires_grad"),
    ("cnn_bn", "sgd", "detached_graph", 1.0),
])
def test_a_failure_outside_the_catalogue_gets_no_confident_name(family, optimizer, fault,
                                                                  severity):
    d = fl.diagnose(zoo.run(zoo.Case(family, optimizer, fault, severity, seed=5)))
    assert d.confidence != "high" or d.top is None, str(d)
    if d.top is None and d.shape != "healthy":  # unhealthy and unexplained: say so
        assert d.confidence == "low" and d.experiment


def test_fp16_no_scaling_needs_float16():
    """A float32 margin loss has many exactly-zero logit gradients too (samples past the
    margin), and its other gradients are powers of two that float16 could hold: the
    gradients never reach float16's subnormal range, so it is not an underflow."""
    history = foreign_loops.margin_loss_float32(0)
    assert measure(history, ["output_grad_zero_median"])["output_grad_zero_median"] > 0.5
    assert not fl.FAULTS["fp16_no_scaling"].evidence(history).fired
    assert fl.diagnose(history).top is None
    probe = fl.FAULTS["fp16_no_scaling"].distinguishing(
        fl.inject(fl.baseline(), "fp16_no_scaling"))  # bfloat16: same 16 bits
    assert not fl.FAULTS["fp16_no_scaling"].evidence(cached_run(probe, 0).history).fired


@pytest.mark.parametrize("family", ["gru", "cnn_bn"])
def test_float16_is_named_without_loss_scaling_and_healthy_with_it(family):
    """The same float16 loop with and without a GradScaler, on a seed never used to set
    a threshold: the scaled one is healthy; the unscaled one is fp16_no_scaling, at most
    medium confidence when its gradients only reached the subnormal range (a risk the
    curve does not show yet) rather than flushing to zero."""
    scaled = fl.diagnose(zoo.run(zoo.Case(family, "momentum", seed=5, habits=("amp",))))
    assert scaled.shape == "healthy" and scaled.top is None, str(scaled)
    case = zoo.Case(family, "momentum", "fp16_no_scaling", "autocast", seed=5)
    history = zoo.run(case)
    d = fl.diagnose(history)
    assert d.top == "fp16_no_scaling", str(d)
    flushed = fl.FAULTS["fp16_no_scaling"].signature.evaluate("", history).fired
    assert flushed or d.confidence != "high", str(d)


@pytest.mark.parametrize("seed", [0, 1])
def test_wrong_loss_is_named_from_a_plain_monitor_history(seed):
    history = foreign_loops.softmax_into_cross_entropy(seed)
    assert not any(c.startswith("val_") for c in history.columns)
    d = fl.diagnose(history)
    assert d.top == "wrong_loss", str(d)
    assert "probabilities" in d.causes[0][2]


@pytest.mark.parametrize("seed", [0, 1])
def test_probabilities_whose_log_the_loop_takes_itself_are_not_softmax_applied_twice(seed):
    """Softmax outputs are the mechanism of wrong_loss only where the loss softmaxes them
    again: the gradient at the output then has rows summing to 0 (p - y).  NLLLoss of
    log p passes back -y/p instead, and that run trains: no cause."""
    history = foreign_loops.softmax_with_its_own_log(seed)
    d = fl.diagnose(history)
    assert d.shape == "healthy" and d.top is None, str(d)
    assert measure(history)["output_softmax_share"] < 0.5


@pytest.mark.parametrize("seed", [0, 1])
def test_class_ordered_batches_over_many_classes_are_named_not_the_labels(seed):
    """Fine-grained data stored class by class and not shuffled: each batch straddles a
    class or two of 100, the loss stays high as new classes arrive, and the labels look
    unrelated to the inputs; the batches' label spread names the order, and the same
    samples shuffled name nothing."""
    ordered = foreign_loops.many_classes_in_order(seed)
    dealt = foreign_loops.many_classes_in_order(seed, shuffled=True)
    d = fl.diagnose(ordered)
    assert d.top == "no_shuffle", str(d)
    assert fl.diagnose(dealt).top is None, str(fl.diagnose(dealt))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_sigmoid_before_bce_with_logits_is_named_and_the_logits_loop_is_not(seed):
    """A one-logit classifier whose forward ends in torch.sigmoid, trained with
    BCEWithLogitsLoss: the gradient shows a BCE on logits, yet every value it was given
    lies inside (0, 1) and spreads over it.  The same loop returning logits names
    nothing: its logits leave the interval."""
    faulty = foreign_loops.sigmoid_into_bce_with_logits(seed)
    fixed = foreign_loops.sigmoid_into_bce_with_logits(seed, fixed=True)
    values, fixed_values = measure(faulty), measure(fixed)
    assert values["sigmoid_twice_share"] == 1.0 and values["output_std_end"] > 0.2
    assert fixed_values["sigmoid_twice_share"] < 0.2
    d = fl.diagnose(faulty)
    assert d.top == "wrong_loss" and "BCEWithLogitsLoss" in d.causes[0][2], str(d)
    assert fl.diagnose(fixed).top is None


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("sgd", [False, True], ids=["learns", "barely-learns"])
def test_softmax_applied_in_the_loop_is_named_from_the_loss_itself(seed, sgd):
    """Logits out of the model, softmax in the loop: the outputs are not probabilities,
    but the loss is the cross-entropy of softmax(softmax(output)) to float rounding,
    thousands of times closer to it than to the output's own cross-entropy - also
    under plain SGD, where the model learns almost nothing and both are near ln 4 (a
    threshold on the distance to the plain cross-entropy alone missed that run)."""
    faulty = foreign_loops.softmax_in_the_loss(seed, sgd=sgd)
    plain = foreign_loops.softmax_in_the_loss(seed, twice=False, sgd=sgd)
    assert faulty["output_prob_frac"].max() < 0.1  # logits: a row may pass as probabilities
    d = fl.diagnose(faulty)
    assert d.top == "wrong_loss" and "applied twice" in d.causes[0][2], str(d)
    values, plain_values = measure(faulty), measure(plain)
    assert values["loss_vs_softmax_twice"] < 1e-5 < 0.01 < plain_values["loss_vs_softmax_twice"]
    assert plain_values["softmax_twice_fit"] < 1e-3 < 10 * 1e3 < values["softmax_twice_fit"]
    assert fl.diagnose(plain).top != "wrong_loss"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_relu_on_the_logits_is_named_and_the_same_loop_without_it_is_not(seed):
    """The output is a ReLU module's own output (the two instruments read one tensor)
    under a softmax cross-entropy: named even where the loss falls; without the ReLU
    the same loop names nothing."""
    d = fl.diagnose(foreign_loops.relu_on_logits(seed))
    assert d.top == "output_activation_mismatch" and "ReLU" in d.causes[0][2], str(d)
    fixed = foreign_loops.relu_on_logits(seed, fixed=True)
    assert measure(fixed, ["output_relu_share"])["output_relu_share"] == 0
    assert fl.diagnose(fixed).top != "output_activation_mismatch"


@pytest.mark.parametrize("binary", [False, True])
def test_a_relu_written_as_a_function_on_the_logits_is_named_from_its_exact_zeros(binary):
    """`return F.relu(self.head(x))` leaves no module whose output the model's could be
    matched with; the output's exact zeros show the clip, under a softmax cross-entropy
    or one logit's BCE (forum 56327's form).  Without the ReLU no entry is exactly 0."""
    buggy = foreign_loops.functional_relu_on_logits(0, binary=binary)
    values = measure(buggy, ["output_zero_share", "logit_loss_share", "output_relu_share"])
    assert values["output_relu_share"] == 0  # invisible to the module route
    assert values["output_zero_share"] >= 0.25 and values["logit_loss_share"] >= 0.9, values
    d = fl.diagnose(buggy)
    assert d.top == "output_activation_mismatch" and "F.relu" in d.causes[0][2], str(d)
    fixed = foreign_loops.functional_relu_on_logits(0, fixed=True, binary=binary)
    assert measure(fixed, ["output_zero_share"])["output_zero_share"] == 0
    assert fl.diagnose(fixed).top != "output_activation_mismatch"


def test_a_relu_on_a_regression_of_non_negative_amounts_is_not_named():
    """The same exact zeros under an MSE: targets >= 0 need nothing below 0, and the
    guard (a loss on logits) keeps the route quiet."""
    history = foreign_loops.relu_count_regression(0)
    values = measure(history, ["output_zero_share", "logit_loss_share"])
    assert values["output_zero_share"] > 0.1 and values["logit_loss_share"] == 0, values
    assert fl.diagnose(history).top != "output_activation_mismatch"


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_mse_broadcasting_one_output_against_the_batch_is_named_from_a_plain_monitor(optimizer):
    """The Monitor reads the output's gradient against the output (target_grad_share):
    float rounding when every output is pulled to the batch's mean target, around 1
    with the output squeezed (each output its own target)."""
    buggy = foreign_loops.broadcast_mse(0, optimizer)
    assert measure(buggy, ["target_share"])["target_share"] < 1e-9
    d = fl.diagnose(buggy)
    assert d.top == "target_broadcast", str(d)
    fixed = foreign_loops.broadcast_mse(0, optimizer, fixed=True)
    assert measure(fixed, ["target_share"])["target_share"] > 0.1
    assert fl.diagnose(fixed).top is None


@pytest.mark.parametrize("seed", [2, 3])
def test_a_diverging_mse_whose_outputs_dwarf_their_targets_is_not_read_as_broadcast(seed):
    """Late in a run that grew by twenty orders of magnitude the targets sink below
    float32's rounding of the outputs, and the gradient is affine in the output as under
    a broadcast MSE; those steps are not read (quantities.TARGETS_VISIBLE).  On these
    seeds they were most of the observed steps, and the run was named target_broadcast."""
    history = foreign_loops.gru_regression_no_zero_grad(seed)
    assert history["loss"].max() > 1e20 * history["loss"].iloc[0]  # the premise: it dwarfs
    threshold = next(c.threshold for c in fl.FAULTS["target_broadcast"].signature.conditions
                     if c.quantity == "target_share")
    assert measure(history, ["target_share"])["target_share"] > 100 * threshold
    assert fl.diagnose(history).top == "no_zero_grad"


@pytest.mark.parametrize("loop", ["sigmoid_regression", "softmax_one_unit",
                                  "relu_probabilities"])
def test_an_output_range_that_excludes_the_targets_is_named_in_its_other_forms(loop):
    """A sigmoid head pinned at 1 below targets near 50, a softmax over one unit
    (exactly 1 for every input), and a ReLU output divided by its row's sum (0/0 at the
    first step): the other routes to the same cause."""
    history = getattr(foreign_loops, loop)(0)
    d = fl.diagnose(history)
    assert d.top == "output_activation_mismatch", str(d)


@pytest.mark.parametrize("seed", [0, 1])
def test_inputs_all_in_one_raw_unit_are_named_not_the_initialisation(seed):
    """No spread between the features, but values near 1000 make the fresh model's
    logits oversized, which a 10x initialisation also does: bad_init is not named where
    the inputs are in the hundreds; the same loop standardised is healthy."""
    raw = foreign_loops.raw_units(seed)
    values = measure(raw)
    assert values["input_scale_spread"] < 100 < values["input_magnitude"]
    assert values["output_scale_start"] > 3
    d = fl.diagnose(raw)
    assert d.top == "no_input_norm" and "bad_init" not in [c[0] for c in d.causes], str(d)
    assert fl.diagnose(foreign_loops.raw_units(seed, standardised=True)).top is None


@pytest.mark.parametrize("seed", [0, 1])
def test_raw_pixels_into_sigmoid_outputs_are_named_not_a_small_rate(seed):
    """Behind sigmoid outputs no logit scale reads the oversized start, but the fresh
    model's sigmoids sit pinned at their bounds before any update, and the clipped
    loss then passes back a gradient some 1e-12 of its first one: the steps are tiny
    because the gradient vanished, which no learning rate explains.  Scaled to [0, 1],
    the same loop is healthy."""
    raw = foreign_loops.raw_pixels_sigmoid(seed)
    values = measure(raw, ["input_magnitude", "saturation_start", "output_scale_start",
                           "grad_growth", "update_ratio_median"])
    assert values["input_magnitude"] == 255 and values["saturation_start"] > 0.5
    assert values["output_scale_start"] < 3 and values["grad_growth"] < 1e-6
    assert values["update_ratio_median"] < 1e-4  # lr_too_small's own mechanism holds
    d = fl.diagnose(raw)
    assert d.top == "no_input_norm" and "lr_too_small" not in [c[0] for c in d.causes], str(d)
    scaled = fl.diagnose(foreign_loops.raw_pixels_sigmoid(seed, scaled=True))
    assert scaled.top is None and scaled.shape == "healthy", str(scaled)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_scheduler_stepped_every_batch_is_named_over_a_small_rate(seed):
    """The steps became tiny (lr_too_small's evidence) because the rate was decayed by
    orders of magnitude early: the decay explains the small steps."""
    d = fl.diagnose(foreign_loops.scheduler_per_batch(seed))
    assert d.top == "lr_decayed_too_early" and "lr_too_small" not in d.lookalikes, str(d)


@pytest.mark.parametrize("seed", [0, 1])
def test_zero_grad_between_backward_and_step_is_named(seed):
    d = fl.diagnose(foreign_loops.zero_grad_before_step(seed))
    assert d.top == "zero_grad_misplaced" and d.shape == "plateau", str(d)


def test_skipped_steps_are_not_physics():
    """Rows where a GradScaler skipped the step carry no update: never a tiny-update or
    a non-finite-gradient fault."""
    history = cached_run(fl.baseline(), 0).history.copy()
    skipped = history.index[::3]
    history.loc[skipped, "step_skipped"] = 1.0
    history.loc[skipped, ["update_ratio", "grad_norm"]] = [0.0, float("inf")]
    history["step_skipped"] = history["step_skipped"].fillna(0.0)
    plain = measure(cached_run(fl.baseline(), 0).history)
    mixed = measure(history)
    assert mixed["update_ratio_median"] == pytest.approx(
        cached_run(fl.baseline(), 0).history.drop(index=skipped)["update_ratio"].median())
    assert mixed["grad_norm_max"] == pytest.approx(plain["grad_norm_max"], rel=0.5)
    assert fl.diagnose(history).top is None


def test_histories_without_the_newer_columns_are_diagnosed():
    newer = ["lr", "param_lowp_frac", "output_prob_frac", "output_logprob_frac",
             "output_nonfinite", "unoptimized_params", "step_skipped"]
    history = cached_run(fl.inject(fl.baseline(), "no_zero_grad"), 0).history
    old = history.drop(columns=[c for c in newer if c in history.columns])
    assert fl.diagnose(old).top == "no_zero_grad"
    assert fl.diagnose(cached_run(fl.baseline(), 0).history.drop(
        columns=[c for c in newer if c in history.columns])).top is None


def test_evidence_reads_as_words_and_numbers():
    fault, faulty = fl.FAULTS["no_zero_grad"], fl.inject(fl.baseline(), "no_zero_grad")
    probe = cached_run(fault.distinguishing(faulty), 0)
    text = fault.outcome.evaluate(fault.name, probe.history).sentence
    assert "x its step-0 value" in text and "since step 0" not in text  # not "... 0246"
    diagnosed = fl.diagnose(cached_run(faulty, 0)).causes[0][2]
    assert "gradient turn" in diagnosed and "parameters outside" not in diagnosed  # a
    #      passing guard is not evidence, and only check/signature() list it
    tabular = fl.diagnose(cached_run(fl.inject(fl.baseline(), "shuffled_labels"), 0))
    assert "attention on pads" not in tabular.causes[0][2]
    assert "not measured" not in tabular.causes[0][2]


@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_a_loss_summed_over_the_batch_is_read_from_its_weight_on_the_outputs(optimizer):
    """Under Adam the curve is healthy and no validation is recorded; the gradient on the
    logits still weighs each row as a whole batch mean (32 in total).  Under momentum the
    32-fold steps make rows so confident that their other classes' probabilities round
    to 0, and those rows' weight is lost: the reading falls, far above 1."""
    history = foreign_loops.summed_cross_entropy(0, optimizer)
    weight = measure(history, ["loss_weight_median"])["loss_weight_median"]
    assert weight == pytest.approx(32) if optimizer == "adam" else 2 <= weight <= 32
    d = fl.diagnose(history)
    assert d.top == "summed_loss", str(d)


def test_a_negated_loss_is_named_without_validation():
    history = foreign_loops.negated_cross_entropy(0)
    assert "val_loss" not in history
    d = fl.diagnose(history)
    assert d.top == "negated_loss" and d.shape == "diverging", str(d)
    assert "no floor" in d.shape_evidence
    # the gradient of minus a cross-entropy gives no loss-weight reading to trust
    assert not fl.FAULTS["summed_loss"].evidence(history).fired


def test_an_oversized_rate_after_a_warm_up_is_named_and_the_tuned_one_is_healthy():
    tuned = fl.diagnose(foreign_loops.one_cycle(0))
    assert tuned.top is None and tuned.shape == "healthy", str(tuned)
    history = foreign_loops.one_cycle(0, factor=30)
    q = measure(history, ["update_ratio_start", "update_ratio_peak"])
    assert q["update_ratio_start"] < 0.1 < q["update_ratio_peak"]  # the first steps are small
    assert fl.diagnose(history).top == "huge_lr"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_large_first_steps_that_keep_their_direction_are_travel_not_a_huge_rate(seed):
    """A raw-scale regression's first updates are 40-50% of its weights' norm (above
    huge_lr's oversized-step line) while its loss falls 10^4-fold: consecutive
    gradients agree (cosine near 0.8-0.9), where an overshooting step turns back."""
    history = foreign_loops.raw_scale_regression(seed)
    q = measure(history, ["update_ratio_start", "grad_cosine_start"])
    assert q["update_ratio_start"] > 0.1 and q["grad_cosine_start"] > 0.5
    d = fl.diagnose(history)
    assert d.shape == "healthy" and d.top is None, str(d)
    overshooting = measure(foreign_loops.classifier_huge_lr(seed), ["grad_cosine_start"])
    assert overshooting["grad_cosine_start"] < 0.5


def test_an_adaptive_optimizer_shrinking_its_own_steps_is_not_a_decayed_schedule():
    history = foreign_loops.radam_raw_inputs(0)
    q = measure(history, ["step_size_change_early", "lr_change_early"])
    assert q["step_size_change_early"] < 0.01 and q["lr_change_early"] == 1.0
    d = fl.diagnose(history)
    assert "lr_decayed_too_early" not in [c[0] for c in d.causes], str(d)


def test_a_stall_in_a_model_with_a_frozen_body_is_not_blamed_on_the_labels():
    """The zoo's binary classifier with its body frozen by requires_grad=False: its head
    alone cannot fit the task.  That is outside the catalogue, not a label problem."""
    case = zoo.Case("binary", "sgd", "frozen_params", "requires_grad", seed=5)
    history = zoo.run(case)
    assert measure(history, ["frozen_share"])["frozen_share"] > 0.5
    assert fl.diagnose(history).top != "shuffled_labels"
    assert measure(zoo.run(zoo.Case("binary", "sgd", seed=5)), ["frozen_share"])["frozen_share"] == 0


def test_where_the_first_nan_was_born_forward_or_backward():
    """nonfinite_from_backward reads the first row with non-finite values: a finite loss
    there means the backward pass made them; a step a GradScaler skipped does not count."""
    import pandas as pd

    from failurelab.evidence.quantities import nonfinite_from_backward

    nan = float("nan")
    backward = pd.DataFrame({"step": [0, 1, 2], "loss": [1.1, 0.9, nan],
                             "nonfinite": [0, 40, 80]})
    forward = pd.DataFrame({"step": [0, 1, 2], "loss": [1.1, nan, nan],
                            "nonfinite": [0, 41, 80]})
    skipped = backward.assign(step_skipped=[1, 0, 0], nonfinite=[40, 0, 0],
                              loss=[1.1, 0.9, 0.8])
    assert nonfinite_from_backward(backward) == 1
    assert nonfinite_from_backward(forward) == 0
    assert math.isnan(nonfinite_from_backward(skipped))  # a skip is not a fault's NaN


def test_a_pinned_gradient_norm_is_read_only_where_it_repeats():
    import pandas as pd

    from failurelab.evidence.quantities import clipped_grad_norm

    pinned = pd.DataFrame({"grad_norm": [2 ** -16] * 20})
    varying = pd.DataFrame({"grad_norm": [0.5 + 0.01 * i for i in range(20)]})
    assert clipped_grad_norm(pinned) == 2 ** -16
    assert math.isnan(clipped_grad_norm(varying))


@pytest.mark.parametrize("seed", [0, 1])
def test_mixup_trains_above_its_validation_loss_without_being_called_shuffled(seed):
    """Mixup's targets are two labels mixed: their entropy holds the training loss above
    a validation loss on hard labels, as wrong labels would.  The output gradient tells
    them apart: a hard label, right or wrong, makes one negative entry per row."""
    mixed = foreign_loops.validated_classifier(seed, mixup=0.4)
    noisy = foreign_loops.validated_classifier(seed, noisy=0.3)
    line = 0.112  # shuffled_labels' calibrated gap (docs/signatures.md)
    for history in (mixed, noisy):
        assert measure(history, ["train_eval_loss_gap"])["train_eval_loss_gap"] > line
    assert measure(mixed, ["soft_target_share"])["soft_target_share"] > 0.05
    assert measure(noisy, ["soft_target_share"])["soft_target_share"] == 0
    assert fl.diagnose(mixed).top is None
    assert fl.diagnose(noisy).top == "shuffled_labels"
