"""Wild forms: catalogue causes written the way users write them, in code shapes no other
benchmark uses, each beside its fixed version (a healthy control), plus bugs no
catalogue fault names.  `fl.investigate`'s parts, one small loop each.

What varies is what real loops vary: batches as dicts (HF-style keys), 3-tuples
(inputs, mask or lengths, labels) and DataLoaders over datasets of dicts; models that
return tuples, dicts or an HF-style output object with the loss computed inside;
steps with gradient accumulation across calls, schedulers made by the factory but
stepped inside the step, clipping, custom losses; regression on raw targets, GRU,
LSTM, EmbeddingBag, conv1d, conv2d, attention and transformer encoders.  Each bug is
the cause's real mechanism (a rate 100x a sane one for that optimizer, raw-scale
features, zero_grad between backward and step, an HF attention mask handed to PyTorch
as a key-padding mask, ...).

The forms were split once, at random, before any diagnosis ran on them
(`split()`: random.Random(SPLIT_SEED) over the sorted names, half to calibration):
rules may be changed in response to the calibration half only; the held half is run
once, before and after.  The split is committed in wild_forms_split.csv.

    python benchmarks/wild_forms.py harm [--seeds 0-2] [--forms a,b]
    python benchmarks/wild_forms.py investigate --half calibration|held [--workers 1]
    python benchmarks/wild_forms.py split        # prints the split (the csv's content)
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

import failurelab as fl
from failurelab.zoo.contract import run_parts

STEPS = 150
N_TRAIN, N_VAL = 768, 256
SPLIT_SEED = 6  # the one random split of the forms into calibration and held halves
SPLIT_FILE = Path(__file__).with_name("wild_forms_split.csv")


@dataclass(frozen=True)
class Held:
    """The held-out set, measured the right way: `predict(model, x)` -> the prediction,
    `loss(prediction, y)` the correct loss; `predict` None: `loss(model)` is the metric."""

    x: object
    y: torch.Tensor
    predict: Callable
    loss: Callable = F.cross_entropy


@dataclass(frozen=True)
class Form:
    name: str
    fault: str  # the catalogue cause, or "outside"
    wrong: str  # one line: the bug, as written
    make: Callable  # (fixed: bool) -> (investigate's keyword arguments, Held)


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _chunks(n: int, size: int):
    return [slice(i, i + size) for i in range(0, n, size)]


def _plain(model, x):
    return model(x)


# ----------------------------------------------------------------------------- data
def tabular(g, d=10, k=4, n=N_TRAIN + N_VAL):
    X = torch.randn(n, d, generator=g)
    W1, W2 = torch.randn(d, 24, generator=g) / math.sqrt(d), torch.randn(24, k, generator=g)
    return X, (torch.tanh(X @ W1) @ W2).argmax(1)


def raw_scaled(X, g):
    """Features on raw scales: each column its own unit, from 1e-2 to 1e4, off centre."""
    scales = 10.0 ** torch.linspace(-2, 4, X.shape[1])
    offsets = torch.rand(X.shape[1], generator=g) * scales * 3
    return X * scales + offsets


def tokens(g, vocab=24, length=12, classes=3, n=N_TRAIN + N_VAL, pad=0, ragged=True,
           bias=2.0):
    """Token sequences whose class makes 4 tokens more frequent (log-odds `bias`);
    right-padded with `pad` to `length` when `ragged`."""
    y = torch.randint(0, classes, (n,), generator=g)
    logits = torch.zeros(classes, vocab)
    for c in range(classes):
        logits[c, 1 + c * 4:1 + c * 4 + 4] = bias
    probs = torch.softmax(logits[y], 1)
    probs[:, pad] = 0
    ids = torch.multinomial(probs, length, replacement=True, generator=g)
    if ragged:
        lengths = torch.randint(4, length + 1, (n,), generator=g)
        ids[torch.arange(length)[None, :] >= lengths[:, None]] = pad
    else:
        lengths = torch.full((n,), length)
    return ids, lengths, y


def signals(g, channels=3, length=24, classes=3, n=N_TRAIN + N_VAL, noise=0.8):
    templates = torch.randn(classes, channels, length, generator=g).cumsum(-1) / 3
    y = torch.randint(0, classes, (n,), generator=g)
    x = templates[y] + noise * torch.randn(n, channels, length, generator=g)
    return x, y


def images(g, classes=4, size=12, n=N_TRAIN + N_VAL):
    y = torch.randint(0, classes, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, size, size, generator=g)
    pos = torch.randint(2, size - 2, (n,), generator=g)
    for i in range(n):
        k, p = int(y[i]), int(pos[i])
        if k == 0:
            x[i, 0, p, 1:size - 1] += 2
        elif k == 1:
            x[i, 0, 1:size - 1, p] += 2
        elif k == 2:
            x[i, 0, p - 2:p + 2, p - 2:p + 2] += 2
        else:
            x[i, 0, :, :size // 2] += 1  # the left half brighter
    return x, y


def regression(g, d=8, n=N_TRAIN + N_VAL):
    """Raw targets: a house-price-like scale (hundreds), a smooth function of x."""
    X = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=g)
    y = 200 + 50 * torch.tanh(X @ w / 2) + 10 * X[:, 0] ** 2 + 2 * torch.randn(n, generator=g)
    return X, y


def series(g, channels=2, length=16, n=N_TRAIN + N_VAL):
    """Regression on sequences: the target is a weighted sum of the late steps."""
    x = torch.randn(n, length, channels, generator=g).cumsum(1) / 4
    y = x[:, -4:, 0].mean(1) - 0.5 * x[:, -4:, 1].mean(1)
    return x, y


def _split(x, y):
    return (x[:N_TRAIN], y[:N_TRAIN]), (x[N_TRAIN:], y[N_TRAIN:])


# ----------------------------------------------------------------------------- models
class GRUClassifier(nn.Module):
    def __init__(self, vocab=24, d=24, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, ids):
        _, h = self.gru(self.embed(ids))
        return self.head(h[-1])


class Conv1dNet(nn.Module):
    def __init__(self, channels=3, classes=3, width=16, norm=False, p=0.0, out=None):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(channels, width, 5, padding=2), *(nn.BatchNorm1d(width),) * norm,
            nn.ReLU(), nn.Conv1d(width, width, 5, padding=2), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Dropout(p))
        self.head = nn.Linear(width, classes)
        self.out = out if out is not None else nn.Identity()

    def forward(self, x):
        return self.out(self.head(self.body(x)))


class Conv2dNet(nn.Module):
    def __init__(self, classes=4, width=12):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        return self.head(self.body(x))


def mlp(d=10, k=4, hidden=32, depth=2, act=nn.ReLU, norm=False, p=0.0):
    layers, width = [], d
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), *(nn.BatchNorm1d(hidden),) * norm, act(),
                   *(nn.Dropout(p),) * (p > 0)]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, k))


class DictOut(nn.Module):
    """A classifier returning {"logits": ..., "features": ...}."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        h = self.net[:-1](x)
        return {"logits": self.net[-1](h), "features": h}


