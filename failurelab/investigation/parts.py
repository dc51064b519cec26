"""The contract: a user's training, as parts an experiment can change one at a time.

`make_parts` normalises what the user hands `fl.investigate` into a frozen `Parts`:
a way to make a fresh model, a way to make its optimizer (and scheduler), the batches
of every step, the user's own step, and optionally a separate loss, validation batches,
the user's own evaluation and accessors for a batch's inputs and targets.  The batches are taken once, up front
(`steps` of them, passing over the data as many times as needed, any DataLoader shuffle
seeded), so that every arm sees exactly the same batches in the same order: an
experiment's only difference from the baseline is the factor it changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from .errors import PartsError

# Default keys of a dict batch, the Hugging Face names included (input_ids, pixel_values).
INPUT_KEYS = ("x", "input", "inputs", "input_ids", "features", "image", "images",
              "pixel_values")
TARGET_KEYS = ("y", "label", "labels", "target", "targets")
# A tuple batch's inputs come first and its targets last: (inputs, targets), and also
# (inputs, lengths or mask, targets), the form of padded sequences and HF encodings.
INPUT_INDEX, TARGET_INDEX = 0, -1
MAX_STEPS = 2000  # an investigation is a handful of short runs, not a training job


@dataclass(frozen=True)
class Parts:
    """One run, as parts.  `batches` holds the batch of every step, in order."""

    make_model: Callable  # () -> nn.Module, called after torch.manual_seed(seed)
    make_optimizer: Callable  # (model) -> (Optimizer, scheduler or None)
    batches: tuple  # the batch of step i is batches[i]
    step: Callable  # (model, optimizer, batch) -> loss: the user's step
    loss: Callable | None = None  # (output, target) -> loss, for the reference step
    val_batches: tuple = ()
    inputs: Callable = None  # batch -> input tensor
    targets: Callable = None  # batch -> target tensor
    with_inputs: Callable = None  # (batch, new inputs) -> batch
    with_targets: Callable = None  # (batch, new targets) -> batch
    seed: int = 0
    autocast: bool = True  # False: every torch.autocast inside the step is disabled
    evaluate: Callable | None = None  # (model, val_batches) -> anything: your evaluation

    @property
    def steps(self) -> int:
        return len(self.batches)


def make_parts(model=None, optimizer=None, batches=None, step=None, loss=None,
               val_batches=None, inputs=None, targets=None, steps=200, seed=0,
               datamodule=None, evaluate=None) -> Parts:
    """Check and normalise the user's parts; a LightningModule in place of `model`
    becomes the parts through `lightning_parts`."""
    if _is_lightning(model):
        from .lightning import lightning_parts

        return make_parts(**lightning_parts(model, datamodule, batches, val_batches),
                          loss=loss, inputs=inputs, targets=targets, steps=steps, seed=seed,
                          evaluate=evaluate)
    _callable(model, "model", "() -> nn.Module: a function that builds a fresh model")
    _callable(optimizer, "optimizer", "(model) -> Optimizer, or (Optimizer, scheduler)")
    _callable(step, "step", "(model, optimizer, batch) -> loss: your training step")
    if loss is not None:
        _callable(loss, "loss", "(output, target) -> loss")
    if evaluate is not None:
        _callable(evaluate, "evaluate", "(model, val_batches) -> your metric: your evaluation")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 2 <= steps <= MAX_STEPS:
        raise PartsError(f"steps must be an integer from 2 to {MAX_STEPS}, got {steps!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise PartsError(f"seed must be an integer, got {seed!r}")
    taken = _take(batches, steps, seed, "batches")
    val = tuple(_take(val_batches, None, seed, "val_batches")) if val_batches is not None else ()
    get_x, set_x = _accessor(inputs, INPUT_KEYS, INPUT_INDEX, "inputs")
    get_y, set_y = _accessor(targets, TARGET_KEYS, TARGET_INDEX, "targets")
    return Parts(model, _optimizer_factory(optimizer), tuple(taken), step, loss, val,
                 get_x, get_y, set_x, set_y, seed, evaluate=evaluate)


def build(parts: Parts):
    """(model, optimizer, scheduler) made fresh for `parts.seed`."""
    torch.manual_seed(parts.seed)
    model = parts.make_model()
    if not isinstance(model, torch.nn.Module):
        raise PartsError(f"model() must return a torch.nn.Module, got {type(model).__name__}")
    optimizer, scheduler = parts.make_optimizer(model)
    return model, optimizer, scheduler


def _is_lightning(obj) -> bool:
    return any(c.__name__ == "LightningModule" for c in type(obj).__mro__)


def _callable(value, name: str, what: str) -> None:
    if not callable(value):
        got = "nothing" if value is None else type(value).__name__
        raise PartsError(f"{name} must be {what}; got {got}")


def _optimizer_factory(make: Callable) -> Callable:
    """(model) -> (optimizer, scheduler or None), checked."""
    def made(model):
        out = make(model)
        optimizer, scheduler = out if isinstance(out, tuple) else (out, None)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise PartsError(f"optimizer(model) must return a torch.optim.Optimizer (or "
                             f"(optimizer, scheduler)); got {type(optimizer).__name__}")
        return optimizer, scheduler
    return made


def _take(batches, steps: int | None, seed: int, name: str) -> list:
    """`steps` batches (None: one pass), passing over `batches` as often as needed.
    A callable is called for each pass; a DataLoader's shuffling is seeded."""
    if batches is None:
        raise PartsError(f"{name} must be a re-iterable of batches (a DataLoader, a list); "
                         f"got nothing")
    source = batches if callable(batches) else (lambda: batches)
    taken: list = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        while steps is None or len(taken) < steps:
            try:
                epoch = iter(source())
            except TypeError:
                raise PartsError(f"{name} must be re-iterable (a DataLoader, a list, or a "
                                 f"function returning an iterable); got "
                                 f"{type(batches).__name__}") from None
            before = len(taken)
            taken.extend(itertools.islice(epoch, None if steps is None else steps - len(taken)))
            if len(taken) == before:  # an empty pass
                break
            if steps is None:
                break
    if not taken:
        raise PartsError(f"{name} yielded no batch")
    return taken


def _accessor(given: Callable | None, keys: tuple, index: int, name: str):
    """(get, set) for one part of a batch: the user's getter (then no setter: an arm
    that must rewrite it is skipped), or the default for tuples, lists and dicts (a
    tuple of one element has inputs only: no targets at index -1)."""
    if given is not None:
        _callable(given, name, "batch -> tensor")
        return given, None

    def get(batch):
        if isinstance(batch, Mapping):
            key = next((k for k in keys if k in batch), None)
            if key is None:
                raise PartsError(f"a batch dict has none of the keys {keys}; pass "
                                 f"{name}=lambda batch: ...")
            return batch[key]
        if isinstance(batch, (tuple, list)) and len(batch) > max(index, 0) + (index < 0):
            return batch[index]
        raise PartsError(f"cannot find the {name} of a {type(batch).__name__} batch; pass "
                         f"{name}=lambda batch: ...")

    def put(batch, value):
        if isinstance(batch, Mapping):
            key = next(k for k in keys if k in batch)
            return type(batch)({**batch, key: value}) if type(batch) is not dict \
                else {**batch, key: value}
        rebuilt = list(batch)
        rebuilt[index] = value
        return type(batch)(rebuilt) if isinstance(batch, list) else tuple(rebuilt)
    return get, put
