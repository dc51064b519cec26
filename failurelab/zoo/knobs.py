"""`Knobs`: every switch a zoo fault can flip, with the healthy value as the default.

A zoo fault is data: the knob it sets and the values (severities) it sets it to.
Each knob enters the loop at one visible place, named in its comment, so searching
for a knob's name finds where its fault enters.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Knobs:
    # --- data (zoo/data.py) ---
    raw_decades: float = 0.0  # > 0: inputs left in raw units spanning this many decades
    nan_rows: float = 0.0  # share of training rows with a NaN feature
    shuffled_rows: float = 0.0  # share of training rows whose X was shuffled without y
    val_raw_decades: float = 0.0  # > 0: the validation split alone left in raw units
    #                               spanning this many decades (scaler on training only)
    # --- model (zoo/models.py) ---
    init_scale: float = 1.0  # every weight matrix multiplied by this after init
    saturating_gain: float = 1.0  # weights feeding the first sigmoid/tanh, multiplied
    relu_bias: float = 0.0  # bias added before the first ReLU
    dropout: float | None = None  # None: the family's own rate
    output: str = "logits"  # "probs": softmax/sigmoid at the end of the model; "relu": a ReLU
    #                         ("shared_relu": the body's own ReLU module, called again;
    #                         "functional_relu": torch.relu in forward, no module)
    depth: int | None = None  # None: the family's own depth (residual stack)
    normalized: bool = True  # residual stack: LayerNorm and a scaled branch; False: neither,
    #                          and He init
    cut: float | None = None  # share of the body before an accidental .detach()
    # --- optimizer and loss (zoo/parts.py) ---
    lr_factor: float = 1.0  # learning rate = family's healthy rate x this
    decay_per_step: float = 0.0  # weight decay set so that lr x decay = this
    frozen: str = ""  # "requires_grad": all but the head frozen; "optimizer": head only in
    #                   the optimizer; "first_layer": all but the first two tensors in it
    stale_optimizer: str = ""  # "rebuilt" | "deepcopy": the optimizer holds another model's
    fp16: str = ""  # "half": model.half() and half inputs; "autocast": float16 autocast;
    #                 neither with a GradScaler
    loss_divisor: float = 1.0  # loss divided by this before backward
    undivided_micro_batches: int = 0  # > 0: the step is this many micro-batches whose
    #                                   mean losses are never divided by their count
    loss: str = "builtin"  # "unsafe_softmax": a hand-written exp / sum / log cross-entropy
    temperature: float = 1.0  # the logits are divided by this in the hand-written loss
    target_shape: str = "matched"  # "broadcast": MSE of (B, 1) outputs against (B,) targets
    # --- loop (zoo/loop.py) ---
    scaled_clip: float = 0.0  # > 0: clip_grad_norm_ to this before scaler.unscale_(), on
    #                           gradients still multiplied by the GradScaler's scale
    zero_grad: str = "each_step"  # "never" | "each_epoch" | "misplaced" | "misplaced_keep"
    train_mode: str = "each_step"  # where model.train() is called: "each_step", or
    #                                "each_epoch" / "once" with validation not restoring it


KNOB_NAMES = tuple(f.name for f in fields(Knobs))


def with_knobs(settings: dict) -> Knobs:
    """Knobs with `settings` applied; an unknown knob is a clear error."""
    unknown = sorted(set(settings) - set(KNOB_NAMES))
    if unknown:
        raise KeyError(f"unknown zoo knob(s) {unknown}; known: {', '.join(KNOB_NAMES)}")
    return replace(Knobs(), **settings)
