"""Checks of the parts themselves, no training: the data the batches hold, and where
one step of the user's loop sends the gradients.

`gradient_flow` runs the user's step once, on the first batch, on a fresh model, and
looks at every trainable parameter as `optimizer.step()` is about to use it: does it
hold a gradient, does the optimizer hold it, did the step change it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import pandas as pd
import torch

from ..catalogue import FAULTS
from ..catalogue.conditions import INPUTS_SCALED, INPUTS_SMALL
from ..evidence.experiments import INIT_OFF
from ..evidence.quantities import input_magnitude, input_scale_spread
from ..telemetry.monitor import DROPOUTS, mode_matters
from .parts import Parts, build


@dataclass
class Flow:
    """One step's gradient flow.  Shares are of the trainable parameters (NaN: the
    user's step never called `optimizer.step()`, or it failed)."""

    no_grad_at_step: float = math.nan
    grad_not_optimized: float = math.nan
    unchanged: float = math.nan
    trainable: int = 0
    without_grad: list[str] = field(default_factory=list)
    not_optimized: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)  # tensors that ask for a
    #   gradient but are no parameter: model.parameters() never lists them
    error: str | None = None


def nonfinite_inputs(parts: Parts) -> float:
    """Share of the distinct training batches whose inputs hold a NaN or Inf."""
    seen, bad = set(), 0
    for batch in parts.batches:
        if id(batch) in seen:
            continue
        seen.add(id(batch))
        try:
            x = parts.inputs(batch)
        except Exception:  # noqa: BLE001 - no inputs to check
            return math.nan
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            bad += int(not bool(torch.isfinite(x).all()))
    return bad / len(seen) if seen else math.nan


def inputs_unscaled(history: pd.DataFrame) -> float:
    """1 when the baseline's inputs are off a standardised scale by the thresholds of
    no_input_norm's own signature (feature spreads 100x apart, or values in the
    hundreds); 0 when both were measured within them; NaN when neither was recorded."""
    limits = ((input_scale_spread, INPUTS_SCALED), (input_magnitude, INPUTS_SMALL))
    values = [(q(history), c.physical or c.threshold) for q, c in limits]
    measured = [(v, limit) for v, limit in values if v == v]
    if not measured:
        return math.nan
    return float(any(v > limit for v, limit in measured))


def val_inputs_shifted(parts: Parts, limit: float) -> float:
    """1 when the validation inputs' mean sits `limit` or more training standard
    deviations from the training inputs' mean in some feature (the largest
    standardised mean difference, as the Monitor's `eval_input_shift`, but over every
    training batch the arms use, not only those a broken run reached); 0 below it; NaN
    without validation batches or float inputs of one shape."""
    train, val = _flat_inputs(parts, parts.batches), _flat_inputs(parts, parts.val_batches)
    if train is None or val is None or train.shape[1] != val.shape[1] or len(train) < 2:
        return math.nan
    mean, std = train.mean(0), train.std(0)
    varies = std > 0
    if not bool(varies.any()):
        return math.nan
    shift = ((val.mean(0) - mean).abs() / torch.where(varies, std, 1.0))[varies].max()
    return float(bool(shift >= limit))


def _flat_inputs(parts: Parts, batches) -> torch.Tensor | None:
    """The distinct batches' float inputs as (samples, features), float64; None when
    any is missing, not a float tensor, or not finite."""
    try:
        xs = [parts.inputs(b) for b in _distinct(batches)]
    except Exception:  # noqa: BLE001 - no inputs to read
        return None
    if not xs or not all(isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() >= 1
                         for x in xs):
        return None
    flat = [x.detach().double().reshape(x.shape[0] if x.dim() > 1 else 1, -1) for x in xs]
    if len({f.shape[1] for f in flat}) != 1:
        return None
    joined = torch.cat(flat)
    return joined if bool(torch.isfinite(joined).all()) else None


def _distinct(batches) -> list:
    seen: dict[int, object] = {}
    for b in batches:
        seen.setdefault(id(b), b)
    return list(seen.values())


