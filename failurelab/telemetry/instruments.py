"""Instruments: the Monitor's column groups, each filled by name.

An instrument captures something cheap while the loop runs (a hook or a copy), hands a
*payload* to each recorded step, and turns a chunk of payloads into named columns with
a constant number of torch calls (the arithmetic is in `probes`).  The monitor runs
each one inside a guard: an instrument that fails is switched off on its own, and its
columns read NaN from then on, while the others keep recording.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from . import private, probes
from .buffers import ChainBuffers, SampleBuffers

_NAN = float("nan")
KEEP_ENTRIES = 2**16  # forward tensors larger than this are sampled or reduced in their hook
# An activation with more units per sample than UNITS_WHOLE (a batch of 64 such is 2^18
# entries, a few passes in its hook) is read on UNITS_READ of them (64 x 2^10 = 2^16 =
# KEEP_ENTRIES), in runs of UNIT_RUN neighbours: a 64-byte line of float32.
UNITS_WHOLE, UNITS_READ, UNIT_RUN = 2**12, 2**10, 16
_ACTIVATION_KINDS = {torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh",
                     torch.nn.ReLU: "relu"}


# Layers whose input, in a model that writes its activations as functions (`F.relu(x)`,
# `torch.sigmoid(x)`, `x.tanh()`), is the previous activation's output.
WEIGHT_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
# layers that standardise what passes through them: their weights rescale features that
# are already on one scale, so the layer after one sees what the scale does
NORMALISATIONS = tuple(getattr(torch.nn, n) for n in (
    "LayerNorm", "GroupNorm", "RMSNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d")
    if hasattr(torch.nn, n))
_PROBABILITY_ROWS = 1e-3  # rows summing to 1 within this are a softmax's, not sigmoids'


def activation_kind(module: torch.nn.Module) -> str | None:
    return _ACTIVATION_KINDS.get(type(module))


def kind_of_values(x: torch.Tensor) -> str | None:
    """Which activation made `x`, read from its values: a ReLU's output is >= 0 with
    exact zeros (half its entries at initialisation); a sigmoid's lies in [0, 1] and is
    exactly 0 only below -88 in float32; a tanh's lies in [-1, 1] with negatives.  None
    for anything else (GELU, no activation, a softmax's probability rows, an
    embedding), which is then not read as an activation."""
    if not x.is_floating_point() or x.numel() == 0 or not torch.isfinite(x).all():
        return None
    low, high = (float(v) for v in torch.aminmax(x.detach()))
    if low >= 0 and bool((x == 0).any()):
        return "relu"
    if low >= 0 and high <= 1:
        rows = x.detach().reshape(-1, x.shape[-1]).sum(-1) if x.dim() > 1 else None
        if rows is not None and bool(((rows - 1).abs() <= _PROBABILITY_ROWS).all()):
            return None
        return "sigmoid"
    if low >= -1 and high <= 1:
        return "tanh"
    return None


class Instrument:
    """A named group of columns.  Subclasses fill `columns` and implement `take`
    (this step's payload, called by `record`) and `compute` (a chunk of payloads →
    {column: one value per step})."""

    name = "instrument"
    columns: tuple[str, ...] = ()
    partials = False  # also return the "_" sums a distributed merge needs (see distributed)

    def take(self):
        return None

    def forget(self) -> None:
        """Drop references to the last batch (on close)."""
        self.current = self.grad = None

    def shape(self, payload):
        """Payloads stack into one chunk only while this key stays the same."""
        return None

    def compute(self, payloads: list) -> dict[str, list[float]]:
        raise NotImplementedError


class Parameters(Instrument):
    """Gradients exactly as the optimizer uses them, weights before and after each step:
    the global columns and, with `per_layer`, one norm per parameter tensor."""

    name = "gradients and weights"

    def __init__(self, params, names, chunk: int, per_layer: bool, interval: int):
        self.params, self.names, self.interval = params, names, interval
        # a complex tensor is copied as its real view, (..., 2): the same norms, dot
        # products and zeros, in buffers of real numbers
        self.complex = [i for i, p in enumerate(params) if p.is_complex()]
        self.weights = list(params)
        self._refresh()
        numels = [w.numel() for w in self.weights]
        self.sizes = numels if per_layer else [sum(numels)]
        self.buffers = (ChainBuffers if interval == 1 else SampleBuffers)(self.weights, chunk)
        self.chunk, self.filled, self.sparse = chunk, 0, False
        self.absent: dict[int, float] = {}  # slot -> entries a sparse gradient leaves out
        self.per_layer = per_layer
        # the columns of the table `probes` computes, in its order
        self.computed = ("grad_norm", "weight_norm", "update_norm", "update_ratio",
                         "grad_cosine", "zero_grad_frac")
        if per_layer:
            self.computed += tuple(f"{kind}/{n}" for kind in
                                   ("grad_norm", "weight_norm", "update_ratio") for n in names)
        self.columns = self.computed + ("_grad_nonfinite",)

    def _refresh(self) -> None:
        """The complex parameters' real views, made again (a `.data` swap replaces
        their storage); nothing to do for a real model."""
        for i in self.complex:
            self.weights[i] = torch.view_as_real(self.params[i].detach())

    def grads(self, slot: int | None = None) -> list[torch.Tensor]:
        """Current gradients as dense tensors (zeros where there is none)."""
        grads = [g if (g := p.grad) is not None else torch.zeros_like(p) for p in self.params]
        if self.complex:
            self._refresh()
            for i in self.complex:
                grads[i] = torch.view_as_real(grads[i])
        if self.sparse:
            dense, absent = probes.densify(grads)
            if slot is not None:
                self.absent[slot] = absent
            return dense
        return grads

    def before_step(self, observed: bool, phase_last: bool, first: bool) -> None:
        if observed:
            self._copy(self.buffers.before_step, self.filled, first, slot=self.filled)
        elif phase_last:  # economy: keep g_{t-1} for step t's cosine
            self._copy(self.buffers.keep_previous, self.filled)

    def _copy(self, into, *args, slot: int | None = None) -> None:
        """`into(*args, grads)`; a sparse gradient's absent entries count for `slot`."""
        try:
            into(*args, self.grads(slot))
        except RuntimeError:  # a sparse gradient (nn.Embedding(sparse=True)): densify
            if self.sparse or not any(p.grad is not None and p.grad.is_sparse
                                      for p in self.params):
                raise
            self.sparse = True
            into(*args, self.grads(slot))

    def take(self, observed: bool, stepped: bool):
        """At `record`: this step's buffer slot, or None when economy skips it."""
        if not observed:
            return None
        slot = self.filled
        self.buffers.at_record(slot, stepped, lambda: self.grads(slot))
        self.filled += 1
        return slot

    def compute(self, slots: list):
        """The columns of a whole chunk: its observed steps fill slots 0..k-1, and the
        weights now are those after its last step.  Column by column (see table)."""
        k = sum(slot is not None for slot in slots)
        self.filled = 0
        if not k:
            return {}
        self._refresh()
        with torch.no_grad():
            table = self.buffers.columns(k, self.sizes, self.per_layer)
            columns = table.T.tolist()  # one list of k values per column
            broken = {slot: probes.broken_entries(self.buffers.step_grads(slot))
                      for slot, norm in enumerate(columns[0]) if not math.isfinite(norm)}
            self.buffers.carry(k)
        absent, self.absent = self.absent, {}
        bad = [0] * k
        zero = columns[self.computed.index("zero_grad_frac")]  # read by name, not by place
        for slot in broken.keys() | absent.keys():  # rare: recount this step's zeros
            bad[slot], zero[slot] = broken.get(slot, (0, zero[slot]))
            if slot in absent:  # a sparse gradient's absent rows are not zeros
                n, gone = self.buffers.step_grads(slot).numel(), absent[slot]
                zeros = int((self.buffers.step_grads(slot) == 0).sum()) - gone
                zero[slot] = zeros / (n - gone) if n > gone else _NAN
        columns.append(bad)
        if k < len(slots) or any(slot != i for i, slot in enumerate(slots)):
            columns = _spread_slots(columns, slots)  # economy: NaN for the steps not observed
        out = dict(zip(self.computed, columns, strict=False))
        out["_grad_nonfinite"] = columns[-1]
        return out


