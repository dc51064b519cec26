"""Copy buffers for `Monitor`: flat float32 rows, one per pending step.

A step's gradients and weights are copied into a preallocated row with one fused
`torch._foreach_copy_` call (the cheapest way to snapshot many small tensors), and the
statistics of a whole chunk of rows are computed together later (see `probes`).
"""

from __future__ import annotations

import torch

from . import private, probes

_NAN = float("nan")


class ChainBuffers:
    """Full preset: every step observed, copies chained to save one copy per step.

    Row i holds the gradient of the step before step i (row 0: the last gradient of the
    previous chunk, NaN at first), the weights just before step i, and a scratch row.
    Row i + 1 doubles as "after step i" (anything that changes the weights between two
    steps counts as part of the update), and each step's previous gradient is simply
    the row above its own.  The three kinds of row are interleaved in one buffer, so
    the norms of a whole chunk of them take one call per parameter tensor.
    """

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.rows = torch.zeros(chunk + 1, 3, n, device=device)  # zeros: finite scratch
        self.grads, self.weights, self.scratch = self.rows.unbind(1)
        self.grads.fill_(_NAN)
        self.grad_rows = [probes.shaped_views(r, params) for r in self.grads]
        self.weight_rows = [probes.shaped_views(r, params) for r in self.weights]
        # a step's weights and gradients, copied in one call
        self.step_rows = [w + g for w, g in zip(self.weight_rows, self.grad_rows[1:], strict=False)]

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            private.copy_without_grad(self.step_rows[slot], [*self.params, *grads])
        else:
            private.copy_without_grad(self.grad_rows[slot + 1], grads)
        self.step_at = slot

    step_at = None  # the slot of a step taken and not yet recorded

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        if not stepped:  # no optimizer step (AMP skipped it): weights unchanged
            self.before_step(slot, True, grads())
        self.step_at = None

    def columns(self, k: int, sizes, per_layer: bool) -> torch.Tensor:
        if self.step_at != k:  # after the chunk's last step: the current weights...
            private.copy_without_grad(self.weight_rows[k], self.params)
        # ...unless a step was taken since (a `history` read between `step()` and
        # `record`): row k already holds the weights it started from
        return probes.chained_columns(self.rows[:k + 1], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.grads[slot + 1]

    def carry(self, k: int) -> None:
        """After computing k rows: keep the last gradient, the next chunk's previous one,
        and move the copies of a step taken but not yet recorded to the first slot."""
        self.grads[0] = self.grads[k]
        if self.step_at == k and k:
            self.weights[0] = self.weights[k]
            self.grads[1] = self.grads[k + 1]
            self.step_at = 0


class SampleBuffers:
    """Economy preset (and large models): separate copies for each observed step and
    the one before it.

    Row i holds, interleaved: the step's gradient, the previous step's, the weights
    before and after the step, and a scratch row (see `ChainBuffers`).  Each step's
    copies go straight into its row, through shaped views made for every row when the
    monitor is made (as `ChainBuffers` does; made when first used, they cost the loop
    more than they save within a chunk): moving the copies from a staging block at
    `record` copied four model-sized rows more per observed step, the largest copy the
    monitor made.  The row is the chunk's next free one; the previous gradient is copied a step
    before its row's step, and a chunk may be computed in between (a `history` read),
    so each copy remembers its row and `at_record` moves it if the step's row changed
    (rare: one more copy).  The extra row holds a step taken while its chunk was full."""

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.rows = torch.zeros(chunk + 1, 5, n, device=device)  # zeros: finite scratch
        self.row = list(self.rows.unbind(0))  # indexing a tensor costs microseconds
        # per row: weights before and gradient (one copy), weights after, gradient,
        # previous gradient
        self._views = [self._shaped(row) for row in self.row]
        self.previous_at = None  # the row the previous step's gradient was copied to
        self.step_at = None  # the row this step's gradient and weights were copied to

    def _shaped(self, row: torch.Tensor) -> tuple:
        grads, previous, before, after = (probes.shaped_views(part, self.params)
                                           for part in row[:4])
        return before + grads, after, grads, previous

    def _views_of(self, slot: int) -> tuple:
        """Row `slot`'s shaped views: weights before and gradient (one copy), weights
        after, gradient, previous gradient."""
        return self._views[slot]

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        self._moved(self.step_at, slot, slice(0, 4))  # a second step before one record
        views = self._views[slot]
        if first:
            private.copy_without_grad(views[0], [*self.params, *grads])
        else:
            private.copy_without_grad(views[2], grads)
        self.step_at = slot

    def keep_previous(self, slot: int, grads: list[torch.Tensor]) -> None:
        private.copy_without_grad(self._views[slot][3], grads)
        self.previous_at = slot

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        self._moved(self.step_at, slot, slice(0, 4))
        row = self.row[slot]
        private.copy_without_grad(self._views[slot][1], self.params)
        if not stepped:
            private.copy_without_grad(self._views[slot][2], grads())
            row[2] = row[3]
        if self.previous_at is None:
            row[1] = _NAN  # no previous step to compare with
        else:
            self._moved(self.previous_at, slot, 1)
        self.previous_at = self.step_at = None

    def _moved(self, at: int | None, slot: int, part) -> None:
        """Copies made into row `at` belong to row `slot` (a chunk computed between)."""
        if at is not None and at != slot:
            self.row[slot][part] = self.row[at][part]

    def columns(self, k: int, sizes, per_layer: bool) -> torch.Tensor:
        return probes.sampled_columns(self.rows[:k], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.rows[slot, 0]

    def carry(self, k: int) -> None:
        """Nothing to keep: each row holds its own previous gradient."""


def _device(params: list[torch.Tensor]) -> torch.device:
    """Keep the copies where the parameters are (one sync per chunk, not per step);
    a model spread over several devices is gathered on the CPU."""
    devices = {p.device for p in params}
    return devices.pop() if len(devices) == 1 else torch.device("cpu")
