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
            _copy(self.step_rows[slot], [*self.params, *grads])
        else:
            _copy(self.grad_rows[slot + 1], grads)

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        if not stepped:  # no optimizer step (AMP skipped it): weights unchanged
            self.before_step(slot, True, grads())

    def columns(self, k: int, sizes, per_layer: bool) -> torch.Tensor:
        _copy(self.weight_rows[k], self.params)  # after the chunk's last step: the current ones
        return probes.chained_columns(self.rows[:k + 1], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.grads[slot + 1]

    def carry(self, k: int) -> None:
        """After computing k rows: keep the last gradient, the next chunk's previous one."""
        self.grads[0] = self.grads[k]


class SampleBuffers:
    """Economy preset: separate copies for each observed step and the one before it.

    Row i holds, interleaved: the step's gradient, the previous step's, the weights
    before and after the step, and a scratch row (see `ChainBuffers`).  A step's copies
    are first made into one staging block, whose shaped views are made once, and moved
    into the step's row in one call when it is recorded: only one step in ten is
    observed, so one more copy costs less than views for every row.  The previous
    step's gradient also waits there: it may belong to the chunk before."""

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.rows = torch.zeros(chunk, 5, n, device=device)  # zeros: finite scratch
        self.staging = torch.zeros(4, n, device=device)  # grads, previous, before, after
        self.grads, self.previous, self.before, self.after = (
            probes.shaped_views(row, params) for row in self.staging)
        self.before_and_grads = self.before + self.grads  # a step's copies, in one call
        self.have_prev = False

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            _copy(self.before_and_grads, [*self.params, *grads])
        else:
            _copy(self.grads, grads)

    def keep_previous(self, grads: list[torch.Tensor]) -> None:
        _copy(self.previous, grads)
        self.have_prev = True

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        staging = self.staging
        _copy(self.after, self.params)
        if not stepped:
            _copy(self.grads, grads())
            staging[2] = staging[3]
        if not self.have_prev:
            staging[1] = _NAN  # no previous step to compare with
        self.have_prev = False
        self.rows[slot, :4] = staging

    def columns(self, k: int, sizes, per_layer: bool) -> torch.Tensor:
        return probes.sampled_columns(self.rows[:k], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.rows[slot, 0]

    def carry(self, k: int) -> None:
        """Nothing to keep: each row holds its own previous gradient."""


def _copy(rows: list[torch.Tensor], tensors: list[torch.Tensor]) -> None:
    """`torch._foreach_copy_` with autograd off (the weights require grad), switched
    directly: `torch.no_grad()` costs a microsecond more, every step."""
    private.copy_without_grad(rows, tensors)


def _device(params: list[torch.Tensor]) -> torch.device:
    """Keep the copies where the parameters are (one sync per chunk, not per step);
    a model spread over several devices is gathered on the CPU."""
    devices = {p.device for p in params}
    return devices.pop() if len(devices) == 1 else torch.device("cpu")
