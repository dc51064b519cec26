"""Quantities: the telemetry arithmetic, as pure functions of stacked tensors.

On a tiny model the cost of telemetry is the *number of torch calls* (1-3 µs each),
not the arithmetic.  So the monitor keeps a few cheap copies per step and computes
every quantity for a whole chunk of steps at once: each function here takes tensors
with a leading "step" dimension `k` and returns a (k, columns) table, one row per step.
A chunk of 32 steps costs about as many torch calls as a single step would.  Boolean
reductions are avoided: on CPU they are several times slower than float ones.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..evidence.thresholds import LABEL_MIX_MIN_SAMPLES

F32 = torch.float32
LONG_ROW = 2**16  # entries: beyond this, memory traffic costs more than torch calls
FEW_CLASSES = 32  # fewer classes than this: reduce them in a classes-first copy
SATURATION_MARGIN = 0.01  # a sigmoid/tanh output this close to a bound passes ~no gradient


def shaped_views(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Views into consecutive segments of `flat`, shaped like each tensor of `like`.

    `torch._foreach_copy_(views, tensors)` then fills `flat` in one fused call (about
    2 µs for a small model, against 6 µs for reshaping and concatenating)."""
    sizes = [t.numel() for t in like]
    return [part.view(t.shape) for part, t in zip(flat.split(sizes), like, strict=True)]


