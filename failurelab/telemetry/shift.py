"""The `eval_input_shift` column: are the inputs a model is evaluated on drawn like the
ones it was trained on?

A forward pass that builds a graph in training mode is training; one under
`torch.no_grad()` / `inference_mode` or in eval mode is evaluation.  Training inputs
add to running per-feature sums (each entry of a sample is a feature); at the next
`record`, the evaluation inputs seen since the previous one are compared with them:
the largest, over features, standardised mean difference |mean_eval - mean_train| /
std_train.  For samples of one population it is sampling noise, about
sqrt(2 ln F / n) for F features and n evaluation samples (0.1 for the lab's 16 features
and 628 rows); an evaluation set prepared differently, or drawn from a shifted
population, moves a feature's mean by whole standard deviations.
"""

from __future__ import annotations

import torch

from .instruments import Instrument, ReducedBatch, model_input, reduce_in_hook
from .probes import feature_spread, feature_sums

_NAN = float("nan")


def _sums(x: torch.Tensor) -> torch.Tensor:
    """(3, F) per-feature sums of a batch, each entry of a sample a feature."""
    return feature_sums(x.detach().reshape(x.shape[0] if x.dim() > 1 else 1, -1))


def _largest_shift(train: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """max over features of |mean_eval - mean_train| / std_train, from (k, 3, F) sums;
    features constant in training (a position that is always padding) are left out,
    and NaN where none is left."""
    mean, var, varies = feature_spread(train)
    es, en = seen[:, [0, 2]].unbind(1)
    usable = varies & (en > 0)
    diff = (es / en.clamp(min=1) - mean).abs() / torch.where(usable, var.sqrt(), 1.0)
    largest = torch.where(usable, diff, 0.0).amax(-1)
    return torch.where(usable.any(-1), largest, _NAN)


class EvalInputs(Instrument):
    """Training inputs' running per-feature statistics, and how far the evaluation
    inputs between two records sit from them (`eval_input_shift`; NaN on steps with no
    evaluation, or before any training input of the same sample shape).

    A small training batch is only copied in its hook; the copies are reduced together
    every KEEP batches and at each evaluation, so the loop pays one copy per step.  A
    large one is reduced at once, while it is still in the CPU's cache (see `Inputs`):
    usually the inputs instrument has done so already and its sums are reused."""

    name = "evaluation inputs"
    columns = ("eval_input_shift",)
    KEEP = 32

    def __init__(self):
        self.batches: list[torch.Tensor] = []  # training inputs not yet reduced, copied
        self.train = None  # (3, F): sum, sum of squares, count over training inputs
        self.eval = None  # the same over evaluation inputs since the last record
        self.last = None  # the sums of the latest evaluation pass (see `retract`)
        self.sample_shape = None  # the training samples' shape; others are not compared

    def see(self, module: torch.nn.Module, seen, copy=None) -> None:
        """`copy`: the input as the inputs instrument kept it (a copy or a
        `ReducedBatch`), if it did."""
        x = model_input(*seen)
        if x is None or x.numel() == 0:
            return
        shape = tuple(x.shape[1:]) if x.dim() > 1 else tuple(x.shape)
        if torch.is_grad_enabled() and module.training:
            if shape != self.sample_shape:  # a new kind of input starts afresh
                self.sample_shape, self.batches, self.train, self.eval = shape, [], None, None
            if isinstance(copy, ReducedBatch) and copy.sums is not None:
                self._add(copy.sums)  # the inputs instrument has reduced it already
                return
            # a copy: a loop may refill its input buffer in place
            large = reduce_in_hook(x)
            self.batches.append(x if large else copy if isinstance(copy, torch.Tensor)
                                else x.detach().clone())
            if large or len(self.batches) >= self.KEEP:
                self._reduce()
        elif shape == self.sample_shape:
            sums = self.last = _sums(x)
            self.eval = sums if self.eval is None else self.eval + sums

    def retract(self) -> None:
        """The latest pass read as an evaluation was not one: reentrant activation
        checkpointing runs the model's forward without a graph, then again inside
        the backward pass with one."""
        if self.eval is not None and self.last is not None:
            self.eval = self.eval - self.last
            if not self.eval[2].any():  # no evaluation row left
                self.eval = None
        self.last = None

    def _reduce(self) -> None:
        """Fold the copied training batches into the running sums."""
        if self.batches:
            batches, self.batches = self.batches, []
            x = batches[0] if len(batches) == 1 else torch.cat(
                [b.reshape(b.shape[0] if b.dim() > 1 else 1, -1) for b in batches])
            self._add(_sums(x))

    def _add(self, sums: torch.Tensor) -> None:
        self.train = sums if self.train is None else self.train + sums

    def take(self, unbatched: bool):
        """(training sums, evaluation sums) when this step evaluated; None otherwise."""
        seen, self.eval, self.last = self.eval, None, None
        if seen is None:
            return None
        self._reduce()
        return None if self.train is None else (self.train, seen)

    def compute(self, payloads):
        """Each evaluation's largest standardised mean difference, computed together for
        the evaluations of one feature count (usually all of a chunk)."""
        values = [_NAN] * len(payloads)
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(payloads):
            if p is not None:
                groups.setdefault(p[0].shape[-1], []).append(i)
        for rows in groups.values():
            train = torch.stack([payloads[i][0] for i in rows])  # (k, 3, F)
            seen = torch.stack([payloads[i][1] for i in rows])
            for i, v in zip(rows, _largest_shift(train, seen).tolist(), strict=False):
                values[i] = v
        return {"eval_input_shift": values}

    def forget(self) -> None:
        self.batches, self.train, self.eval, self.last = [], None, None, None
