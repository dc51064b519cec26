"""Recipes: one frozen, validated description of a whole experiment.

A recipe holds every switch a fault can flip, so a fault is just "the baseline with
one field changed" and `diff` can show that field.  Nothing here touches torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

TASKS = ("tabular", "sequence")
OPTIMIZERS = ("sgd", "adam")
DTYPES = ("float32", "float16", "bfloat16")
LABELS = ("aligned", "shuffled")
OUTPUTS = ("logits", "softmax", "relu")
LOG_SOFTMAX = ("fused", "by_hand")
LOADERS = ("batched", "per_sample")
ZERO_GRAD_AT = ("before_backward", "before_step")
OPTIMIZE = ("all", "head")
REDUCTIONS = ("mean", "sum")
TARGETS = ("classes", "value")
TARGET_SHAPES = ("matched", "flat")


@dataclass(frozen=True)
class Recipe:
    """One fully specified experiment; build it with `baseline()` and change it with `inject()`."""

    task: str = "tabular"  # which synthetic task and model: "tabular" or "sequence"

    # --- data -----------------------------------------------------------------------
    n_train: int = 2000  # training samples generated from the seed
    n_val: int = 500  # validation samples, always clean and balanced
    normalize_inputs: bool = True  # standardise features with training mean/std (tabular)
    normalize_val: bool = True  # ...and validation with the same statistics (False: raw)
    labels: str = "aligned"  # "shuffled" permutes training labels: they no longer match samples
    train_label_shift: int = 0  # training labels become (y + shift) mod classes; validation untouched
    minority_fraction: float = 1.0  # share of classes 1 and 2 kept in training (1.0 = balanced)
    nan_rows: int = 0  # training rows whose amount feature is missing (NaN) in the raw data
    impute_missing: bool = False  # fill missing values with the training median first
    shuffle: bool = True  # reshuffle every epoch; the raw data are stored sorted by class
    balanced_sampling: bool = False  # draw every class equally often (oversample rare ones)
    loader: str = "batched"  # "per_sample" preprocesses each sample in Python, then collates
    leak_label: bool = False  # the last feature is recorded after the outcome: it encodes y
    target: str = "classes"  # "value": regress the teacher's score with MSE (tabular)
    target_shape: str = "matched"  # "flat": (B,) targets against the (B, 1) output

    # --- model ----------------------------------------------------------------------
    hidden: int = 64  # width of the hidden layers
    depth: int = 0  # extra residual ReLU blocks before the head, without normalisation
    residual_scale: float = 1.0  # multiplies each residual branch (1/sqrt(2 depth) tames it)
    dropout: float = 0.1  # dropout probability before the output layer (tabular)
    init_scale: float = 1.0  # multiplies every weight matrix after PyTorch's default init
    sigmoid_gain: float = 1.0  # extra multiplier on the weights feeding the sigmoid layer
    relu_bias: float = 0.0  # initial bias of the layer feeding the ReLU
    output: str = "logits"  # "softmax" ends the model in softmax before cross-entropy,
    #                         "relu" in a ReLU (logits clipped at 0)
    mask_padding: bool = True  # hide pad tokens from attention (sequence)
    mask_inverted: bool = False  # mask the real tokens instead of the pads (sequence)

    # --- optimisation ---------------------------------------------------------------
    optimizer: str = "sgd"  # "sgd" (with momentum) or "adam"
    optimize: str = "all"  # the parameters given to the optimizer: "all", or "head" only
    freeze_body: bool = False  # requires_grad=False on every layer but the head (tabular)
    lr: float = 0.1  # learning rate
    momentum: float = 0.9  # SGD momentum (ignored by Adam)
    weight_decay: float = 0.0  # L2 penalty applied by the optimizer
    batch_size: int = 64  # samples per optimizer step
    accumulate: int = 1  # micro-batches the step's batch is split into, one backward each
    divide_accumulated: bool = True  # divide each micro-batch's loss by `accumulate`
    steps: int = 300  # optimizer steps in a run
    zero_grad: bool = True  # clear gradients before each backward pass
    zero_grad_at: str = "before_backward"  # "before_step" clears them after backward
    grad_clip: float = 0.0  # clip the global gradient norm to this value (0 = off)
    unscale_before_clip: bool = True  # with a GradScaler: unscale_() the gradients first
    lr_decay_every: int = 0  # StepLR: multiply the rate by 0.1 every this many steps (0 = off)
    loss_reduction: str = "mean"  # "sum" adds the per-sample losses instead of averaging
    log_softmax: str = "fused"  # "by_hand": NLL of log(softmax(logits)), written inside
    #                             the autocast region (float16 there on the CPU)
    negate_loss: bool = False  # minimise -loss, i.e. climb the loss

    # --- numerics -------------------------------------------------------------------
    dtype: str = "float32"  # autocast compute dtype: "float32" (off), "float16", "bfloat16"
    loss_scaling: bool = False  # dynamic loss scaling with torch.amp.GradScaler
    scaler_growth_interval: int = 2000  # GradScaler: clean steps before the scale doubles

    # --- evaluation -----------------------------------------------------------------
    eval_every: int = 10  # validate every this many steps (and at the last step)
    eval_mode: bool = True  # call model.eval() before validating
    restore_train_mode: bool = True  # call model.train() after validating

    def __post_init__(self) -> None:
        for problem in _problems(self):
            raise ValueError(problem)

    def replace(self, **changes) -> "Recipe":
        """A validated copy with `changes` applied (an unknown field raises TypeError)."""
        return dataclasses.replace(self, **changes)


# The sequence task is a different problem, with its own sizes and optimizer.
_SEQUENCE = dict(task="sequence", n_train=2000, n_val=500, hidden=32, dropout=0.0,
                 optimizer="adam", lr=0.01, batch_size=64, steps=300)

# Fields that only mean something for one task, with the value the other task must keep.
_TASK_ONLY = {
    "tabular": {"normalize_inputs": True, "nan_rows": 0, "impute_missing": False,
                "sigmoid_gain": 1.0, "relu_bias": 0.0, "dropout": 0.0, "depth": 0,
                "residual_scale": 1.0, "leak_label": False, "normalize_val": True,
                "optimize": "all", "freeze_body": False, "target": "classes",
                "target_shape": "matched"},
    "sequence": {"mask_padding": True, "mask_inverted": False},
}


def baseline(task: str = "tabular") -> Recipe:
    """The healthy, fully seeded experiment every fault is compared with."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return Recipe() if task == "tabular" else Recipe(**_SEQUENCE)