def _spread_slots(columns: list[list], slots: list) -> list[list]:
    """Columns of one value per slot → one value per step (`slots[i]`: step i's slot,
    None: not observed, NaN), in one numpy assignment rather than a loop per value."""
    where = [i for i, slot in enumerate(slots) if slot is not None]
    spread = np.full((len(columns), len(slots)), _NAN)
    spread[:, where] = np.array(columns, dtype=np.float64)[:, [slots[i] for i in where]]
    return spread.tolist()


def model_input(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The model's input batch: its first argument that holds a batch (positional
    first), looking one level into an argument that holds tensors (a batch dict
    `{"x": ..., "mask": ...}`, see `first_tensor`).  A 0-d tensor (the time `t` of an
    ODE function `f(t, y)`) or a boolean mask is not the batch; a model given nothing
    else is read on its first tensor.  A `PackedSequence` is read padded, (batch, time,
    ...), as the loop would have passed it unpacked: its packed rows are time steps,
    not samples."""
    fallback = None
    for a in (*args, *kwargs.values()):
        if isinstance(a, PackedSequence):
            with torch.no_grad():
                return pad_packed_sequence(a, batch_first=True)[0]
        x = first_tensor(a)
        if x is not None:
            if _holds_batch(x):
                return x
            fallback = x if fallback is None else fallback
    return fallback


def first_tensor(value) -> torch.Tensor | None:
    """`value` if it is a tensor; else the first tensor with a batch dimension among its
    items, one level deep: a tuple or list (`(logits, hidden)`), a dict's values (a
    batch dict, or a HuggingFace `ModelOutput`, whose 0-d loss comes before the
    logits), a dataclass's fields.  A boolean tensor (a mask) is passed over."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, (tuple, list)):
        items = value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = (getattr(value, f.name) for f in dataclasses.fields(value))
    else:
        return None
    return next((t for t in items if isinstance(t, torch.Tensor) and _holds_batch(t)), None)


