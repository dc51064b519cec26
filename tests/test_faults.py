"""The fault catalogue: every signature reproduces, no signature fires on a healthy run,
every fix heals and every distinguishing experiment gives its documented outcome.

Default run: seeds 0-2.  `pytest -m slow` adds seeds 3-9.  (`failurelab verify`, the
README's first command, checks every signature and both baselines on seeds 0-9 too, so
the default run keeps to three seeds to leave CI its margin.)"""

import pytest
from runs_cache import cached_run

import failurelab as fl
from failurelab.catalogue.faults import FAMILIES, PHENOMENA, SHAPES

FAULT_NAMES = list(fl.FAULTS)
SEEDS = [0, 1, 2]
SLOW_SEEDS = [3, 4, 5, 6, 7, 8, 9]
fast_and_slow = [pytest.param(s) for s in SEEDS] + [
    pytest.param(s, marks=pytest.mark.slow) for s in SLOW_SEEDS]


def faulty(name):
    fault = fl.FAULTS[name]
    return fault, fault.inject(fl.baseline(fault.task))


def test_the_registry_names_and_order_are_pinned():
    assert FAULT_NAMES == [
        "no_zero_grad", "huge_lr", "saturated_sigmoid", "shuffled_labels", "no_input_norm",
        "fp16_no_scaling", "bad_padding_mask", "lr_too_small", "class_imbalance",
        "nan_in_data", "dead_relu", "bad_init", "wrong_loss", "dropout_too_strong",
        "eval_mode_forgotten", "no_shuffle", "label_offset", "fp16_overflow", "overfitting",
        "slow_data", "weight_decay_too_large", "batch_too_small", "exploding_gradients",
        "inverted_padding_mask", "zero_grad_misplaced", "init_too_small", "label_leakage",
        "lr_decayed_too_early", "summed_loss", "negated_loss", "accumulation_not_divided",
        "val_not_normalized", "clip_before_unscale", "log_softmax_by_hand",
        "train_mode_not_restored", "params_not_in_optimizer",
        "output_activation_mismatch",
        "target_broadcast",
    ]


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_a_fault_changes_one_field_or_says_why_it_changes_more(name):
    """More than one field only where the mistake lives in a loop the baseline does not
    have (micro-batches, mixed precision): the fault's text says which and why."""
    fault, recipe = faulty(name)
    changed = fl.diff(fl.baseline(fault.task), recipe)
    assert 1 <= len(changed) <= 4
    assert len(changed) == 1 or len(fault.why_several_fields) > 20


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_a_fault_carries_its_teaching_text(name):
    fault = fl.FAULTS[name]
    assert fault.family in FAMILIES and fault.shape in SHAPES
    assert fault.phenomenon is None or fault.phenomenon in PHENOMENA
    for text in (fault.title, fault.symptom, fault.cause, fault.experiment, fault.fix):
        assert text and text[0].isupper() and len(text) < 600


@pytest.mark.parametrize("seed", fast_and_slow)
@pytest.mark.parametrize("name", FAULT_NAMES)
def test_the_signature_shows_in_every_seed(name, seed):
    fault, recipe = faulty(name)
    fl.check(cached_run(recipe, seed), name)


@pytest.mark.parametrize("seed", fast_and_slow)
@pytest.mark.parametrize("task", ["tabular", "sequence"])
def test_no_signature_fires_on_a_healthy_baseline(task, seed):
    history = cached_run(fl.baseline(task), seed).history
    fired = [f.name for f in fl.FAULTS.values() if f.evidence(history).fired]
    assert fired == []


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_the_fix_heals(name):
    fault, recipe = faulty(name)
    fixed = fault.apply_fix(recipe)
    for seed in SEEDS[:3]:
        run = cached_run(fixed, seed)
        with pytest.raises(AssertionError):
            fl.check(run, name)
        assert not run.diverged
        assert run.summary["final_val_acc"] >= fault.fixed_accuracy
        assert [f.name for f in fl.FAULTS.values() if f.evidence(run.history).fired] == []


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_the_distinguishing_experiment_gives_its_documented_outcome(name):
    fault, recipe = faulty(name)
    probe = fault.distinguishing(recipe)
    assert probe != recipe
    for seed in SEEDS[:3]:
        outcome = fault.outcome.evaluate(name, cached_run(probe, seed).history)
        assert outcome.fired, outcome.sentence


def test_inject_is_pure_and_unknown_names_suggest_the_closest():
    base = fl.baseline()
    assert fl.inject(base, "huge_lr") != base and base == fl.baseline()
    with pytest.raises(KeyError, match="Did you mean 'huge_lr'") as err:
        fl.inject(base, "huge_lrr")
    assert "no_zero_grad" in str(err.value)


def test_every_signature_says_what_each_condition_is():
    for fault in fl.FAULTS.values():
        roles = [c.role for c in fault.signature.conditions]
        assert set(roles) <= {"mechanism", "effect", "guard"}
        assert "mechanism" in roles, fault.name  # the score is graded mechanism evidence
        for c in fault.signature.conditions:
            assert len(c.why) > 20, (fault.name, c.quantity)


def test_thresholds_sit_outside_the_recorded_healthy_population():
    from failurelab.catalogue import healthy

    for fault in fl.FAULTS.values():
        for signature, ranges in zip(fault.signatures, healthy.ROUTES[fault.name], strict=True):
            for c in signature.conditions:  # past every healthy run its guards admit
                if c.role == "guard" or c.quantity not in ranges:
                    continue
                low, high = ranges[c.quantity]
                assert (c.threshold > high) if c.above else (c.threshold < low), \
                    (fault.name, c.quantity, c.threshold, (low, high))


def test_the_catalogue_imports_point_one_way():
    import ast
    import pathlib

    root = pathlib.Path(fl.__file__).parent
    users = {"sweep.py"}  # verify runs the catalogue by name: it stands above the entries
    for path in (root / "catalogue").glob("*.py"):
        if path.name in users:
            continue
        names = [n.module for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.ImportFrom) and n.module]
        assert "faults" not in names, path.name  # catalogue -> fault, never -> faults


def test_check_says_what_it_measured_when_the_signature_is_absent():
    with pytest.raises(AssertionError, match=r"gradient turn \(1 - cosine\) .* \(≤ 0.05\)"):
        fl.check(cached_run(fl.baseline(), 0), "no_zero_grad")


def test_the_catalogue_covers_every_shape_and_phenomenon():
    shapes = {f.shape for f in fl.FAULTS.values()}
    assert {"diverging", "oscillating", "plateau", "stepwise", "degrading",
            "nonfinite"} <= shapes
    assert set(PHENOMENA) <= {f.phenomenon for f in fl.FAULTS.values()}
    assert len(fl.FAULTS) >= 20
