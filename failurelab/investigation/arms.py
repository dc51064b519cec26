"""Experiments as pure transformations of `Parts`, each changing exactly one factor.

An arm takes the baseline's parts and returns new parts that differ in one factor
only: the seed, the batches, the learning rate, the inputs, the targets, the
precision, the initialisation, or the step.  Everything else (the other parts, the
seed that draws the initial weights, the order of the batches) is the baseline's, so
a difference in the outcome is that factor's doing.  `None`: the arm does not apply to
these parts (no separate loss for a reference step, no low precision to undo...).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ..basics.text import Text
from ..telemetry.monitor import DROPOUTS
from . import checks
from .parts import Parts

PERMUTE_SEED = 1234  # the fixed generator that permutes the labels
DEAL_SEED = 4321  # the fixed generator that re-deals the samples across the batches
RESEED = (1, 2)  # the reseeded arms' offsets from the baseline's seed
LR_KEYS = ("lr", "initial_lr", "max_lr", "min_lr")  # a param group's rates (OneCycleLR's too)


@dataclass(frozen=True)
class Arm:
    """One experiment: its name, what it changes (one line), and the change."""

    name: str
    changes: Text
    apply: Callable[[Parts], Parts | None]


def baseline(parts: Parts) -> Parts:
    return parts


def repeat(parts: Parts) -> Parts:
    """The same parts again: a reproducible loop gives a bitwise-identical history."""
    return parts


def reseed(offset: int) -> Callable[[Parts], Parts]:
    def arm(parts: Parts) -> Parts:
        return replace(parts, seed=parts.seed + offset)
    return arm


def overfit_batch(parts: Parts) -> Parts:
    """The first batch at every step."""
    return replace(parts, batches=(parts.batches[0],) * parts.steps)


def lr_scaled(factor: float) -> Callable[[Parts], Parts]:
    """Every param group's rate times `factor`, and the scheduler's base rates with
    them, so a schedule keeps its shape at the new scale."""
    def arm(parts: Parts) -> Parts:
        make = parts.make_optimizer

        def scaled(model):
            optimizer, scheduler = make(model)
            for group in optimizer.param_groups:
                for key in LR_KEYS:
                    if isinstance(group.get(key), (int, float)):
                        group[key] = group[key] * factor
            if scheduler is not None and hasattr(scheduler, "base_lrs"):
                scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
            return optimizer, scheduler
        return replace(parts, make_optimizer=scaled)
    return arm


def labels_permuted(parts: Parts) -> Parts | None:
    """The targets of the distinct training batches permuted across samples (a fixed
    generator), the inputs untouched: what the model can learn without the labels."""
    if parts.with_targets is None:
        return None
    distinct = _distinct(parts.batches)
    ys = [parts.targets(b) for b in distinct]
    if not all(isinstance(y, torch.Tensor) and y.dim() >= 1 for y in ys):
        return None
    joined = torch.cat(ys)
    g = torch.Generator().manual_seed(PERMUTE_SEED)
    shuffled = joined[torch.randperm(len(joined), generator=g)]
    pieces = shuffled.split([len(y) for y in ys])
    new = {id(b): parts.with_targets(b, p) for b, p in zip(distinct, pieces, strict=True)}
    return replace(parts, batches=tuple(new[id(b)] for b in parts.batches))


def inputs_standardised(parts: Parts) -> Parts | None:
    """Inputs shifted and scaled per feature by the training batches' mean and std
    (float inputs only)."""
    if parts.with_inputs is None:
        return None
    distinct = _distinct(parts.batches)
    xs = [parts.inputs(b) for b in distinct]
    if not all(isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() >= 2
               for x in xs):
        return None
    joined = torch.cat([x.double() for x in xs])
    finite = torch.where(torch.isfinite(joined), joined, torch.nan)
    mean = finite.nanmean(0)
    std = (finite - mean).pow(2).nanmean(0).sqrt()
    std = torch.where(std > 0, std, torch.ones_like(std))
    mean, std = torch.nan_to_num(mean), torch.nan_to_num(std, nan=1.0)

    def scaled(x):
        return ((x.double() - mean) / std).to(x.dtype)
    new = {id(b): parts.with_inputs(b, scaled(x)) for b, x in zip(distinct, xs, strict=True)}
    return replace(parts, batches=tuple(new[id(b)] for b in parts.batches))


def float32(parts: Parts) -> Parts:
    """The model in float32 and every autocast in the step disabled."""
    make = parts.make_model

    def made():
        return make().float()
    return replace(parts, make_model=made, autocast=False)


def reinit_defaults(parts: Parts) -> Parts:
    """The user's model, then every module's own `reset_parameters()`: PyTorch's
    default initialisation in place of the user's."""
    make = parts.make_model

    def made():
        model = make()
        with torch.no_grad():
            for module in model.modules():
                if callable(getattr(module, "reset_parameters", None)):
                    module.reset_parameters()
        return model
    return replace(parts, make_model=made)


