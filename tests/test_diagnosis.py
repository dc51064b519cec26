"""Diagnosis from telemetry alone: shapes on synthetic curves, causes on the catalogue
and on plain PyTorch loops the lab has never seen."""

import math
import re

import foreign_loops
import numpy as np
import pandas as pd
import pytest
from runs_cache import cached_run

import failurelab as fl
from failurelab.catalogue.faults import accepted_shapes
from failurelab.evidence.quantities import measure


def curve(loss, val=None):
    """A history with nothing but a loss (and optionally a validation loss every 10 steps)."""
    h = pd.DataFrame({"step": np.arange(len(loss)), "loss": np.asarray(loss, float)})
    if val is not None:
        h["val_loss"] = np.nan
        h.loc[::10, "val_loss"] = val
    return h


rng = np.random.default_rng(0)
STEPS = np.arange(300)
FALLING = 1.1 * np.exp(-STEPS / 40) + 0.05 + 0.02 * rng.random(300)
# swings that last several steps around a level that never falls (start 1.1)
SWINGING = np.r_[1.1, 0.6 + 0.35 * np.sin(np.arange(299) / 2) + 0.05 * rng.random(299)]
# a falling curve with a hard batch every 15 steps, above the loss's start: small-batch
# SGD, healthy (the 10th-90th percentile swing called it oscillating)
SPIKY = FALLING + np.where(STEPS % 15 == 7, 1.5, 0.0)
CYCLE = np.r_[4.0, 4.0, 3.8, 3.5, 3.0, 2.2, 1.4, 0.8, 0.4, 0.2]  # a jump, then recovery
JUMPS = np.r_[1.1 * np.exp(-np.arange(30) / 5), np.tile(CYCLE, 27)]
EVALS = np.arange(30)


@pytest.mark.parametrize("loss, val, shape", [
    (FALLING, None, "healthy"),
    (SPIKY, None, "healthy"),
    (np.full(300, 1.1) + 0.005 * rng.standard_normal(300), None, "plateau"),
    (0.8 + 0.3 * np.exp(-STEPS / 30) + 0.005 * rng.standard_normal(300), None, "plateau"),
    (1.1 * np.exp(STEPS / 60), None, "diverging"),
    (np.r_[1.1 * np.exp(np.arange(40) / 8), np.nan], None, "diverging"),
    (np.r_[1.1, 1.1, np.nan], None, "nonfinite"),
    (np.r_[2.3, 31.5, np.inf, np.nan], None, "diverging"),  # rose 13x within five steps
    (SWINGING, None, "oscillating"),
    (JUMPS, None, "stepwise"),
    (FALLING, 0.3 + 0.01 * (EVALS - 6).clip(0), "degrading"),
], ids=["healthy", "healthy-spiky", "flat", "stalled-high", "rising", "rising-to-nan", "nan-at-once",
        "rose-fast-to-inf", "swinging", "jump-and-recover", "validation-worsens"])
def test_synthetic_curves_get_their_shape(loss, val, shape):
    assert fl.diagnose(curve(loss, val)).shape == shape


def test_a_shape_near_a_threshold_names_the_other_side():
    just_above = 0.3 + 0.16 * ((EVALS - 20) / 7).clip(0, 1)  # rises 0.16 (threshold 0.15)
    d = fl.diagnose(curve(FALLING, just_above))
    assert d.shape == "degrading" and d.shape_alternative == "healthy"
    clearly = 0.3 + 0.6 * ((EVALS - 20) / 7).clip(0, 1)
    assert fl.diagnose(curve(FALLING, clearly)).shape_alternative is None


@pytest.mark.parametrize("name", list(fl.FAULTS))
def test_every_fault_is_named_from_its_telemetry(name):
    fault = fl.FAULTS[name]
    run = cached_run(fault.inject(fl.baseline(fault.task)), 0)
    d = fl.diagnose(run.history)  # the history only: no recipe, no name
    assert d.top == name, str(d)
    assert d.shape in accepted_shapes(fault)  # the one shape rule
    assert any(c.isdigit() for c in d.causes[0][2])  # the evidence quotes numbers


