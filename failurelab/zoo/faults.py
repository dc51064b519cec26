"""The zoo's faults, written the way users write them.  A fault is data: the knob it
sets (see `zoo/knobs.py`), the values it sets it to (its severities), any knobs it
also fixes, and which families and optimizers it applies to.

`EXPECTED_CAUSE` is the one place that says which catalogue fault `fl.diagnose` should
name for each zoo fault (None: the failure is outside the catalogue).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .families import (
    DROPOUT,
    FAMILIES_BY_NAME,
    FLOAT,
    HALF,
    LOGITS,
    OPTIMIZERS,
    PAIRED,
    RELU,
    RESIDUAL,
    SATURATING,
)

# zoo fault -> catalogue fault it really has the mechanism of (None: outside the catalogue)
EXPECTED_CAUSE = {
    "no_zero_grad": "no_zero_grad",
    "zero_grad_misplaced": "zero_grad_misplaced",  # added to the catalogue by diagnosis
    "huge_lr": "huge_lr",
    "lr_too_small": "lr_too_small",
    "shuffled_labels": "shuffled_labels",
    "no_input_norm": "no_input_norm",
    "nan_in_data": "nan_in_data",
    "wrong_loss": "wrong_loss",
    "fp16_no_scaling": "fp16_no_scaling",
    "saturated_sigmoid": "saturated_sigmoid",
    "dead_relu": "dead_relu",
    "bad_init": "bad_init",
    "weight_decay_too_large": "weight_decay_too_large",
    "dropout_too_strong": "dropout_too_strong",
    # a deep residual stack without branch scaling explodes in the *forward* pass at
    # initialisation (logit std 15 at 8 blocks, ~1000 at 16: each unscaled branch adds
    # its own variance), NaN within 1-3 steps: an initialisation-scale fault, fixed by
    # scaling the branches by 1/sqrt(2 depth) or normalising (Fixup), not by clipping
    "deep_unscaled_residual": "bad_init",
    "frozen_params": None,  # a deliberate freeze: no fault to name
    "params_not_in_optimizer": "params_not_in_optimizer",
    "detached_graph": None,
    "unsafe_log_loss": None,
    "stale_optimizer": "params_not_in_optimizer",  # none of the model's are in it
    # the catalogue's target_broadcast: its signature reads the output's gradient
    # against the output (target_grad_share)
    "broadcast_mse": "target_broadcast",
    "fp16_adam_eps": None,
    "accumulation_not_divided": "accumulation_not_divided",
    "val_not_normalized": "val_not_normalized",
    "clip_before_unscale": "clip_before_unscale",
    "train_mode_not_restored": "train_mode_not_restored",
    "output_activation_mismatch": "output_activation_mismatch",
}


@dataclass(frozen=True)
class ZooFault:
    name: str
    cause: str | None  # the catalogue fault fl.diagnose should name; None: outside it
    knob: str  # the Knobs field each severity sets
    severities: tuple  # values of that knob, mildest first
    description: str  # the bug, as a user would have written it
    also: tuple = ()  # (knob, value) pairs set at every severity
    needs: frozenset = frozenset()  # family traits required (see zoo/families.py)
    families: tuple | None = None  # None: every family with `needs`
    optimizers: tuple = OPTIMIZERS
    habits: tuple = ()  # habits the fault needs to be observable (e.g. validation)
    skip: tuple = ()  # (family, severity) pairs that do not exist

    def applies(self, family: str, optimizer: str) -> bool:
        traits = FAMILIES_BY_NAME[family].traits
        return (self.needs <= traits and optimizer in self.optimizers
                and (self.families is None or family in self.families))

    def severities_for(self, family: str) -> tuple:
        return tuple(s for s in self.severities if (family, s) not in self.skip)

    def settings(self, severity) -> dict:
        if severity not in self.severities:
            raise ValueError(f"{self.name} has severities {self.severities}, got {severity!r}")
        return {self.knob: severity, **dict(self.also)}


_SGD = ("sgd", "momentum")
_FAULTS = (
    ZooFault("no_zero_grad", None, "zero_grad", ("never", "each_epoch"),
             "optimizer.zero_grad() forgotten, or called only once per epoch (32 steps)"),
    ZooFault("zero_grad_misplaced", None, "zero_grad", ("misplaced", "misplaced_keep"),
             "optimizer.zero_grad() between backward() and step(): every gradient is 0 at "
             "the step (set_to_none=True, or False: zeros kept)"),
    ZooFault("huge_lr", None, "lr_factor", (30.0, 300.0), "learning rate 30x / 300x the "
             "family's healthy rate"),
    ZooFault("lr_too_small", None, "lr_factor", (1e-3, 1e-4), "learning rate 1000x / "
             "10000x below the family's healthy rate"),
    ZooFault("shuffled_labels", None, "shuffled_rows", (0.5, 1.0), "X shuffled alone "
             "(X = X[perm] without y) for half / all of the training rows",
             needs=frozenset({PAIRED})),
    ZooFault("no_input_norm", None, "raw_decades", (3.0, 6.0), "inputs left in raw units "
             "whose scales span 3 / 6 decades (no standardisation)",
             needs=frozenset({FLOAT})),
    ZooFault("nan_in_data", None, "nan_rows", (0.01, 0.1), "NaN in one feature of 1% / "
             "10% of the training rows", needs=frozenset({FLOAT})),
    ZooFault("wrong_loss", None, "output", ("probs", "probs_nll"), "nn.Softmax (nn.Sigmoid "
             "for BCE) at the end of the model, fed to the logits loss; or nn.Softmax fed "
             "to NLLLoss, which expects log-probabilities", needs=frozenset({LOGITS}),
             skip=(("binary", "probs_nll"),)),
    ZooFault("fp16_no_scaling", None, "fp16", ("half", "autocast"), "float16 without a "
             "GradScaler: model.half() with half inputs, or torch.autocast('cpu', "
             "torch.float16) around the forward", needs=frozenset({HALF}), optimizers=_SGD),
    ZooFault("saturated_sigmoid", None, "saturating_gain", (10.0, 30.0), "the weights "
             "feeding the sigmoid/tanh layer initialised 10x / 30x too large",
             needs=frozenset({SATURATING})),
    ZooFault("dead_relu", None, "relu_bias", (-3.0, -10.0), "a bias of -3 / -10 added to "
             "the layer feeding the first ReLU", needs=frozenset({RELU})),
    ZooFault("bad_init", None, "init_scale", (10.0, 30.0), "every weight matrix "
             "initialised 10x / 30x larger than PyTorch's default"),
    ZooFault("weight_decay_too_large", None, "decay_per_step", (0.02, 0.1), "weight_decay "
             "so large that lr x weight_decay is 2% / 10% per step (coupled L2 for SGD, "
             "Adam and RMSprop; decoupled for AdamW)"),
    ZooFault("dropout_too_strong", None, "dropout", (0.75, 0.9), "dropout p = 0.75 / 0.9",
             needs=frozenset({DROPOUT}), habits=("val",)),
    ZooFault("deep_unscaled_residual", None, "depth", (8, 16), "the residual stack 8 / 16 "
             "blocks deep without LayerNorm or branch scaling, He-initialised, at the "
             "4-block stack's rate", also=(("normalized", False),),
             needs=frozenset({RESIDUAL}), optimizers=_SGD),
    ZooFault("frozen_params", None, "frozen", ("requires_grad",),
             "all but the head frozen on purpose: requires_grad=False (one form: its "
             "optimizer form is params_not_in_optimizer)"),
    ZooFault("params_not_in_optimizer", None, "frozen", ("optimizer", "first_layer"),
             "the optimizer given the head's parameters only (a line from a fine-tuning "
             "example), or param groups listed by hand that leave out the first layer"),
    ZooFault("detached_graph", None, "cut", (0.5, 1.0), "an accidental .detach() halfway "
             "through the body / right before the head",
             skip=(("gru", 0.5),)),  # a one-layer body: halfway is its input
    ZooFault("unsafe_log_loss", None, "temperature", (0.005, 0.001), "a hand-written "
             "softmax cross-entropy, -log(exp(z/T)[y] / exp(z/T).sum()), at temperature "
             "0.005 / 0.001 (as in contrastive code): exp(z/T) overflows or p underflows, "
             "giving inf / inf = NaN or -log(0) = inf",
             also=(("loss", "unsafe_softmax"),), needs=frozenset({LOGITS}),
             families=("cnn_bn", "gru", "attention", "resmlp", "bag")),
    ZooFault("stale_optimizer", None, "stale_optimizer", ("rebuilt", "deepcopy"), "the "
             "optimizer holds another model's parameters: the model was re-created after "
             "it (a re-run notebook cell), or the loop trains a copy.deepcopy of it"),
    ZooFault("broadcast_mse", None, "target_shape", ("flat_targets", "flat_outputs"),
             "MSELoss of (B, 1) outputs against (B,) targets, or of (B,) outputs against "
             "(B, 1) targets: broadcasting to (B, B) fits the mean",
             families=("regressor",)),
    ZooFault("fp16_adam_eps", None, "loss_divisor", (1.0, 16.0), "model.half() under "
             "Adam/RMSprop, the loss divided by 1 / 16: eps=1e-8 rounds to 0 in float16, "
             "so a gradient entry of 0 steps by 0/0 = NaN", also=(("fp16", "half"),),
             needs=frozenset({HALF}), optimizers=("adam", "adamw", "rmsprop")),
    ZooFault("accumulation_not_divided", None, "undivided_micro_batches", (4, 8),
             "gradient accumulation over 4 / 8 micro-batches, each loss the mean over its "
             "micro-batch, never divided by their number",
             # a softmax cross-entropy's gradient tells its loss weight; one logit (BCE)
             # or a regression's does not (see probes.loss_weights)
             families=("cnn_bn", "gru", "attention", "resmlp", "bag")),
    ZooFault("val_not_normalized", None, "val_raw_decades", (3.0, 6.0), "the scaler fit "
             "and applied to the training split only: validation inputs in raw units "
             "spanning 3 / 6 decades", needs=frozenset({FLOAT}), habits=("val",)),
    ZooFault("clip_before_unscale", None, "scaled_clip", (1.0, 10.0), "mixed precision "
             "with a GradScaler, clip_grad_norm_(max_norm=1 / 10) called on the scaled "
             "gradients: scaler.unscale_(optimizer) forgotten before it",
             # Adam, AdamW and RMSprop divide each step by the gradient's own scale, so a
             # gradient pinned 1e4-1e5 times too small still takes steps of the usual size
             needs=frozenset({HALF}), optimizers=_SGD, habits=("amp",)),
    ZooFault("train_mode_not_restored", None, "train_mode", ("once", "each_epoch"),
             "validation calls model.eval() and never model.train(); the loop calls "
             "model.train() once before training / at the top of each epoch",
             # the families whose forward the mode changes: BatchNorm, dropout p > 0
             families=("cnn_bn", "binary", "bag"), habits=("val",)),
    ZooFault("output_activation_mismatch", None, "output",
             ("relu", "shared_relu", "functional_relu"),
             "nn.ReLU() after the last Linear layer, the body's own ReLU module called "
             "on the logits too (return self.relu(self.head(x))), or F.relu written in "
             "forward, the output fed to CrossEntropyLoss or to BCE with logits: no logit "
             "can go below 0",
             # a softmax cross-entropy needs negative logits for the classes it rules
             # out, one logit's BCE for the negatives (sigmoid(relu(z)) >= 0.5); a
             # regression may have targets >= 0
             families=("cnn_bn", "gru", "attention", "resmlp", "bag", "binary"),
             skip=(("gru", "shared_relu"),)),  # a GRU body has no ReLU module
)
FAULTS = {f.name: replace(f, cause=EXPECTED_CAUSE[f.name]) for f in _FAULTS}