def _holds_batch(t: torch.Tensor) -> bool:
    return t.dim() > 0 and t.dtype != torch.bool


class Inputs(Instrument):
    """The batch the model is given: scale, scale mismatch between features, NaN/Inf.

    Under gradient accumulation a step sees several forward passes; the step's batch is
    all of them (concatenated when they stack), so a NaN row in any micro-batch counts
    and `batch_size` is what the optimizer steps on.  A 1-D input is one unbatched
    sample: it, and every forward tensor of its step, is read as a batch of one (a batch
    of scalars should be passed as (B, 1)).

    A small batch is copied and its chunk reduced together (few torch calls per step).
    A batch on the CPU larger than `KEEP_ENTRIES` is reduced in its hook instead, to a
    `ReducedBatch`, while it is still in the cache: stacking 32 copies of it later costs
    several times more than the reduction."""

    name = "inputs"
    columns = ("input_absmax", "input_std_ratio", "input_nonfinite", "batch_size")
    current: torch.Tensor | ReducedBatch | None = None  # the latest forward's input
    given: torch.Tensor | None = None  # ...as the loop passed it (not a copy), until taken

    def __init__(self):
        self.earlier: list = []  # this step's previous micro-batches, copied or reduced

    def see(self, seen) -> None:
        """Copy (or reduce) the input as the forward sees it (a loop may refill one
        input buffer in place every step); the evaluation-input instrument reuses it."""
        x = self.given = model_input(*seen)
        if x is not None and x.numel() == 0:
            return  # an empty batch (0 rows): nothing to read, its row stays NaN
        if x is not None:
            x = _reduced(x) if reduce_in_hook(x) else x.detach().clone()
            if self.current is not None:
                if _stacks(self.current, x):  # a micro-batch of the same step: keep it too
                    self.earlier.append(self.current)
                else:
                    self.earlier = []  # not one batch split in parts: the latest stands alone
        self.current = x

    def take(self, unbatched: bool):
        x, earlier, self.current, self.earlier = self.current, self.earlier, None, []
        self.given = None
        if x is None:
            return None
        if isinstance(x, ReducedBatch):
            return ReducedBatch.join([*earlier, x]) if earlier else x
        if unbatched:
            return x.unsqueeze(0)
        return torch.cat([*earlier, x]) if earlier else x

    def shape(self, x):
        return None if x is None else (type(x), x.shape, x.dtype)

    def compute(self, xs):
        if xs[0] is None:
            return {}
        if isinstance(xs[0], ReducedBatch):
            return self._compute_reduced(xs)
        stacked = torch.stack(xs)
        absmax, low, high = zip(*probes.input_quantities(stacked).tolist(), strict=True)
        out = {}
        if self.partials and stacked.is_floating_point():
            sums = probes.feature_sums(stacked.reshape(len(xs), stacked.shape[1], -1))
            out["_in_fsum"], out["_in_fsq"], out["_in_fn"] = (list(sums[:, i].numpy())
                                                              for i in range(3))
        ratios = [math.sqrt(hi / lo) if lo > 0 else _NAN for lo, hi in zip(low, high, strict=True)]
        bad = [0] * len(xs)
        batch, floating = xs[0].shape[0], xs[0].is_floating_point()  # alike in a chunk
        for i, (x, a) in enumerate(zip(xs, absmax, strict=True)):
            if batch < 2:  # one sample has no per-feature spread
                if not math.isfinite(a):
                    bad[i] = probes.nonfinite_count(x)
            elif floating and not (math.isfinite(a) and math.isfinite(ratios[i])):
                ratios[i], bad[i] = probes.std_ratio(x), probes.nonfinite_count(x)
        out.update(zip(Inputs.columns, (absmax, ratios, bad, [batch] * len(xs)), strict=True))
        return out

    def _compute_reduced(self, xs: list[ReducedBatch]) -> dict:
        """The same columns from batches reduced in their hooks (all of a chunk alike)."""
        absmax = torch.stack([x.absmax for x in xs]).tolist()
        batch = xs[0].shape[0]
        if xs[0].sums is None:  # integer inputs (token ids): no scale to compare
            return dict(zip(Inputs.columns, (absmax, [_NAN] * len(xs), [0] * len(xs),
                                           [batch] * len(xs)), strict=True))
        sums = torch.stack([x.sums for x in xs])  # (k, 3, F)
        entries = xs[0].shape.numel()
        bad = [int(entries - c) for c in sums[:, 2].sum(1).tolist()]
        ratios = [probes.spread_ratio(s) if batch >= 2 else _NAN for s in sums]
        out = dict(zip(Inputs.columns, (absmax, ratios, bad, [batch] * len(xs)), strict=True))
        if self.partials:
            out["_in_fsum"], out["_in_fsq"], out["_in_fn"] = (list(sums[:, i].numpy())
                                                              for i in range(3))
        return out


