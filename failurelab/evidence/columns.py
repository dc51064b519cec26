"""Every history column, declared once: its name, its group and who records it.

A history is a table with one row per recorded step.  `Monitor` records the column
groups of its preset (see telemetry.monitor.PRESETS); the lab's own loop adds the
*extras* below through `mon.record(loss, **extra)`, and a user's loop may pass the same
names.  A per-module column is declared by its prefix and written `prefix/<module>`.

Quantities (see `quantities`) declare the columns they require; "lab-only" and "not
recorded" are derived from these declarations, and docs/columns.md is generated from
them (python benchmarks/signatures.py --write-docs).
"""

from __future__ import annotations

from dataclasses import dataclass

MONITOR, EXTRA = "monitor", "extra"  # who records a column


@dataclass(frozen=True)
class ColumnGroup:
    """Columns that one recorder writes together (a Monitor instrument, a preset part, or
    one measurement of the lab's loop)."""

    name: str  # also how a diagnosis names it when it is "not recorded"
    recorder: str  # MONITOR or EXTRA
    columns: tuple[str, ...]  # "prefix/" for per-module or per-parameter columns
    meaning: str  # one line for docs/columns.md
    preset: str = "full"  # the cheapest Monitor preset that records it (MONITOR only)

    def present(self, columns) -> bool:
        """Does a history with these columns hold this group?  By its first column."""
        first = self.columns[0]
        return any(c.startswith(first) for c in columns) if first.endswith("/") \
            else first in columns


GROUPS: tuple[ColumnGroup, ...] = (
    ColumnGroup("loss", MONITOR, ("step", "loss"),
                "the step index and the training loss passed to record()", "economy"),
    ColumnGroup("gradients", MONITOR,
                ("grad_norm", "weight_norm", "update_norm", "update_ratio", "grad_cosine",
                 "nonfinite", "zero_grad_frac", "grad_carried"),
                "global gradient and weight norms, ‖Δw‖/‖w‖, the cosine of consecutive "
                "gradients, non-finite and exactly-zero gradient entries, a .grad never "
                "emptied", "economy"),
    ColumnGroup("optimizer state", MONITOR,
                ("lr", "param_lowp_frac", "unoptimized_params", "step_skipped", "dropout_rate",
                 "loss_scaled", "batchnorm_train", "frozen_frac", "train_mode",
                 "forward_observed"),
                "what record() reads off the optimizer, scaler and model at each step, and "
                "whether the step's forward tensors were read",
                "economy"),
    ColumnGroup("layers", MONITOR, ("grad_norm/", "weight_norm/", "update_ratio/"),
                "the same norms per parameter tensor"),
    ColumnGroup("input statistics", MONITOR,
                ("input_absmax", "input_std_ratio", "input_nonfinite", "batch_size",
                 "first_layer_std_ratio"),
                "the model's input batch: largest abs(x), feature-std spread, NaN/Inf, size; "
                "the feature-std spread of the first weighted layer's input where the model "
                "transforms its input before it"),
    ColumnGroup("output gradient", MONITOR,
                ("output_grad_zero_frac", "output_grad_min", "output_std", "output_prob_frac",
                 "output_logprob_frac", "output_nonfinite", "loss_weight", "output_backwards",
                 "output_soft_target_frac", "output_ce", "output_ce_twice", "target_grad_share",
                 "output_float16", "output_label_purity", "output_sigmoid_logits",
                 "output_label_mean", "output_label_std", "output_zero_frac"),
                "the model's output and the gradient that reached it"),
    ColumnGroup("activations", MONITOR, ("act_mean/", "act_std/", "dead_frac/",
                                         "saturated_frac/"),
                "per activation module: mean, std, dead (ReLU) or saturated (sigmoid, tanh)"),
    ColumnGroup("evaluation inputs", MONITOR, ("eval_input_shift",),
                "standardised shift of evaluation inputs from training inputs"),
    ColumnGroup("validation", EXTRA, ("val_loss", "val_acc", "val_min_recall", "val_jitter"),
                "validation loss, accuracy, worst-class recall, logit jitter of two passes"),
    ColumnGroup("batch labels", EXTRA, ("label_purity", "batch_acc"),
                "share of the batch's most common label; training accuracy of the batch"),
    ColumnGroup("timing", EXTRA, ("t_data", "t_forward", "t_backward", "t_step"),
                "CPU seconds of each step's segments"),
    ColumnGroup("padding", EXTRA, ("pad_attention", "pad_sensitivity"),
                "attention on pad positions; prediction change when pads are appended"),
)
GROUP = {g.name: g for g in GROUPS}
COLUMN_GROUP = {c: g.name for g in GROUPS for c in g.columns}  # column (or prefix) -> group


def group_of(column: str) -> str | None:
    """The group a column (or a per-module column `prefix/<module>`) belongs to."""
    if column in COLUMN_GROUP:
        return COLUMN_GROUP[column]
    prefix = column.split("/", 1)[0] + "/"
    return COLUMN_GROUP.get(prefix) if "/" in column else None


def extra(column: str) -> bool:
    """Recorded by the lab's loop (or a user's `record(**extra)`), not by a Monitor."""
    group = group_of(column)
    return group is not None and GROUP[group].recorder == EXTRA