@pytest.mark.parametrize("task", ["tabular", "sequence"])
def test_a_healthy_baseline_gets_no_cause(task):
    d = fl.diagnose(cached_run(fl.baseline(task), 1))
    assert d.shape == "healthy" and d.top is None and d.confidence == "high"


@pytest.mark.parametrize("loop, cause", [
    (foreign_loops.regression_no_zero_grad, "no_zero_grad"),
    (foreign_loops.classifier_huge_lr, "huge_lr"),
    (foreign_loops.unnormalised_inputs, "no_input_norm"),
    (foreign_loops.nan_inputs, "nan_in_data"),
    (foreign_loops.healthy_adam, None),
    (foreign_loops.validation_in_raw_units, "val_not_normalized"),
    (foreign_loops.validation_standardised, None),
], ids=["regression-forgets-zero_grad", "classifier-at-lr-20", "raw-feature-scales",
        "nan-in-the-inputs", "healthy-adam-gelu-tanh", "validation-in-raw-units",
        "validation-standardised"])
@pytest.mark.parametrize("seed", [0, 1])
def test_plain_loops_the_lab_never_saw_are_diagnosed(loop, cause, seed):
    d = fl.diagnose(loop(seed))
    assert d.top == cause, str(d)


def test_a_cause_named_by_elimination_is_low_confidence_and_asks_for_its_experiment():
    """A stuck loss with every other stall ruled out names shuffled labels only by
    elimination: a bug the catalogue lacks (a reshape that scrambles samples) leaves the
    same trace, so the answer is a hypothesis to test, never a confident cause.  The
    label route with a measurement of its own (training loss above the clean validation
    loss) keeps the confidence its margin earns."""
    d = fl.diagnose(cached_run(fl.inject(fl.baseline(), "shuffled_labels"), 0))
    assert d.top == "shuffled_labels" and d.confidence == "low", str(d)
    assert d.experiment == fl.FAULTS["shuffled_labels"].text("experiment")
    noisy = fl.diagnose(foreign_loops.validated_classifier(0, noisy=0.3))
    assert noisy.top == "shuffled_labels" and noisy.confidence != "low", str(noisy)


def test_a_loss_without_a_floor_is_not_read_as_noisy_labels():
    """(pred - y).mean(), the square forgotten, falls without bound, faster on the
    held-out rows read after each step: training stands above validation by more than
    the label route's gap, and three standard errors out of the noise, yet no label is
    wrong.  A loss below zero is neither a likelihood nor a distance, so the route's
    guard (the training loss ends at or above zero) keeps it out."""
    history = foreign_loops.unsquared_regression(0)
    q = measure(history, ["train_eval_loss_gap", "train_eval_gap_z", "loss_end"])
    assert q["train_eval_loss_gap"] > 1 and q["train_eval_gap_z"] > 3 and q["loss_end"] < 0
    assert fl.diagnose(history).top != "shuffled_labels"


def test_missing_columns_lower_confidence_and_name_the_experiment():
    loss_only = cached_run(fl.inject(fl.baseline(), "shuffled_labels"), 0).history[["step", "loss"]]
    d = fl.diagnose(loss_only)
    assert d.shape == "plateau" and d.top is None and d.confidence == "low"
    assert {"shuffled_labels", "lr_too_small", "dead_relu"} <= set(d.lookalikes)
    assert "overfit" in d.experiment and "gradients" in d.missing


def test_an_economy_monitor_history_is_diagnosed_without_crashing():
    run = cached_run(fl.inject(fl.baseline(), "huge_lr"), 0)
    sparse = run.history[["step", "loss", "grad_norm", "update_ratio"]].copy()
    sparse.loc[sparse.step % 10 != 0, ["grad_norm", "update_ratio"]] = math.nan
    d = fl.diagnose(sparse)
    # Every 10th update ratio is too little to prove the mechanism: the answer is
    # huge_lr or an honest "none fits", never another confident name.
    assert d.shape == "diverging" and (d.top == "huge_lr" or d.confidence == "low"), str(d)


def test_empty_and_single_step_histories_get_a_clear_message():
    with pytest.raises(ValueError, match="empty"):
        fl.diagnose(curve([]))
    with pytest.raises(ValueError, match="at least 2 recorded steps"):
        fl.diagnose(curve([1.0]))
    assert fl.diagnose(curve([float("nan")])).shape == "nonfinite"
    with pytest.raises(ValueError, match="'loss' column"):
        fl.diagnose(pd.DataFrame({"step": [0, 1]}))
    with pytest.raises(TypeError, match="a history DataFrame or a log.s path"):
        fl.diagnose([1.0, 2.0])


