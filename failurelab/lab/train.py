"""The one training loop.  Read it top to bottom: every fault enters at a visible line.

`build` makes the parts (model, optimizer, loss, loader, validation data) and `run`
trains them under `Monitor`, adding what only the lab's own loop can measure:
validation metrics, per-segment timing and the sequence model's attention on padding.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone

import torch
from torch import nn

from ..basics.build import notice_other_build
from ..basics.recipes import Recipe, check_seed
from ..evidence.runs import Run
from ..telemetry.monitor import Monitor
from . import data
from .models import make_model

EXTRA_PADS = 10  # pads appended to validation sequences to test that padding is ignored
PROBE_SAMPLES = 128  # validation samples used for the repeat and extra-padding checks


@dataclass
class Parts:
    """Everything a run is made of, for the lab's loop or for yours."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: nn.Module
    train_loader: torch.utils.data.DataLoader  # (X, y) batches in the recipe's order
    val: tuple[torch.Tensor, torch.Tensor]  # (X_val, y_val), preprocessed like training
    recipe: Recipe
    seed: int


def build(recipe: Recipe, seed: int = 0) -> Parts:
    """The seeded parts of `recipe`; the caller's global RNG state is left untouched."""
    check_seed(seed)
    notice_other_build()
    prepared = data.prepare(recipe, seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = make_model(recipe)
    if recipe.freeze_body:
        for name, p in model.named_parameters():
            p.requires_grad_(name.startswith("head."))
    # "head": the optimizer of a fine-tuning snippet, the rest of the model left out
    optimized = model.head.parameters() if recipe.optimize == "head" else model.parameters()
    if recipe.optimizer == "sgd":
        optimizer = torch.optim.SGD(optimized, lr=recipe.lr, momentum=recipe.momentum,
                                    weight_decay=recipe.weight_decay)
    else:
        optimizer = torch.optim.Adam(optimized, lr=recipe.lr, weight_decay=recipe.weight_decay)
    per_sample = recipe.loader == "per_sample"
    if per_sample:
        dataset = data.PerSampleData(prepared.X_train, prepared.y_train, prepared.mean,
                                     prepared.std)
    else:
        X = prepared.X_train
        if prepared.mean is not None:
            X = (X - prepared.mean) / prepared.std  # standardise once, with training statistics
        dataset = data.BatchedData(X, prepared.y_train)
    loader = data.make_loader(dataset, recipe.batch_size, recipe.shuffle, seed, per_sample,
                              balanced=recipe.balanced_sampling)
    val = (prepared.X_val, prepared.y_val)
    # "sum" adds the batch's per-sample losses: the gradient grows with the batch size.
    if recipe.target == "value":
        loss_fn = nn.MSELoss(reduction=recipe.loss_reduction)
    elif recipe.log_softmax == "fused":
        loss_fn = nn.CrossEntropyLoss(reduction=recipe.loss_reduction)
    else:
        loss_fn = HandWrittenCrossEntropy(recipe.loss_reduction)
    return Parts(model, optimizer, loss_fn, loader, val, recipe, seed)


class HandWrittenCrossEntropy(nn.Module):
    """Cross-entropy as NLL of log(softmax(logits)), the textbook formula written out.
    Unlike F.cross_entropy's fused log-softmax it computes each probability first, and a
    probability that underflows to 0 has log 0 = -inf, whose backward is 0/0 = NaN even
    when its class is not the target (at a logit gap of ~104 in float32, ~17 in float16)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log(torch.softmax(logits, dim=-1))
        return nn.functional.nll_loss(log_probs, y, reduction=self.reduction)


def run(recipe: Recipe, *, seed: int = 0, steps: int | None = None, preset: str = "full",
        threads: int = 1, device: str | torch.device = "cpu", forward_every: int = 1) -> Run:
    """Train one recipe and return its full history.  (`fl.run` also takes a fault or
    task name and serves a verification session's stored runs: the loop knows no faults.)

    Never raises because training went bad: at the first non-finite loss the run stops
    and reports it.  Uses `threads` torch threads (tiny models are fastest on one) and
    restores the caller's thread count and RNG state afterwards.

    `device` trains the same parts (built on the CPU, with the same seed) on another
    device, with autocast and the GradScaler of that device: does a fault seen on the
    CPU reproduce on a GPU?  Bitwise reproducibility is the CPU's: GPU kernels may sum
    in another order from run to run.

    `forward_every`: the Monitor's forward schedule (see `Monitor`); the lab reads every
    step, `benchmarks/forward_schedule.py` diagnoses its faults on the default one.
    """
    if not isinstance(recipe, Recipe):
        raise TypeError(f"the lab's loop trains a Recipe, got {type(recipe).__name__} "
                        "(fl.run also takes a fault or task name)")
    if steps is not None:
        recipe = recipe.replace(steps=steps)
    check_seed(seed)
    device = usable_device(device)
    started, trained_at = time.perf_counter(), utc_now()
    with torch_threads(threads), torch.random.fork_rng(), warnings.catch_warnings():
        # target_shape "flat": torch warns about the broadcast; the user ignored it
        warnings.filterwarnings("ignore", message="Using a target size")
        parts = build(recipe, seed)
        torch.manual_seed(seed)  # dropout draws from here
        history, first_bad = _train(parts, preset, device, forward_every)
    return Run(recipe, seed, history, first_bad, time.perf_counter() - started, trained_at)


def utc_now() -> str:
    """The time now, as worksheets write it (UTC, ISO 8601, milliseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _train(parts: Parts, preset: str, device: torch.device, forward_every: int = 1):
    recipe, model, optimizer, loss_fn = parts.recipe, parts.model, parts.optimizer, parts.loss_fn
    model.to(device)  # in place: the optimizer's parameters move with it
    val = tuple(t.to(device) for t in parts.val)  # moved once, evaluated every eval_every
    amp_dtype = getattr(torch, recipe.dtype)
    use_amp = recipe.dtype != "float32"
    by_hand = recipe.log_softmax == "by_hand"
    matched = recipe.target == "value" and recipe.target_shape == "matched"
    scaler = torch.amp.GradScaler(device.type, enabled=recipe.loss_scaling,
                                  growth_interval=recipe.scaler_growth_interval)
    # A StepLR counts scheduler.step() calls; this loop calls it once per optimizer step.
    schedule = (torch.optim.lr_scheduler.StepLR(optimizer, recipe.lr_decay_every, gamma=0.1)
                if recipe.lr_decay_every else None)
    batches = endless_batches(parts.train_loader)
    first_bad = None
    model.train()  # once: `evaluate` puts it back after validating
    # every step's forward tensors by default: the lab's histories are teaching material
    # read step by step, and its fingerprints are stated for them
    with Monitor(model, optimizer, preset=preset, forward_every=forward_every) as mon:
        for step in range(recipe.steps):
            t0 = time.thread_time()
            X, y = (t.to(device) for t in next(batches))
            t1 = time.thread_time()
            if recipe.zero_grad and recipe.zero_grad_at == "before_backward":
                optimizer.zero_grad(set_to_none=True)  # forget this and gradients accumulate
            t_forward = t_backward = 0.0
            losses, outputs = [], []
            # One backward per micro-batch; with accumulate = 1 the whole batch at once.
            for X_part, y_part in zip(X.chunk(recipe.accumulate), y.chunk(recipe.accumulate), strict=True):
                ta = time.thread_time()
                with torch.autocast(device.type, dtype=amp_dtype, enabled=use_amp):
                    logits = model(X_part)  # (B / accumulate, classes)
                    if by_hand:  # written inside autocast, where AMP guides put the loss
                        loss = loss_fn(logits, y_part).float()
                if matched:
                    y_part = y_part.view_as(logits)  # forget this and MSE pairs every output with every target
                if not by_hand:
                    loss = loss_fn(logits.float(), y_part)
                if recipe.negate_loss:
                    loss = -loss  # a log-likelihood to maximise, handed to a minimiser
                losses.append(loss.detach())
                outputs.append(logits.detach())
                if recipe.accumulate > 1 and recipe.divide_accumulated:
                    loss = loss / recipe.accumulate  # forget this and the step sums k means
                tb = time.thread_time()
                scaler.scale(loss).backward()  # a plain backward() when loss_scaling is off
                t_forward, t_backward = t_forward + tb - ta, t_backward + time.thread_time() - tb
            if len(losses) > 1:
                loss, logits = torch.stack(losses).mean(), torch.cat(outputs)  # the batch's
            t2 = time.thread_time()
            if recipe.zero_grad and recipe.zero_grad_at == "before_step":
                optimizer.zero_grad(set_to_none=True)  # misplaced: erases what backward made
            t3 = time.thread_time()
            if recipe.grad_clip:
                if recipe.unscale_before_clip:
                    scaler.unscale_(optimizer)  # forget this and the clip sees loss x scale
                nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            scaler.step(optimizer)  # skips the step if fp16 gradients overflowed
            scaler.update()
            if schedule is not None:
                schedule.step()  # per batch: a schedule written in epochs decays far too soon
            t4 = time.thread_time()
            # CPU seconds of this thread, not wall-clock: what each segment costs does not
            # depend on what else the machine is running, so timing verdicts never flake.
            extra = dict(t_data=t1 - t0, t_forward=t_forward, t_backward=t_backward + t3 - t2,
                         t_step=t4 - t3, batch_acc=_accuracy(logits, y), label_purity=_purity(y))
            if recipe.task == "sequence":
                extra["pad_attention"] = pad_attention(model, X_part)  # the last forward's
            if step % recipe.eval_every == 0 or step == recipe.steps - 1:
                extra.update(evaluate(model, val, recipe))
            mon.record(loss, **extra)
            if not math.isfinite(loss.item()):
                first_bad = step  # stop cleanly: nothing after a NaN loss means anything
                break
    return mon.history, first_bad


def evaluate(model: nn.Module, val, recipe: Recipe) -> dict[str, float]:
    """Validation loss and accuracy, and the two checks that loss and accuracy miss.

    `val_jitter`: largest logit difference between two identical validation passes;
    exactly 0 in eval mode, large when dropout is still active.
    `pad_sensitivity` (sequence): mean change of the predicted probability when extra
    pads are appended; float rounding (~1e-7) when padding is masked.
    Both checks need only an existence proof, so they use the first PROBE_SAMPLES.
    """
    X, y = val
    if recipe.eval_mode:
        model.eval()  # forget this and dropout keeps firing during validation
    use_amp = recipe.dtype != "float32"
    with torch.no_grad(), torch.autocast(X.device.type, dtype=getattr(torch, recipe.dtype),
                                         enabled=use_amp):
        first = model(X).float()
        probe, few = X[:PROBE_SAMPLES], first[:PROBE_SAMPLES]
        again = model(probe).float()
        loss = (nn.functional.mse_loss(first, y.view_as(first)) if recipe.target == "value"
                else nn.functional.cross_entropy(first, y))
        out = dict(val_loss=float(loss),
                   val_acc=_accuracy(first, y), val_min_recall=_min_recall(first, y),
                   val_jitter=float((few - again).abs().max()))
        if recipe.task == "sequence":
            padded = nn.functional.pad(probe, (0, EXTRA_PADS), value=data.PAD)
            shifted = model(padded).float()
            out["pad_sensitivity"] = float((few.softmax(-1) - shifted.softmax(-1))
                                           .abs().amax(-1).mean())
    if recipe.restore_train_mode:
        model.train()  # forget this and training goes on in eval mode
    return out


def usable_device(device: str | torch.device) -> torch.device:
    """`device` as a torch.device, or a clear error before anything is built."""
    try:
        device = torch.device(device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, TypeError) as error:
        raise ValueError(f"device {str(device)!r} cannot be used here ({error})") from None
    return device


def pad_attention(model: nn.Module, tokens: torch.Tensor) -> float:
    """Mean share of attention that the last batch put on pad positions."""
    weights = model.pool.weights  # (B, T)
    return float((weights * (tokens == data.PAD)).sum(1).mean())


def _classes(logits: torch.Tensor, y: torch.Tensor):
    """(predicted, true) classes; a regression's are the signs of its values (its
    accuracy is the share of predictions on the target's side of 0, the mean)."""
    if y.is_floating_point():
        return (logits.reshape(-1) > 0).long(), (y.reshape(-1) > 0).long()
    return logits.argmax(-1), y


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    pred, y = _classes(logits, y)
    return float((pred == y).float().mean())


def _min_recall(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Recall of the worst class: near 0 when a model only predicts the majority."""
    pred, y = _classes(logits, y)
    recalls = [float((pred[y == c] == c).float().mean()) for c in y.unique()]
    return min(recalls)


def _purity(y: torch.Tensor) -> float:
    """Share of the batch taken by its most common label (1.0 = one class only)."""
    labels = (y > 0).long() if y.is_floating_point() else y  # a regression's: signs
    return float(torch.bincount(labels).max()) / len(y)


def endless_batches(loader):
    """Batches forever, epoch after epoch; the loader reshuffles each epoch."""
    while True:
        yield from loader


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with `n` torch threads, then restore the caller's setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
