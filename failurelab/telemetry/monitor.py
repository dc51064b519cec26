"""`Monitor`: the one telemetry recorder, for the lab's loop and for yours.

It needs nothing from the training loop beyond `record(loss)` after each optimizer
step.  Everything else comes from hooks it adds, and removes on `close()`:

* an optimizer *step pre-hook* copies the weights and the gradients exactly as the
  optimizer is about to use them: after a GradScaler unscaled them, after clipping,
  accumulated when `zero_grad` was forgotten, and before a loop that zeroes them right
  after `step()` can erase them; it also reads whether the model is in training mode
  (`train_mode`: 0 after a validation that never called `model.train()` again);
* a forward pre-hook on the model sees the input batch, a forward hook the output,
  and a hook on the output tensor sees the gradient arriving there (float16 flushes
  tiny values to 0);
* forward hooks on every Sigmoid / Tanh / ReLU module see its output;
* a hook on the last trainable parameter sees, in each backward pass, whether `.grad`
  was emptied since the last step (`grad_carried`: 1 when it never was).

The forward hooks (all but the model's forward pre-hook, which also sees evaluations)
are attached only for the steps whose forward tensors are read: every `forward_every`-th
step under the full preset (`FORWARD_EVERY`; `fl.run` reads every step), and the
`forward_observed` column says which rows those are.

Only forward passes that build a graph are observed, so an evaluation under
`torch.no_grad()` between steps does not overwrite the training batch's statistics;
one column compares exactly those evaluation inputs with the training inputs
(`eval_input_shift`, see `shift`).

Each column group is an `instruments.Instrument`.  `record` only keeps cheap copies;
the statistics of up to `CHUNK_STEPS` observed steps are computed together (economy
observes one step in ten, so its chunks span ten times as many records; on the other
nine its hooks return at once and a row keeps only what `record` knows: the loss, the
learning rate, whether a step ran, the extras).  Under full a chunk also holds at least
`FORWARD_CHUNK` steps of the forward schedule where memory allows (256 steps of a tiny
model): when its statistics are computed changes, never what a row holds.  Nothing the
monitor does may break the loop it watches: an instrument that fails is switched off
with one warning (`Monitor.stopped` says which, when and why) and the others go on.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from . import distributed, private
from . import instruments as ins
from .misuse import Misuse, MonitorWarning, scalar_loss, warn  # noqa: F401 - public name
from .shift import EvalInputs
from .table import Table


@dataclass(frozen=True)
class Preset:
    """A set of column groups (see evidence.columns) and how often the gradient columns
    are observed (every `interval`-th step)."""

    groups: tuple[str, ...]
    interval: int


PRESETS = {"full": Preset(("parameters", "layers", "inputs", "outputs", "activations"), 1),
           "economy": Preset(("parameters",), 10)}
ECONOMY_INTERVAL = PRESETS["economy"].interval
# Full reads the forward tensors (inputs, output and its gradient, activations) of one
# step in FORWARD_EVERY, step 0 first, its hooks attached only for those steps: capturing
# them every step cost a tiny MLP's loop 1.4x with no statistics at all, while the
# diagnosis reads them as medians, shares and a start (`evidence.quantities`), which one
# step in 8 of a run of 40 steps or more gives.  `forward_every=1` reads every step (the lab).
FORWARD_EVERY = 8
# A model with more trainable entries than this (1 MB of float32 weights) has its
# gradients and weights read on the forward schedule too (with the gradient of the step
# before, for the cosine).  Reading them every step copies and passes over them some 15
# times a step: 42 MB of a 5 M-parameter transformer's weights and gradients copied every
# step cost 1.25x, and the 0.5 M-parameter CNN of benchmarks/overhead.py spent 2.7 ms of
# its 100 ms step there (0.7 ms on the schedule), most of a 5% budget.  Below it, a
# step's copies cost microseconds.
PARAMETERS_EVERY_STEP = 2**18
CHUNK_STEPS = 64  # steps whose statistics are computed together
# ...and at least this many of the forward schedule's steps: their statistics cost some
# fifty torch calls per chunk whatever its length, which, with 8 read steps in a chunk of
# 64, cost the tiny MLP's loop under full 20 µs a step (5 at 32 read steps in 256).
# At most 4 * CHUNK_STEPS steps, and memory under CHUNK_BYTES; economy, large models and
# `forward_every=1` (the lab) keep chunks of CHUNK_STEPS.
FORWARD_CHUNK = 32
CHUNK_BYTES = 64 * 2**20  # ...unless their pending copies would exceed this
GLOBAL_COLUMNS = ("step", "loss", "grad_norm", "weight_norm", "update_norm", "update_ratio",
                  "grad_cosine", "nonfinite", "zero_grad_frac", "grad_carried", "lr",
                  "param_lowp_frac", "unoptimized_params", "step_skipped", "dropout_rate",
                  "loss_scaled", "batchnorm_train", "frozen_frac", "train_mode",
                  "forward_observed")
# What `record` itself measures, in the order of `_Step.state`.
STATE_COLUMNS = ("lr", "param_lowp_frac", "unoptimized_params", "step_skipped",
                 "dropout_rate", "loss_scaled", "batchnorm_train", "frozen_frac", "train_mode",
                 "forward_observed")
INPUT_COLUMNS = ins.Inputs.columns + ins.Outputs.columns
_LOWP = (torch.float16, torch.bfloat16)
DROPOUTS = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
             torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)
_GATHERED = ("loss", "nonfinite", "batch_size", "input_absmax", "input_nonfinite",
             "output_nonfinite", "output_grad_min", "output_prob_frac", "output_logprob_frac",
             "output_grad_zero_frac", "output_zero_frac")
_NAN = float("nan")
_TENSOR = torch.Tensor


@dataclass(slots=True)
class _Step:
    """What one `record` call keeps until its chunk is computed."""

    loss: float | torch.Tensor  # a tensor until its chunk is read (see `scalar_loss`)
    payloads: dict  # instrument -> its payload for this step
    state: tuple  # the values of STATE_COLUMNS
    extra: dict[str, float]
    shapes: tuple  # per forward instrument: steps whose shapes match stack together


class Monitor:
    """Record the course's minimal observation set for any model and optimizer.

    >>> mon = Monitor(model, optimizer)
    >>> ...; optimizer.step(); mon.record(loss)
    >>> mon.history  # one row per recorded step

    `max_rows` bounds a long run's history: older steps are thinned (see table.py and
    docs/engineers.md, "Long runs"); None keeps every step.

    `forward_every`: read the forward tensors (inputs, output, activations) of one step
    in this many, from step 0 (default `FORWARD_EVERY`; 1: every step).  A model of more
    than `PARAMETERS_EVERY_STEP` trainable entries also reads its gradients and weights
    on those steps only.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 scaler: torch.amp.GradScaler | None = None,
                 preset: str = "full", other_ranks: str = "local",
                 hook_optimizer: bool = True, forward_every: int | None = None,
                 max_rows: int | None = None):
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
        if other_ranks not in ("local", "none"):
            raise ValueError(f"other_ranks must be 'local' or 'none', got {other_ranks!r}")
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, "
                            f"got {type(optimizer).__name__}")
        if forward_every is not None and (isinstance(forward_every, bool)
                                          or not isinstance(forward_every, int)
                                          or forward_every < 1):
            raise ValueError(f"forward_every must be a whole number >= 1 (1: every step), "
                             f"got {forward_every!r}")
        if scaler is not None and not isinstance(scaler, torch.amp.GradScaler):
            raise TypeError(f"scaler must be a torch.amp.GradScaler or None, "
                            f"got {type(scaler).__name__}")
        if isinstance(model, torch.jit.ScriptModule) and preset != "economy":
            raise TypeError("a TorchScript module takes no forward hooks: give the Monitor the "
                            "nn.Module before torch.jit.script (the scripted one shares its "
                            "parameters), or use preset='economy', which needs none")
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters to monitor")
        total = sum(p.numel() for p in model.parameters())
        # weights frozen (requires_grad=False) when the Monitor was made: fine-tuning a head
        # is deliberate, but a stall in such a model may be the frozen body's alone
        self._frozen = 1 - sum(p.numel() for _, p in named) / total
        self.preset = preset
        self._scaler = scaler  # None: found, where possible, in the caller's frames
        groups, self._interval = PRESETS[preset].groups, PRESETS[preset].interval
        self._params = [p for _, p in named]
        # the steps whose forward tensors are read: every `_forward_every`-th, from step 0
        self._forward_every = forward_every or FORWARD_EVERY
        if self._interval == 1 and _numel(self._params) > PARAMETERS_EVERY_STEP:
            self._interval = self._forward_every  # a large model: see PARAMETERS_EVERY_STEP
        self._forward_every = max(self._forward_every, self._interval)
        self._optimizer = optimizer
        optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
        self._unoptimized = [p for p in self._params if id(p) not in optimized]
        self._unoptimized_marks: list[float] | None = None  # their sums at the last look
        self._optimized_elsewhere: set[int] = set()  # indices into _unoptimized that moved
        self._unoptimized_last = 0
        self._dropouts = [m for m in model.modules() if isinstance(m, DROPOUTS)]
        self._norms = [m for m in model.modules() if private.is_batchnorm(m)]
        self._model = model
        # NaN, not 1, for a model whose forward is the same in either mode: no verdict
        self._moded = any(mode_matters(m) for m in model.modules())
        self._mode = _NAN  # 1: the model was in training mode when the optimizer stepped
        forward = FORWARD_CHUNK * self._forward_every // self._interval if len(groups) > 1 else 0
        self._chunk_steps = min(4 * CHUNK_STEPS, max(CHUNK_STEPS, forward))
        self._chunk = max(1, min(self._chunk_steps, CHUNK_BYTES // (16 * _numel(self._params))))
        self._parameters = ins.Parameters(self._params, [n for n, _ in named], self._chunk,
                                          "layers" in groups, self._interval)
        self._handles = ([optimizer.register_step_pre_hook(_Hook(self._before_step))]
                         if hook_optimizer else [])
        # instruments fed by hooks in the forward or backward pass, one payload per step
        self._carried = ins.Carried(self._params[-1])
        self._hooked: list[ins.Instrument] = [self._carried]
        self._watch = self._params[-1].register_hook(self._saw_backward)  # see `_arm_watch`
        self._inputs = None
        # the forward hooks of the schedule's steps: (register, hook), attached by `_arm`
        self._forward_hooks: list[tuple] = []
        self._forward_handles: list = []
        self._finders: dict = {}  # layer -> its hook, until the first weighted layer is known
        if "inputs" in groups:
            self._inputs = ins.Inputs()
            self._outputs = ins.Outputs(self._stop, (self._params[0], self._params[-1]))
            # unlike the other forward instruments it also reads the passes made without
            # a graph (evaluation): `_see_input` hands it every pass
            self._eval_inputs = EvalInputs()
            self._hooked += [self._inputs, self._outputs, self._eval_inputs]
            # always attached: evaluation passes come between any two steps
            self._handles.append(model.register_forward_pre_hook(_Hook(self._see_input),
                                                                 with_kwargs=True))
            self._forward_hooks.append((model.register_forward_hook, _Hook(self._see_output)))
            self._hook_first_layer(model)
        if "activations" in groups:
            self._hook_activations(model)
        self._all = [self._parameters, *self._hooked]
        # read only on the schedule's steps (`_take`); the rest every step
        self._scheduled = {i for i in self._hooked
                           if i is not self._carried and i is not getattr(self, "_eval_inputs", None)}
        self._forward_on = False  # are the forward hooks attached now?
        # the training inputs of a step the schedule does not read (references, not
        # copies): read after all when the step's loss is not finite (`_read_unread_inputs`)
        self._unread_inputs: list = []
        self._stepping = [i for i in self._hooked if hasattr(i, "at_step")]  # read at steps
        self._rank, self._world = distributed.world()
        self._other_ranks = other_ranks
        for instrument in self._hooked:
            instrument.partials = self._world > 1
        self._table = Table(list(GLOBAL_COLUMNS) + [c for i in self._all for c in i.columns
                                                    if c not in GLOBAL_COLUMNS and c[0] != "_"],
                            STATE_COLUMNS, max_rows)  # max_rows: see table, "Long runs"
        self._pending: list[_Step] = []
        # the forward shapes of the last row the long path built (None: none yet): an
        # unobserved row stacks with them, also when it is the first of a new chunk
        self._shapes: tuple | None = None
        self._losses_later = False  # does a pending step hold its loss as a tensor?
        self._sized_for = None  # the forward shapes the chunk length was last checked for
        self._stepped = False  # has the optimizer stepped since the last record?
        self._paused = False  # in a closure's re-evaluation: not observed (`_closure_step`)
        self._forward_seen = False  # a training forward since the last optimizer step?
        self._recomputing = False  # the model's forward is running again inside backward
        self._count = 0  # steps recorded so far
        self._lr = _NAN
        self._lowp = 0.0
        self._scaled = 0.0  # 1: the step was taken by an enabled GradScaler (NaN: no step)
        self._scaler_read = False  # has a step been taken (and the frames read) yet?
        self._off: set = set()  # instruments switched off after a failure
        self.stopped: dict[str, dict] = {}  # instrument -> step, reason, columns
        self._misuse = Misuse(warn)
        # extras may not overwrite what the hooks measure; `lr` may be given (a rate the
        # first param group does not hold), and wins over the one read at the step
        self._measured = frozenset(self._table.columns) - {"lr"}
        self._closed = False
        self._parameters_told = False  # warned that the trainable parameters changed
        earlier = _ATTACHED.get(model)
        if earlier is not None and earlier() is not None and not earlier()._closed:
            warn("this model already has a Monitor that was not closed (a re-run cell?): its "
                 "hooks still run and cost time; close() it, or use `with Monitor(...)`")
        _ATTACHED[model] = weakref.ref(self)
        self._quiet = False  # is the next step one economy does not observe (`_counted`)?
        self._quick = False  # ...and may its record take the short path (`record`)?
        self._quiet_until = 0  # the count at which the current run of such steps ends
        # the short path's row: no forward instrument, no parameter the optimizer lacks
        self._quickable = self._inputs is None and not self._unoptimized
        self._arm(True)  # step 0 is read

    def _arm(self, on: bool) -> None:
        """Attach the forward hooks for a step the schedule reads; remove them after it.
        An empty hook costs as much as a cheap one: a module with any hook leaves
        PyTorch's fast call path, and a tiny model's step has few microseconds to spare."""
        if on == self._forward_on:
            return
        self._forward_on = on
        if on:
            self._forward_handles = [register(hook) for register, hook in self._forward_hooks]
        else:
            for handle in self._forward_handles:
                handle.remove()
            self._forward_handles = []

    def _arm_watch(self, on: bool) -> None:
        """Attach the hook of `grad_carried` for a step whose gradients are read (every
        step, unless economy or a large model reads one in `_interval`); remove it
        after.  Attached for good instead, its calls on the nine steps economy does not
        read cost the tiny MLP's loop more (about 3.7 µs each, in the loop) than
        registering and removing it once (about 17 µs)."""
        if on == (self._watch is not None):
            return
        if on:
            self._watch = self._carried.param.register_hook(self._saw_backward)
        else:
            self._watch.remove()
            self._watch = None

    def _hook_activations(self, model: nn.Module) -> None:
        """Each Sigmoid/Tanh/ReLU module's output; in a model with none (its activations
        written as functions), the inputs of its Linear/Conv layers instead."""
        for name, module in model.named_modules():
            kind = ins.activation_kind(module)
            if kind:
                instrument = ins.Activations(name, kind)
                self._hooked.append(instrument)
                self._forward_hooks.append((module.register_forward_hook,
                                            _Hook(self._saver(instrument))))
        if any(isinstance(i, ins.Activations) for i in self._hooked):
            return
        self._layers_run = 0  # weight layers run in this forward pass so far
        self._forward_hooks.append((model.register_forward_pre_hook, _Hook(self._new_forward)))
        for name, module in model.named_modules():
            if isinstance(module, ins.WEIGHT_LAYERS):
                instrument = ins.LayerInput(name)
                self._hooked.append(instrument)
                self._forward_hooks.append((module.register_forward_pre_hook,
                                            _Hook(self._input_saver(instrument))))

    def _hook_first_layer(self, model: nn.Module) -> None:
        """The input of every layer with weights of its own, until a training forward
        shows which of them runs first; from then on only that one's
        (`_keep_first_layer`)."""
        self._first_layer: nn.Module | None = None
        self._first_inputs = ins.FirstLayerInputs()
        self._hooked.append(self._first_inputs)
        self._finders = {module: (module.register_forward_pre_hook,
                                  _Hook(self._first_layer_saver(module)))
                         for module in model.modules() if ins.holds_weights(module)}
        self._forward_hooks += self._finders.values()

    def _first_layer_saver(self, module: nn.Module):
        def save(layer, args) -> None:
            if not args or not self._training_forward():
                return
            if self._first_layer is None:
                self._first_layer = module
            if module is self._first_layer:
                given = self._inputs.given if self._inputs is not None else None
                self._contained(self._first_inputs, (args, {}), given)
        return save

    def _keep_first_layer(self) -> None:
        """Once the first weighted layer is known, the other layers' hooks go (each would
        cost a call in every observed forward)."""
        first = self._finders.get(self._first_layer)
        others = {id(h) for h in self._finders.values() if h is not first}
        if self._forward_on:  # attached now (a schedule that reads every step): detach them
            kept = []
            for hook, handle in zip(self._forward_hooks, self._forward_handles, strict=True):
                if id(hook) in others:
                    handle.remove()
                else:
                    kept.append(handle)
            self._forward_handles = kept
        self._forward_hooks = [h for h in self._forward_hooks if id(h) not in others]
        self._finders = {}

    def _new_forward(self, module, args) -> None:
        self._layers_run = 0

    def _input_saver(self, instrument: ins.LayerInput):
        def save(module, args) -> None:
            self._layers_run += 1
            if self._layers_run > 1 and args:  # the first weight layer reads the data
                self._guarded(instrument, args[0], self._unbatched())
        return save

    # --- hooks: each one guarded, so no failure reaches the user's loop ---------------
    def _before_step(self, optimizer, args, kwargs):
        if self._quiet:  # a step economy does not observe: what its row needs, no more
            self._forward_seen = False
            if self._moded:
                self._mode = 1.0 if self._model.training else 0.0
            groups = optimizer.param_groups  # `first_lr`'s common case, without its call
            lr = groups[0].get("lr") if groups else None
            self._lr = lr if type(lr) is float else ins.first_lr(optimizer)
            self._stepped = True
            return None
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)  # args[0]: optimizer
        if closure is not None:
            return self._closure_step(optimizer, closure, args, kwargs)
        self._observe_step(optimizer)
        return None

    def _closure_step(self, optimizer, closure, args, kwargs) -> tuple[tuple, dict]:
        """`optimizer.step(closure)` computes the gradients inside the step, after this
        hook: they are taken after the closure's first evaluation, at the weights the
        step starts from.  Its later evaluations (LBFGS's line search) are the step's own
        work on the same batch, not more batches: the hooks do not observe them."""
        calls = 0

        def observed(*a, **kw):
            nonlocal calls
            calls += 1
            if calls > 1:
                self._paused = True
                try:
                    return closure(*a, **kw)
                finally:
                    self._paused = False
            loss = closure(*a, **kw)
            self._observe_step(optimizer)
            return loss
        if "closure" in kwargs:
            return args, {**kwargs, "closure": observed}
        return (args[0], observed, *args[2:]), kwargs

    def _observe_step(self, optimizer) -> None:
        self._forward_seen = False
        if self._moded:
            self._mode = 1.0 if self._model.training else 0.0
        if self._unobserved():
            self._lr = ins.first_lr(optimizer)  # economy: nothing else to take here
            self._stepped = True
            return
        for instrument in self._stepping:  # close what the backward passes found
            if instrument not in self._off:
                try:
                    instrument.at_step()
                    if (instrument is self._carried and instrument.stepped is None
                            and not self._count % self._interval):
                        self._watch_another()
                except Exception as exc:  # noqa: BLE001 - containment is the point
                    self._stop(instrument, exc)
        try:
            self._lr = ins.first_lr(optimizer)
            if (self._scaler is not None or not self._count % self._forward_every
                    or not self._scaler_read):
                # without a scaler given, the caller's frames are read on the forward
                # schedule's steps (microseconds each): a loop's steps are all taken by
                # its GradScaler or none are
                self._scaled = 1.0 if ins.scaled_step(self._scaler) else 0.0
                self._scaler_read = True
            phase = self._count % self._interval  # 0: this step is observed
            last = phase == self._interval - 1  # economy: keep g_{t-1} for step t's cosine
            if (phase == 0 or last) and self._parameters not in self._off:
                self._parameters.before_step(phase == 0, last, not self._stepped)
        except Exception as exc:  # noqa: BLE001 - containment is the point
            self._stop(self._parameters, exc)
        self._stepped = True

    def _watch_another(self) -> None:
        """No backward reached the watched parameter before this step (an unused pooler,
        a frozen head, `backward(inputs=...)`): from now on `grad_carried` watches the
        last trainable parameter that holds a gradient."""
        param = next((p for p in reversed(self._params) if p.requires_grad
                      and p.grad is not None and p is not self._carried.param), None)
        if param is not None:
            if self._watch is not None:
                self._watch.remove()
            self._carried.param = param
            self._watch = param.register_hook(self._saw_backward)

    def before_step(self) -> None:
        """Take the gradients and weights now, as the optimizer is about to step.

        For loops whose gradients are computed inside `optimizer.step(closure)` (as
        PyTorch Lightning does), where a step pre-hook would run before the closure:
        create the monitor with `hook_optimizer=False` and call this after the
        closure's backward (Lightning: `on_before_optimizer_step`)."""
        self._observe_step(self._optimizer)

    def _see_input(self, module, args, kwargs) -> None:
        """The model's input batch, before the forward: the activation hooks need to
        know whether it is one unbatched sample.  Evaluation inputs too, for
        `eval_input_shift` only."""
        if self._paused:
            return
        # activation checkpointing around the model recomputes its forward inside the
        # backward pass: the same batch again, not another micro-batch or an evaluation
        training = torch.is_grad_enabled()
        in_backward = training and private.in_backward()
        self._recomputing = in_backward and self._forward_seen
        if self._recomputing:
            return
        if in_backward and self._eval_inputs not in self._off:
            try:
                self._eval_inputs.retract()  # reentrant: its first pass had no graph
            except Exception as exc:  # noqa: BLE001 - never fail inside the user's backward
                self._stop(self._eval_inputs, exc)
        self._forward_seen = training or self._forward_seen
        if training and not self._forward_on:  # a step the schedule does not read
            if not module.training:  # ...but a pass in eval mode is an evaluation
                self._contained(self._eval_inputs, module, (args, kwargs), None)
            else:  # kept by reference: read only if this step's loss is not finite
                self._unread_inputs.append((args, kwargs))
            return
        self._guarded(self._inputs, (args, kwargs))
        # a training pass: the inputs instrument has just copied the batch
        copied = training and self._inputs not in self._off
        self._contained(self._eval_inputs, module, (args, kwargs),
                        self._inputs.current if copied else None)

    def _see_output(self, module, args, output) -> None:
        if self._recomputing:
            self._recomputing = False
            return
        self._guarded(self._outputs, output)

    def _saw_backward(self, grad) -> None:
        """A backward pass reached the watched parameter (its gradient not yet added)."""
        if self._carried not in self._off and not self._count % self._interval and not self._paused:
            try:
                self._carried.see()
            except Exception as exc:  # noqa: BLE001 - never fail inside the user's backward
                self._stop(self._carried, exc)

    def _saver(self, instrument: ins.Activations):
        def save(module, args, output) -> None:
            self._guarded(instrument, output, self._unbatched())
        return save

    def _guarded(self, instrument: ins.Instrument, seen, *more) -> None:
        """Hand a forward tensor to an instrument; only forward passes that build a
        graph count."""
        if self._training_forward():
            self._contained(instrument, seen, *more)

    def _training_forward(self) -> bool:
        """Is the forward now running one the instruments read: it builds a graph, and it
        is neither a closure's re-evaluation nor a checkpoint's recomputation?"""
        return torch.is_grad_enabled() and not self._paused and not self._recomputing

    def _contained(self, instrument: ins.Instrument, *seen) -> None:
        """`instrument.see(*seen)`, unless it was switched off; no failure reaches the
        user's forward."""
        if instrument not in self._off:
            try:
                instrument.see(*seen)
            except Exception as exc:  # noqa: BLE001 - containment is the point
                self._stop(instrument, exc)

    def _unobserved(self) -> bool:
        """Is the step now being taken one that economy does not observe, not even for
        the cosine of the next one?  Its row holds the loss, the learning rate, whether
        a step was taken, the cheap state columns and your extras; the rest is NaN."""
        phase = self._count % self._interval
        return 0 < phase < self._interval - 1

    def _counted(self) -> None:
        """One more step recorded: attach or remove what the next one needs.  Checked
        once here, not in each hook: on a tiny model every line the monitor runs per
        step is a measurable share of the step."""
        self._count += 1
        self._quiet = quiet = self._unobserved()
        # ...and `record` takes its short path until the step before the next observed one
        self._quick = quiet and self._quickable and not self._closed
        if quiet:
            self._quiet_until = self._count - self._count % self._interval + self._interval - 1
        if self._finders and self._first_layer is not None:
            try:
                self._keep_first_layer()
            except Exception as exc:  # noqa: BLE001 - never fail in the user's record
                self._finders = {}
                self._stop(self._first_inputs, exc)
        if self._forward_hooks:
            self._arm(not self._count % self._forward_every)
        self._arm_watch(not self._count % self._interval)

    def _unbatched(self) -> bool:
        """Is the current input one unbatched sample (1-D)?  Its forward tensors are
        then read as a batch of one."""
        x = self._inputs.current if self._inputs is not None else None
        return x is not None and x.dim() <= 1

    def _stop(self, instrument: ins.Instrument, exc: BaseException) -> None:
        """Switch one instrument off: one warning, and the history says so.  Its pending
        chunk is dropped (its state may be half-written), so its columns are NaN from
        the first step not yet computed (`nan_from`) on."""
        if instrument in self._off:
            return
        self._off.add(instrument)
        columns = [c for c in instrument.columns if c[0] != "_"]
        reason = f"{type(exc).__name__}: {exc}"
        nan_from = self._table.count
        self.stopped[instrument.name] = {"step": self._count, "nan_from": nan_from,
                                         "reason": reason, "columns": columns}
        warn(f"the {instrument.name!r} instrument failed at step {self._count} and is "
                   f"switched off ({reason}); its columns are NaN from step {nan_from} on, "
                   f"the rest keeps recording (see Monitor.stopped)")

    # --- recording ------------------------------------------------------------------
    def record(self, loss: Any, **extra: float) -> None:
        """Record one step.  Call once per step, after `optimizer.step()`.

        `loss` may be a tensor or a number; `extra` adds columns of your own, e.g.
        `val_loss`, `val_acc`, `label_purity`, `t_data` (see the README).
        """
        if self._quick and self._stepped and not extra and type(loss) is _TENSOR and loss.is_cpu:
            # a step economy does not observe, its loss a CPU tensor: what
            # `_record_unobserved` keeps, in as few lines as it takes (on a tiny model each
            # attribute and call of a record costs the loop time, mostly in cache misses
            # after the training step: this path runs warm in 2 µs, in the loop in ~10)
            try:
                value = loss.item()
            except RuntimeError:  # not one element: `scalar_loss` below says so
                pass
            else:
                self._stepped = False
                self._misuse.last = weakref.ref(loss)
                pending = self._pending
                pending.append(_Step(value, _NO_PAYLOADS, (self._lr, self._lowp, 0, 0, _NAN, _NAN,
                                                           _NAN, self._frozen, self._mode, 0.0),
                                     _NO_EXTRA, ()))
                self._count = count = self._count + 1
                if count >= self._quiet_until:  # the next step keeps a gradient for a cosine
                    self._quick = self._quiet = False
                if len(pending) >= self._chunk * self._interval:
                    self._flush()
                return
        if self._closed:
            self._misuse.after_close()
            return
        loss_value = scalar_loss(loss)
        if isinstance(loss_value, torch.Tensor):
            self._losses_later = True  # read with its chunk (`_read_losses`)
        if extra:
            extra = self._misuse.extras(extra, self._measured)
        stepped, self._stepped = self._stepped, False
        finite = not isinstance(loss_value, float) or math.isfinite(loss_value)
        if (stepped and self._shapes is not None and self._count % self._interval
                and (finite or self._inputs is None)):
            self._record_unobserved(loss, loss_value, extra)
            return
        if not stepped:
            self._misuse.no_step(loss, self._count, self._params)
        self._misuse.seen(loss)
        if not stepped:
            self._lr = ins.first_lr(self._optimizer)
        unoptimized = self._count_unoptimized() if self._unoptimized else 0
        norms_training = 1.0 if self._norms and any(m.training for m in self._norms) else 0.0
        forward = self._forward_on and bool(self._scheduled)  # this step's forward was read
        if not forward and not finite:
            self._read_unread_inputs()
        self._unread_inputs.clear()
        state = (self._lr, self._lowp_share(), unoptimized, 0 if stepped else 1,
                 self._dropout_rate(), self._scaled if stepped else _NAN, norms_training,
                 self._frozen, self._mode if stepped else _NAN, 1.0 if forward else 0.0)
        payloads, shapes = self._take(stepped, forward)
        self._shapes = shapes
        step = _Step(loss_value, payloads, state, extra, shapes)
        if forward and shapes != self._sized_for:
            # the first step, or one whose forward tensors differ in shape (a batch
            # padded to its own longest sequence): the chunk must hold the largest
            self._sized_for = shapes
            self._chunk = min(self._chunk, ins.chunk_length(payloads.values(),
                                                            _numel(self._params),
                                                            self._chunk_steps, CHUNK_BYTES))
        self._pending.append(step)
        self._counted()
        if len(self._pending) >= self._chunk * self._interval:
            self._flush()

    def _read_unread_inputs(self) -> None:
        """A step the schedule does not read ended in a non-finite loss: its input batch,
        kept by reference, is read after all (NaN rows in the data are the first thing
        to rule out, and the forward hooks were not attached to copy them)."""
        for seen in self._unread_inputs:
            self._contained(self._inputs, seen)

    def _count_unoptimized(self) -> int:
        """The parameters outside the optimizer that hold a gradient and have not moved
        since the last observed step: their gradients are never applied.  One that moved
        is trained by another optimizer (a GAN's discriminator, stepped in the same loop)
        and is set aside for the rest of the run; the first look has nothing to compare
        with and counts none.  Steps economy does not observe repeat the last count."""
        try:
            marks = _sums(self._unoptimized)
        except Exception:  # noqa: BLE001 - never fail the user's loop: count as before
            return sum(p.grad is not None for p in self._unoptimized)
        last, count = self._unoptimized_marks, 0
        if last is not None:
            for i, (p, mark) in enumerate(zip(self._unoptimized, marks, strict=True)):
                if mark != last[i] and not (math.isnan(mark) and math.isnan(last[i])):
                    self._optimized_elsewhere.add(i)
                elif p.grad is not None and i not in self._optimized_elsewhere:
                    count += 1
        self._unoptimized_marks, self._unoptimized_last = marks, count
        return count

    def _record_unobserved(self, loss, loss_value: float, extra: dict) -> None:
        """A step economy does not observe: the least a row needs, because on a tiny
        model every attribute the monitor touches per step costs the loop time."""
        self._misuse.seen(loss)
        state = (self._lr, self._lowp, self._unoptimized_last, 0, _NAN, _NAN, _NAN, self._frozen,
                 self._mode, 0.0)
        payloads = _NO_PAYLOADS  # shared, never written: economy has no forward instruments
        if self._inputs is not None:
            self._unread_inputs.clear()
            if self._eval_inputs not in self._off:
                payloads = {}
                try:  # an evaluation since the last record belongs to this row
                    payloads[self._eval_inputs] = self._eval_inputs.take(False)
                except Exception as exc:  # noqa: BLE001
                    self._stop(self._eval_inputs, exc)
        pending = self._pending
        pending.append(_Step(loss_value, payloads, state, extra, self._shapes))
        self._counted()
        if len(pending) >= self._chunk * self._interval:
            self._flush()

    def _take(self, stepped: bool, forward: bool) -> tuple[dict, tuple]:
        """Each live instrument's payload for this step, and the shapes they stack by
        (one per forward instrument, in `_hooked`'s order); the forward instruments'
        only on the steps the schedule reads (`forward`)."""
        payloads, shapes = {}, []
        if self._parameters not in self._off:
            try:
                observed = (self._count % self._interval) == 0
                payloads[self._parameters] = self._parameters.take(observed, stepped)
            except Exception as exc:  # noqa: BLE001
                self._stop(self._parameters, exc)
        unbatched = self._unbatched()
        for instrument in self._hooked:
            if not forward and instrument in self._scheduled and (
                    instrument is not self._inputs or self._inputs.current is None):
                shapes.append("unread")
                continue
            if instrument not in self._off:
                try:
                    payload = payloads[instrument] = instrument.take(unbatched)
                    shapes.append(instrument.shape(payload))
                    continue
                except Exception as exc:  # noqa: BLE001
                    self._stop(instrument, exc)
            shapes.append("off")
        return payloads, tuple(shapes)

    def _flush(self) -> None:
        """Compute the statistics of every pending step and append their rows.

        A forward instrument computes the steps whose payloads stack (same shapes)
        together: a loop whose batches vary in length (padded to each batch's longest
        sequence) makes a few such groups per chunk, while the gradient and weight
        buffers, whose shape never varies, are still computed once per chunk."""
        steps, self._pending = self._pending, []
        self._quick = False  # the next record starts the new chunk by the long path
        if not steps:
            return
        self._check_parameters()
        if self._losses_later:
            self._losses_later = False
            _read_losses(steps)
        chunk = self._table.new_rows(steps, partials=self._world > 1)
        self._compute(self._parameters, steps, [None], chunk)
        for position, instrument in enumerate(self._hooked):
            self._compute(instrument, steps, _stacking(steps, instrument, position), chunk)
        self._table.append(chunk, steps, keep_partials=self._world > 1)

    def _check_parameters(self) -> None:
        """Once per chunk: are the model's trainable parameters still the ones the
        monitor was made with?  A layer replaced, or one unfrozen and added with
        `add_param_group`, leaves the gradient and weight columns covering the old set,
        so the change is named (once) rather than recorded as physics."""
        if self._parameters_told:
            return
        try:
            present = {id(p): p.requires_grad for p in self._model.parameters()}
        except Exception:  # noqa: BLE001 - a check, never a failure of the user's record
            return
        watched = {id(p) for p in self._params}
        added = sum(1 for i, trains in present.items() if trains and i not in watched)
        gone = sum(1 for i in watched if i not in present)
        if added or gone:
            self._parameters_told = True
            warn(f"the model's trainable parameters changed after the monitor was made "
                 f"(by step {self._count}: {added} new or unfrozen, {gone} no longer in the "
                 f"model: a layer replaced or unfrozen?); the gradient and weight columns "
                 f"still cover the {len(watched)} it was made with. Make a new Monitor "
                 f"after changing the model (close() the old one)")

    def _compute(self, instrument: ins.Instrument, steps: list[_Step], groups: list,
                 chunk) -> None:
        """One instrument's columns for `steps`, one call per group of them (None: all)."""
        if instrument in self._off:
            return
        for group in groups:
            chosen = steps if group is None else [steps[i] for i in group]
            try:
                with torch.no_grad():
                    values = instrument.compute([s.payloads.get(instrument) for s in chosen])
            except Exception as exc:  # noqa: BLE001
                self._stop(instrument, exc)
                self._table.blank(chunk, instrument.columns)  # NaN from the chunk's start
                return
            self._table.fill(chunk, chosen, values, group)

    def _dropout_rate(self) -> float:
        """The largest drop probability among the model's dropout layers that are in
        training mode now (0 with none): what a training-mode loss pays for dropout."""
        rate = 0.0
        for m in self._dropouts:  # a loop: max() over a generator costs twice as much
            if m.training and float(m.p) > rate:
                rate = float(m.p)
        return rate

    def _lowp_share(self) -> float:
        """Share of trainable parameter entries stored in float16/bfloat16, refreshed
        every `_chunk` records (`model.half()` may come after the monitor was attached)."""
        if not len(self._pending) % self._chunk:
            low = sum(p.numel() for p in self._params if p.dtype in _LOWP)
            self._lowp = low / _numel(self._params)
        return self._lowp

    # --- results and lifecycle -------------------------------------------------------
    @property
    def history(self) -> pd.DataFrame:
        """One row per recorded step: the columns of the API contract plus your extras.
        `history.attrs["stopped"]` lists the instruments that failed (see `stopped`);
        with `max_rows`, `history.attrs["thinned"]` which older steps are left out.
        A view, not a rebuild: cheap to read every few steps (see table)."""
        self._flush()
        frame = self._table.frame()
        frame.attrs["stopped"] = {k: dict(v) for k, v in self.stopped.items()}
        if self._table.max_rows is not None:
            frame.attrs["thinned"] = self._table.thinning()
        return frame

    def alerts(self, window: int = 20, lang: str | None = None) -> list:
        """The course's warning signs in the last `window` steps (see `fl.alerts`);
        reads only those rows, so its cost does not grow with the run."""
        from ..evidence.alerts import alerts, rows_read

        self._flush()
        return alerts(self._table.frame(last=rows_read(window)), window, lang)

    def to_csv(self, path) -> None:
        """Save the history; `fl.read_history(path)` reads it back exactly."""
        from ..evidence.runs import save_history

        save_history(self.history, path)

    def close(self) -> None:
        """Remove every hook this monitor added.  Safe to call more than once.

        Under `torch.distributed` every rank must call it: rank 0's history then holds
        the global columns (see `distributed`)."""
        self._flush()
        if self._world > 1 and not self._closed:
            self._merge_ranks()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._arm(False)
        self._arm_watch(False)
        self._quick = False
        if self._model in _ATTACHED and _ATTACHED[self._model]() is self:
            del _ATTACHED[self._model]
        for instrument in self._hooked:
            instrument.forget()
        self._closed = True

    def _merge_ranks(self) -> None:
        table = self._table
        local = table.local_rows(["step", *_GATHERED])
        by_rank = distributed.gather(local)  # the collective: every rank gets here
        try:
            _same_steps(by_rank)
            merged = distributed.merge(by_rank)
        except Exception as exc:  # noqa: BLE001 - close() must not fail the user's run
            merged = None
            warn(f"the ranks' columns could not be merged ({type(exc).__name__}: {exc}); "
                 f"each rank's history keeps its own")
        if self._rank == 0 and merged is not None:
            table.overwrite(merged)
        elif self._rank != 0 and self._other_ranks == "none":
            table.clear()
        table.partials = []

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Hook(functools.partial):
    """A hook the monitor adds to the model or the optimizer.  A copy of either
    (`copy.deepcopy`, e.g. for an EMA of the weights; `pickle`, `torch.save(model)`)
    gets one that does nothing: the monitor watches what it was given, and copying
    the monitor along would copy its buffers and fail on the graph its hooks hold."""

    def __deepcopy__(self, memo) -> "_Hook":
        return _Hook(_nothing)

    def __reduce__(self):
        return _Hook, (_nothing,)


def _nothing(*args) -> None:
    return None


_ABSENT = object()  # a step that has no payload of an instrument
_NO_PAYLOADS: dict = {}  # the payloads of a step no instrument observed (never written)
_NO_EXTRA: dict = {}  # the extras of a step given none (never written)
_ATTACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its monitor


def _stacking(steps: list[_Step], instrument: ins.Instrument, position: int) -> list:
    """The steps of a chunk grouped by one forward instrument's shapes (`_take`'s
    `position`): usually one group of all of them.  Steps without its payload
    (economy's unobserved ones) are left out: their columns stay NaN."""
    keys = [s.shapes[position] if instrument in s.payloads else _ABSENT for s in steps]
    if keys.count(keys[0]) == len(keys) and keys[0] is not _ABSENT:
        return [None]
    groups: dict = {}
    for i, key in enumerate(keys):
        if key is not _ABSENT:
            groups.setdefault(key, []).append(i)
    return list(groups.values())


def _sums(params: list) -> list[float]:
    """Each parameter's float64 sum, read in one transfer where they share a device."""
    with torch.no_grad():
        sums = [p.detach().sum(dtype=torch.float64) for p in params]
        if len({s.device for s in sums}) == 1:
            return torch.stack(sums).tolist()
        return [float(s) for s in sums]  # a model split over devices: one read each


def _same_steps(by_rank: list[list[dict]]) -> None:
    """Rows merge by position: each must hold the same step on every rank (with
    `max_rows`, ranks that recorded different numbers of steps thin differently)."""
    for i, rows in enumerate(zip(*by_rank, strict=False)):
        if len({row["step"] for row in rows}) > 1:
            raise ValueError(f"row {i} holds different steps on different ranks (max_rows "
                             f"thinned ranks that recorded different numbers of steps)")


def _read_losses(steps: list[_Step]) -> None:
    """Losses kept on an accelerator (see `scalar_loss`), read in one transfer."""
    kept = [s for s in steps if isinstance(s.loss, torch.Tensor)]
    if kept:
        values = torch.stack([s.loss.float() for s in kept]).tolist()
        for step, value in zip(kept, values, strict=False):
            step.loss = value


def mode_matters(module: nn.Module) -> bool:
    """Does this layer compute differently in training and eval mode?  Dropout that
    drops something, BatchNorm that keeps running statistics, and recurrent or
    attention layers with a dropout probability."""
    if isinstance(module, DROPOUTS):
        return float(module.p) > 0
    if private.is_batchnorm(module):
        return bool(module.track_running_stats)
    if isinstance(module, (nn.RNNBase, nn.MultiheadAttention)):
        return float(module.dropout) > 0
    return False


def _numel(params) -> int:
    return sum(p.numel() for p in params)