def test_the_report_reads_as_text():
    text = str(fl.diagnose(cached_run(fl.inject(fl.baseline(), "no_zero_grad"), 0)))
    assert "shape: diverging" in text and "cause: no_zero_grad" in text
    assert "next experiment:" in text and "confidence:" in text


def test_train_minus_validation_loss_compares_the_same_steps():
    """A loss swinging inside the last 20% (a forgotten zero_grad under Adam) whose
    validation tracks it has no gap; noisy training labels put the training loss above
    validation at every evaluation."""
    from failurelab.evidence.quantities import train_eval_loss_gap

    steps = np.arange(200)
    swinging = 2 + 0.8 * np.sin(steps / 6 + 4.46)  # the last validation at a trough:
    tracked = curve(swinging, swinging[::10])  # late mean 1.99, last validation 1.20
    assert abs(train_eval_loss_gap(tracked)) < 0.1  # 5-step means lag the curve: 0.02
    noisy = curve(np.full(200, 1.0), np.full(20, 0.6))
    assert train_eval_loss_gap(noisy) == pytest.approx(0.4)
    assert train_eval_loss_gap(curve([1.0, 0.9], [0.8])) == pytest.approx(0.2)  # 2 steps


def test_a_gap_is_weighed_against_the_batch_noise_of_the_losses_it_averages():
    """The same 0.13 gap between training and validation loss stands out of training
    losses that vary by 0.02 from batch to batch (z far above 3) and not out of losses
    that vary by 0.3, as a batch of 8 makes them (z under 3): shuffled_labels' gap route
    needs z >= 3 (tests/test_diagnosis_wild.py: noisy labels read z 15-17)."""
    from failurelab.evidence.quantities import train_eval_gap_z, train_eval_loss_gap

    rng = np.random.default_rng(0)
    trend = 0.7 + 0.7 * np.exp(-np.arange(300) / 40)  # learns, then levels off
    for spread, stands_out in ((0.02, True), (0.3, False)):
        train = np.clip(trend + rng.normal(0, spread, 300), 0.05, None)
        history = curve(train, trend[::10] - 0.13)
        gap, z = train_eval_loss_gap(history), train_eval_gap_z(history)
        # 6 late validations, each against a mean of 5 losses: a standard error of
        # 1.25 spread / sqrt(30), 0.005 and 0.07
        assert abs(gap - 0.13) < 4 * 1.25 * spread / math.sqrt(30)
        assert (z >= 3) == stands_out, z
    assert math.isnan(train_eval_gap_z(curve(trend)))  # no validation: no gap


# --- one shape rule (issue 29, item 5) -----------------------------------------------------

def test_one_shape_rule_is_read_by_the_diagnosis_the_mystery_and_the_grade(tmp_path):
    """huge_lr's curve honestly reads diverging, plateau or oscillating: each of those
    predictions is right wherever a shape is graded or named."""
    from failurelab.catalogue.diagnosis import _shows
    from failurelab.course.mystery import pick, reveal

    huge_lr = fl.FAULTS["huge_lr"]
    shapes = accepted_shapes(huge_lr)
    assert shapes[0] == huge_lr.shape and "plateau" in shapes
    assert all(_shows(huge_lr, s) for s in shapes) and not _shows(huge_lr, "healthy")
    seed = next(s for s in range(100) if pick(s) == "huge_lr")
    assert " or ".join(shapes) in str(reveal(seed))
    ws = fl.Worksheet(tmp_path / "w.json")
    ws.predict(f"mystery-{seed}", shape="plateau", cause="huge_lr")
    reveal(seed, worksheet=ws)
    assert ws.grade().loc[f"mystery-{seed}", "shape_correct"] is True