class FirstLayerInputs(Inputs):
    """The features the model's weights first see: the input of the first layer with
    weights of its own (`holds_weights`) that a training forward runs, where it is not
    the model's input itself (a model that standardises its own input, a normalisation
    layer in front).  Its one column is the per-feature std spread (`input_std_ratio`'s);
    NaN where that layer reads the model's input as given (the same data:
    `input_std_ratio` says it already), or no weight layer ran."""

    name = "first layer input"
    columns = ("first_layer_std_ratio",)

    def see(self, seen, given: torch.Tensor | None = None) -> None:
        x = model_input(*seen)
        if x is None or (given is not None and _same_data(x, given)):
            return
        super().see(seen)
        self.given = None  # not needed: the model's input is `Inputs.given`

    def compute(self, xs):
        if xs[0] is None or isinstance(xs[0], ReducedBatch) and xs[0].sums is None:
            return {}
        if not isinstance(xs[0], ReducedBatch) and not xs[0].is_floating_point():
            return {}
        return {"first_layer_std_ratio": super().compute(xs)["input_std_ratio"]}


def holds_weights(module: torch.nn.Module) -> bool:
    """Does this module multiply what it is given by weights of its own (Linear, Conv,
    recurrent, attention, embedding, a custom layer with parameters), unlike a
    normalisation layer's scale and shift?"""
    return (next(module.parameters(recurse=False), None) is not None
            and not isinstance(module, NORMALISATIONS) and not private.is_batchnorm(module))


def _same_data(x: torch.Tensor, given: torch.Tensor) -> bool:
    """Does `x` hold the same entries as the model's input (the tensor itself, or a view
    of the same memory, e.g. flattened)?"""
    return x is given or (x.data_ptr() == given.data_ptr() and x.numel() == given.numel()
                          and x.dtype == given.dtype)


@dataclass(slots=True, frozen=True)
class ReducedBatch:
    """A large input batch reduced in its hook: its largest |entry| (0-d), its
    per-feature sums ((3, F) float64, see `probes.feature_sums`; None for integer
    inputs), and what `_stacks` compares."""

    absmax: torch.Tensor
    sums: torch.Tensor | None
    shape: torch.Size
    dtype: torch.dtype
    device: torch.device

    def dim(self) -> int:
        return len(self.shape)

    @staticmethod
    def join(parts: list[ReducedBatch]) -> ReducedBatch:
        """The micro-batches of one step, as one batch."""
        first = parts[0]
        sums = None if first.sums is None else torch.stack([p.sums for p in parts]).sum(0)
        shape = torch.Size([sum(p.shape[0] for p in parts), *first.shape[1:]])
        return ReducedBatch(torch.stack([p.absmax for p in parts]).max(), sums, shape,
                            first.dtype, first.device)


def reduce_in_hook(x: torch.Tensor) -> bool:
    """Reduce this batch in its hook (see `Inputs`)?"""
    return x.numel() > KEEP_ENTRIES and x.dim() > 1 and x.device.type == "cpu"


def _reduced(x: torch.Tensor) -> ReducedBatch:
    with torch.no_grad():
        flat = x.detach().reshape(x.shape[0], -1)
        if flat.is_floating_point():
            least, most = probes.row_extremes(flat.reshape(1, -1))  # no copy of |x|
            absmax, sums = torch.maximum(-least, most)[0].to(probes.F32), probes.feature_sums(flat)
        else:
            absmax, sums = flat.abs().amax().to(probes.F32), None
    return ReducedBatch(absmax, sums, x.shape, x.dtype, x.device)