def layer_norms(rows: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """(k, n) → (k, P): each row's L2 norm over each parameter's segment."""
    return torch.stack([torch.linalg.vector_norm(part, dim=1)
                        for part in rows.split(sizes, dim=1)], dim=1)


def chained_columns(rows: torch.Tensor, sizes, per_layer: bool) -> torch.Tensor:
    """Parameter columns for k consecutive steps from (k + 1, 3, n) chained rows.

    rows[i + 1, 0] is step i's gradient and rows[i, 0] the one before it (NaN: none);
    rows[i, 1] are the weights before step i and rows[i + 1, 1] those after it; rows[:, 2]
    is scratch, for the updates and then the non-zero tests.  Sharing rows saves a pass
    over the buffers for each of them, and interleaving them lets one `layer_norms`
    call cover gradients, weights and updates.  Returns (k, 6 [+ 3 P]): see `_assemble`.
    """
    grads, weights, scratch = rows.unbind(1)
    torch.sub(weights[1:], weights[:-1], out=scratch[:-1])  # the updates
    norms = _with_totals(layer_norms(rows.view(-1, rows.shape[2]), sizes), 3)  # (k+1, 3, P+1)
    dots = row_dots(grads[1:], grads[:-1], scratch[:-1])
    nonzero = _nonzero(grads[1:], scratch[:-1])
    return _assemble(norms[1:, 0], norms[:-1, 0, -1], dots, norms[1:, 1], norms[:-1, 1],
                     norms[:-1, 2], nonzero, per_layer)


def sampled_columns(rows: torch.Tensor, sizes, per_layer: bool) -> torch.Tensor:
    """Parameter columns for k separate steps from (k, 5, n) rows: each step's gradient,
    the previous step's, the weights before and after the step, and scratch."""
    grads, prev, before, after, scratch = rows.unbind(1)
    torch.sub(after, before, out=scratch)  # the updates
    norms = _with_totals(layer_norms(rows.view(-1, rows.shape[2]), sizes), 5)  # (k, 5, P+1)
    prev_norm = (norms[:, 1, 0] if len(sizes) == 1  # the whole row's norm
                 else torch.linalg.vector_norm(prev, dim=1))
    dots = row_dots(grads, prev, scratch)
    return _assemble(norms[:, 0], prev_norm, dots, norms[:, 3], norms[:, 2], norms[:, 4],
                     _nonzero(grads, scratch), per_layer)


def _with_totals(layers: torch.Tensor, kinds: int) -> torch.Tensor:
    """(r * kinds, P) per-parameter norms → (r, kinds, P + 1): the whole model's norm
    appended to each row, so ratios of both take one call."""
    layers = layers.view(-1, kinds, layers.shape[1])
    return torch.cat([layers, _total(layers).unsqueeze(-1)], dim=-1)


def _assemble(g, prev_norm, dots, w, b, d, nonzero, per_layer: bool) -> torch.Tensor:
    """One (k, 6) table: grad_norm, weight_norm, update_norm, update_ratio, grad_cosine,
    zero_grad_frac; with `per_layer` followed by (k, P) each of grad_norm/,
    weight_norm/ and update_ratio/, one column per parameter tensor.  g, w (after the
    step), b (before it) and d (the update) are (k, P + 1) norms, the total last."""
    grad_norm = g[:, -1]
    ratio = _ratio(d, b)
    cosine = (dots / (grad_norm * prev_norm)).clamp(-1, 1)  # NaN without a previous step
    table = torch.stack([grad_norm, w[:, -1], d[:, -1], ratio[:, -1], cosine, 1 - nonzero],
                        dim=1)
    if not per_layer:
        return table
    return torch.cat([table, g[:, :-1], w[:, :-1], ratio[:, :-1]], dim=1)


def _total(layer: torch.Tensor) -> torch.Tensor:
    """(..., P) per-parameter norms → (...,) whole-model norms."""
    return layer.square().sum(-1).sqrt()


def _nonzero(grads: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """Share of non-zero entries per row (NaN counts as non-zero: callers recount rows
    whose norm is not finite exactly, see `broken_entries`)."""
    return count_where(torch.ne, grads, 0, scratch) / grads.shape[1]


def row_dots(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """(k, n), (k, n) → (k,): each row's dot product.  Short rows: one vecdot call, or,
    given scratch `out` of their shape, the same product and sum without allocating a
    temporary of their size (bitwise the same).  Long rows: one BLAS dot per row, which
    reads them once and allocates nothing (vecdot multiplies, then sums; bmm is twice
    as slow as dot)."""
    if a.shape[1] < LONG_ROW:
        return torch.linalg.vecdot(a, b) if out is None else torch.mul(a, b, out=out).sum(1)
    return torch.stack([torch.dot(x, y) for x, y in zip(a, b, strict=True)])


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den, NaN where den is 0 (an update of a zero tensor has no ratio)."""
    return torch.where(den > 0, num / den, float("nan"))


def input_quantities(X: torch.Tensor) -> torch.Tensor:
    """(k, B, ...) batches → (k, 3): absmax, smallest and largest per-feature variance.

    Dimension 1 is the batch; every later position is a feature.  Integer inputs
    (token ids) have no scale to compare, so their variances are NaN.
    """
    k = X.shape[0]
    flat = X.reshape(k, X.shape[1], -1)
    if not flat.is_floating_point():
        absmax = flat.abs().amax((1, 2)).to(F32)
        return torch.stack([absmax, absmax * float("nan"), absmax * float("nan")], dim=1)
    flat = flat.to(F32)
    least, most = row_extremes(flat.reshape(k, -1))  # |x|'s max without a copy
    # means over the batch as BLAS products: a reduction over dimension 1 is several
    # times slower on CPU
    share = flat.new_full((flat.shape[1],), 1 / flat.shape[1])
    centred = flat - torch.matmul(share, flat).unsqueeze(1)
    low, high = row_extremes(torch.matmul(share, centred.square_()))
    return torch.stack([torch.maximum(-least, most), low, high], dim=1)


def row_extremes(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, m) → each row's smallest and largest entry.  Two reductions: on CPU
    `torch.aminmax(dim=1)` is not vectorised, and 5-7 times slower than both."""
    return rows.amin(1), rows.amax(1)


def activation_quantities(kind: str, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(k, B, ...) outputs → (k, 3): sum, sum of squares, failure count; and for ReLU the
    (k, units) batch sums per unit (what a distributed merge needs to find dead units).

    Failures: for sigmoid/tanh, outputs within SATURATION_MARGIN of a bound (saturated:
    they pass almost no gradient back); for ReLU, units that are zero for every sample
    of the batch (dead: no gradient reaches their weights).  A ReLU output is >= 0, so
    a unit is alive exactly when its sum over the batch is > 0, and those sums also give
    the total: two passes over the output (a BLAS vector-matrix product, several times
    faster than a sum over the batch dimension, and a dot), no temporary of its size.
    """
    k = Y.shape[0]
    flat = Y.reshape(k, -1).to(F32)
    units = None
    if kind == "relu":
        squares = row_dots(flat, flat)
        units = torch.matmul(flat.new_ones(Y.shape[1]), flat.reshape(k, Y.shape[1], -1))
        total = units.sum(1)
        failed = units.shape[1] - count_where(torch.gt, units, 0)
    else:
        total = flat.sum(1)
        bound = 0.5 if kind == "sigmoid" else 0.0  # centre of the output range
        distance = (flat - bound).abs_()
        failed = count_where(torch.gt, distance, 1 - bound - SATURATION_MARGIN, distance)
        squares = row_dots(flat, flat, distance)  # reuses the temporary
    return torch.stack([total, squares, failed], dim=1), units


def count_where(compare, t: torch.Tensor, value: float,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """(k, m) → (k,) float counts of the entries where `compare(t, value)` holds, e.g.
    `torch.gt`.  The comparison writes 1.0 / 0.0 floats (into `out`, which may be `t`)
    and a float sum counts them exactly: two passes, where a boolean reduction is
    several times slower on CPU.  NaN compares false, so callers must treat rows with
    NaN separately."""
    return flags(compare, t, value, out).sum(1)


def flags(compare, t: torch.Tensor, value, out: torch.Tensor | None = None) -> torch.Tensor:
    """`compare(t, value)` (e.g. `torch.gt`) written as 1.0 / 0.0 floats (into `out`,
    which may be `t`): on the CPU a float comparison is about twice as fast as a
    boolean one, and a mask that multiplies can replace a `torch.where`."""
    if out is None:
        out = torch.empty_like(t, dtype=F32)
    return compare(t, value, out=out)


def sums(T: torch.Tensor) -> torch.Tensor:
    """(k, ...) → (k, 2): sum and sum of squares of each step's tensor."""
    flat = T.reshape(T.shape[0], -1).to(F32)
    return torch.stack([flat.sum(1), flat.square().sum(1)], dim=1)


def feature_sums(X: torch.Tensor) -> torch.Tensor:
    """(..., n, F) samples of F features → (..., 3, F): per-feature sum, sum of squares
    and count of the finite entries, in float64 (running sums over a whole run stay
    exact enough to subtract).  NaN/Inf entries are left out, as std_ratio does.

    Usually every entry is finite, which the plain sums show (a NaN/Inf entry makes its
    feature's sum NaN/Inf): then the mask, the masked copy and the count, three passes
    over a float64 copy of the inputs, are not needed.  The squares overwrite that copy
    (always a copy of our own): a fresh tensor of its size costs more to allocate than
    to fill."""
    flat = X.to(torch.float64, copy=True)
    total = flat.sum(-2)
    if bool(total.isfinite().all()):
        count = torch.full_like(total, X.shape[-2])
        return torch.stack((total, flat.square_().sum(-2), count), dim=-2)
    finite = flat.isfinite()
    flat = torch.where(finite, flat, 0.0)
    total = flat.sum(-2)
    return torch.stack((total, flat.square_().sum(-2), finite.double().sum(-2)), dim=-2)


def feature_spread(sums: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(..., 3, F) feature sums (see `feature_sums`) → per-feature mean, variance, and
    whether the feature varies: a feature whose spread is below float64 rounding of its
    mean (a position that is always padding, a constant column) is constant."""
    total, square, count = sums.unbind(-2)
    mean = total / count.clamp(min=1)
    var = (square / count.clamp(min=1) - mean.square()).clamp(min=0)
    varies = (count > 1) & (var.sqrt() > 1e-12 * mean.abs().clamp(min=1))
    return mean, var, varies


def spread_ratio(sums: torch.Tensor) -> float:
    """Largest over smallest per-feature std from one batch's (3, F) feature sums, by
    `std_ratio`'s rules: NaN/Inf entries and constant features left out, 1.0 when
    fewer than two features are left."""
    _, var, varies = feature_spread(sums)
    var = var[varies]
    return float((var.max() / var.min()).sqrt()) if len(var) >= 2 else 1.0


def zeros_and_floor(T: torch.Tensor) -> torch.Tensor:
    """(k, ...) → (k, 2): share of exactly-zero entries, and the smallest non-zero
    magnitude, of each step's tensor.  A float16 gradient has nothing between 0 and
    6e-8: everything smaller was flushed to zero."""
    flat = T.reshape(T.shape[0], -1).to(F32).abs()
    nonzero = flat.sign()
    floor = torch.where(nonzero > 0, flat, torch.inf).amin(1)
    return torch.stack([1 - nonzero.mean(1), floor], dim=1)


def zero_shares(T: torch.Tensor) -> torch.Tensor:
    """(k, ...) → (k,): share of each step's entries that are exactly 0.  A float
    computed by a Linear layer is exactly 0 only when something clipped it (a ReLU, a
    clamp): healthy logits read 0."""
    return T.reshape(T.shape[0], -1).eq(0).to(F32).mean(1)


def distribution_rows(T: torch.Tensor, tol: float = 1e-3) -> torch.Tensor:
    """(k, ..., C) outputs → (k, 2): share of rows (along the last dimension) that are
    probabilities (every entry in [0, 1], summing to 1 within `tol`) and share that are
    log-probabilities (every entry <= 0, exp summing to 1 within `tol`).  A loss that
    applies softmax again to such rows trains on the wrong objective."""
    rows = classes_first(T)
    low, high = rows.amin(1), rows.amax(1)
    prob = (low >= 0) & (high <= 1) & ((rows.sum(1) - 1).abs() <= tol)
    logprob = (high <= 0) & ((rows.exp().sum(1) - 1).abs() <= tol)
    return torch.stack([prob.float().mean(1), logprob.float().mean(1)], dim=1)


def classes_first(T: torch.Tensor) -> torch.Tensor:
    """(k, ..., C) → (k, C, rows) float32.  Fewer than `FEW_CLASSES` classes are copied
    into that order: reductions over the classes then run along memory for all rows at
    once, where over a short last dimension (3 classes) they would be several times
    slower, and softmax 20 times.  More classes (a vocabulary) are long enough to
    reduce along memory as they lie: a transposed view, no copy, and every result of
    it keeps that layout."""
    k, classes = T.shape[0], T.shape[-1] if T.dim() > 1 else 1
    rows = T.reshape(k, -1, classes).to(F32).transpose(1, 2)
    return rows.contiguous() if classes < FEW_CLASSES else rows


def _softmax_classes(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over dimension 1 of (k, C, rows) logits."""
    e = (logits - logits.amax(1, keepdim=True)).exp_()
    return e.div_(e.sum(1, keepdim=True))


class GradientRows(NamedTuple):
    """The gradient at a softmax's logits as `loss_weights`, `soft_target_shares` and
    `implied_losses` read it, made once for all three (see `gradient_rows`)."""

    g: torch.Tensor  # (k, C, rows), classes first
    softmax_like: torch.Tensor  # (k,): the rows sum to 0, as a softmax cross-entropy's do
    negatives: torch.Tensor  # (k, rows): negative entries per row
    with_grad: torch.Tensor  # (k, rows): 1.0 where a row has any gradient (not ignored)


def gradient_rows(grads: torch.Tensor, tol: float = 1e-2) -> GradientRows | None:
    """(k, ..., C) gradients → their `GradientRows`; None without a class axis."""
    if grads.dim() < 3 or grads.shape[-1] < 2:
        return None
    g = classes_first(grads)
    # summed over the rows: a confident row's few-ulp rounding is large next to its own
    # tiny gradient, never next to the whole output's
    softmax_like = g.sum(1).abs().sum(1) <= tol * g.abs().sum((1, 2))
    return GradientRows(g, softmax_like, flags(torch.lt, g, 0).sum(1),
                        flags(torch.gt, g.abs().amax(1), 0))


def loss_weights(outputs: torch.Tensor, grads: torch.Tensor, tol: float = 1e-2,
                 rows: GradientRows | None = None) -> torch.Tensor:
    """(k, ..., C) logits and the gradient that reached them → (k,): the total weight
    the loss gave the rows (samples or tokens) of each step's output; NaN where the
    gradient is not a softmax cross-entropy's.

    A softmax cross-entropy with weight w on a row has gradient w (p - y) on its
    logits, so the entries of a row sum to 0 and, over the classes whose gradient is
    positive (every one but the true class), w = sum(g) / sum(p).  A mean over B rows
    weighs each 1/B, 1 in total, with or without class weights or ignored rows (those
    have no gradient); a sum weighs B.  Soft targets (label smoothing, distillation)
    only lower the estimate.  `tol` admits float16 rounding of the gradient.

    The weight is read from rows that show a hard target under one softmax, and scaled
    to all of the step's rows with a gradient: exactly one negative entry, the true
    class's (p - 1 < 0); the entries with a gradient hold the whole softmax; and the
    largest entry's g / p equals the row's estimate (every other entry is w p), all
    within `tol` (float16 rounding, and flushing the smallest entries to 0).  Rows that
    fail are several softmaxes side by side on one axis (heads whose logits were
    concatenated: divided by the joint softmax they read as a heavy weight), targets
    that are soft or taken at another temperature (distillation's T p_T - T q_T reads
    as T times a mean's weight), or a true class at p = 1 to float precision with only
    ulps of gradient elsewhere.  None of those is read; a step most of whose rows are
    not read is not measured (NaN)."""
    rows = gradient_rows(grads, tol) if rows is None else rows
    if rows is None:  # one logit per row: no class axis
        return torch.full((outputs.shape[0],), float("nan"), device=outputs.device)
    g, softmax_like = rows.g, rows.softmax_like
    p = _softmax_classes(classes_first(outputs))  # (k, C, rows)
    # masks as 1.0 / 0.0 floats that multiply: on the CPU `torch.where` over the whole
    # output is several times slower (see `flags`)
    positive = g.clamp(min=0)
    share = (p * flags(torch.gt, positive, 0)).sum(1)
    tiny = torch.finfo(F32).tiny
    per_row = positive.sum(1) / share.clamp(min=tiny)  # (k, rows)
    targets = rows.negatives
    covered = (p * flags(torch.ne, g, 0)).sum(1) >= 1 - tol
    # g / p at each row's largest entry, the most precise (not argmax + gather: on the
    # CPU an argmax across the classes is 50-100 times slower than this max)
    at_top = flags(torch.eq, positive, positive.amax(1, keepdim=True))
    top_ratio = (positive / p.clamp(min=tiny) * at_top).amax(1)
    agree = (top_ratio - per_row).abs() <= tol * per_row
    with_grad = share > 0
    read = (with_grad & (targets == 1) & covered & agree).to(F32)
    n_read, n_with_grad = read.sum(1), with_grad.to(F32).sum(1)
    weight = (per_row * read).sum(1) * n_with_grad / n_read.clamp(min=1)
    return torch.where(softmax_like & (2 * n_read > n_with_grad), weight, float("nan"))


def soft_target_shares(grads: torch.Tensor, tol: float = 1e-2,
                       rows: GradientRows | None = None) -> torch.Tensor:
    """(k, ..., C) gradients that reached a softmax's logits → (k,): the share of the
    rows with a gradient that have more than one negative entry, the rows trained on
    soft targets; NaN where the gradient is not a softmax cross-entropy's (its rows do
    not sum to 0, see `loss_weights`) or there is no class axis.

    A row's gradient is w (p - t) for target t: a hard label, right or wrong, makes only
    the labelled entry negative (p - 1 < 0, every other entry w p >= 0).  Mixup's two
    labels, label smoothing and distillation's tempered targets spread t over several
    classes, each negative where p falls short of its share: their training loss has a
    floor of its own (the targets' entropy) that a validation loss on hard labels does
    not."""
    rows = gradient_rows(grads, tol) if rows is None else rows
    if rows is None:
        return torch.full((grads.shape[0],), float("nan"), device=grads.device)
    with_grad = rows.with_grad.sum(1)
    soft = (flags(torch.gt, rows.negatives, 1) * rows.with_grad).sum(1)
    return torch.where(rows.softmax_like & (with_grad > 0), soft / with_grad.clamp(min=1),
                       float("nan"))


def label_mixes(grads: torch.Tensor, rows: GradientRows | None = None,
                tol: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(k, B, C) gradients that reached a classifier's logits → each step's label
    counts (k, C), over the rows with exactly one negative entry (a hard label makes
    only its own entry of a softmax cross-entropy's row negative, see
    `soft_target_shares`), and a (k,) mask of the steps that can be read: a softmax
    cross-entropy's gradient with at least LABEL_MIX_MIN_SAMPLES such rows.  None for
    an output with more than one row per sample (tokens: their labels are words, not
    the batch's classes) or without a class axis."""
    rows = gradient_rows(grads, tol) if rows is None else rows
    if rows is None or grads.dim() != 3:
        return None
    hard = flags(torch.eq, rows.negatives, 1) * rows.with_grad  # (k, B)
    labels = rows.g.argmin(1)  # (k, B): the negative entry's class
    counts = torch.zeros(grads.shape[0], rows.g.shape[1],
                         device=grads.device).scatter_add_(1, labels, hard)
    return counts, rows.softmax_like & (hard.sum(1) >= LABEL_MIX_MIN_SAMPLES)


def binary_label_mixes(outputs: torch.Tensor, grads: torch.Tensor,
                       tol: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(k, B) or (k, B, 1) logits of a binary classifier and their gradients → label
    counts (k, 2) and the (k,) mask of steps read, as `label_mixes`; None for another
    shape.  A binary cross-entropy on logits (`BCEWithLogitsLoss`, mean or sum) has
    gradient w (sigmoid(z) - y): negative exactly where y = 1, and the same w on every
    row.  A step is read when every row that is not already fitted (|sigmoid(z) - y|
    over 0.01) gives that w within `tol`: an MSE's gradient, 2 (z - t) / B, does not."""
    if outputs.dim() == 3 and outputs.shape[-1] == 1:
        outputs, grads = outputs[..., 0], grads[..., 0]
    if outputs.dim() != 2 or grads.shape != outputs.shape:
        return None
    g = grads.to(F32)
    y = flags(torch.lt, g, 0)  # a fitted row's gradient may round to 0: counted neither way
    residual = torch.sigmoid(outputs.to(F32)) - y
    fitted = residual.abs() <= 0.01
    w = torch.where(fitted, torch.nan, g / torch.where(fitted, 1.0, residual))
    centre = w.nanmedian(1, keepdim=True).values
    off = ((w - centre).abs() > tol * centre.abs()) & ~fitted
    live = (~fitted).sum(1)
    read = (centre[:, 0] > 0) & ~off.any(1) & (live >= LABEL_MIX_MIN_SAMPLES)
    ones = y.sum(1)
    return torch.stack([flags(torch.gt, g, 0).sum(1), ones], dim=1), read


def sigmoid_logit_shares(outputs: torch.Tensor,
                         mixes: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """(k, B) or (k, B, 1) outputs that a binary cross-entropy on logits was given, with
    their `binary_label_mixes` → (k,): 1.0 where every one of a step's values lies
    strictly between 0 and 1, else 0.0; NaN where no such loss was read.  Logits are
    unconstrained, and a classifier that learns pushes its negatives below 0: a batch of
    16 or more of them inside (0, 1) is a sigmoid's output, squashed again by the loss
    (its loss cannot go below about 0.5 nats).  A ReLU's zeros and a saturated sigmoid's
    exact 0 or 1 fall outside the open interval."""
    k = outputs.shape[0]
    if mixes is None:
        return torch.full((k,), float("nan"), device=outputs.device)
    flat = outputs.reshape(k, -1).to(F32)
    inside = ((flat > 0) & (flat < 1)).all(1)
    return torch.where(mixes[1], inside.to(F32), float("nan"))


def label_spreads(mixes: tuple[torch.Tensor, torch.Tensor] | None, k: int,
                  device=None) -> torch.Tensor:
    """(k, 2): the mean and the standard deviation of each step's class indices, from
    its label counts (`label_mixes`); NaN where no mix was read.  Over a run they say
    whether batches are drawn across the classes or from a narrow band of them (data
    stored class by class, not shuffled: `quantities.label_mixing`), with no class
    identity kept from step to step."""
    if mixes is None:
        return torch.full((k, 2), float("nan"), device=device)
    counts, read = mixes
    ids = torch.arange(counts.shape[1], device=counts.device, dtype=counts.dtype)
    n = counts.sum(1).clamp(min=1)
    mean = (counts * ids).sum(1) / n
    var = ((counts * ids.square()).sum(1) / n - mean.square()).clamp(min=0)
    both = torch.stack([mean, var.sqrt()], dim=1)
    return torch.where(read[:, None], both, float("nan"))


def label_purities(mixes: tuple[torch.Tensor, torch.Tensor] | None, k: int,
                   device=None) -> torch.Tensor:
    """Each step's share of the batch taken by its most common label, from its label
    counts (`label_mixes`): a loop that records no labels still shows batches of one
    class (data stored sorted and not shuffled) this way.  NaN where no mix was read."""
    if mixes is None:
        return torch.full((k,), float("nan"), device=device)
    counts, read = mixes
    return torch.where(read, counts.amax(1) / counts.sum(1).clamp(min=1), float("nan"))


def implied_losses(outputs: torch.Tensor, rows: GradientRows | None) -> torch.Tensor:
    """(k, ..., C) logits and their `GradientRows` → (k, 2): the mean cross-entropy of
    each step's rows at the class their gradient labels, and the same with softmax
    applied twice (the cross-entropy of softmax(softmax(logits))); NaN where the
    gradient is not a softmax cross-entropy's or there is no class axis.

    A loss that takes softmax's output as its logits (`cross_entropy(out.softmax(-1),
    y)`, softmax written into the loop rather than the model) equals the second to
    float rounding and sits above log(1 + (C-1)/e) for good, while the output's own
    cross-entropy, the first, falls as the model learns; a plain cross-entropy equals
    the first.  The label is a row's most negative gradient entry: a hard label's
    entry under a plain cross-entropy (its only negative one, see `loss_weights`).
    Under softmax applied twice it is the labelled entry in every row that is not
    confidently wrong (random logits of std 1 and 5 classes: 99.5% of rows); a
    confidently wrong row passes almost no gradient and may point elsewhere, so a
    model that is confidently wrong on many rows reads further from its loss, a miss
    rather than a false match.  Rows without a gradient (ignored, padding) are left
    out."""
    k = outputs.shape[0]
    if rows is None:
        return torch.full((k, 2), float("nan"), device=outputs.device)
    g = rows.g
    logp = torch.log_softmax(classes_first(outputs), 1)  # (k, C, rows)
    logq = torch.log_softmax(logp.exp(), 1)
    label = flags(torch.eq, g, g.amin(1, keepdim=True)).mul_(rows.with_grad.unsqueeze(1))
    count = label.sum((1, 2)).clamp(min=1)
    implied = torch.stack([(logp * label).sum((1, 2)), (logq * label).sum((1, 2))], dim=1)
    implied = implied.div_(-count.unsqueeze(1))
    return torch.where((rows.softmax_like & (rows.with_grad.sum(1) > 0)).unsqueeze(1),
                       implied, float("nan"))


def target_shares(outputs: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """(k, ...) outputs and the gradients that reached them → (k,): the share of each
    step's gradient variance that its output does not explain, 1 - R^2 of the
    least-squares line grad = a output + b over all entries (1 where a <= 0: a loss
    that pushes outputs up where they are high explains nothing); NaN with fewer than 4
    entries or where the output or gradient does not vary.

    An MSE's gradient is w (output - target), so what the output leaves unexplained is
    the targets.  When MSELoss broadcasts (B, 1) outputs against (B,) targets, or one
    target against a sequence, every output is pulled to one value, the targets' mean,
    and the gradient is an exact affine function of the output: the share is float
    rounding.  Computed in float64, so that rounding is 1e-12, not float32's 1e-6."""
    k = outputs.shape[0]
    o = outputs.reshape(k, -1).double()
    g = grads.reshape(k, -1).double()
    if o.shape[1] < 4:
        return torch.full((k,), float("nan"), dtype=torch.float64, device=outputs.device)
    o = o - o.mean(1, keepdim=True)
    g = g - g.mean(1, keepdim=True)
    var_o, var_g, cov = (o * o).sum(1), (g * g).sum(1), (o * g).sum(1)
    share = (1 - cov * cov / (var_o * var_g)).clamp_(min=0)
    share = torch.where(cov <= 0, torch.ones_like(share), share)
    varies = (var_o > 0) & (var_g > 0) & var_o.isfinite() & var_g.isfinite()
    return torch.where(varies, share, float("nan"))


def std_of(total: float, total_sq: float, n: int) -> float:
    """Population std from a sum and a sum of squares (NaN for no entries)."""
    if not n:
        return float("nan")
    mean = total / n
    return max(total_sq / n - mean * mean, 0.0) ** 0.5


def densify(grads: list[torch.Tensor]) -> tuple[list[torch.Tensor], int]:
    """Sparse gradients (nn.Embedding(sparse=True)) as dense tensors, and how many
    entries they leave out: those are absent, not "exactly zero" gradient entries."""
    dense, absent = [], 0
    for g in grads:
        if g.is_sparse:
            g = g.coalesce()
            absent += g.numel() - g.values().numel()
            g = g.to_dense()
        dense.append(g)
    return dense, absent


def activation_units(kind: str, shape: torch.Size) -> int:
    """What `activation_quantities`' failure count is out of, for one step's output."""
    per_sample = shape[1:].numel()
    return per_sample if kind == "relu" else shape[0] * per_sample


def broken_entries(t: torch.Tensor) -> tuple[int, float]:
    """(NaN/Inf entries, share of exact zeros) of one tensor, counted exactly."""
    return nonfinite_count(t), float((t == 0).float().mean())


def nonfinite_count(t: torch.Tensor) -> int:
    """Exact number of NaN/Inf entries (only needed once a norm came out non-finite)."""
    return int((~torch.isfinite(t)).sum()) if t.is_floating_point() else 0


def std_ratio(x: torch.Tensor) -> float:
    """Largest over smallest per-feature std of one batch, skipping NaN/Inf entries and
    constant features: the exact, slower path for batches the fast path can't rate."""
    flat = x.reshape(x.shape[0], -1).to(F32)
    flat = torch.where(torch.isfinite(flat), flat, float("nan"))
    std = (flat - flat.nanmean(0)).square().nanmean(0).sqrt()
    std = std[torch.isfinite(std) & (std > 0)]
    return float(std.max() / std.min()) if len(std) >= 2 else 1.0