# Every seed the lab accepts: torch generators take 64-bit seeds, and the data derive
# `seed + 1` and `seed + 2` from it, so the signed 64-bit range leaves room for both.
MAX_SEED = 2**63 - 1
MAX_STEPS = 1_000_000  # a recipe's longest run: about a day of the lab's CPU time
MAX_SEED_COUNT = 10_000  # one verify of the catalogue on this many seeds takes a day


def check_seed(seed, what: str = "seed") -> int:
    """`seed` itself when it is a usable seed; else a ValueError saying the range (a
    huge seed would otherwise fail deep inside torch, after the work had started)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{what} must be a non-negative integer no larger than 2**63 - 1 "
                         f"({MAX_SEED}), got {seed!r}")
    return seed


def parse_seeds(text: str) -> list[int]:
    """'0-9' or '0,3,7' (or a mix: '0-4,9') -> a sorted list of distinct seeds."""
    seeds: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"seeds must look like 0-9 or 0,3,7; got {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"seeds must be non-negative ranges low-high; got {part!r}")
        check_seed(last, "a seed")
        if last - first + len(seeds) >= MAX_SEED_COUNT:
            raise ValueError(f"at most {MAX_SEED_COUNT} seeds at once; got {text!r}")
        seeds.update(range(first, last + 1))
    return sorted(seeds)


@dataclass(frozen=True)
class Set:
    """An edit as data: set recipe field `field` to `value`."""

    field: str
    value: object

    def apply(self, recipe: Recipe) -> Recipe:
        return recipe.replace(**{self.field: self.value})

    def __str__(self) -> str:
        return f"{self.field} = {self.value!r}"


@dataclass(frozen=True)
class Scale:
    """An edit as data: multiply recipe field `field` by `factor` (integer fields are
    rounded to the nearest integer)."""

    field: str
    factor: float

    def apply(self, recipe: Recipe) -> Recipe:
        old = getattr(recipe, self.field)
        new = old * self.factor
        return recipe.replace(**{self.field: round(new) if isinstance(old, int) else new})

    def __str__(self) -> str:
        return f"{self.field} x {self.factor:g}"


Edit = tuple  # of Set | Scale, applied in order


def apply(recipe: Recipe, edit: Edit) -> Recipe:
    """`recipe` with every change of `edit` applied, in order (validated once each)."""
    for change in edit:
        recipe = change.apply(recipe)
    return recipe


def diff(a: Recipe, b: Recipe) -> dict[str, tuple]:
    """Fields whose values differ, as `{field: (value_in_a, value_in_b)}`."""
    out = {}
    for field in dataclasses.fields(Recipe):
        va, vb = getattr(a, field.name), getattr(b, field.name)
        if va != vb:
            out[field.name] = (va, vb)
    return out


def format_value(value) -> str:
    """A recipe value as a person reads it: floats to 6 significant digits, so that
    0.1 * 30 shows as 3 rather than 3.0000000000000004; strings quoted."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value) if isinstance(value, str) else str(value)


def format_diff(changes: dict[str, tuple]) -> str:
    """A `diff` as one line, 'lr: 0.1 → 3, labels: 'aligned' → 'shuffled''; the values
    of `diff` itself stay exact."""
    return ", ".join(f"{k}: {format_value(a)} → {format_value(b)}"
                     for k, (a, b) in changes.items()) or "no change"


def _choice(name: str, value, allowed) -> str | None:
    if value not in allowed:
        return f"{name} must be one of {allowed}, got {value!r}"
    return None


