"""Recipes: frozen, validated, and diffable."""

import dataclasses
import re

import pytest

import failurelab as fl


def test_baselines_are_frozen_and_differ_only_where_the_tasks_do():
    tab, seq = fl.baseline("tabular"), fl.baseline("sequence")
    with pytest.raises(dataclasses.FrozenInstanceError):
        tab.lr = 1.0
    assert fl.diff(tab, tab) == {}
    assert fl.diff(tab, seq)["task"] == ("tabular", "sequence")
    assert fl.baseline() == tab


def test_diff_names_exactly_the_changed_fields():
    base = fl.baseline()
    changed = base.replace(lr=1.0, zero_grad=False)
    assert fl.diff(base, changed) == {"lr": (0.1, 1.0), "zero_grad": (True, False)}


@pytest.mark.parametrize("field, value, message", [
    ("lr", -0.1, r"lr must be a number in \(0"),
    ("lr", float("nan"), "lr must be a number"),
    ("batch_size", 0, r"batch_size must be an integer in \[1, 2000\]"),
    ("batch_size", 64.0, "batch_size must be an integer"),
    ("dropout", 1.0, r"dropout must be a number in \[0.0, 0.99\]"),
    ("optimizer", "rmsprop", r"optimizer must be one of \('sgd', 'adam'\)"),
    ("dtype", "float8", "dtype must be one of"),
    ("zero_grad", "yes", "zero_grad must be True or False"),
    ("steps", 0, "steps must be an integer"),
    ("minority_fraction", 0.0, "minority_fraction must be a number"),
    ("train_label_shift", 3, "train_label_shift must be an integer in"),
    ("lr_decay_every", -1, r"lr_decay_every must be an integer in \[0, 1000000\]"),
    ("lr_decay_every", 2.5, "lr_decay_every must be an integer"),
    ("loss_reduction", "max", r"loss_reduction must be one of \('mean', 'sum'\)"),
    ("negate_loss", 1, "negate_loss must be True or False"),
    ("leak_label", "yes", "leak_label must be True or False"),
    ("scaler_growth_interval", 0, r"scaler_growth_interval must be an integer in \[1, "),
    ("accumulate", 0, r"accumulate must be an integer in \[1, 64\]"),
    ("accumulate", 5, r"batch_size \(64\) must split into accumulate \(5\) equal micro-batches"),
    ("divide_accumulated", 0, "divide_accumulated must be True or False"),
])
def test_a_bad_value_names_the_field_and_the_allowed_range(field, value, message):
    with pytest.raises(ValueError, match=message):
        fl.baseline().replace(**{field: value})


def test_switches_of_the_other_task_are_refused():
    with pytest.raises(ValueError, match="mask_padding applies to the sequence task only"):
        fl.baseline("tabular").replace(mask_padding=False)
    with pytest.raises(ValueError, match="normalize_inputs applies to the tabular task only"):
        fl.baseline("sequence").replace(normalize_inputs=False)
    with pytest.raises(ValueError, match="leak_label applies to the tabular task only"):
        fl.baseline("sequence").replace(leak_label=True)


def test_loss_scaling_without_float16_is_refused():
    with pytest.raises(ValueError, match="loss_scaling needs dtype='float16'"):
        fl.baseline().replace(loss_scaling=True)


def test_unknown_task_and_unknown_field_are_clear():
    with pytest.raises(ValueError, match="task must be one of"):
        fl.baseline("images")
    with pytest.raises(TypeError, match="lerning_rate"):
        fl.baseline().replace(lerning_rate=0.1)


def test_format_diff_shows_floats_without_noise_while_diff_keeps_exact_values():
    slower = fl.baseline().replace(lr=fl.baseline().lr * 0.1)  # 0.010000000000000002
    changes = fl.diff(fl.baseline(), slower)
    assert changes == {"lr": (0.1, 0.1 * 0.1)} and changes["lr"][1] != 0.01
    assert fl.format_diff(changes) == "lr: 0.1 → 0.01"
    shuffled = fl.inject(fl.baseline(), "shuffled_labels")
    assert fl.format_diff(fl.diff(fl.baseline(), shuffled)) == "labels: 'aligned' → 'shuffled'"
    assert fl.format_diff({}) == "no change"


@pytest.mark.parametrize("seed", [2**63, 10**20, -1, 1.0, True])
def test_a_seed_outside_the_64_bit_range_is_a_clear_value_error_before_any_work(seed):
    for start in (lambda: fl.run("tabular", seed=seed), lambda: fl.build(fl.baseline(), seed)):
        with pytest.raises(ValueError, match=r"seed must be a non-negative integer no larger "
                                             r"than 2\*\*63 - 1"):
            start()


def test_the_largest_seed_is_accepted():
    from failurelab.basics.recipes import MAX_SEED

    assert fl.build(fl.baseline().replace(n_train=64, n_val=16), MAX_SEED).seed == MAX_SEED


@pytest.mark.parametrize("text, message", [("99999999999999999999", "2**63 - 1"),
                                           ("0-99999999999999999999", "2**63 - 1"),
                                           ("0-20000", "at most 10000 seeds")])
def test_parse_seeds_refuses_seeds_torch_cannot_take_or_too_many(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        fl.parse_seeds(text)


def test_the_new_switches_default_to_the_unchanged_baseline():
    base = fl.baseline()
    assert (base.lr_decay_every, base.loss_reduction, base.negate_loss, base.leak_label,
            base.scaler_growth_interval) == (0, "mean", False, False, 2000)


def test_a_regression_target_refuses_class_switches_and_only_it_can_be_flat():
    base = fl.baseline()
    assert (base.target, base.target_shape) == ("classes", "matched")
    regression = base.replace(target="value", target_shape="flat")
    assert fl.diff(base, regression) == {"target": ("classes", "value"),
                                         "target_shape": ("matched", "flat")}
    with pytest.raises(ValueError, match="target_shape='flat' needs target='value'"):
        base.replace(target_shape="flat")
    with pytest.raises(ValueError, match="minority_fraction applies to class labels only"):
        regression.replace(minority_fraction=0.5)
    with pytest.raises(ValueError, match="target applies to the tabular task only"):
        fl.baseline("sequence").replace(target="value")