class Outputs(Instrument):
    """The model's output and the gradient arriving at it.

    The gradient also says how much the loss weighed the output's rows (`loss_weight`,
    see `probes.loss_weights`), and its hook counts the backward passes through the
    output before each optimizer step (`output_backwards`): gradient accumulation over
    k micro-batches takes k, and each micro-batch's loss must then weigh 1/k.

    An output larger than `KEEP_ENTRIES` (a language model's logits over its vocabulary)
    is read on a sample of its rows, the same rows of its gradient (see `sample_rows`):
    its columns are computed some twenty times over, so every entry of a (16, 64, 2000)
    output made a small causal LM's step 2.7 times slower.  Its `loss_weight` is scaled
    from the rows read to all of them; its other columns are those rows' own.

    Only a backward pass that reaches the parameters counts: `torch.autograd.grad` of
    the loss with respect to the inputs (a gradient penalty, an adversarial example)
    also carries a gradient through the output, but adds nothing to `.grad`."""

    name = "outputs"
    columns = ("output_std", "output_grad_zero_frac", "output_grad_min", "output_prob_frac",
               "output_logprob_frac", "output_nonfinite", "loss_weight", "output_backwards",
               "output_soft_target_frac", "output_ce", "output_ce_twice", "target_grad_share",
               "output_float16", "output_label_purity", "output_sigmoid_logits",
               "output_label_mean", "output_label_std", "output_zero_frac")

    def __init__(self, report, params=()):
        self.report = report  # report(instrument, exc): the gradient hook runs in backward
        # the gradient accumulators of the first and last trainable parameters: a
        # backward that executes neither does not train (see `trains`)
        self.accumulators = _accumulators(params)
        self.current = self.grad = None
        self.backwards = 0  # gradients that reached an output since the last step
        self.seen = 0  # outputs seen so far: which one a gradient belongs to
        self.stepped = None  # how many the last optimizer step was built from
        self.scale = 1.0  # rows of the output per row read (see `sample_rows`)

    def see(self, output) -> None:
        """The output tensor: the model's output, or the first tensor with a batch
        dimension in a tuple, dict or dataclass it returns (`first_tensor`: the logits
        of a HuggingFace `ModelOutput`)."""
        if not isinstance(output, torch.Tensor):
            output = first_tensor(output)
            if output is None:
                return
        if output.numel() == 0:
            return  # an empty batch: nothing to read
        self.current, self.scale = sample_rows(output.detach())
        if output.requires_grad:
            self.seen += 1
            output.register_hook(functools.partial(self._guarded_grad, self.seen))

    def _guarded_grad(self, seen: int, grad: torch.Tensor) -> None:
        try:
            self.keep_grad(grad, seen)
        except Exception as exc:  # noqa: BLE001 - never fail inside the user's backward
            self.report(self, exc)

    def keep_grad(self, grad: torch.Tensor, seen: int) -> None:
        """Only the gradient of the latest output, the one `current` holds: a step that
        runs the model twice before one backward (two views, a batch of negatives)
        pairs its output with its own gradient, not with the other pass's."""
        if seen == self.seen and self.trains():
            self.grad = sample_rows(grad)[0]
            self.backwards += 1

    def trains(self) -> bool:
        """Will the backward pass now running add to the parameters' `.grad`?"""
        return private.backward_reaches(self.accumulators)

    def at_step(self) -> None:
        """The optimizer is stepping: close the count of backward passes it used."""
        self.stepped, self.backwards = self.backwards, 0

    def take(self, unbatched: bool):
        out, grad, self.current, self.grad = self.current, self.grad, None, None
        backwards, self.stepped = self.stepped, None
        if unbatched:
            out, grad = (t.unsqueeze(0) if t is not None else None for t in (out, grad))
        return out, grad, backwards, self.scale

    def shape(self, payload):
        out, grad, _, _ = payload
        return (None if out is None else (out.shape, out.dtype),
                None if grad is None else (grad.shape, grad.dtype))

    @staticmethod
    def _label_mixes(outputs, grads, rows):
        """The label counts the output gradient names: a softmax's rows, else a single
        logit's binary cross-entropy (those second), or (None, None)."""
        if grads is None:
            return None, None
        mixes = probes.label_mixes(grads, rows) if rows is not None else None
        if mixes is not None or outputs is None:
            return mixes, None
        binary = probes.binary_label_mixes(outputs, grads)
        return binary, binary

    def compute(self, payloads):
        outs = [p[0] for p in payloads]
        grads = [p[1] for p in payloads]
        k = len(payloads)
        # a chunk's payloads share their shapes: all of them tensors, or all None
        stacked = torch.stack(outs) if outs[0] is not None else None
        stacked_grads = torch.stack(grads) if grads[0] is not None else None
        some = stacked if stacked is not None else stacked_grads
        nan = torch.full((k, 2), _NAN, device=some.device if some is not None else None)
        if stacked is not None:
            tables = [probes.sums(stacked), probes.distribution_rows(stacked)]
        else:
            tables = [nan, nan]
        tables.append(probes.zeros_and_floor(stacked_grads) if stacked_grads is not None
                      else nan)
        by_row = probes.gradient_rows(stacked_grads) if stacked_grads is not None else None
        if stacked is not None and stacked_grads is not None:
            tables.append(probes.loss_weights(stacked, stacked_grads, rows=by_row).unsqueeze(1))
        else:
            tables.append(nan[:, :1])
        tables.append(probes.soft_target_shares(stacked_grads, rows=by_row).unsqueeze(1)
                      if stacked_grads is not None else nan[:, :1])
        mixes, binary = self._label_mixes(stacked, stacked_grads, by_row)
        tables.append(probes.label_purities(mixes, k, nan.device).unsqueeze(1))
        tables.append(probes.sigmoid_logit_shares(stacked, binary).unsqueeze(1)
                      if stacked is not None else nan[:, :1])
        tables.append(probes.label_spreads(mixes, k, nan.device))
        tables.append(probes.implied_losses(stacked, by_row) if stacked is not None else nan)
        tables.append(probes.target_shares(stacked, stacked_grads).to(nan.dtype).unsqueeze(1)
                      if stacked is not None and stacked_grads is not None else nan[:, :1])
        tables.append(probes.zero_shares(stacked).unsqueeze(1) if stacked is not None
                      else nan[:, :1])
        values = torch.cat(tables, dim=1).tolist()  # one conversion for the whole chunk
        n = outs[0].numel() if stacked is not None else 0
        (total, sq, prob, logp, zero, low, weight, soft, purity, squashed, label_mean,
         label_std, ce, ce_twice, target, out_zero) = zip(*values, strict=True)
        bad = [_NAN] * k if stacked is None else [
            probes.nonfinite_count(y) if n and not math.isfinite(s) else 0  # count exactly
            for y, s in zip(outs, sq, strict=True)]
        weight = [w * p[3] for w, p in zip(weight, payloads, strict=True)]  # from the rows read to all
        # the output's own dtype: a float32 value can sit on float16's grid (a difference
        # of two large nearly equal numbers keeps few bits), a float16 tensor cannot hide
        half = [_NAN] * k if stacked is None else [float(outs[0].dtype == torch.float16)] * k
        out = dict(zip(self.columns, (
            [probes.std_of(t, s, n) for t, s in zip(total, sq, strict=True)], zero, low, prob, logp, bad,
            weight, [_NAN if p[2] is None else p[2] for p in payloads], soft, ce, ce_twice,
            target, half, purity, squashed, label_mean, label_std, out_zero), strict=True))
        if self.partials and stacked is not None:
            rows = outs[0].numel() // (outs[0].shape[-1] if outs[0].dim() else 1)
            grad_n = grads[0].numel() if grads[0] is not None else 0
            for key, values in (("_out_sum", list(total)), ("_out_sq", list(sq)),
                                ("_out_n", [outs[0].numel()] * k), ("_out_rows", [rows] * k),
                                ("_out_grad_n", [grad_n] * k)):
                out[key] = values
        return out

    def forget(self) -> None:
        self.current = self.grad = self.stepped = None
        self.backwards = 0