def reference_step(parts: Parts) -> Parts | None:
    """The textbook step in place of the user's: zero_grad, forward, the user's loss,
    backward, step."""
    if parts.loss is None:
        return None
    loss_fn, inputs, targets = parts.loss, parts.inputs, parts.targets
    inputs(parts.batches[0]), targets(parts.batches[0])  # unreadable: not applicable, said why

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs(batch)), targets(batch))
        loss.backward()
        optimizer.step()
        return loss
    return replace(parts, step=step)


def targets_shaped(parts: Parts) -> Parts | None:
    """The targets given the model's output shape where they hold its entries in a
    shape only size-1 dimensions tell apart ((B,) -> (B, 1)); None when no batch's
    targets are such (nothing to change) or the batch cannot be rewritten."""
    shape = checks.output_shape(parts)
    if parts.with_targets is None or shape is None:
        return None
    distinct = _distinct(parts.batches)
    new = {}
    for b in distinct:
        x, y = parts.inputs(b), parts.targets(b)
        if not isinstance(y, torch.Tensor) or not isinstance(x, torch.Tensor) or not shape:
            continue
        rows = (len(x), *shape[1:])  # this batch's output shape: one row per sample
        if checks.misshaped(y, rows):
            new[id(b)] = parts.with_targets(b, y.reshape(rows))
    if not new:
        return None
    return replace(parts, batches=tuple(new.get(id(b), b) for b in parts.batches))


def output_identity(parts: Parts) -> Parts | None:
    """The activation module that makes the model's output passed by at that call (its
    input returned): the model ends in the layer before it, every other use of the
    same module untouched.  None when no activation module makes the output."""
    maker = checks.output_maker(parts)
    if maker is None:
        return None
    make = parts.make_model

    def made():
        model = make()
        _bypass(model, maker.name, maker.call)
        return model
    return replace(parts, make_model=made)


def _bypass(model, name: str, call: int) -> None:
    """Make call number `call` (per forward pass of `model`) of module `name` return
    its input."""
    seen = [0]

    def restart(module, args):
        seen[0] = 0

    def skip(module, args, output):
        seen[0] += 1
        if seen[0] - 1 == call and args and isinstance(args[0], torch.Tensor):
            return args[0]
        return None
    model.register_forward_pre_hook(restart)
    model.get_submodule(name).register_forward_hook(skip)


def reshuffled(parts: Parts) -> Parts | None:
    """The samples of every step's batch re-dealt at random across all the steps (a
    fixed generator), each batch keeping its size: the same samples, as often, in
    mixed batches.  Batches must be tuples, lists or dicts of tensors with one first
    dimension (every field of a sample moves with it); None otherwise."""
    fields = [_sample_fields(b) for b in parts.batches]
    if any(f is None for f in fields) or len({tuple(k for k, _ in f) for f in fields}) != 1:
        return None
    keys = [k for k, _ in fields[0]]
    sizes = [len(f[0][1]) for f in fields]
    joined = {k: torch.cat([dict(f)[k] for f in fields]) for k in keys}
    g = torch.Generator().manual_seed(DEAL_SEED)
    order = torch.randperm(sum(sizes), generator=g)
    dealt = {k: v[order].split(sizes) for k, v in joined.items()}
    batches = tuple(_rebuilt(b, {k: dealt[k][i] for k in keys})
                    for i, b in enumerate(parts.batches))
    return replace(parts, batches=batches)


MERGED = 64  # samples per step in `batches_merged`: the top of healthy loops' batches