def padding_hides_tokens(parts: Parts) -> float:
    """Does the key-padding mask the loop hands an attention module hide the padding?
    One step of the user's loop on a fresh model and the first batch: the model's
    token-id input (an integer tensor of the mask's shape) against the first mask an
    nn.MultiheadAttention (also inside nn.Transformer* layers) receives.  1 when the
    keys it hides hold varied tokens and the ones it lets through one repeated token
    (the mask is inverted: the padding attended, the text hidden); 0 when the keys it
    hides hold one repeated token, the padding; NaN when there is no such mask or input,
    the batch has no padding, or the step fails.  The user's own step is run because
    the mask is often made there, from the batch, not by the model."""
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            model, optimizer, _ = build(parts)
            attention = [m for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
            if not attention:
                return math.nan
            tokens, masks = [], []
            handles = [model.register_forward_pre_hook(_note_tokens(tokens), with_kwargs=True)]
            handles += [m.register_forward_pre_hook(_note_mask(masks), with_kwargs=True)
                        for m in attention]
            try:
                parts.step(model, optimizer, parts.batches[0])
            finally:
                for h in handles:
                    h.remove()
    except Exception:  # noqa: BLE001 - the user's step failed: not measured
        return math.nan
    if not tokens or not masks or tokens[0].shape != masks[0].shape:
        return math.nan
    return _hides_text(tokens[0], masks[0])


def _hides_text(tokens: torch.Tensor, mask: torch.Tensor) -> float:
    hidden = mask if mask.dtype == torch.bool else mask == float("-inf")
    if not bool(hidden.any()) or bool(hidden.all()):
        return math.nan  # no padding in the batch, or nothing to compare it with
    hidden_kinds = tokens[hidden].unique().numel()
    shown_kinds = tokens[~hidden].unique().numel()
    if hidden_kinds == 1 and shown_kinds > 1:
        return 0.0
    if shown_kinds == 1 and hidden_kinds > 1:
        return 1.0
    return math.nan


def _note_tokens(seen: list):
    def note(module, args, kwargs):
        first = args[0] if args else next(iter(kwargs.values()), None)
        if not seen and isinstance(first, torch.Tensor) and not first.is_floating_point() \
                and first.dim() == 2:
            seen.append(first.detach())
    return note


def key_padding_mask(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The key-padding mask of one nn.MultiheadAttention call (keyword or 4th argument)."""
    mask = kwargs.get("key_padding_mask", args[3] if len(args) > 3 else None)
    return mask if isinstance(mask, torch.Tensor) else None


def _note_mask(seen: list):
    def note(module, args, kwargs):
        mask = key_padding_mask(args, kwargs)
        if mask is not None:
            seen.append(mask.detach())
    return note


def samples_mixed(parts: Parts) -> float:
    """1 when a fresh model's outputs for the other samples of a batch change as one
    sample changes: the first sample is replaced by a copy of the second, in eval mode
    without gradients (so batch norm reads its running statistics, dropout is off),
    and more than 1.5 samples' worth of output elements move.  A model that treats
    samples independently moves at most that one sample's outputs (1/B of them); a
    reshape or a time-major/batch-major mix-up that mixes samples moves many.  Also 1
    when the user's loss pairs outputs with other samples' targets (`loss` given).  0
    below it; NaN when the first batch has fewer than 2 samples or the model cannot be
    run on its inputs alone."""
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.manual_seed(parts.seed)
            model = parts.make_model().eval()
            x = parts.inputs(parts.batches[0])
            if not isinstance(x, torch.Tensor) or x.dim() < 1 or len(x) < 2:
                return math.nan
            changed = x.clone()
            changed[0] = x[1]
            before, after = _tensors(model(x)), _tensors(model(changed))
            if _loss_pairs_across(parts, model, x):
                return 1.0
    except Exception:  # noqa: BLE001 - the model needs more than its inputs: not measured
        return math.nan
    total = sum(b.numel() for b in before)
    if not total or [b.shape for b in before] != [a.shape for a in after]:
        return math.nan
    moved = sum(int((b.double() - a.double()).abs().gt(1e-6 * (b.double().abs() + 1e-30)).sum())
                for b, a in zip(before, after, strict=True))
    return float(moved / total > 1.5 / len(x))


def _loss_pairs_across(parts: Parts, model, x: torch.Tensor) -> bool:
    """Does the user's loss pair a sample's output with another sample's target?  A
    loss that averages (or sums) per-sample terms is the same number when the batch's
    samples are reversed together, inputs with their targets, up to rounding (1e-4
    relative leaves float32 summation order far behind); a flatten that reads outputs
    time-major against batch-major targets is not."""
    if parts.loss is None:
        return False
    y = parts.targets(parts.batches[0])
    if not isinstance(y, torch.Tensor) or len(y) != len(x):
        return False
    a = float(parts.loss(model(x), y))
    b = float(parts.loss(model(x.flip(0)), y.flip(0)))
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) > 1e-4 * max(abs(a), 1e-12)


def _tensors(out) -> list[torch.Tensor]:
    """The floating-point tensors of a model's output (a tensor, or a tuple/list/dict)."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


PREDICTION_KEY = "logits"  # the prediction's name in a dict output (Hugging Face's too)


def prediction(out) -> torch.Tensor | None:
    """The prediction in a model's output: the tensor itself; of a dict (an HF-style
    output is one) its "logits", else its first entry; of a tuple or list its first
    element - `(output, state)` of a recurrent model, `(scores, attention weights)`.
    None when that is no floating-point tensor."""
    if isinstance(out, dict):
        out = out[PREDICTION_KEY] if PREDICTION_KEY in out else next(iter(out.values()), None)
    while isinstance(out, (tuple, list)) and out:
        out = out[0]
    return out if isinstance(out, torch.Tensor) and out.is_floating_point() else None


def init_scale(parts: Parts) -> tuple[float, float]:
    """(share of weight tensors whose initial RMS is more than INIT_OFF x above the one
    PyTorch's `reset_parameters()` gives them, share more than INIT_OFF x below).
    Weights: parameters of two or more dimensions of modules that can reset
    themselves; NaN, NaN when there are none or making the model failed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(parts.seed)
            model = parts.make_model()
            user = {n: _rms(p) for n, p in model.named_parameters() if p.dim() >= 2}
            with torch.no_grad():
                for module in model.modules():
                    if callable(getattr(module, "reset_parameters", None)):
                        module.reset_parameters()
            default = {n: _rms(p) for n, p in model.named_parameters() if n in user}
    except Exception:  # noqa: BLE001 - the user's factory failed: not measured
        return math.nan, math.nan
    pairs = [(user[n], default[n]) for n in user if default[n] > 0]
    if not pairs:
        return math.nan, math.nan
    above = sum(u > INIT_OFF * d for u, d in pairs) / len(pairs)
    below = sum(u * INIT_OFF < d for u, d in pairs) / len(pairs)
    return above, below


def _rms(p: torch.Tensor) -> float:
    return float(p.detach().double().pow(2).mean().sqrt())


def grads_carried(history: pd.DataFrame) -> float:
    """Share of the baseline's steps whose gradient was never emptied since the step
    before (the Monitor's `grad_carried`)."""
    if "grad_carried" not in history or history["grad_carried"].notna().sum() == 0:
        return math.nan
    return float(history["grad_carried"].dropna().mean())


def gradient_flow(parts: Parts) -> Flow:
    flow = Flow()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _one_step(parts, flow)
    except Exception as exc:  # noqa: BLE001 - the user's step failed: said, not raised
        flow.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return flow


def unregistered(model: torch.nn.Module) -> list[str]:
    """Names of the leaf tensors a module keeps as plain attributes that require a
    gradient: `self.w = torch.randn(...).requires_grad_()` in place of nn.Parameter.
    No optimizer built from `model.parameters()` holds them, so they never train;
    parameters and buffers are registered elsewhere and never show here."""
    found = []
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and value.requires_grad and value.is_leaf:
                found.append(f"{prefix}.{name}" if prefix else name)
    return found


def _one_step(parts: Parts, flow: Flow) -> None:
    model, optimizer, _ = build(parts)
    flow.unregistered = unregistered(model)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        return
    held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    before = {n: p.detach().clone() for n, p in named}
    seen: dict[str, bool] = {}

    def look(opt, args, kwargs):
        if not seen:  # the first step only
            for n, p in named:
                seen[n] = p.grad is not None and bool(p.grad.detach().abs().sum() > 0)
    handle = optimizer.register_step_pre_hook(look)
    try:
        parts.step(model, optimizer, parts.batches[0])
    finally:
        handle.remove()
    if not seen:
        flow.error = "the step never called optimizer.step()"
        return
    flow.trainable = len(named)
    unchanged = {n: bool(torch.equal(before[n], p.detach())) for n, p in named}
    flow.without_grad = [n for n, _ in named if not seen[n]]
    # a parameter outside this optimizer that the step moved anyway is trained by
    # another one (a GAN's discriminator, stepped in the same step): not left out
    flow.not_optimized = [n for n, p in named if seen[n] and id(p) not in held and unchanged[n]]
    flow.no_grad_at_step = len(flow.without_grad) / len(named)
    flow.grad_not_optimized = len(flow.not_optimized) / len(named)
    flow.unchanged = sum(unchanged.values()) / len(named)


# --- the model's output and the targets: what the output is made by, what it is paired with

# Activation modules that end a model by mistake: their range is not a logit's (a
# rectifier clips the negatives a classifier needs, a squashing function bounds them).
SQUASHING = (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.LeakyReLU, torch.nn.PReLU, torch.nn.ELU,
             torch.nn.CELU, torch.nn.SELU, torch.nn.GELU, torch.nn.SiLU, torch.nn.Mish,
             torch.nn.Softplus, torch.nn.Tanh, torch.nn.Hardtanh, torch.nn.Hardswish,
             torch.nn.Hardsigmoid)
# Activation modules whose output is a probability (a row of them): a loss that applies
# softmax or sigmoid itself needs the logits before them.
PROBABILITIES = (torch.nn.Softmax, torch.nn.Sigmoid, torch.nn.Softmin)


@dataclass
class OutputMaker:
    """The activation module whose call returned the model's output on the first batch:
    its name, which of its calls in one forward pass (a module called twice, the body's
    ReLU reused on the logits, is bypassed at that call only), and its kind."""

    name: str
    call: int
    probabilities: bool


def output_maker(parts: Parts) -> OutputMaker | None:
    """Which activation module made the model's output, as it is or reshaped (a fresh
    model in eval mode, no gradients, the first batch); None when the output is no
    activation module's output, or the model cannot be run on its inputs alone."""
    kinds = SQUASHING + PROBABILITIES
    try:
        with warnings.catch_warnings(), torch.no_grad(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            torch.manual_seed(parts.seed)
            model = parts.make_model().eval()
            calls: list[tuple[str, int, object]] = []
            counts: dict[str, int] = {}
            handles = []
            for name, module in model.named_modules():
                if isinstance(module, kinds):
                    handles.append(module.register_forward_hook(_note_call(name, calls, counts)))
            try:
                out = prediction(model(parts.inputs(parts.batches[0])))
            finally:
                for h in handles:
                    h.remove()
    except Exception:  # noqa: BLE001 - the model needs more than its inputs: not measured
        return None
    if out is None:
        return None
    for name, call, output in reversed(calls):
        if _same_values(output, out):
            module = model.get_submodule(name)
            return OutputMaker(name, call, isinstance(module, PROBABILITIES))
    return None


def _same_values(made, out: torch.Tensor) -> bool:
    """Is `out` the activation's output `made`, or a view of it that only reshapes
    (`.squeeze(-1)`, `.view(-1)`, `.flatten()`): the same memory, the same entries."""
    if made is out:
        return True
    if not isinstance(made, torch.Tensor) or made.numel() != out.numel() or not out.numel():
        return False
    return (made.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
            and made.storage_offset() == out.storage_offset()
            and torch.equal(made.reshape(-1), out.reshape(-1)))


def _note_call(name: str, calls: list, counts: dict):
    def hook(module, args, output):
        calls.append((name, counts.get(name, 0), output))
        counts[name] = counts.get(name, 0) + 1
    return hook


def fresh_raw_output(parts: Parts):
    """A fresh model's output (seeded as the baseline's) on the first batch's inputs,
    as the model returns it (a tensor, a tuple, a dict), in eval mode without
    gradients, the caller's RNG untouched; None when the model cannot be run on its
    inputs alone."""
    try:
        with warnings.catch_warnings(), torch.no_grad(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            torch.manual_seed(parts.seed)
            return parts.make_model().eval()(parts.inputs(parts.batches[0]))
    except Exception:  # noqa: BLE001 - not measured
        return None


def fresh_output(parts: Parts) -> list[torch.Tensor] | None:
    """[the prediction] of a fresh model's output on the first batch (`prediction`:
    the tensor, a dict's logits, a tuple's first element); [] when it holds no
    floating-point prediction, None when the model cannot be run on its inputs alone."""
    out = fresh_raw_output(parts)
    if out is None:
        return None
    pred = prediction(out)
    return [] if pred is None else [pred]


def output_kind(parts: Parts) -> tuple[float, float]:
    """(`output_activation`, `output_probabilities`): 1 where the model's output is a
    squashing / a probability module's output, 0 where it is neither (NaN, NaN when
    the model could not be run on the first batch's inputs)."""
    if not fresh_output(parts):
        return math.nan, math.nan
    maker = output_maker(parts)
    if maker is None:
        return 0.0, 0.0
    return float(not maker.probabilities), float(maker.probabilities)


# A softmax's outputs sum to 1 (a log-softmax's exponentials do) within float32 rounding,
# a few 1e-7 per term, 1e-4 at worst over a batch of a thousand; free logits or a
# regression head sum to 1 along an axis, in every column at once, by chance essentially
# never.  A thousandth leaves the rounding far behind.
NORMALISED = 1e-3


def normalised_over_batch(parts: Parts) -> float:
    """`normalised_over_batch`: 1 when a fresh model's output on the first batch is
    normalised across the samples, not across the classes: softmax or log-softmax over
    dim 0 (every column of probabilities sums to 1 over the batch, or of
    log-probabilities' exponentials) while the rows do not.  Each sample's prediction
    then depends on the other samples of its batch, and the loss rewards ranking the
    samples, not classifying them; no catalogue fault has that mechanism.  0 otherwise;
    NaN when the output is not one tensor of two or more dimensions over a batch of two
    or more samples, or the model cannot be run on its inputs alone."""
    out = fresh_output(parts)
    if out is None or len(out) != 1 or out[0].dim() < 2 or len(out[0]) < 2 \
            or out[0].shape[-1] < 2:
        return math.nan
    x = out[0].detach().double()
    if not bool(torch.isfinite(x).all()):
        return math.nan

    def normalised(dim: int) -> bool:
        sums = x.sum(dim) if bool((x >= 0).all()) else x.exp().sum(dim)
        return bool(((sums - 1).abs() <= NORMALISED).all())
    return float(normalised(0) and not normalised(-1))


def output_shape(parts: Parts) -> tuple[int, ...] | None:
    """The shape of a fresh model's output on the first batch (eval mode, no gradients);
    None when it is not one tensor or the model cannot be run on its inputs alone."""
    out = fresh_output(parts)
    return tuple(out[0].shape) if out is not None and len(out) == 1 else None


def misshaped(target, output_shape: tuple[int, ...]) -> bool:
    """Does `target` hold the output's entries in a shape that only size-1 dimensions
    tell apart ((B,) against (B, 1))?  An elementwise loss broadcasts such a pair to
    (B, B): every output compared with every target."""
    if not isinstance(target, torch.Tensor) or tuple(target.shape) == tuple(output_shape):
        return False
    drop = [s for s in output_shape if s != 1]
    return target.numel() == math.prod(output_shape) and [s for s in target.shape if s != 1] == drop


def targets_misshaped(parts: Parts) -> float:
    """`targets_misshaped`: 1 when the first batch's targets and the model's output
    are such a pair, 0 when not, NaN when either is not measured."""
    shape = output_shape(parts)
    try:
        y = parts.targets(parts.batches[0])
    except Exception:  # noqa: BLE001 - no targets to read
        return math.nan
    if shape is None or not isinstance(y, torch.Tensor):
        return math.nan
    return float(misshaped(y, shape))


# A loss that applies (log-)softmax or a sigmoid itself equals the logits loss of its
# input to float rounding (1e-7 in float32: this is a hundred times that); any other
# loss differs by far more.
SAME_LOSS = 1e-5


def loss_takes_logits(parts: Parts) -> float:
    """`loss_takes_logits`: 1 when your `loss`, on a fresh model's output for the first
    batch, equals the loss that reads that output as logits - the cross-entropy for
    class-index targets, binary cross-entropy with logits for float targets of the
    output's size, of the output or of its softmax/sigmoid (squashed in the loss) -
    within SAME_LOSS (relative); 0 when it differs; NaN without a
    separate `loss`, or when the output and targets fit neither.  It tells softmax
    applied twice (probabilities into a loss that squashes again) from probabilities
    compared with targets they cannot reach (an MSE on a sigmoid's output)."""
    raw = fresh_raw_output(parts) if parts.loss is not None else None
    pred = prediction(raw)
    if pred is None:
        return math.nan
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            y = parts.targets(parts.batches[0])
            if not isinstance(y, torch.Tensor):
                return math.nan
            out = pred.float()
            F = torch.nn.functional
            if not y.is_floating_point() and out.dim() == 2 and y.shape == out.shape[:1]:
                # softmax written into the loss itself squashes twice as well
                logits_losses = [F.cross_entropy(out, y), F.cross_entropy(out.softmax(1), y)]
            elif y.is_floating_point() and y.numel() == out.numel():
                same = y.float().reshape(out.shape)  # (B,) targets of a (B, 1) output
                logits_losses = [F.binary_cross_entropy_with_logits(out, same),
                                 F.binary_cross_entropy_with_logits(out.sigmoid(), same)]
            else:
                return math.nan
            # your loss reads the output as the model returns it (a tuple, a dict)
            yours = float(parts.loss(out if isinstance(raw, torch.Tensor) else raw, y))
    except Exception:  # noqa: BLE001 - not measured
        return math.nan
    return float(any(abs(yours - float(v)) <= SAME_LOSS * max(abs(yours), 1e-12)
                     for v in logits_losses))


# A batch dealt at random holds (n-1)/n of the training labels' diversity (Gini
# impurity), 0.94 or more for batches of 16; batches that hold less than half of it
# were made by the data's order, not by chance (one class each: 0; a fine-grained set
# stored class by class, two classes of a hundred in a batch: ~0.4).
MIXED = 0.5


def batches_unmixed(parts: Parts, seed: int = 4321) -> float:
    """1 when the median distinct training batch holds less than MIXED of the label
    diversity the same labels dealt into batches of the same sizes at random (a fixed
    generator) hold: the order made the batches unrepresentative (sorted by class, one
    class or two per batch), not the data's own imbalance, which random batches share.
    Diversity: a batch's Gini impurity (1 - sum of squared class shares), as a share
    of the whole set's.  0 otherwise; NaN for targets that are not class labels
    (integers, one dimension, batches of 16 or more, as the label-purity quantity
    reads them) or a single class."""
    ys = []
    for batch in _distinct(parts.batches):
        try:
            y = parts.targets(batch)
        except Exception:  # noqa: BLE001 - no targets to read
            return math.nan
        if not isinstance(y, torch.Tensor) or y.dim() != 1 or y.is_floating_point() \
                or len(y) < 16:
            return math.nan
        ys.append(y.long())
    if not ys:
        return math.nan
    joined = torch.cat(ys)
    whole = _gini(joined)
    if whole <= 0:
        return math.nan
    dealt = joined[torch.randperm(len(joined), generator=torch.Generator().manual_seed(seed))]
    random = dealt.split([len(y) for y in ys])
    return float(_median_gini(ys) < MIXED * _median_gini(random))


def _gini(y: torch.Tensor) -> float:
    shares = torch.bincount(y - y.min()).double() / len(y)
    return float(1 - shares.pow(2).sum())


def _median_gini(batches) -> float:
    values = sorted(_gini(y) for y in batches)
    return values[len(values) // 2]


# batch_too_small's own threshold (its signature's batch_size_median), read from it: a
# handful of samples per step, every gradient estimate noise-dominated.
SMALL_BATCH = next(c.threshold for c in FAULTS["batch_too_small"].signature.conditions
                   if c.quantity == "batch_size_median")


def median_batch(parts: Parts) -> float:
    """The median number of samples in the distinct training batches (the inputs' first
    dimension, as the Monitor's batch_size); NaN when the inputs are not tensors."""
    sizes = []
    for batch in _distinct(parts.batches):
        try:
            x = parts.inputs(batch)
        except Exception:  # noqa: BLE001 - no inputs to read
            return math.nan
        if not isinstance(x, torch.Tensor) or x.dim() < 1:
            return math.nan
        sizes.append(len(x))
    sizes.sort()
    return float(sizes[len(sizes) // 2]) if sizes else math.nan


def batch_small(parts: Parts) -> float:
    """`batch_small`: 1 when the median training batch holds SMALL_BATCH samples or
    fewer, 0 when more, NaN when not measured."""
    size = median_batch(parts)
    return math.nan if size != size else float(size <= SMALL_BATCH)


# dropout_too_strong's own threshold (its signature's dropout_rate), read from it: past
# the 0.5 that is the largest rate in common use.
STRONG_DROPOUT = next(c.threshold for c in FAULTS["dropout_too_strong"].signature.conditions
                      if c.quantity == "dropout_rate")


def dropout_strong(parts: Parts) -> float:
    """`dropout_strong`: 1 when a dropout module of a fresh model drops STRONG_DROPOUT of
    its units or more, 0 when every one drops fewer (or there is none), NaN when the
    model could not be made.  Functional dropout (`F.dropout(x, p)`) is not seen."""
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            model = parts.make_model()
    except Exception:  # noqa: BLE001 - the model could not be made: not measured
        return math.nan
    rates = [m.p for m in model.modules() if isinstance(m, DROPOUTS)]
    return float(max(rates, default=0.0) >= STRONG_DROPOUT)


def decay_rates(parts: Parts) -> list[tuple[float, bool]]:
    """(lr x weight_decay, exact) of every param group that decays, in the optimizer the
    user's factory makes for a fresh model: the share of each weight the decay alone
    removes per step.  Exact under SGD (coupled L2 added to a plain gradient step) and
    decoupled decay (AdamW): w <- w (1 - lr x decay).  Not under Adam, RMSprop and the
    other adaptive optimizers with coupled L2: there the decay's pull is divided by the
    gradient's running RMS with the rest of the gradient, and lr x decay bounds nothing.
    The rate is the group's largest (`lr`, or the `initial_lr` / `max_lr` a warm-up or
    one-cycle schedule keeps), so a schedule that starts low is read at its peak.  []
    when no group decays or the parts cannot be built."""
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            _, optimizer, _ = build(parts)
    except Exception:  # noqa: BLE001 - the parts could not be built: not measured
        return []
    plain = isinstance(optimizer, torch.optim.SGD)
    rates = []
    for group in optimizer.param_groups:
        decay = group.get("weight_decay")
        lrs = [group[k] for k in ("lr", "initial_lr", "max_lr")
               if isinstance(group.get(k), (int, float))]
        if isinstance(decay, (int, float)) and decay > 0 and lrs:
            exact = plain or group.get("decoupled_weight_decay") is True
            rates.append((float(max(lrs)) * float(decay), exact))
    return rates


def decay_strong(parts: Parts, kept: float) -> float:
    """`decay_strong`: 1 when the weight decay alone would shrink the weights to `kept`
    of their size within the investigated steps, (1 - lr x decay)^steps <= kept, in
    some param group; 0 when every decaying group stays above it and lr x decay is
    exact for each (SGD, decoupled decay); NaN otherwise: no group decays (a penalty
    written into the loss is not seen), or an adaptive optimizer's coupled decay reads
    weak (its real pull may be stronger).  `kept`: weight_decay_too_large's own
    threshold on the weights' final over initial norm (0.5: half).  Healthy decays stay
    far from it: SGD at lr 0.1 with 5e-4, or AdamW at 1e-3 with 0.1, remove 5e-5 / 1e-4
    per step, 10% / 18% over 2000 steps, the investigation's longest run."""
    rates = decay_rates(parts)
    if not rates:
        return math.nan
    if any(r >= 1 or (1 - r) ** parts.steps <= kept for r, _ in rates):
        return 1.0
    return 0.0 if all(exact for _, exact in rates) else math.nan


# A gradient of the user's loss - summed or averaged, scaled by a GradScaler, clipped,
# the same forward pass repeated - points along the loss's own gradient (cosine 1); one
# of the loss negated points the other way (cosine -1).  Half of either, a 60-degree
# cone, decides; a gradient in between (another loss in the step, dropout drawn
# differently) decides nothing.
SAME_DIRECTION = 0.5


def step_climbs_loss(parts: Parts) -> float:
    """`step_climbs_loss`: does the gradient your step hands `optimizer.step()` point up
    your own `loss`?  On a fresh model and the first batch, the gradient of `loss`
    (one forward pass, the RNG seeded so dropout draws what your step's first forward
    pass draws), then your step on the same model, state restored, read at
    `optimizer.step()` (a step pre-hook).  1 when their cosine is -SAME_DIRECTION or
    below (the step minimises the loss negated: it climbs the loss), 0 when it is
    SAME_DIRECTION or above, NaN between, without `loss`, when the step never calls
    `optimizer.step()` with a gradient, or fails.  A loss handed in with the same wrong
    sign as the step's agrees with it: this sees a step that disagrees with its loss."""
    if parts.loss is None:
        return math.nan
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            model, optimizer, _ = build(parts)
            params = [p for p in model.parameters() if p.requires_grad]
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            batch = parts.batches[0]
            torch.manual_seed(parts.seed)
            loss = parts.loss(model(parts.inputs(batch)), parts.targets(batch))
            wanted = torch.autograd.grad(loss, params, allow_unused=True)
            model.load_state_dict(state)  # batch norm's running statistics as made
            given = _grads_at_step(parts, model, optimizer, params, batch)
    except Exception:  # noqa: BLE001 - the user's step or loss failed here: not measured
        return math.nan
    cos = _cosine(wanted, given) if given is not None else math.nan
    if cos != cos:
        return math.nan
    return 1.0 if cos <= -SAME_DIRECTION else 0.0 if cos >= SAME_DIRECTION else math.nan


def _grads_at_step(parts: Parts, model, optimizer, params, batch) -> list | None:
    """The gradients `params` hold when the user's step first calls `optimizer.step()`."""
    seen: list = []

    def look(opt, args, kwargs):
        if not seen:
            seen.append([None if p.grad is None else p.grad.detach().clone() for p in params])
    handle = optimizer.register_step_pre_hook(look)
    try:
        torch.manual_seed(parts.seed)
        parts.step(model, optimizer, batch)
    finally:
        handle.remove()
    return seen[0] if seen else None


def _cosine(a, b) -> float:
    """Cosine between two lists of gradients, over the entries both hold (NaN when
    either is zero or not finite)."""
    pairs = [(x.double().reshape(-1), y.double().reshape(-1))
             for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if not pairs:
        return math.nan
    u, v = torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs])
    norms = float(u.norm() * v.norm())
    cos = float(u @ v) / norms if norms > 0 else math.nan
    return cos if math.isfinite(cos) else math.nan


def steps_in_eval(history: pd.DataFrame, limit: float, share) -> float:
    """1 when the baseline took `limit` or more of its steps in eval mode (`share`:
    the history quantity that reads it), 0 below, NaN when not recorded."""
    value = share(history)
    return math.nan if value != value else float(value >= limit)


EVAL_BATCHES = 2  # validation batches the check hands your evaluation: the mode shows at once


def evaluates_in_train_mode(parts: Parts) -> float:
    """`evaluates_in_train_mode`: does your `evaluate` run the model in training mode?
    Your evaluation is called once on a fresh model (seeded as the baseline's, in
    training mode, as a loop leaves it between steps) and the first EVAL_BATCHES
    validation batches (the first training batch without validation batches); a
    forward pre-hook notes the model's mode at every pass.  1 when a pass ran in
    training mode and the model holds a module whose forward depends on the mode
    (the Monitor's `mode_matters`: dropout with p > 0, batch norm with running
    statistics, recurrent or attention dropout): the metric is measured on a randomly thinned
    network, on each batch's own statistics; 0 when every pass ran in eval mode, or no
    module depends on it; NaN without `evaluate`, when it ran no forward pass, or failed."""
    if parts.evaluate is None:
        return math.nan
    modes: list[bool] = []
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            torch.manual_seed(parts.seed)
            model = parts.make_model().train()
            model.register_forward_pre_hook(lambda module, args: modes.append(module.training))
            batches = parts.val_batches[:EVAL_BATCHES] or parts.batches[:1]
            parts.evaluate(model, list(batches))
    except Exception:  # noqa: BLE001 - your evaluation failed here: not measured
        return math.nan
    if not modes:
        return math.nan
    return float(any(modes) and any(mode_matters(m) for m in model.modules()))