def _accumulators(params) -> list:
    """The autograd nodes that add each parameter's gradient to its `.grad` (none where
    a tensor subclass or an older torch does not expose them: every pass then counts)."""
    try:
        with torch.enable_grad():
            return [p.view_as(p).grad_fn.next_functions[0][0]
                    for p in params if p.requires_grad and p.is_leaf]
    except (RuntimeError, AttributeError, IndexError, TypeError):
        return []


def sample_rows(t: torch.Tensor) -> tuple[torch.Tensor, float]:
    """`t`, or when it holds more than `KEEP_ENTRIES` entries a (rows, last dimension)
    copy of about that many of its rows (one drawn from each of that many equal
    stretches, so no stride can fall in step with a sequence length), and how many of
    its rows each row read stands for.  The rows drawn depend only on the shape: an
    output and its gradient give the same ones, and no random state of the loop's is
    touched (see `_spread`)."""
    if t.numel() <= KEEP_ENTRIES or t.dim() < 2:
        return t, 1.0
    rows = t.reshape(-1, t.shape[-1])
    keep = max(1, KEEP_ENTRIES // rows.shape[1])
    return rows.index_select(0, _spread(rows.shape[0], keep, t.device)), rows.shape[0] / keep


def sample_units(y: torch.Tensor) -> torch.Tensor:
    """`y`, (batch, ...), or when each sample has more than `UNITS_WHOLE` units (its
    entries: a convolution's channels x positions) a (batch, `UNITS_READ`) copy of
    some of them: the same units of every sample, so a unit's whole batch is read (a
    ReLU unit is dead when no sample fires it).  They are read in runs of `UNIT_RUN`
    neighbours, one run from each equal stretch of the sample (every channel of a
    convolution's output has some): memory is read by the cache line, so a scattered
    sample of units would cost as much as the whole output.  Which units, and whether
    to sample at all, depend on a sample's shape alone, never on the batch: every rank
    of a distributed run, and a short last batch, read the same units, whose per-unit
    sums the ranks merge."""
    units = y.shape[1:].numel() if y.dim() >= 2 and y.shape[0] else 0  # no view: every forward
    if units <= UNITS_WHOLE:
        return y
    return y.reshape(y.shape[0], units).index_select(
        1, _runs(units, UNITS_READ // UNIT_RUN, y.device))


@functools.lru_cache(maxsize=16)
def _spread(n: int, keep: int, device: torch.device) -> torch.Tensor:
    """`keep` of the numbers 0..n-1, one drawn from each of `keep` equal stretches,
    ascending; from a generator of its own, seeded alike every time."""
    starts = torch.arange(keep, dtype=torch.float64) * (n / keep)
    offsets = torch.rand(keep, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return (starts + offsets * (n / keep)).long().clamp(max=n - 1).to(device)


@functools.lru_cache(maxsize=16)
def _runs(units: int, runs: int, device: torch.device) -> torch.Tensor:
    """The units `sample_units` reads: `runs` runs of `UNIT_RUN` neighbours, spread."""
    starts = _spread(units // UNIT_RUN, runs, device) * UNIT_RUN
    return (starts[:, None] + torch.arange(UNIT_RUN, device=device)).flatten()


class Activations(Instrument):
    """One Sigmoid/Tanh/ReLU module's output: mean, std, saturated or dead share.

    A small output is kept until its chunk is computed (one set of torch calls for 32
    steps).  Of one with more than `UNITS_WHOLE` units per sample, a sample of its units
    is read (see `sample_units`): its columns are those units' own.  Reading the whole
    of a convolution's ReLU outputs, (64, 32, 32, 32) and (64, 64, 16, 16), cost 2 ms
    of the CNN's 56 ms step in `benchmarks/overhead.py`, the sample about 0.6 ms.  What
    is still larger than `KEEP_ENTRIES` (a wide layer, a batch of thousands) is
    reduced in the hook to its three sums (a few fused reductions, no copy), because
    keeping and stacking it would copy megabytes per step and hold them while the loop
    allocates its own."""

    def __init__(self, module_name: str, kind: str, keep_entries: int = KEEP_ENTRIES):
        self.kind, self.keep_entries = kind, keep_entries
        self.name = f"activations/{module_name}"
        self.columns = self._read_into()

    def _read_into(self) -> tuple[str, str, str]:
        """The mean, std and failure columns of this activation's kind."""
        name = self.name[len("activations/"):]
        last = "dead_frac" if self.kind == "relu" else "saturated_frac"
        return tuple(f"{c}/{name}" for c in ("act_mean", "act_std", last))

    current = None  # the output (a tensor) or its sums (a `Reduced`)

    def see(self, output, unbatched: bool) -> None:
        if not isinstance(output, torch.Tensor) or output.numel() == 0:
            return
        y = sample_units(output.unsqueeze(0) if unbatched else output)
        if y.numel() <= self.keep_entries or y.dim() < 2:
            self.current = y  # stacked under no_grad when its chunk is computed
            return
        sums, units = probes.activation_quantities(self.kind, y.detach().unsqueeze(0))
        self.current = Reduced(sums, y.shape, units if self.partials else None)

    def take(self, unbatched: bool):
        y, self.current = self.current, None
        return y

    def shape(self, y):
        if isinstance(y, Reduced):
            return "reduced", y.shape
        return None if y is None else (y.shape, y.dtype)

    def compute(self, ys):
        if ys[0] is None:
            return {}
        if isinstance(ys[0], Reduced):
            shape, table = ys[0].shape, torch.cat([y.sums for y in ys])
            units = [y.units for y in ys]
        else:
            shape = ys[0].shape
            table, units = probes.activation_quantities(self.kind, torch.stack(ys))
        table = table.tolist()
        per_step, n = probes.activation_units(self.kind, shape), shape.numel()
        mean, std, failed = self._read_into()
        out = {mean: [total / n for total, _, _ in table],
               std: [probes.std_of(total, sq, n) for total, sq, _ in table],
               # NaN activations: their failures are unknown
               failed: [f / per_step if math.isfinite(total) else _NAN for total, _, f in table]}
        if self.partials:
            self._add_partials(out, table, n, units)
        return out

    def _add_partials(self, out, table, n: int, units) -> None:
        name = self.name[len("activations/"):]
        out[f"_act_sum/{name}"] = [t[0] for t in table]
        out[f"_act_sq/{name}"] = [t[1] for t in table]
        out[f"_act_n/{name}"] = [n] * len(table)
        out[f"_act_failed/{name}"] = [t[2] if math.isfinite(t[0]) else _NAN for t in table]
        if self.kind == "relu":  # per unit: > 0 where some sample of the batch fired it
            alive = units if isinstance(units, torch.Tensor) else torch.cat(units)
            out[f"_act_alive/{name}"] = list(alive.numpy())


class LayerInput(Activations):
    """The input of a Linear/Conv layer in a model whose activations are functions, read
    as the activation that made it (`kind_of_values`, decided on the first batch it
    sees).  Its columns are named `<layer>.input`; both failure columns are declared,
    and the one of the other kind stays NaN.  The first such layer of a forward pass
    reads the model's data, not an activation: the Monitor does not hand it over."""

    def __init__(self, layer_name: str, keep_entries: int = KEEP_ENTRIES):
        super().__init__(f"{layer_name}.input", "", keep_entries)
        self.kind = None  # decided by the first input seen
        name = self.name[len("activations/"):]
        self.columns = tuple(f"{c}/{name}" for c in ("act_mean", "act_std", "dead_frac",
                                                      "saturated_frac"))

    def see(self, output, unbatched: bool) -> None:
        if self.kind is None and isinstance(output, torch.Tensor):
            self.kind = kind_of_values(output) or "none"
        if self.kind != "none":
            super().see(output, unbatched)


class Carried(Instrument):
    """Did the gradient an optimizer step used start from an empty `.grad`?

    A hook on one parameter runs in every backward pass, before the new gradient is
    added, and looks at what `.grad` already holds.  A loop that zeroes its gradients
    once per step finds it empty (None or zeros) at some backward before every step,
    whatever else it does to them (clipping, loss scaling, micro-batches, a second
    loss, any optimizer); a loop that forgot `zero_grad` never does, because every
    backward adds to the sum of all earlier ones.  What the backward passes found is
    closed at each optimizer step, so a loop that records once per micro-batch (a
    misuse) still reads one value per step.  One parameter tells: zeroing (or
    forgetting to) treats every parameter of the optimizer alike.  The hook sits on
    the last trainable parameter, usually the output layer's bias: reached by every
    backward and cheap to count."""

    name = "gradients carried over"
    columns = ("grad_carried",)

    def __init__(self, param: torch.Tensor):
        self.param = param
        self.stepped = None  # what the backward passes before the last step found
        self._reset()

    def _reset(self) -> None:
        self.seen = False  # a backward reached the parameter since the last step
        self.cleared = False  # ...and found `.grad` empty at least once
        self.counts: list = []  # non-zero entries found in `.grad`, as 0-d tensors

    def see(self) -> None:
        self.seen = True
        if self.cleared:
            return
        held = self.param.grad
        if held is None:
            self.cleared = True
        elif held.is_sparse:
            self.cleared = private.sparse_is_empty(held)
        else:
            self.counts.append(torch.count_nonzero(held))  # no sync: read per chunk

    def at_step(self) -> None:
        """The optimizer is stepping: close what its gradient was built from."""
        self.stepped = None if not self.seen else 0 if self.cleared else self.counts
        self._reset()

    def take(self, unbatched: bool):
        """At `record`: the last step's finding (None when no step ran since the last
        record, or no backward reached the parameter before it)."""
        payload, self.stepped = self.stepped, None
        return payload

    def compute(self, payloads):
        """1 where every backward before the step found a gradient already there, 0
        where one found it empty, NaN where there was no step or no backward."""
        counts = [c for p in payloads if isinstance(p, list) for c in p]
        found = iter(torch.stack(counts).gt(0).tolist() if counts else [])
        values = []
        for p in payloads:
            if p is None:
                values.append(_NAN)
            elif isinstance(p, list):
                values.append(float(all([next(found) for _ in p])))
            else:
                values.append(0.0)
        return {"grad_carried": values}

    def forget(self) -> None:
        self.stepped = None
        self._reset()


@dataclass(slots=True, frozen=True)
class Reduced:
    """A large activation output reduced in its hook: (1, 3) sums, its shape, and for
    ReLU under torch.distributed the per-unit batch sums."""

    sums: torch.Tensor
    shape: torch.Size
    units: torch.Tensor | None


def _stacks(a, b) -> bool:
    """Can two inputs (tensors, or both `ReducedBatch`) be one batch in parts (same
    sample shape, dtype and device)?"""
    return (type(a) is type(b) and a.dim() > 1 and a.shape[1:] == b.shape[1:]
            and a.dtype == b.dtype and a.device == b.device)


def first_lr(optimizer: torch.optim.Optimizer) -> float:
    """The first param group's learning rate (a tensor for `capturable` optimizers)."""
    lr = optimizer.param_groups[0].get("lr", _NAN) if optimizer.param_groups else _NAN
    try:
        return float(lr)
    except (TypeError, ValueError):
        return _NAN


_SCALER_FRAMES = 8  # hook <- hook runner <- step wrapper(s) <- GradScaler._maybe_opt_step


def scaled_step(scaler: torch.amp.GradScaler | None) -> bool:
    """Whether the step now starting runs on loss-scaled gradients.  A scaler given to
    the Monitor answers for itself (it takes every step of its loop); without one the
    caller's frames are the fallback (`stepped_by_grad_scaler`)."""
    if scaler is not None:
        return scaler.is_enabled()
    return stepped_by_grad_scaler()


def stepped_by_grad_scaler() -> bool:
    """Whether the optimizer step now starting was called by an enabled
    `torch.amp.GradScaler` (directly, or by a framework's AMP plugin).

    A scaler leaves no trace on the optimizer, so the caller's frames are the only
    place to see it; a few frames up, never deeper.  Float16 gradients without one
    underflow (`fp16_no_scaling`); with one they do not, and this tells them apart."""
    frame = sys._getframe(1)
    for _ in range(_SCALER_FRAMES):
        frame = frame.f_back
        if frame is None:
            return False
        if frame.f_code.co_name in ("step", "_maybe_opt_step"):
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.amp.GradScaler):
                return owner.is_enabled()
    return False


def chunk_length(payloads, n_params: int, limit: int, max_bytes: int) -> int:
    """How many steps to hold before computing: fewer when the model or batch is large."""
    held = 4 * n_params * 4
    for payload in payloads:
        for t in payload if isinstance(payload, tuple) else (payload,):
            if isinstance(t, torch.Tensor):
                held += t.numel() * t.element_size()
    return max(1, min(limit, max_bytes // max(held, 1)))
