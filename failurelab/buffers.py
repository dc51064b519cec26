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

    Row i of `weights` holds the weights just before step i, so row i + 1 doubles as
    "after step i" (anything that changes the weights between two steps counts as part
    of the update).  Row 0 of `grads` holds the last gradient of the previous chunk, so
    each step's previous gradient is simply the row above its own.
    """

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.grads = torch.full((chunk + 1, n), _NAN, device=device)
        self.weights = torch.empty(chunk + 1, n, device=device)
        self.scratch = torch.empty(chunk, n, device=device)  # updates, then signs
        self.grad_rows = [probes.shaped_views(r, params) for r in self.grads]
        self.weight_rows = [probes.shaped_views(r, params) for r in self.weights]

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            torch._foreach_copy_(self.weight_rows[slot], self.params)
        torch._foreach_copy_(self.grad_rows[slot + 1], grads)

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        if not stepped:  # no optimizer step (AMP skipped it): weights unchanged
            self.before_step(slot, True, grads())

    def columns(self, k: int, close: bool, sizes) -> torch.Tensor:
        if close:  # the weights after the chunk's last step are the current ones
            torch._foreach_copy_(self.weight_rows[k], self.params)
        return probes.chained_columns(self.grads[:k + 1], self.weights[:k + 1], sizes,
                                      self.scratch)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.grads[slot + 1]

    def carry(self, k: int, moving: int | None) -> None:
        """After computing k rows: keep the last gradient; optionally move a slot to 0."""
        self.grads[0] = self.grads[k]
        if moving is not None:
            self.grads[1], self.weights[0] = self.grads[moving + 1], self.weights[moving]


class SampleBuffers:
    """Economy preset: separate copies for each observed step and the one before it."""

    def __init__(self, params: list[torch.Tensor], chunk: int):
        n = sum(p.numel() for p in params)
        self.params = params
        self.device = device = _device(params)
        self.bufs = [torch.empty(chunk, n, device=device) for _ in range(4)]  # grads, prev,
        #                                                           weights before and after
        self.rows = [[probes.shaped_views(r, params) for r in b] for b in self.bufs]
        self.have_prev = False

    def before_step(self, slot: int, first: bool, grads: list[torch.Tensor]) -> None:
        if first:
            torch._foreach_copy_(self.rows[2][slot], self.params)
        torch._foreach_copy_(self.rows[0][slot], grads)

    def keep_previous(self, slot: int, grads: list[torch.Tensor]) -> None:
        torch._foreach_copy_(self.rows[1][slot], grads)
        self.have_prev = True

    def at_record(self, slot: int, stepped: bool, grads) -> None:
        """`grads()` gives the current gradients; asked for only when no step ran."""
        torch._foreach_copy_(self.rows[3][slot], self.params)
        if not stepped:
            torch._foreach_copy_(self.rows[0][slot], grads())
            self.bufs[2][slot] = self.bufs[3][slot]
        if not self.have_prev:
            self.bufs[1][slot] = _NAN  # no previous step to compare with
        self.have_prev = False

    def columns(self, k: int, close: bool, sizes) -> torch.Tensor:
        return probes.sampled_columns(*(b[:k] for b in self.bufs), sizes)

    def step_grads(self, slot: int) -> torch.Tensor:
        return self.bufs[0][slot]

    def carry(self, k: int, moving: int | None) -> None:
        if moving is not None:
            for b in self.bufs:
                b[0] = b[moving]


def _device(params: list[torch.Tensor]) -> torch.device:
    """Keep the copies where the parameters are (one sync per chunk, not per step);
    a model spread over several devices is gathered on the CPU."""
    devices = {p.device for p in params}
    return devices.pop() if len(devices) == 1 else torch.device("cpu")
