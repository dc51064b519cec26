"""The course's experiment keys: neutral names that give nothing away before the run.

A notebook's prediction cell sits right under the experiment's heading; had it read
`ws.predict("huge_lr", ...)` the name would answer the question it asks.  So the
notebooks name each experiment by where it is taught ("01-2": notebook 01, Experiment
2), and this table, the one place that knows, resolves a key to its fault once the
student has observed it.  Worksheets written before the keys, whose experiments carry
the fault's own name, still resolve: a fault name is its own key, and "a+b" names the
two faults injected together.  Any other name (a mystery, a student's own loop) names
no recipe, and nothing here binds it to one.
"""

from __future__ import annotations

from ..basics.recipes import Recipe, baseline
from ..catalogue import FAULTS
from ..catalogue.faults import inject

# key -> the fault its notebook section injects into its task's baseline
EXPERIMENTS: dict[str, str] = {
    "01-1": "no_zero_grad", "01-2": "huge_lr", "01-3": "saturated_sigmoid",
    "01-4": "shuffled_labels",
    "02-1": "no_input_norm", "02-2": "class_imbalance", "02-3": "nan_in_data",
    "02-4": "no_shuffle", "02-5": "label_offset", "02-6": "overfitting",
    "03-1": "lr_too_small", "03-2": "dropout_too_strong", "03-3": "weight_decay_too_large",
    "03-4": "batch_too_small", "03-5": "exploding_gradients",
    "04-1": "dead_relu", "04-2": "bad_init",
    "04-3": "output_activation_mismatch",
    "05-1": "fp16_no_scaling", "05-2": "fp16_overflow", "05-3": "clip_before_unscale",
    "05-4": "log_softmax_by_hand",
    "06-1": "wrong_loss", "06-2": "eval_mode_forgotten", "06-3": "bad_padding_mask",
    "06-4": "inverted_padding_mask",
    "08-1": "slow_data",
    "11-1": "label_leakage", "11-2": "lr_decayed_too_early", "11-3": "summed_loss",
    "11-4": "negated_loss", "11-5": "init_too_small", "11-6": "zero_grad_misplaced",
    "11-7": "accumulation_not_divided", "11-8": "val_not_normalized",
    "11-9": "train_mode_not_restored", "11-10": "params_not_in_optimizer",
    "11-11": "target_broadcast",
}
KEYS: dict[str, str] = {fault: key for key, fault in EXPERIMENTS.items()}  # fault -> key
JOIN = "+"  # "huge_lr+shuffled_labels": both faults in one recipe


def faults_of(name: str) -> tuple[str, ...]:
    """The faults an experiment name injects: () for a name that names no recipe."""
    if name in EXPERIMENTS:
        return (EXPERIMENTS[name],)
    parts = tuple(name.split(JOIN))
    return parts if all(p in FAULTS for p in parts) else ()


def fault_of(name: str) -> str | None:
    """The one fault behind `name` (a course key or a fault name), else None."""
    faults = faults_of(name)
    return faults[0] if len(faults) == 1 else None


def recipe_of(name: str) -> Recipe | None:
    """The recipe `name` stands for: its faults injected into their task's baseline."""
    faults = faults_of(name)
    if not faults:
        return None
    return inject(baseline(FAULTS[faults[0]].task), *faults)


def label(name: str) -> str:
    """How an instructor reads an experiment: "huge_lr" for both "01-2" and an older
    worksheet's "huge_lr" (one column per fault in a class), the name itself otherwise."""
    return fault_of(name) or name


def shown(name: str, revealed: bool) -> str:
    """How a student's table names an experiment: the key, with its fault once observed."""
    fault = fault_of(name)
    return f"{name} · {fault}" if revealed and fault and fault != name else name