def batches_merged(parts: Parts) -> Parts | None:
    """Every step's batch replaced by the samples of k consecutive batches (from its own
    on, wrapping at the end), k enough to hold MERGED samples at the median batch size:
    the same steps, the same order of samples, the same step function, k times as many
    samples per step.  Only for batches of `checks.SMALL_BATCH` samples or fewer (a
    larger batch's gradient noise is not the suspect, and the arm would cost k times
    the baseline's compute); batches must be tuples, lists or dicts of tensors with one
    first dimension.  None otherwise."""
    fields = [_sample_fields(b) for b in parts.batches]
    if any(f is None for f in fields) or len({tuple(k for k, _ in f) for f in fields}) != 1:
        return None
    size = checks.median_batch(parts)
    if not size <= checks.SMALL_BATCH:
        return None
    n, keys, k = len(fields), [key for key, _ in fields[0]], math.ceil(MERGED / size)
    merged = []
    for i, b in enumerate(parts.batches):
        group = [dict(fields[(i + j) % n]) for j in range(k)]
        merged.append(_rebuilt(b, {key: torch.cat([g[key] for g in group]) for key in keys}))
    return replace(parts, batches=tuple(merged))


def _sample_fields(batch) -> list[tuple] | None:
    """[(key, tensor)] of a batch whose every field is a tensor of one first dimension."""
    items = list(batch.items()) if isinstance(batch, dict) else (
        list(enumerate(batch)) if isinstance(batch, (tuple, list)) else None)
    if not items or not all(isinstance(v, torch.Tensor) and v.dim() >= 1 for _, v in items):
        return None
    return items if len({len(v) for _, v in items}) == 1 else None


def _rebuilt(batch, values: dict):
    if isinstance(batch, dict):
        return {**batch, **values}
    rebuilt = [values[i] for i in range(len(batch))]
    return rebuilt if isinstance(batch, list) else tuple(rebuilt)


def dropout_off(parts: Parts) -> Parts | None:
    """The model with every dropout module's rate set to 0, the rest as made (the same
    weights: dropout holds none).  None when the model has no dropout module that drops
    anything."""
    make = parts.make_model

    def without_dropout():
        model = make()
        for module in model.modules():
            if isinstance(module, DROPOUTS):
                module.p = 0.0
        return model
    try:
        with torch.random.fork_rng():
            model = make()
    except Exception:  # noqa: BLE001 - the baseline reports a model that cannot be made
        return None
    if not any(isinstance(m, DROPOUTS) and m.p > 0
               for m in model.modules()):
        return None
    return replace(parts, make_model=without_dropout)


def weight_decay_off(parts: Parts) -> Parts | None:
    """Every param group's `weight_decay` set to 0 in the optimizer the user's factory
    makes, the rest as made (the rates, the schedule, the weights).  None when no group
    decays (nothing to remove: a penalty written into the loss is not reached)."""
    if not checks.decay_rates(parts):
        return None
    make = parts.make_optimizer

    def undecayed(model):
        optimizer, scheduler = make(model)
        for group in optimizer.param_groups:
            if isinstance(group.get("weight_decay"), (int, float)):
                group["weight_decay"] = 0.0
        return optimizer, scheduler
    return replace(parts, make_optimizer=undecayed)


def train_mode(parts: Parts) -> Parts:
    """The model put in training mode before every forward pass that takes gradients
    (a forward pre-hook); passes without gradients, validation, keep the mode the
    loop set."""
    make = parts.make_model

    def made():
        model = make()
        model.register_forward_pre_hook(_train_when_learning)
        return model
    return replace(parts, make_model=made)


def _train_when_learning(module, args):
    if torch.is_grad_enabled() and not module.training:
        module.train()


def mask_inverted(parts: Parts) -> Parts:
    """Every key-padding mask handed to an attention module inverted (a forward
    pre-hook on each nn.MultiheadAttention): the keys it hid are attended, the ones it
    let through hidden.  Boolean masks and 0/-inf additive ones (what nn.Transformer*
    layers turn a boolean mask into); any other additive mask is left as it is."""
    make = parts.make_model

    def made():
        model = make()
        for module in model.modules():
            if isinstance(module, torch.nn.MultiheadAttention):
                module.register_forward_pre_hook(_invert_mask, with_kwargs=True)
        return model
    return replace(parts, make_model=made)