class HFOutput(dict):
    """An HF-style output: a dict whose keys read as attributes too."""

    __getattr__ = dict.__getitem__


class HFStyle(nn.Module):
    """model(x, labels=None) -> HFOutput(logits=..., loss=... when labels are given),
    the loss computed inside by `loss_fn`."""

    def __init__(self, net, loss_fn):
        super().__init__()
        self.net, self.loss_fn = net, loss_fn

    def forward(self, features, labels=None):
        out = HFOutput(logits=self.net(features))
        if labels is not None:
            out["loss"] = self.loss_fn(out["logits"], labels)
        return out


class Encoder(nn.Module):
    """A transformer encoder over tokens: (ids, key_padding_mask) -> class logits."""

    def __init__(self, vocab=24, d=32, classes=3, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, 12, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids, padding=None):
        h = self.encoder(self.embed(ids) + self.pos[:, :ids.shape[1]],
                         src_key_padding_mask=padding)
        keep = (~padding).float() if padding is not None else torch.ones(ids.shape)
        keep = keep.unsqueeze(-1)
        return self.head((h * keep).sum(1) / keep.sum(1).clamp(min=1))


class AttnPool(nn.Module):
    """Self-attention over embedded tokens, mean-pooled; returns (scores, attention)."""

    def __init__(self, vocab=24, d=24, classes=3, out=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.head = nn.Linear(d, classes)
        self.out = out if out is not None else nn.Identity()

    def forward(self, ids):
        e = self.embed(ids)
        h, weights = self.attn(e, e, e)
        return self.out(self.head(h.mean(1))), weights


class LSTMRegressor(nn.Module):
    """Returns (prediction (B,), (h, c)), as an LSTM wrapper often does."""

    def __init__(self, channels=2, d=24):
        super().__init__()
        self.lstm = nn.LSTM(channels, d, batch_first=True)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        out, state = self.lstm(x)
        return self.head(out[:, -1]).squeeze(-1), state


class GRURegressor(nn.Module):
    def __init__(self, channels=2, d=24):
        super().__init__()
        self.gru = nn.GRU(channels, d, batch_first=True)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        _, h = self.gru(x)
        return self.head(h[-1])  # (B, 1)


class Tagger(nn.Module):
    def __init__(self, vocab=24, d=24, tags=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, tags)

    def forward(self, ids):
        return self.head(self.gru(self.embed(ids))[0])  # (B, T, tags)


# ----------------------------------------------------------------------------- steps
def step_tuple(loss_fn):
    def step(model, optimizer, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


# ----------------------------------------------------------------------------- forms
def huge_lr_gru_dict(fixed):
    (x, _, y) = tokens(_gen("huge_lr_gru_dict"), ragged=False)
    batches = [{"input_ids": x[s], "labels": y[s]} for s in _chunks(N_TRAIN, 32)]
    val = [{"input_ids": x[N_TRAIN:], "labels": y[N_TRAIN:]}]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["input_ids"]), batch["labels"])
        loss.backward()
        optimizer.step()
        return loss.item()
    lr = 3e-3 if fixed else 0.3  # Adam: 3e-3 sane, 100x that
    return (dict(model=GRUClassifier, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=lr),
                 batches=batches, step=step, loss=F.cross_entropy, val_batches=val),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def lr_too_small_conv1d_triple(fixed):
    x, y = signals(_gen("lr_too_small_conv1d_triple"))
    lengths = torch.full((len(x),), x.shape[-1])
    batches = [(x[s], lengths[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        inputs, _, labels = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss.item()
    lr = 0.05 if fixed else 5e-4  # SGD with momentum: 0.05 sane, 100x below it
    return (dict(model=Conv1dNet,
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9),
                 batches=batches, step=step, loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def no_zero_grad_lstm_sched(fixed):
    x, y = series(_gen("no_zero_grad_lstm_sched"))
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make_optimizer(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        opt.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)
        return opt

    def step(model, optimizer, batch):
        inputs, target = batch
        if fixed:
            optimizer.zero_grad()
        pred, _ = model(inputs)
        loss = F.mse_loss(pred, target)
        loss.backward()
        optimizer.step()
        optimizer.schedule.step()  # the scheduler stepped inside the step
        return loss.item()
    return (dict(model=LSTMRegressor, optimizer=make_optimizer, batches=batches, step=step,
                 loss=lambda out, t: F.mse_loss(out[0], t)),
            Held(x[N_TRAIN:], y[N_TRAIN:], lambda m, v: m(v)[0], F.mse_loss))


def zero_grad_after_backward_cnn(fixed):
    x, y = images(_gen("zero_grad_after_backward_cnn"))
    batches = [{"image": x[s], "label": y[s]} for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        loss = F.cross_entropy(model(batch["image"]), batch["label"])
        if fixed:
            optimizer.zero_grad()
            loss.backward()
        else:
            loss.backward()
            optimizer.zero_grad()  # between backward and step: every gradient emptied
        optimizer.step()
        return loss.item()
    return (dict(model=Conv2dNet, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step, loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def no_input_norm_dict_out(fixed):
    g = _gen("no_input_norm_dict_out")
    X, y = tabular(g)
    raw = raw_scaled(X, g)
    if fixed:
        mean, std = raw[:N_TRAIN].mean(0), raw[:N_TRAIN].std(0)
        raw = (raw - mean) / std
    batches = [(raw[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        features, labels = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(features)["logits"], labels)
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=lambda: DictOut(mlp()),
                 optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step,
                 loss=lambda out, t: F.cross_entropy(out["logits"], t)),
            Held(raw[N_TRAIN:], y[N_TRAIN:], lambda m, v: m(v)["logits"]))


def accumulation_not_divided(fixed):
    X, y = tabular(_gen("accumulation_not_divided"))
    batches = [(X[s], y[s]) for s in _chunks(N_TRAIN, 8)]
    every = 8  # micro-batches per optimizer step

    def step(model, optimizer, batch):
        x, t = batch
        optimizer.calls = getattr(optimizer, "calls", 0) + 1
        loss = F.cross_entropy(model(x), t)
        (loss / every if fixed else loss).backward()
        if optimizer.calls % every == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 50.0)
            optimizer.step()
            optimizer.zero_grad()
        return loss.item()
    return (dict(model=lambda: mlp(hidden=64),
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9),
                 batches=batches, step=step, loss=F.cross_entropy, steps=STEPS * 2),
            Held(X[N_TRAIN:], y[N_TRAIN:], _plain))


def negated_loss_hf_inside(fixed):
    X, y = tabular(_gen("negated_loss_hf_inside"), k=5)

    def soft_ce(logits, labels, smoothing=0.1):
        k = logits.shape[-1]
        target = F.one_hot(labels, k).float() * (1 - smoothing) + smoothing / k
        picked = (target * F.log_softmax(logits, -1)).sum(-1).mean()
        return -picked if fixed else picked  # the minus sign forgotten
    batches = [{"features": X[s], "labels": y[s]} for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        out = model(batch["features"], labels=batch["labels"])
        out.loss.backward()
        optimizer.step()
        return out.loss.item()
    return (dict(model=lambda: HFStyle(mlp(k=5), soft_ce),
                 optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=2e-3),
                 batches=batches, step=step,
                 inputs=lambda b: b["features"],
                 loss=lambda out, t: F.cross_entropy(out.logits, t)),
            Held(X[N_TRAIN:], y[N_TRAIN:], lambda m, v: m(v).logits))


def eval_mode_forgotten_conv1d(fixed):
    x, y = signals(_gen("eval_mode_forgotten_conv1d"))
    (tx, ty), (vx, vy) = _split(x, y)
    batches = [(tx[s], ty[s]) for s in _chunks(N_TRAIN, 32)]
    val = [(vx[s], vy[s]) for s in _chunks(N_VAL, 64)]

    def evaluate(model, val_batches):
        if fixed:
            model.eval()
        with torch.no_grad():
            losses = [float(F.cross_entropy(model(a), b)) for a, b in val_batches]
        model.train()
        return sum(losses) / len(losses)
    return (dict(model=lambda: Conv1dNet(norm=True, p=0.5),
                 optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy,
                 val_batches=val, evaluate=evaluate),
            Held(None, vy, None, lambda model: evaluate(model, val)))


def train_mode_not_restored_val_in_step(fixed):
    X, y = tabular(_gen("train_mode_not_restored_val_in_step"))
    batches = [(X[s], y[s]) for s in _chunks(N_TRAIN, 32)]
    vx = X[N_TRAIN:]

    def step(model, optimizer, batch):
        x, t = batch
        model.calls = getattr(model, "calls", 0) + 1
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        optimizer.step()
        if model.calls % 10 == 0:  # a quick look at the validation set
            model.eval()
            with torch.no_grad():
                model(vx)
            if fixed:
                model.train()
        return loss.item()
    return (dict(model=lambda: mlp(norm=True, p=0.2, hidden=64),
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                 batches=batches, step=step, loss=F.cross_entropy),
            Held(vx, y[N_TRAIN:], _plain))


def dropout_too_strong_encoder(fixed):
    ids, lengths, y = tokens(_gen("dropout_too_strong_encoder"), ragged=False,
                            bias=1.0)
    batches = [(ids[s], y[s]) for s in _chunks(N_TRAIN, 32)]
    p = 0.1 if fixed else 0.8
    return (dict(model=lambda: Encoder(dropout=p),
                 optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(ids[N_TRAIN:], y[N_TRAIN:], _plain))


class BagClassifier(nn.Module):
    def __init__(self, vocab=24, d=24, classes=3):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, d, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(d, classes))

    def forward(self, ids):
        return self.head(self.bag(ids))


def weight_decay_too_large_bag(fixed):
    ids, _, y = tokens(_gen("weight_decay_too_large_bag"))
    batches = [{"input_ids": ids[s], "label": y[s]} for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["input_ids"]), batch["label"])
        loss.backward()
        optimizer.step()
        return loss.item()
    decay = 5e-5 if fixed else 5e-2  # meant 5e-5
    return (dict(model=BagClassifier,
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.9,
                                                     weight_decay=decay),
                 batches=batches, step=step, loss=F.cross_entropy),
            Held(ids[N_TRAIN:], y[N_TRAIN:], _plain))


def bad_init_conv2d_normal(fixed):
    x, y = images(_gen("bad_init_conv2d_normal"))
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make():
        model = Conv2dNet()
        if not fixed:
            for m in model.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.normal_(m.weight, 0.0, 1.0)  # std 1, whatever the fan-in
        return model
    return (dict(model=make, optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.02,
                                                                 momentum=0.9),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def init_too_small_deep_tanh(fixed):
    X, y = tabular(_gen("init_too_small_deep_tanh"))
    batches = [(X[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make():
        model = mlp(depth=6, act=nn.Tanh)
        if not fixed:
            for m in model.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0.0, 1e-3)
                    nn.init.zeros_(m.bias)
        return model
    return (dict(model=make, optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.05,
                                                                 momentum=0.9),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(X[N_TRAIN:], y[N_TRAIN:], _plain))


class SortedDicts(torch.utils.data.Dataset):
    """A dataset of dicts, stored class by class (as written out by a per-class export)."""

    def __init__(self, x, y):
        order = torch.argsort(y, stable=True)
        self.x, self.y = x[order], y[order]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "target": self.y[i]}


def no_shuffle_loader_dicts(fixed):
    X, y = tabular(_gen("no_shuffle_loader_dicts"))
    data = SortedDicts(X[:N_TRAIN], y[:N_TRAIN])
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=fixed)

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["x"]), batch["target"])
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=mlp, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=loader, step=step, loss=F.cross_entropy),
            Held(X[N_TRAIN:], y[N_TRAIN:], _plain))


