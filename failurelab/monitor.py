"""`Monitor`: the one telemetry recorder, for the lab's loop and for yours.

It needs nothing from the training loop beyond `record(loss)` after each optimizer
step.  Everything else comes from hooks it adds, and removes on `close()`:

* an optimizer *step pre-hook* copies the weights and the gradients exactly as the
  optimizer is about to use them: after a GradScaler unscaled them, after clipping,
  accumulated when `zero_grad` was forgotten, and before a loop that zeroes them right
  after `step()` can erase them;
* a forward hook on the model sees the input batch and the output, and a hook on the
  output tensor sees the gradient arriving there (float16 flushes tiny values to 0);
* forward hooks on every Sigmoid / Tanh / ReLU module see its output.

Only forward passes that build a graph are observed, so an evaluation under
`torch.no_grad()` between steps does not overwrite the training batch's statistics.

`record` only keeps cheap copies; the statistics of up to `CHUNK_STEPS` steps are then
computed together (see `probes`), which keeps the overhead low on tiny models.
Reading `history` computes whatever is pending, so it is always complete.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from . import probes
from .buffers import ChainBuffers, SampleBuffers

# full: every column every step.  economy: the global columns on every
# ECONOMY_INTERVAL-th step (the loss on every step) and no forward hooks, for long runs.
PRESETS = ("full", "economy")
ECONOMY_INTERVAL = 10
CHUNK_STEPS = 32  # steps whose statistics are computed together
CHUNK_BYTES = 64 * 2**20  # ...unless their pending copies would exceed this
_ACTIVATIONS = {nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.ReLU: "relu"}
GLOBAL_COLUMNS = ("step", "loss", "grad_norm", "weight_norm", "update_norm", "update_ratio",
                  "grad_cosine", "nonfinite", "zero_grad_frac", "lr", "param_lowp_frac",
                  "unoptimized_params", "step_skipped")
INPUT_COLUMNS = ("input_absmax", "input_std_ratio", "input_nonfinite", "batch_size",
                 "output_std", "output_grad_zero_frac", "output_grad_min", "output_prob_frac",
                 "output_logprob_frac", "output_nonfinite")
_LOWP = (torch.float16, torch.bfloat16)
_NAN = float("nan")


@dataclass(slots=True)
class _Step:
    """What one `record` call keeps until its chunk is computed."""

    loss: float
    slot: int | None  # its row in the copy buffers; None when economy skips the step
    inputs: torch.Tensor | None
    output: torch.Tensor | None  # the model's output (e.g. logits)
    output_grad: torch.Tensor | None  # gradient of the loss w.r.t. that output
    outputs: dict[str, torch.Tensor]
    extra: dict[str, float]
    shapes: tuple | None  # steps stack together only if their forward tensors match
    state: tuple  # lr, param_lowp_frac, unoptimized_params, step_skipped


class Monitor:
    """Record the course's minimal observation set for any model and optimizer.

    >>> mon = Monitor(model, optimizer)
    >>> ...; optimizer.step(); mon.record(loss)
    >>> mon.history  # one row per recorded step
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 preset: str = "full"):
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, "
                            f"got {type(optimizer).__name__}")
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters to monitor")
        self.preset = preset
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        numels = [p.numel() for p in self._params]
        self._sizes = numels if preset == "full" else [sum(numels)]  # economy: one segment
        self._activations: dict[str, str] = {}
        self._optimizer = optimizer
        optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
        self._unoptimized = [p for p in self._params if id(p) not in optimized]
        self._lr = _NAN
        self._handles = [optimizer.register_step_pre_hook(self._before_step)]
        if preset == "full":
            self._hook_forward(model)
        self._columns = list(GLOBAL_COLUMNS) + self._layer_columns()
        self._column_index = {c: i for i, c in enumerate(self._columns)}
        self._rows: list[list[float]] = []
        self._pending: list[_Step] = []
        self._frame: pd.DataFrame | None = None
        self._allocate(sum(numels))
        self._stepped = False  # has the optimizer stepped since the last record?
        self._count = 0  # steps recorded so far
        self._interval = 1 if preset == "full" else ECONOMY_INTERVAL  # observe every n-th
        self._input: torch.Tensor | None = None
        self._output: torch.Tensor | None = None
        self._output_grad: torch.Tensor | None = None
        self._outputs: dict[str, torch.Tensor] = {}

    def _hook_forward(self, model: nn.Module) -> None:
        self._handles.append(model.register_forward_hook(self._see_batch, with_kwargs=True))
        for name, module in model.named_modules():
            kind = _ACTIVATIONS.get(type(module))
            if kind:
                self._activations[name] = kind
                self._handles.append(module.register_forward_hook(self._saver(name)))

    def _allocate(self, n: int) -> None:
        """Flat float32 copy buffers, one row per pending step, each filled in one call."""
        self._chunk = max(1, min(CHUNK_STEPS, CHUNK_BYTES // (4 * 4 * n)))
        self._filled = 0  # buffer rows used by pending steps
        kind = ChainBuffers if self.preset == "full" else SampleBuffers
        self._buffers = kind(self._params, self._chunk)

    # --- hooks ----------------------------------------------------------------------
    def _before_step(self, optimizer, args, kwargs) -> None:
        phase = self._count % self._interval  # 0: this step is observed
        if phase == 0:  # several steps per record: measure them together
            with torch.no_grad():
                self._buffers.before_step(self._filled, not self._stepped, self._current_grads())
        elif phase == self._interval - 1:  # economy: keep g_{t-1} for step t's cosine
            with torch.no_grad():
                self._buffers.keep_previous(self._filled, self._current_grads())
        self._lr = _first_lr(optimizer)
        self._stepped = True

    def _see_batch(self, module, args, kwargs, output) -> None:
        """The model's input batch and output (one hook for both: each hook costs µs)."""
        if not torch.is_grad_enabled():
            return
        if args and isinstance(args[0], torch.Tensor):
            self._input = args[0]
        else:
            self._input = next((a for a in (*args, *kwargs.values())
                                if isinstance(a, torch.Tensor)), None)
        if isinstance(output, torch.Tensor):
            self._output = output.detach()
            if output.requires_grad:
                output.register_hook(self._keep_output_grad)

    def _keep_output_grad(self, grad: torch.Tensor) -> None:
        self._output_grad = grad

    def _saver(self, name: str):
        def save(module, args, output) -> None:
            if torch.is_grad_enabled() and isinstance(output, torch.Tensor):
                self._outputs[name] = output
        return save

    def _current_grads(self) -> list[torch.Tensor]:
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]

    # --- recording ------------------------------------------------------------------
    def record(self, loss: Any, **extra: float) -> None:
        """Record one step.  Call once per step, after `optimizer.step()`.

        `loss` may be a tensor or a number; `extra` adds columns of your own
        (e.g. `mon.record(loss, lr=scheduler.get_last_lr()[0])`).
        """
        loss_value = _as_float(loss)
        slot = None
        if self._count % self._interval == 0:
            slot = self._filled
            with torch.no_grad():
                self._buffers.at_record(slot, self._stepped, self._current_grads)
        state = (self._lr if self._stepped else _first_lr(self._optimizer), self._lowp_share(),
                 sum(p.grad is not None for p in self._unoptimized), 0 if self._stepped else 1)
        self._stepped = False
        inputs, self._input = self._input, None
        output, self._output = self._output, None
        output_grad, self._output_grad = self._output_grad, None
        outputs, self._outputs = self._outputs, {}
        shapes = None
        if self.preset == "full":
            # Copy the batch: a loop may refill one input buffer in place every step.
            inputs = inputs.detach().clone() if inputs is not None else None
            shapes = (_shape(inputs), _shape(output), _shape(output_grad),
                      *[out.shape for out in outputs.values()])
        step = _Step(loss_value, slot, inputs, output, output_grad, outputs, extra, shapes,
                     state)
        if self._pending and shapes != self._pending[0].shapes:
            self._flush(moving=slot)  # computes the other pending steps; this one moves to 0
            step.slot = 0
        if not self._rows and not self._pending:
            self._chunk = min(self._chunk, _chunk_length(step, sum(self._sizes)))
        self._pending.append(step)
        self._count += 1
        self._filled += step.slot is not None
        if self._filled >= self._chunk:
            self._flush()

    def _flush(self, moving: int | None = None) -> None:
        """Compute the statistics of every pending step and append their rows.

        `moving`: the buffer slot of a step that is not part of this chunk (its shapes
        differ); it is kept and moved to slot 0."""
        steps, self._pending = self._pending, []
        k, self._filled = self._filled, 0
        values, broken = self._quantities([s for s in steps if s.slot is not None], k,
                                          moving) if k else ([], {})
        for step in steps:
            loss_nonfinite = 0 if math.isfinite(step.loss) else 1
            skipped = step.state[-1]
            if step.slot is None:  # economy skipped this step: only the loss was seen
                row = [len(self._rows), step.loss, *[_NAN] * 5, loss_nonfinite, _NAN,
                       *step.state]
            else:
                v = values[step.slot]
                if skipped:  # no optimizer step: no update happened (NaN, not a tiny one)
                    v[2] = v[3] = _NAN
                # A NaN/Inf gradient: count its broken entries and its exact zeros directly
                # (the fast float path cannot tell NaN from 0).  A skipped step's broken
                # gradients are why it was skipped (GradScaler), not a fault.
                bad, zero_share = broken.get(step.slot, (0, v[5]))
                row = [len(self._rows), step.loss, *v[:5],
                       loss_nonfinite + (0 if skipped else bad), zero_share, *step.state]
                if self.preset == "full":  # per-parameter columns, then forward statistics
                    layers = v[6:]
                    if skipped:
                        n = len(self._names)
                        layers[2 * n:3 * n] = [_NAN] * n
                    row = self._forward_row(step, row + layers)
            self._rows.append(self._with_extra(row, step.extra))
        self._frame = None

    def _quantities(self, steps: list[_Step], k: int, moving: int | None):
        """Raw per-step values (one list per observed pending step), in column order, and
        {slot: (non-finite entries, share of zeros)} for the steps whose gradient norm
        came out non-finite."""
        with torch.no_grad():
            parts = [self._buffers.columns(k, moving is None, self._sizes)]
            if self.preset == "full":
                parts += self._forward_quantities(steps)
            values = torch.cat(parts, dim=1).tolist()
            broken = {slot: probes.broken_entries(self._buffers.step_grads(slot))
                      for slot, v in enumerate(values) if not math.isfinite(v[0])}
            self._buffers.carry(k, moving)
        return values, broken

    def _forward_quantities(self, steps: list[_Step]) -> list[torch.Tensor]:
        nan = torch.full((len(steps), 3), _NAN, device=self._buffers.device)
        inputs = [s.inputs for s in steps]
        parts = [probes.input_quantities(torch.stack(inputs)) if inputs[0] is not None else nan]
        outputs = [s.output for s in steps]
        parts.append(probes.sums(torch.stack(outputs)) if outputs[0] is not None
                     else nan[:, :2])
        grads = [s.output_grad for s in steps]
        parts.append(probes.zeros_and_floor(torch.stack(grads)) if grads[0] is not None
                     else nan[:, :2])
        parts.append(probes.distribution_rows(torch.stack(outputs)) if outputs[0] is not None
                     else nan[:, :2])
        for name, kind in self._activations.items():
            outs = [s.outputs.get(name) for s in steps]
            parts.append(probes.activation_quantities(kind, torch.stack(outs))
                         if outs[0] is not None else nan)
        return parts

    def _forward_row(self, step: _Step, row: list[float]) -> list[float]:
        """Turn the raw forward sums at the end of `row` into the forward columns."""
        split = len(GLOBAL_COLUMNS) + 3 * len(self._names)
        row, forward = row[:split], row[split:]
        absmax, low, high = forward[:3]  # low, high: smallest and largest feature variance
        out_sum, out_sq, output_zero, output_min, prob, logprob = forward[3:9]
        x = step.inputs
        ratio, nonfinite = (math.sqrt(high / low) if low > 0 else _NAN), 0
        if x is None:
            nonfinite = _NAN
        elif x.is_floating_point() and not (math.isfinite(absmax) and math.isfinite(ratio)):
            ratio, nonfinite = probes.std_ratio(x), probes.nonfinite_count(x)
        batch = x.shape[0] if x is not None and x.dim() else _NAN
        n_out = step.output.numel() if step.output is not None else 0
        out_bad = _NAN if step.output is None else 0
        if n_out and not math.isfinite(out_sq):  # overflowed or non-finite: count exactly
            out_bad = probes.nonfinite_count(step.output)
        row += [absmax, ratio, nonfinite, batch, _std(out_sum, out_sq, n_out), output_zero,
                output_min, prob, logprob, out_bad]
        for i, (name, kind) in enumerate(self._activations.items()):
            total, total_sq, failed = forward[9 + 3 * i:12 + 3 * i]
            out = step.outputs.get(name)
            if out is None:
                row += [_NAN, _NAN, _NAN]
                continue
            n = out.numel()
            failed = failed if math.isfinite(total) else _NAN  # NaN activations: unknown
            row += [total / n, _std(total, total_sq, n),
                    failed / probes.activation_units(kind, out.shape)]
        return row

    def _with_extra(self, row: list[float], extra: dict[str, float]) -> list[float]:
        for key, value in extra.items():
            index = self._column_index.get(key)
            if index is None:
                index = self._column_index[key] = len(self._columns)
                self._columns.append(key)
            row.extend([_NAN] * (index + 1 - len(row)))
            row[index] = _NAN if value is None else float(value)
        return row

    def _lowp_share(self) -> float:
        """Share of trainable parameter entries stored in float16/bfloat16 (the dtypes
        can change after the monitor was attached, e.g. by `model.half()`)."""
        if self._count % CHUNK_STEPS and self._count:
            return self._lowp
        low = sum(p.numel() for p in self._params if p.dtype in _LOWP)
        self._lowp = low / sum(p.numel() for p in self._params)
        return self._lowp

    def _layer_columns(self) -> list[str]:
        if self.preset != "full":
            return []
        cols = [f"{kind}/{n}" for kind in ("grad_norm", "weight_norm", "update_ratio")
                for n in self._names]
        cols += list(INPUT_COLUMNS)
        for name, kind in self._activations.items():
            last = "dead_frac" if kind == "relu" else "saturated_frac"
            cols += [f"act_mean/{name}", f"act_std/{name}", f"{last}/{name}"]
        return cols

    # --- results and lifecycle -------------------------------------------------------
    @property
    def history(self) -> pd.DataFrame:
        """One row per recorded step: the columns of the API contract plus your extras."""
        self._flush()
        if self._frame is None:
            width = len(self._columns)
            rows = [r + [_NAN] * (width - len(r)) for r in self._rows]
            frame = pd.DataFrame(rows, columns=self._columns)
            self._frame = frame.astype({"step": "int64"})
        return self._frame.copy()

    def alerts(self, window: int = 20) -> list:
        """The course's warning signs in the last `window` steps (see `fl.alerts`)."""
        from .alerts import alerts

        return alerts(self.history, window)

    def to_csv(self, path) -> None:
        """Save the history; `fl.read_history(path)` reads it back exactly."""
        from .runs import save_history

        save_history(self.history, path)

    def close(self) -> None:
        """Remove every hook this monitor added.  Safe to call more than once."""
        self._flush()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._input = None
        self._outputs = {}

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _chunk_length(step: _Step, n_params: int) -> int:
    """How many steps to hold before computing: fewer when the model or batch is large."""
    held = 4 * n_params * 4
    held += sum(t.numel() * t.element_size()
                for t in (step.inputs, step.output, step.output_grad, *step.outputs.values())
                if t is not None)
    return max(1, min(CHUNK_STEPS, CHUNK_BYTES // max(held, 1)))


def _first_lr(optimizer: torch.optim.Optimizer) -> float:
    """The first param group's learning rate (a tensor for `capturable` optimizers)."""
    lr = optimizer.param_groups[0].get("lr", _NAN) if optimizer.param_groups else _NAN
    try:
        return float(lr)
    except (TypeError, ValueError):
        return _NAN


def _shape(t: torch.Tensor | None):
    return None if t is None else (t.shape, t.dtype)


def _std(total: float, total_sq: float, n: int) -> float:
    """Population std from a sum and a sum of squares."""
    if not n:
        return _NAN
    mean = total / n
    return math.sqrt(max(total_sq / n - mean * mean, 0.0))


def _norm(parts: list[float]) -> float:
    return math.sqrt(sum(x * x for x in parts))


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else _NAN


def _clip(cosine: float) -> float:
    return max(-1.0, min(1.0, cosine)) if math.isfinite(cosine) else cosine


def _as_float(loss: Any) -> float:
    if isinstance(loss, torch.Tensor):
        if loss.numel() != 1:
            raise ValueError(f"record(loss) needs a scalar loss, got shape {tuple(loss.shape)}")
        return float(loss.detach())
    try:
        return float(loss)
    except (TypeError, ValueError):
        raise TypeError(f"record(loss) needs a tensor or a number, got {type(loss).__name__}") \
            from None