def _invert_mask(module, args, kwargs):
    mask = checks.key_padding_mask(args, kwargs)
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        flipped = ~mask
    elif bool(((mask == 0) | (mask == float("-inf"))).all()):
        flipped = torch.where(mask == 0, float("-inf"), 0.0).to(mask.dtype)
    else:
        return None
    if "key_padding_mask" in kwargs or len(args) <= 3:
        return args, {**kwargs, "key_padding_mask": flipped}
    return (*args[:3], flipped, *args[4:]), kwargs


def _distinct(batches: tuple) -> list:
    """Each batch object once, in order of first use."""
    seen: dict[int, object] = {}
    for b in batches:
        seen.setdefault(id(b), b)
    return list(seen.values())


ARMS = {arm.name: arm for arm in (
    Arm("baseline", Text("nothing: your loop as it is", "不做任何改动：你的循环原样运行"), baseline),
    Arm("repeat", Text("nothing, run again with the same seed",
                       "不做改动，用同一个种子再运行一次"), repeat),
    *(Arm(f"reseed+{k}", Text(f"the seed (+{k}): another initialisation",
                              f"随机种子 (+{k})：另一种初始化"), reseed(k)) for k in RESEED),
    Arm("overfit_batch", Text("the batches: the first batch at every step",
                              "批次：每一步都用第一个批次"), overfit_batch),
    Arm("lr/10", Text("the learning rate: divided by 10 (every param group, scheduler too)",
                      "学习率：除以 10（所有参数组，调度器同样）"), lr_scaled(0.1)),
    Arm("lr*10", Text("the learning rate: multiplied by 10 (every param group, scheduler too)",
                      "学习率：乘以 10（所有参数组，调度器同样）"), lr_scaled(10.0)),
    Arm("lr*100", Text("the learning rate: multiplied by 100 (every param group, scheduler too)",
                       "学习率：乘以 100（所有参数组，调度器同样）"), lr_scaled(100.0)),
    Arm("labels_permuted", Text("the labels: permuted across the training samples",
                                "标签：在训练样本之间随机置换"), labels_permuted),
    Arm("inputs_standardised", Text("the inputs: standardised per feature with the training "
                                    "batches' mean and std",
                                    "输入：按训练批次的均值和标准差逐特征标准化"),
        inputs_standardised),
    Arm("float32", Text("the precision: float32 model, autocast disabled",
                        "精度：模型用 float32，关闭 autocast"), float32),
    Arm("reinit_defaults", Text("the initialisation: PyTorch's defaults (reset_parameters)",
                                "初始化：PyTorch 的默认初始化 (reset_parameters)"),
        reinit_defaults),
    Arm("reference_step", Text("the step: zero_grad, forward, your loss, backward, step",
                               "训练步：zero_grad、前向、你的损失、反向、step"), reference_step),
    Arm("targets_shaped", Text("the targets: given the output's shape ((B,) -> (B, 1))",
                               "目标：改成与输出相同的形状（(B,) -> (B, 1)）"), targets_shaped),
    Arm("output_identity", Text("the output activation: passed by, the model ends in the "
                                "layer before it",
                                "输出激活：跳过它，模型以它前面的那一层结尾"), output_identity),
    Arm("reshuffled", Text("the batches: the same samples re-dealt at random across the steps",
                           "批次：同样的样本随机重新分配到各步"), reshuffled),
    Arm("batches_merged", Text(f"the batch size: consecutive batches merged into one of "
                               f"{MERGED} samples at every step",
                               f"批大小：每一步把连续的批次合并为一个 {MERGED} 个样本的批次"),
        batches_merged),
    Arm("dropout_off", Text("the dropout: every dropout module's rate set to 0",
                            "dropout：所有 dropout 模块的比率设为 0"), dropout_off),
    Arm("weight_decay_off", Text("the weight decay: set to 0 in every param group",
                                 "权重衰减：所有参数组都设为 0"), weight_decay_off),
    Arm("train_mode", Text("the mode: training mode for every forward pass that takes "
                           "gradients", "模式：每次需要梯度的前向传播都处于训练模式"),
        train_mode),
    Arm("mask_inverted", Text("the padding mask: inverted (attention modules attend to the "
                              "keys it hid, and hide the others)",
                              "填充掩码：取反（注意力模块关注原先被隐藏的键，隐藏其余的键）"),
        mask_inverted),
)}
SEEDS = ("baseline", "reseed+1", "reseed+2")  # the arms that measure the run-to-run spread