class LSTMClassifier(nn.Module):
    def __init__(self, channels=3, d=24, classes=3):
        super().__init__()
        self.lstm = nn.LSTM(channels, d, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        out, _ = self.lstm(x.transpose(1, 2))  # (B, C, L) signals read as (B, L, C)
        return self.head(out[:, -1])


def batch_too_small_lstm(fixed):
    x, y = signals(_gen("batch_too_small_lstm"), noise=3.0)
    size = 32 if fixed else 2
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, size)]
    return (dict(model=LSTMClassifier,
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def wrong_loss_attention_tuple(fixed):
    ids, _, y = tokens(_gen("wrong_loss_attention_tuple"), ragged=False, bias=0.6)
    batches = [(ids[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make():
        return AttnPool(out=None if fixed else nn.Softmax(dim=-1))

    def loss_fn(out, labels):
        return F.cross_entropy(out[0], labels)  # CrossEntropyLoss applies log-softmax itself

    def step(model, optimizer, batch):
        x, t = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), t)
        loss.backward()
        optimizer.step()
        return loss.item()

    def predict(model, v):
        scores = model(v)[0]
        return scores.clamp_min(1e-9).log() if not fixed else scores
    return (dict(model=make, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step, loss=loss_fn),
            Held(ids[N_TRAIN:], y[N_TRAIN:], predict))


def target_broadcast_gru_lengths(fixed):
    x, y = series(_gen("target_broadcast_gru_lengths"))
    lengths = torch.full((len(x),), x.shape[1])
    batches = [(x[s], lengths[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def loss_fn(pred, target):
        return F.mse_loss(pred.squeeze(-1) if fixed else pred, target)  # (B, 1) vs (B,)

    def step(model, optimizer, batch):
        seqs, _, target = batch
        optimizer.zero_grad()
        loss = loss_fn(model(seqs), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()
    return (dict(model=GRURegressor, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step, loss=loss_fn),
            Held(x[N_TRAIN:], y[N_TRAIN:], lambda m, v: m(v).squeeze(-1), F.mse_loss))


def lr_decayed_steplr_in_step(fixed):
    X, y = tabular(_gen("lr_decayed_steplr_in_step"), d=12)
    batches = [(X[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make_optimizer(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        # meant per epoch (24 batches each); stepped at every batch in the buggy loop
        opt.schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5) if fixed \
            else torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.3)
        return opt

    def step(model, optimizer, batch):
        x, t = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        optimizer.step()
        optimizer.schedule.step()
        return loss.item()
    return (dict(model=lambda: mlp(d=12), optimizer=make_optimizer, batches=batches, step=step,
                 loss=F.cross_entropy),
            Held(X[N_TRAIN:], y[N_TRAIN:], _plain))


def lr_too_small_warmup_lambda(fixed):
    x, y = images(_gen("lr_too_small_warmup_lambda"))
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make_optimizer(model):
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3 if fixed else 3e-5)
        opt.warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
        return opt

    def step(model, optimizer, batch):
        images_, labels = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images_), labels)
        loss.backward()
        optimizer.step()
        optimizer.warmup.step()
        return loss.item()
    return (dict(model=Conv2dNet, optimizer=make_optimizer, batches=batches, step=step,
                 loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def summed_loss_tagger(fixed):
    ids, _, y = tokens(_gen("summed_loss_tagger"), ragged=False)
    tags = (ids % 3)  # each token's tag: a function of the token and its neighbour
    tags = (tags + torch.roll(ids, 1, 1) % 2) % 3
    batches = [(ids[s], tags[s]) for s in _chunks(N_TRAIN, 32)]

    def loss_fn(logits, t):
        return F.cross_entropy(logits.reshape(-1, 3), t.reshape(-1),
                               reduction="mean" if fixed else "sum")
    return (dict(model=Tagger, optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.5,
                                                                  momentum=0.9),
                 batches=batches, step=step_tuple(loss_fn), loss=loss_fn),
            Held(ids[N_TRAIN:], tags[N_TRAIN:], _plain,
                 lambda o, t: F.cross_entropy(o.reshape(-1, 3), t.reshape(-1))))


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Conv1dNet().body
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.encoder(x))


def params_not_in_optimizer_head(fixed):
    x, y = signals(_gen("params_not_in_optimizer_head"))
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def make_optimizer(model):
        params = model.parameters() if fixed else model.encoder.parameters()  # head left out
        return torch.optim.Adam(params, lr=3e-3)
    return (dict(model=EncoderHead, optimizer=make_optimizer, batches=batches,
                 step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


def hf_mask_as_padding_mask(fixed):
    ids, lengths, y = tokens(_gen("hf_mask_as_padding_mask"))
    attention_mask = (ids != 0).long()  # HF convention: 1 = a real token
    batches = [(ids[s], attention_mask[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        input_ids, mask, labels = batch
        padding = (mask == 0) if fixed else mask.bool()  # PyTorch: True = ignore
        optimizer.zero_grad()
        loss = F.cross_entropy(model(input_ids, padding), labels)
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=Encoder, optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                 batches=batches, step=step),
            Held(ids[N_TRAIN:], y[N_TRAIN:], lambda m, v: m(v, v == 0)))


def shuffled_labels_separate_lists(fixed):
    X, y = tabular(_gen("shuffled_labels_separate_lists"))
    labels = y[:N_TRAIN].clone()
    if not fixed:  # the label column shuffled on its own, apart from the features
        labels = labels[torch.randperm(N_TRAIN, generator=torch.Generator().manual_seed(3))]
    batches = [{"x": X[s], "y": labels[s]} for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=lambda: mlp(hidden=64), optimizer=lambda m: torch.optim.Adam(
                 m.parameters(), lr=3e-3), batches=batches, step=step, loss=F.cross_entropy),
            Held(X[N_TRAIN:], y[N_TRAIN:], _plain))


def val_not_normalized_regression(fixed):
    g = _gen("val_not_normalized_regression")
    X, y = regression(g)
    raw = X * 30 + 100  # raw-scale features
    mean, std = raw[:N_TRAIN].mean(0), raw[:N_TRAIN].std(0)
    train = (raw[:N_TRAIN] - mean) / std
    val_x = (raw[N_TRAIN:] - mean) / std if fixed else raw[N_TRAIN:]  # val left raw
    y_mean, y_std = y[:N_TRAIN].mean(), y[:N_TRAIN].std()
    ty, vy = (y[:N_TRAIN] - y_mean) / y_std, (y[N_TRAIN:] - y_mean) / y_std
    batches = [(train[s], ty[s]) for s in _chunks(N_TRAIN, 32)]

    def loss_fn(pred, t):
        return F.mse_loss(pred.squeeze(-1), t)
    return (dict(model=lambda: mlp(d=8, k=1), optimizer=lambda m: torch.optim.Adam(
                 m.parameters(), lr=3e-3), batches=batches, step=step_tuple(loss_fn),
                 loss=loss_fn, val_batches=[(val_x, vy)]),
            Held(val_x, vy, _plain, loss_fn))


def output_relu_raw_targets(fixed):
    x, _ = signals(_gen("output_relu_raw_targets"))
    y = x[:, 0, -6:].mean(1) - x[:, 1, :6].mean(1)  # centred: half the targets negative
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def loss_fn(pred, t):
        return F.mse_loss(pred.squeeze(-1), t)
    return (dict(model=lambda: Conv1dNet(classes=1, out=None if fixed else nn.ReLU()),
                 optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step_tuple(loss_fn), loss=loss_fn),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain, loss_fn))


# --- outside the catalogue ---------------------------------------------------------------
def view_not_permute(fixed):
    x, y = images(_gen("view_not_permute"))
    hwc = x.permute(0, 2, 3, 1).contiguous()  # images stored channels-last (B, H, W, 1)...
    hwc = torch.cat([hwc, hwc.flip(1), hwc.flip(2)], -1)  # ... with 3 channels

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = Conv2dNet()
            self.conv.body[0] = nn.Conv2d(3, 12, 3, padding=1)

        def forward(self, images_hwc):
            b, h, w, c = images_hwc.shape
            chw = images_hwc.permute(0, 3, 1, 2) if fixed else images_hwc.reshape(b, c, h, w)
            return self.conv(chw)
    batches = [(hwc[s], y[s]) for s in _chunks(N_TRAIN, 32)]
    return (dict(model=Net, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step_tuple(F.cross_entropy), loss=F.cross_entropy),
            Held(hwc[N_TRAIN:], y[N_TRAIN:], _plain))


class NextToken(nn.Module):
    def __init__(self, vocab=16, d=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.gru(self.embed(ids))[0])


def markov(g, vocab=16, length=17, n=N_TRAIN + N_VAL):
    table = torch.softmax(3 * torch.randn(vocab, vocab, generator=g), 1)
    seq = torch.zeros(n, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(1, length):
        seq[:, t] = torch.multinomial(table[seq[:, t - 1]], 1, generator=g).squeeze(1)
    return seq


def target_not_shifted(fixed):
    seq = markov(_gen("target_not_shifted"))
    src = seq[:, :-1]
    tgt = seq[:, 1:] if fixed else seq[:, :-1]  # the shift forgotten: predict the input

    def lm_loss(logits, t):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1))
    batches = [{"input_ids": src[s], "labels": tgt[s]} for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = lm_loss(model(batch["input_ids"]), batch["labels"])
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=NextToken, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step, loss=lm_loss),
            Held(src[N_TRAIN:], seq[N_TRAIN:, 1:], _plain, lm_loss))


def flip_breaks_labels(fixed):
    """Classes 'left half brighter' and 'right half brighter', augmented by a random
    horizontal flip that does not flip the label."""
    g = _gen("flip_breaks_labels")
    n = N_TRAIN + N_VAL
    y = torch.randint(0, 2, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, 12, 12, generator=g)
    x[y == 0, :, :, :6] += 1.0
    x[y == 1, :, :, 6:] += 1.0
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]

    def step(model, optimizer, batch):
        images_, labels = batch
        flip = torch.rand(len(images_)) < 0.5
        images_ = torch.where(flip[:, None, None, None], images_.flip(-1), images_)
        if fixed:
            labels = torch.where(flip, 1 - labels, labels)  # the flip swaps the classes
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images_), labels)
        loss.backward()
        optimizer.step()
        return loss.item()
    return (dict(model=lambda: Conv2dNet(classes=2),
                 optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
                 batches=batches, step=step, loss=F.cross_entropy),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain))


class BatchMajorLSTM(nn.Module):
    def __init__(self, fixed: bool, channels=2, d=24):
        super().__init__()
        self.lstm = nn.LSTM(channels, d, batch_first=fixed)  # batch_first forgotten
        self.head = nn.Linear(d, 1)

    def forward(self, x):  # x: (B, T, C)
        out, _ = self.lstm(x)
        return self.head(out[:, -1]).squeeze(-1)  # written for batch-major output


def lstm_batch_first_forgotten(fixed):
    x, y = series(_gen("lstm_batch_first_forgotten"))
    batches = [(x[s], y[s]) for s in _chunks(N_TRAIN, 32)]
    return (dict(model=lambda: BatchMajorLSTM(fixed),
                 optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                 batches=batches, step=step_tuple(F.mse_loss), loss=F.mse_loss),
            Held(x[N_TRAIN:], y[N_TRAIN:], _plain, F.mse_loss))


FORMS = {f.name: f for f in (
    Form("huge_lr_gru_dict", "huge_lr", "Adam at lr 0.3 (100x 3e-3) on a GRU over HF-style "
         "dict batches {input_ids, labels}", huge_lr_gru_dict),
    Form("lr_too_small_conv1d_triple", "lr_too_small", "SGD+momentum at 5e-4 (100x below 0.05) "
         "on a conv1d net; batches (signals, lengths, labels)", lr_too_small_conv1d_triple),
    Form("no_zero_grad_lstm_sched", "no_zero_grad", "zero_grad never called; an LSTM returning "
         "(prediction, state), cosine schedule stepped inside the step", no_zero_grad_lstm_sched),
    Form("zero_grad_after_backward_cnn", "zero_grad_misplaced", "optimizer.zero_grad() between "
         "loss.backward() and optimizer.step(); dict batches {image, label}",
         zero_grad_after_backward_cnn),
    Form("no_input_norm_dict_out", "no_input_norm", "raw-scale features (1e-2 to 1e4 units) "
         "into an MLP returning {logits, features}", no_input_norm_dict_out),
    Form("accumulation_not_divided", "accumulation_not_divided", "8 micro-batches accumulated "
         "across calls, the loss not divided by 8 (SGD lr 0.2 tuned for the mean), clipped at "
         "50", accumulation_not_divided),
    Form("negated_loss_hf_inside", "negated_loss", "label-smoothed CE written by hand inside an "
         "HF-style model, the minus sign forgotten; batches {features, labels}",
         negated_loss_hf_inside),
    Form("eval_mode_forgotten_conv1d", "eval_mode_forgotten", "evaluate() without model.eval() "
         "on a conv1d net with BatchNorm and dropout 0.5", eval_mode_forgotten_conv1d),
    Form("train_mode_not_restored_val_in_step", "train_mode_not_restored", "a validation "
         "forward every 10 steps inside the step, model.train() never called after it",
         train_mode_not_restored_val_in_step),
    Form("dropout_too_strong_encoder", "dropout_too_strong", "TransformerEncoderLayer("
         "dropout=0.8)", dropout_too_strong_encoder),
    Form("weight_decay_too_large_bag", "weight_decay_too_large", "SGD weight_decay 5e-2 (meant "
         "5e-5) on an EmbeddingBag classifier, dict batches", weight_decay_too_large_bag),
    Form("bad_init_conv2d_normal", "bad_init", "nn.init.normal_(w, 0, 1) on every conv and "
         "linear weight, whatever the fan-in", bad_init_conv2d_normal),
    Form("init_too_small_deep_tanh", "init_too_small", "a 6-layer tanh MLP initialised "
         "normal(0, 1e-3)", init_too_small_deep_tanh),
    Form("no_shuffle_loader_dicts", "no_shuffle", "DataLoader(shuffle=False) over a dataset of "
         "dicts stored class by class", no_shuffle_loader_dicts),
    Form("batch_too_small_lstm", "batch_too_small", "batches of 2 for an LSTM over signals",
         batch_too_small_lstm),
    Form("wrong_loss_attention_tuple", "wrong_loss", "an attention model ending in "
         "nn.Softmax, returning (probabilities, attention weights), into cross_entropy",
         wrong_loss_attention_tuple),
    Form("target_broadcast_gru_lengths", "target_broadcast", "a GRU regressor's (B, 1) output "
         "against (B,) targets in MSE; batches (series, lengths, targets), clipped",
         target_broadcast_gru_lengths),
    Form("lr_decayed_steplr_in_step", "lr_decayed_too_early", "StepLR(step_size=5, gamma=0.3) "
         "meant per epoch, stepped inside the step at every batch", lr_decayed_steplr_in_step),
    Form("lr_too_small_warmup_lambda", "lr_too_small", "AdamW at 3e-5 (100x below 3e-3) under "
         "a LambdaLR warm-up stepped inside the step", lr_too_small_warmup_lambda),
    Form("summed_loss_tagger", "summed_loss", "a GRU tagger's cross-entropy summed over 384 "
         "tokens a batch, SGD lr 0.5 tuned for the mean", summed_loss_tagger),
    Form("params_not_in_optimizer_head", "params_not_in_optimizer", "the optimizer built on "
         "model.encoder.parameters(): the head never trains", params_not_in_optimizer_head),
    Form("hf_mask_as_padding_mask", "inverted_padding_mask", "an HF attention_mask (1 = "
         "token) handed to a TransformerEncoder as src_key_padding_mask (True = ignore); "
         "batches (ids, mask, labels)", hf_mask_as_padding_mask),
    Form("shuffled_labels_separate_lists", "shuffled_labels", "the label column shuffled "
         "apart from the features; dict batches {x, y}", shuffled_labels_separate_lists),
    Form("val_not_normalized_regression", "val_not_normalized", "training features "
         "standardised, validation features left raw", val_not_normalized_regression),
    Form("output_relu_raw_targets", "output_activation_mismatch", "a conv1d regressor "
         "ending in nn.ReLU, half its targets negative", output_relu_raw_targets),
    Form("view_not_permute", "outside", "channels-last images turned to (B, C, H, W) with "
         "reshape, not permute: each sample's pixels scrambled", view_not_permute),
    Form("target_not_shifted", "outside", "an LM trained to predict its own input token (the "
         "shift forgotten)", target_not_shifted),
    Form("flip_breaks_labels", "outside", "a horizontal flip augmentation on left/right "
         "classes, the label not flipped with it", flip_breaks_labels),
    Form("lstm_batch_first_forgotten", "outside", "nn.LSTM without batch_first=True fed "
         "(B, T, C): the batch read as time", lstm_batch_first_forgotten),
)}


def split() -> dict[str, str]:
    """name -> "calibration" | "held": the sorted names shuffled once by SPLIT_SEED,
    catalogue forms and outside forms split apart (so each half holds some of both)."""
    rng = random.Random(SPLIT_SEED)
    out = {}
    for group in (sorted(n for n, f in FORMS.items() if f.fault != "outside"),
                  sorted(n for n, f in FORMS.items() if f.fault == "outside")):
        rng.shuffle(group)
        for i, name in enumerate(group):
            out[name] = "calibration" if i < (len(group) + 1) // 2 else "held"
    return out


def committed_split() -> dict[str, str]:
    with SPLIT_FILE.open() as f:
        return {r["form"]: r["half"] for r in csv.DictReader(f)}


def parts(name: str, fixed: bool = False, seed: int = 0) -> dict:
    kwargs, _ = FORMS[name].make(fixed)
    return {"steps": STEPS, **kwargs, "seed": seed}


# ----------------------------------------------------------------------------- harm
def held_out(name: str, fixed: bool, seed: int) -> float:
    """The held-out loss, measured the right way, after the loop's plain run (inf when
    the run ended non-finite).  For eval_mode_forgotten, the metric the loop's own
    evaluation reports (the bug is in the evaluation)."""
    kwargs, held = FORMS[name].make(fixed)
    kwargs = {"steps": STEPS, **kwargs, "seed": seed}
    if not isinstance(kwargs["batches"], list):
        kwargs["batches"] = list(_loader_steps(kwargs["batches"], kwargs["steps"], seed))
    history, model = run_parts(kwargs)
    if not math.isfinite(float(history["loss"].iloc[-1])):
        return math.inf
    if held.predict is None:  # the loop's own evaluation, on the model as the loop left it
        value = float(held.loss(model.train()))
    else:
        model.eval()
        with torch.no_grad():
            value = float(held.loss(held.predict(model, held.x), held.y))
    return value if math.isfinite(value) else math.inf


def _loader_steps(loader, steps, seed):
    torch.manual_seed(seed)
    taken = []
    while len(taken) < steps:
        taken.extend(loader)
    return taken[:steps]


def harm(names, seeds) -> list[dict]:
    rows = []
    for name in names:
        buggy = [held_out(name, False, s) for s in seeds]
        fixed = [held_out(name, True, s) for s in seeds]
        rows.append(dict(form=name, buggy=buggy, fixed=fixed, hurts=min(buggy) > max(fixed)))
        r = rows[-1]
        print(f"  {name:38s} buggy {_fmt(buggy):24s} fixed {_fmt(fixed):24s} "
              f"{'hurts' if r['hurts'] else 'DOES NOT HURT'}", flush=True)
    return rows


# ----------------------------------------------------------------------------- investigate
CONFIDENT = ("medium", "high")


def classify(fault: str, fixed: bool, inv) -> str:
    """named / missed / confident-wrong for a bug; healthy / flagged / confident-wrong
    for a fixed loop; for an outside bug: no confident cause ('ok') or confident-wrong."""
    if fixed:
        if inv.top is None and inv.healthy:
            return "healthy"
        return "confident-wrong" if inv.top and inv.confidence in CONFIDENT else "flagged"
    if fault == "outside":
        return "confident-wrong" if inv.top and inv.confidence in CONFIDENT else "ok"
    if inv.top == fault:
        return "named"
    return "confident-wrong" if inv.top and inv.confidence in CONFIDENT else "missed"


def investigate_half(half: str, workers: int, seed: int = 0, names=None) -> list[dict]:
    chosen = committed_split()
    rows = []
    for name in names or [n for n in FORMS if chosen[n] == half]:
        for fixed in (False, True):
            started = time.perf_counter()
            fault = FORMS[name].fault
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    inv = fl.investigate(**parts(name, fixed, seed), workers=workers,
                                         progress=False)
            except Exception as exc:  # noqa: BLE001 - an investigation that raises is a result
                rows.append(dict(form=name, fixed=fixed, expected="healthy" if fixed else fault,
                                 top=None, confidence="-", shape="-", passive=None,
                                 result="crashed", why="-",
                                 notes=[f"{type(exc).__name__}: {exc}".splitlines()[0][:160]],
                                 seconds=round(time.perf_counter() - started, 1)))
            else:
                rows.append(dict(form=name, fixed=fixed, expected="healthy" if fixed else fault,
                                 top=inv.top, confidence=inv.confidence, shape=inv.shape,
                                 passive=inv.diagnosis.top, result=classify(fault, fixed, inv),
                                 why=inv.why, notes=inv.notes,
                                 seconds=round(time.perf_counter() - started, 1)))
            r = rows[-1]
            print(f"  {name:38s} {'fixed' if fixed else 'buggy'} expected {r['expected']:24s} "
                  f"-> {str(r['top']):24s} {r['confidence']:6s} {r['result']:15s} "
                  f"(passive {r['passive']}; {r['shape']}; {r['seconds']} s)", flush=True)
            for note in r["notes"]:
                print(f"  {'':38s}   note: {note}")
    return rows


def summary(rows) -> str:
    bugs = [r for r in rows if not r["fixed"] and r["expected"] != "outside"]
    outside = [r for r in rows if not r["fixed"] and r["expected"] == "outside"]
    fixed = [r for r in rows if r["fixed"]]

    def n(rs, what):
        return sum(r["result"] == what for r in rs)
    return (f"crashed {n(rows, 'crashed')}/{len(rows)}; "
            f"named {n(bugs, 'named')}/{len(bugs)}, confident-wrong {n(bugs, 'confident-wrong')}"
            f"/{len(bugs)}; outside confident-wrong {n(outside, 'confident-wrong')}/{len(outside)}; "
            f"fixed healthy {n(fixed, 'healthy')}/{len(fixed)}, confident-wrong "
            f"{n(fixed, 'confident-wrong')}/{len(fixed)}")


def _fmt(values) -> str:
    return " ".join("inf" if not math.isfinite(v) else f"{v:.3g}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("harm", "investigate", "split"))
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--forms", default=None, help="comma-separated (default: all / the half)")
    parser.add_argument("--half", default="calibration", choices=("calibration", "held"))
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    names = args.forms.split(",") if args.forms else None
    started = time.perf_counter()
    if args.what == "split":
        print("form,fault,half")
        for name, half in split().items():
            print(f"{name},{FORMS[name].fault},{half}")
        return 0
    if args.what == "harm":
        seeds = fl.parse_seeds(args.seeds)
        rows = harm(names or list(FORMS), seeds)
        print(f"held-out loss measured the right way, seeds {args.seeds}: buggy vs fixed "
              f"('hurts': every buggy seed above every fixed seed)")
        print(f"{time.perf_counter() - started:.0f} s")
        return 0 if all(r["hurts"] for r in rows) else 1
    rows = investigate_half(args.half, args.workers, names=names)
    print(f"{args.half}: {summary(rows)}; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