def test_the_report_labels_a_curve_with_the_shape_its_telemetry_reads(tmp_path):
    """accumulation_not_divided is documented diverging; its seed-0 run flattens and
    reads plateau: the report's page and map say plateau, and list the other shapes."""
    from failurelab.course import report

    fault = fl.FAULTS["accumulation_not_divided"]
    healthy = cached_run(fl.baseline(), 0).history
    card = report._card_job(fault.name, 0, None, healthy, str(tmp_path))
    read = fl.diagnose(cached_run(fault.inject(fl.baseline()), 0)).shape
    assert card.shape == read == "plateau" != fault.shape
    page = report.render_card(card)
    assert "loss shape of this run plateau" in page
    assert "diverging or plateau or oscillating" in page
    index = report.render_index([card])
    row = next(line for line in index.splitlines() if line.startswith("<tr><th>plateau"))
    assert fault.name in row


def test_notebook_01_quotes_the_shape_huge_lr_reads():
    """The notebook says the flat-looking curve reads diverging, with the numbers the
    diagnosis gives on its seed-0 run."""
    import json
    from pathlib import Path

    from failurelab.evidence.quantities import loss_peak_ratio, loss_progress

    history = cached_run(fl.inject(fl.baseline(), "huge_lr"), 0).history
    assert fl.diagnose(history).shape == "diverging"
    cells = json.loads(Path(__file__).parent.parent.joinpath(
        "notebooks", "01_first_four.ipynb").read_text(encoding="utf-8"))["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = " ".join(text.split())
    assert f"peaked at {loss_peak_ratio(history):.3g} times its start" in text
    assert f"ended {-loss_progress(history):.0%} above it" in text


# --- wording: signs and shapes (issue 29, item 15) -----------------------------------------

NEGATIVE_ZERO = re.compile(r"(?<![\w.])-0(?:\.0*)?(?![.\d]*[1-9])")  # "-0%", "-0.00", "-0"
BLOWS_UP = ("blow up", "blows up", "blew up", "still diverges", "爆炸")


def _contradictions(d) -> list[str]:
    """Sentences of a diagnosis (both languages) that print a negative zero, or say the
    run blows up when its curve is not diverging."""
    found = []
    for lang in ("en", "zh"):
        text = d.text(lang) + "\n" + "\n".join(e for _, _, e in d.causes)
        found += [f"{lang}: {m.group(0)!r} in {text!r}" for m in NEGATIVE_ZERO.finditer(text)]
        if d.shape not in ("diverging", "nonfinite"):
            found += [f"{lang}: {w!r} on a {d.shape} curve" for w in BLOWS_UP if w in text]
    return found


@pytest.mark.parametrize("name", list(fl.FAULTS))
def test_every_diagnosis_sentence_keeps_its_sign_and_shape(name):
    """Every fault's evidence, rendered on its seed-0 lab run in both languages: no
    "-0%", and no "blows up" under a curve that did not."""
    fault = fl.FAULTS[name]
    history = cached_run(fault.inject(fl.baseline(fault.task)), 0).history
    d = fl.diagnose(history)
    assert _contradictions(d) == []
    measured = measure(history)  # shared: each quantity is computed once
    for lang in ("en", "zh"):  # every fault's own sentence, fired or not
        for other in fl.FAULTS.values():
            sentence = other.evidence(history, measured, lang).sentence
            assert not NEGATIVE_ZERO.search(sentence), sentence


@pytest.mark.parametrize("loss, words", [
    (np.r_[1.1, 3.0, 1.1 + 0.001 * rng.standard_normal(298)], "ended back at its start"),
    (np.r_[1.0, 1.0 + 0.004 * np.ones(299)], "stayed at its initial level"),
    (np.r_[1.0, 1.06 * np.ones(299)], "ended 6% above it"),
])
def test_a_curve_that_ends_at_or_above_its_start_is_worded_without_a_negative_share(loss, words):
    d = fl.diagnose(curve(loss))
    assert words in d.shape_evidence and _contradictions(d) == [], d.shape_evidence


def test_a_forgotten_zero_grad_under_adam_is_not_said_to_blow_up():
    """The issue's case: under Adam the accumulated gradient is normalised and the run
    does not diverge; the next step must not promise that it "still blows up"."""
    recipe = fl.inject(fl.baseline(), "no_zero_grad").replace(optimizer="adam", lr=1e-3)
    d = fl.diagnose(cached_run(recipe, 0).history)
    assert d.top == "no_zero_grad", str(d)
    assert _contradictions(d) == [], str(d)
