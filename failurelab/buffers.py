"""Copy buffers for `Monitor`: flat float32 rows, one per pending step.

A step's gradients and weights are copied into a preallocated row with one fused
`torch._foreach_copy_` call (the cheapest way to snapshot many small tensors), and the
statistics of a whole chunk of rows are computed together later (see `probes`).
"""

from __future__ import annotations

import torch

from . import probes

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
        self.step_rows = [w + g for w, g in zip(self.weight_rows, self.grad_rows[1:])]

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            _copy(self.step_rows[slot], [*self.params, *grads])
        else:
            _copy(self.grad_rows[slot + 1], grads)

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        if not stepped:  # no optimizer step (AMP skipped it): weights unchanged
            self.before_step(slot, True, grads())

    def columns(self, k: int, close: bool, sizes, per_layer: bool) -> torch.Tensor:
        if close:  # the weights after the chunk's last step are the current ones
            _copy(self.weight_rows[k], self.params)
        return probes.chained_columns(self.rows[:k + 1], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.grads[slot + 1]

    def carry(self, k: int, moving: int | None) -> None:
        """After computing k rows: keep the last gradient; optionally move a slot to 0."""
        self.grads[0] = self.grads[k]
        if moving is not None:
            self.grads[1], self.weights[0] = self.grads[moving + 1], self.weights[moving]


class SampleBuffers:
    """Economy preset: separate copies for each observed step and the one before it.

    Row i holds, interleaved: the step's gradient, the previous step's, the weights
    before and after the step, and a scratch row (see `ChainBuffers`).  The previous
    step's gradient is first kept in a row of its own: that step may fall in the chunk
    before (a chunk may end between the two steps), so it is only moved into place
    when its observed step is recorded."""

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.rows = torch.zeros(chunk, 5, n, device=device)  # zeros: finite scratch
        self.bufs = self.rows.unbind(1)[:4]  # grads, previous grads, weights before, after
        self.views = [[None] * chunk for _ in self.bufs]  # made when first used
        self.previous = torch.zeros(n, device=device)  # g_{t-1}, until step t is recorded
        self.previous_views = probes.shaped_views(self.previous, params)
        self.have_prev = False

    def _views(self, kind: int, slot: int) -> list[torch.Tensor]:
        """The shaped views of one row (most rows of an economy chunk are never used)."""
        views = self.views[kind][slot]
        if views is None:
            views = self.views[kind][slot] = probes.shaped_views(self.bufs[kind][slot],
                                                                 self.params)
        return views

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            _copy(self._views(2, slot), self.params)
        _copy(self._views(0, slot), grads)

    def keep_previous(self, grads: list[torch.Tensor]) -> None:
        _copy(self.previous_views, grads)
        self.have_prev = True

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        _copy(self._views(3, slot), self.params)
        if not stepped:
            _copy(self._views(0, slot), grads())
            self.bufs[2][slot] = self.bufs[3][slot]
        self.bufs[1][slot] = self.previous if self.have_prev else _NAN  # NaN: none to compare
        self.have_prev = False

    def columns(self, k: int, close: bool, sizes, per_layer: bool) -> torch.Tensor:
        return probes.sampled_columns(self.rows[:k], sizes, per_layer)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.bufs[0][slot]

    def carry(self, k: int, moving: int | None) -> None:
        if moving is not None:
            self.rows[0] = self.rows[moving]


def _copy(rows: list[torch.Tensor], tensors: list[torch.Tensor]) -> None:
    """`torch._foreach_copy_` with autograd off (the weights require grad), switched
    directly: `torch.no_grad()` costs a microsecond more, every step."""
    enabled = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)
    try:
        torch._foreach_copy_(rows, tensors)
    finally:
        torch._C._set_grad_enabled(enabled)


def _device(params: list[torch.Tensor]) -> torch.device:
    """Keep the copies where the parameters are (one sync per chunk, not per step);
    a model spread over several devices is gathered on the CPU."""
    devices = {p.device for p in params}
    return devices.pop() if len(devices) == 1 else torch.device("cpu")