def _number(name, value, lo, hi, *, integer=False, lo_open=False) -> str | None:
    kind = int if integer else (int, float)
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if ok and not integer:
        ok = math.isfinite(value)
    if ok:
        ok = (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        left = "(" if lo_open else "["
        what = "an integer" if integer else "a number"
        return f"{name} must be {what} in {left}{lo}, {hi}], got {value!r}"
    return None


def _problems(r: Recipe):
    """Yield one message per invalid field, naming the field and the allowed range."""
    checks = [
        _choice("task", r.task, TASKS),
        _choice("optimizer", r.optimizer, OPTIMIZERS),
        _choice("dtype", r.dtype, DTYPES),
        _choice("labels", r.labels, LABELS),
        _choice("output", r.output, OUTPUTS),
        _choice("log_softmax", r.log_softmax, LOG_SOFTMAX),
        _choice("loader", r.loader, LOADERS),
        _choice("zero_grad_at", r.zero_grad_at, ZERO_GRAD_AT),
        _choice("optimize", r.optimize, OPTIMIZE),
        _choice("loss_reduction", r.loss_reduction, REDUCTIONS),
        _choice("target", r.target, TARGETS),
        _choice("target_shape", r.target_shape, TARGET_SHAPES),
        _number("lr_decay_every", r.lr_decay_every, 0, 1_000_000, integer=True),
        _number("scaler_growth_interval", r.scaler_growth_interval, 1, 1_000_000,
                integer=True),
        _number("n_train", r.n_train, 16, 1_000_000, integer=True),
        _number("n_val", r.n_val, 16, 1_000_000, integer=True),
        _number("train_label_shift", r.train_label_shift, 0, 2, integer=True),
        _number("minority_fraction", r.minority_fraction, 0.0, 1.0, lo_open=True),
        _number("nan_rows", r.nan_rows, 0, r.n_train if isinstance(r.n_train, int) else 0,
                integer=True),
        _number("hidden", r.hidden, 1, 4096, integer=True),
        _number("depth", r.depth, 0, 256, integer=True),
        _number("residual_scale", r.residual_scale, 0.0, 10.0, lo_open=True),
        _number("dropout", r.dropout, 0.0, 0.99),
        _number("init_scale", r.init_scale, 0.0, 1e3, lo_open=True),
        _number("sigmoid_gain", r.sigmoid_gain, 0.0, 1e3, lo_open=True),
        _number("relu_bias", r.relu_bias, -1e3, 1e3),
        _number("lr", r.lr, 0.0, 1e4, lo_open=True),
        _number("momentum", r.momentum, 0.0, 0.999),
        _number("weight_decay", r.weight_decay, 0.0, 1e3),
        _number("batch_size", r.batch_size, 1, r.n_train if isinstance(r.n_train, int) else 1,
                integer=True),
        _number("accumulate", r.accumulate, 1,
                r.batch_size if isinstance(r.batch_size, int) else 1, integer=True),
        _number("steps", r.steps, 1, MAX_STEPS, integer=True),
        _number("grad_clip", r.grad_clip, 0.0, 1e6),
        _number("eval_every", r.eval_every, 1, 1_000_000, integer=True),
    ]
    for name in ("normalize_inputs", "impute_missing", "shuffle", "mask_padding",
                 "mask_inverted", "zero_grad", "balanced_sampling", "loss_scaling", "eval_mode",
                 "leak_label", "negate_loss", "divide_accumulated", "normalize_val",
                 "unscale_before_clip", "restore_train_mode", "freeze_body"):
        value = getattr(r, name)
        if not isinstance(value, bool):
            checks.append(f"{name} must be True or False, got {value!r}")
    yield from (c for c in checks if c)
    if r.loss_scaling and r.dtype != "float16":
        yield f"loss_scaling needs dtype='float16' (it guards fp16 gradients), got dtype={r.dtype!r}"
    if (isinstance(r.accumulate, int) and isinstance(r.batch_size, int) and r.accumulate
            and r.batch_size % r.accumulate):
        yield (f"batch_size ({r.batch_size}) must split into accumulate ({r.accumulate}) "
               f"equal micro-batches")
    if r.task in TASKS:
        yield from _task_mismatches(r)
    yield from _target_mismatches(r)


# Switches that mean something only for class labels, at the value a regression keeps.
_CLASSES_ONLY = {"train_label_shift": 0, "minority_fraction": 1.0, "balanced_sampling": False,
                 "leak_label": False, "output": "logits", "log_softmax": "fused"}


def _target_mismatches(r: Recipe):
    if r.target_shape == "flat" and r.target != "value":
        yield "target_shape='flat' needs target='value' (only a regression's targets broadcast)"
    if r.target == "value":
        for name, neutral in _CLASSES_ONLY.items():
            if getattr(r, name) != neutral:
                yield (f"{name} applies to class labels only; leave it at {neutral!r} for "
                       f"target='value'")


def _task_mismatches(r: Recipe):
    other = "sequence" if r.task == "tabular" else "tabular"
    for name, neutral in _TASK_ONLY[other].items():
        if getattr(r, name) != neutral:
            yield (f"{name} applies to the {other} task only; leave it at "
                   f"{neutral!r} for task={r.task!r}")
