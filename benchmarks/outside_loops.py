"""Training loops that go wrong in ways no catalogue fault names, as `fl.investigate`'s
parts; their fixed versions are healthy controls of other architectures and optimizers.

An investigation of one of these should end with "no catalogue cause fits" (or at
least no confident name): each is a real way training fails, and none is the mechanism
of a catalogue fault.  `parts(name, fixed, seed)` gives the keyword arguments;
`harm()` checks that each bug really hurts: the held-out loss, measured the correct
way (the right loss on the right targets), buggy against fixed.

    python benchmarks/outside_loops.py [--seeds 0-2] [--loops graph_cut,...]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

import failurelab as fl
from failurelab.zoo.contract import run_parts

STEPS = 150
BATCH = 32
N_TRAIN, N_VAL = 1024, 256
HURTS = 1.5  # a bug "hurts" when its held-out loss is this many times the fixed loop's


@dataclass(frozen=True)
class Outside:
    name: str
    wrong: str  # one line: what is wrong
    make: Callable  # (fixed: bool) -> dict of parts without the seed
    score: Callable  # (model, val_batches) -> the held-out loss, measured correctly


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _batches(X, y, size=BATCH) -> list[tuple]:
    return [(X[i:i + size], y[i:i + size]) for i in range(0, len(X), size)]


def _plain_step(loss_fn, model, optimizer, batch):
    """zero_grad -> forward -> loss -> backward -> step: the textbook step."""
    x, y = batch
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def _held_out(loss_fn, model, val_batches) -> float:
    model.eval()
    with torch.no_grad():
        losses = [float(loss_fn(model(x), y)) for x, y in val_batches]
    return sum(losses) / len(losses)


def _optimizer(kind, lr, model, **options):
    return kind(model.parameters(), lr=lr, **options)


# --- graph_cut: features cached with .detach() and the cached copy fed to the head ------

def _signals(g, classes=3, channels=4, length=16):
    n = N_TRAIN + N_VAL
    templates = torch.randn(classes, channels, length, generator=g).cumsum(-1) / 3
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(0, length, (n,), generator=g)
    X = torch.stack([templates[c].roll(int(s), -1) for c, s in zip(y, shift, strict=True)])
    X = X + 0.7 * torch.randn(X.shape, generator=g)
    return (X - X.mean()) / X.std(), y


class CachedFeatures(nn.Module):
    """Conv1d + GroupNorm encoder and a linear head; the features are kept (detached,
    for an embedding plot) and, in the buggy version, the kept copy is what the head
    reads: the encoder never gets a gradient."""

    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.features = nn.Sequential(
            nn.Conv1d(4, 16, 5, padding=2), nn.GroupNorm(4, 16), nn.GELU(),
            nn.Conv1d(16, 16, 5, padding=2), nn.GroupNorm(4, 16), nn.GELU(),
            nn.AdaptiveMaxPool1d(1), nn.Flatten())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        f = self.features(x)
        self.last_features = f.detach()
        return self.head(f if self.fixed else self.last_features)  # BUG: the detached copy


def _graph_cut(fixed: bool) -> dict:
    X, y = _signals(_gen("graph_cut"))
    return dict(model=partial(CachedFeatures, fixed),
                optimizer=partial(_optimizer, torch.optim.NAdam, 3e-3),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]),
                step=partial(_plain_step, F.cross_entropy), loss=F.cross_entropy,
                val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- frozen_random_backbone: the "pretrained" backbone never loaded, run under no_grad --

def _images(g, classes=4, size=12):
    n = N_TRAIN + N_VAL
    coarse = torch.randn(classes, 1, 4, 4, generator=g)
    templates = F.interpolate(coarse, size=(size, size), mode="bilinear")
    y = torch.randint(0, classes, (n,), generator=g)
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    X = torch.stack([templates[c].roll(tuple(s.tolist()), dims=(1, 2)) for c, s in zip(y, shifts, strict=True)])
    X = X + 0.6 * torch.randn(X.shape, generator=g)
    return (X - X.mean()) / X.std(), y


class FineTuned(nn.Module):
    """A small conv backbone and a linear head, written as in a fine-tuning example;
    the line that loads the backbone's pretrained weights is missing, so the frozen
    backbone is a random one."""

    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.backbone = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        if self.fixed:
            return self.head(self.backbone(x))
        with torch.no_grad():  # BUG: a frozen backbone, but nothing pretrained was loaded
            features = self.backbone(x)
        return self.head(features)


def _frozen_random_backbone(fixed: bool) -> dict:
    X, y = _images(_gen("frozen_random_backbone"))
    return dict(model=partial(FineTuned, fixed),
                optimizer=partial(_optimizer, torch.optim.SGD, 0.05, momentum=0.9),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]),
                step=partial(_plain_step, F.cross_entropy), loss=F.cross_entropy,
                val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- time_major_tagger: (T, B) logits flattened against (B, T) tags ---------------------

def _tagged(g, length=12, vocab=20, tags=4):
    n = N_TRAIN + N_VAL
    X = torch.randint(0, vocab, (n, length), generator=g)
    table = torch.randint(0, tags, (vocab, vocab), generator=g)
    previous = torch.cat([torch.zeros(n, 1, dtype=torch.long), X[:, :-1]], 1)
    return X, table[X, previous]  # each tag depends on the token and the one before


class Tagger(nn.Module):
    """Embedding -> GRU -> per-token tag logits, (B, T, tags)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 4)

    def forward(self, tokens):
        return self.out(self.gru(self.embed(tokens))[0])


def _tag_loss(fixed: bool, logits, tags):
    """Cross-entropy over every token.  The buggy flatten reads the logits time-major
    (copied from a seq-first model) while the tags stay batch-major: each prediction
    is scored against another sample's tag."""
    flat = logits.reshape(-1, 4) if fixed else logits.transpose(0, 1).reshape(-1, 4)  # BUG
    return F.cross_entropy(flat, tags.reshape(-1))


def _time_major_tagger(fixed: bool) -> dict:
    X, y = _tagged(_gen("time_major_tagger"))
    loss = partial(_tag_loss, fixed)
    return dict(model=Tagger, optimizer=partial(_optimizer, torch.optim.Adam, 1e-2),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]), step=partial(_plain_step, loss),
                loss=loss, val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- forgotten_square: a regression loss that rewards large negative outputs ------------

def _regression(g, d=8):
    n = N_TRAIN + N_VAL
    X = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g) / math.sqrt(d)
    y = torch.tanh(1.5 * X @ w) + 0.3 * X[:, :1] + 0.05 * torch.randn(n, 1, generator=g)
    return X, (y - y.mean()) / y.std()


def _mlp(d_in=8, d_out=1, hidden=32):
    return nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, d_out))


def _residual_loss(fixed: bool, pred, target):
    """Mean squared error, the square forgotten in the buggy version: the mean residual
    falls without bound as the outputs go to minus infinity."""
    return ((pred - target) ** 2).mean() if fixed else (pred - target).mean()  # BUG


def _forgotten_square(fixed: bool) -> dict:
    X, y = _regression(_gen("forgotten_square"))
    loss = partial(_residual_loss, fixed)
    return dict(model=_mlp, optimizer=partial(_optimizer, torch.optim.AdamW, 1e-2),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]), step=partial(_plain_step, loss),
                loss=loss, val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- first_target_collate: a collate_fn that gives the whole batch one target ----------

def _collate(fixed: bool, items):
    """Dict batches from (x, y) samples; the buggy one keeps the first sample's target
    for the whole batch, and MSE broadcasts it against every output."""
    x = torch.stack([i[0] for i in items])
    y = torch.stack([i[1] for i in items]) if fixed else items[0][1]  # BUG: (1,), not (B, 1)
    return {"x": x, "y": y}


def _dict_step(model, optimizer, batch):
    optimizer.zero_grad()
    loss = F.mse_loss(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
    return loss.item()


def _mse(pred, target):
    return F.mse_loss(pred, target.expand_as(pred) if target.numel() == 1 else target)


def _first_target_collate(fixed: bool) -> dict:
    X, y = _regression(_gen("first_target_collate"))
    samples = list(zip(X[:N_TRAIN], y[:N_TRAIN], strict=True))
    batches = [_collate(fixed, samples[i:i + BATCH]) for i in range(0, N_TRAIN, BATCH)]
    return dict(model=_mlp, optimizer=partial(_optimizer, torch.optim.RMSprop, 3e-3),
                batches=batches, step=_dict_step, loss=_mse,
                val_batches=[{"x": X[N_TRAIN:], "y": y[N_TRAIN:]}], steps=STEPS)


# --- seq_first_flatten: a seq-first GRU's (T, B, H) output flattened with view(B, -1) ---

def _sequences(g, length=8, channels=3, classes=3):
    n = N_TRAIN + N_VAL
    X = torch.randn(n, length, channels, generator=g)
    w = torch.randn(channels, classes, generator=g)
    weights = torch.linspace(0.2, 1.0, length).unsqueeze(-1)
    return X, ((X @ w) * weights).sum(1).argmax(1)  # each class a weighted sum over time


class SeqClassifier(nn.Module):
    """A GRU with PyTorch's default seq-first layout and a linear classifier over every
    time step's state.  The buggy flatten views the (T, B, H) output as (B, T*H): each
    row mixes the states of several samples."""

    def __init__(self, fixed: bool, length=8):
        super().__init__()
        self.fixed = fixed
        self.gru = nn.GRU(3, 16)  # batch_first=False: (T, B, C)
        self.out = nn.Linear(16 * length, 3)

    def forward(self, x):
        states, _ = self.gru(x.transpose(0, 1))  # (T, B, H)
        if self.fixed:
            flat = states.transpose(0, 1).reshape(x.shape[0], -1)
        else:
            flat = states.contiguous().view(x.shape[0], -1)  # BUG: mixes samples
        return self.out(flat)


def _seq_first_flatten(fixed: bool) -> dict:
    X, y = _sequences(_gen("seq_first_flatten"))
    return dict(model=partial(SeqClassifier, fixed),
                optimizer=partial(_optimizer, torch.optim.Adagrad, 0.05),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]),
                step=partial(_plain_step, F.cross_entropy), loss=F.cross_entropy,
                val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- nll_on_logits: NLLLoss handed raw logits (the log_softmax forgotten) ---------------

def _blobs(g, d=10, classes=4):
    n = N_TRAIN + N_VAL
    centres = 1.5 * torch.randn(classes, d, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return centres[y] + torch.randn(n, d, generator=g), y


def _classifier(d_in=10, classes=4, hidden=64):
    return nn.Sequential(nn.Linear(d_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def _nll(fixed: bool, logits, labels):
    """NLLLoss expects log-probabilities; the buggy loop hands it the raw logits: the
    loss is minus the true class's logit, which falls without bound as that logit
    grows (nothing pushes the other classes' logits down)."""
    return F.nll_loss(F.log_softmax(logits, -1) if fixed else logits, labels)  # BUG


def _nll_on_logits(fixed: bool) -> dict:
    X, y = _blobs(_gen("nll_on_logits"))
    loss = partial(_nll, fixed)
    return dict(model=_classifier, optimizer=partial(_optimizer, torch.optim.SGD, 0.05,
                                                     momentum=0.9),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]), step=partial(_plain_step, loss),
                loss=loss, val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


# --- softmax_over_batch: per-token log-probabilities normalised over the batch ----------

class BatchSoftmaxTagger(nn.Module):
    """Embedding -> GRU -> per-token log-probabilities, (B, T, tags).  The buggy
    version normalises over dim 0, the batch, as nn.LogSoftmax() without a dim does
    for a 3-d input: each sample's probabilities depend on the other samples."""

    def __init__(self, fixed: bool):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 4)
        self.log_probs = nn.LogSoftmax(dim=-1 if fixed else 0)  # BUG: dim 0 is the batch

    def forward(self, tokens):
        return self.log_probs(self.out(self.gru(self.embed(tokens))[0]))


def _token_nll(log_probs, tags):
    return F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]), tags.reshape(-1))


def _softmax_over_batch(fixed: bool) -> dict:
    X, y = _tagged(_gen("softmax_over_batch"))
    return dict(model=partial(BatchSoftmaxTagger, fixed),
                optimizer=partial(_optimizer, torch.optim.Adam, 1e-2),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]), step=partial(_plain_step, _token_nll),
                loss=_token_nll, val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


def _score_tags(model, val_batches):
    """Token cross-entropy of the model's outputs read as tag scores (log-softmax over
    the tags), one sentence at a time, as a deployed tagger reads them: the fixed
    model's output already is that; the buggy one normalised each score against the
    other sentences of its batch, and alone it has none (every score 0: uniform)."""
    singles = [(x[i:i + 1], y[i:i + 1]) for x, y in val_batches for i in range(len(x))]
    return _held_out(lambda out, tags: F.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                       tags.reshape(-1)), model, singles)


# --- unregistered_weight: a projection kept as a plain tensor, never a Parameter -------

class Projected(nn.Module):
    """A learned input projection and an MLP head.  The buggy version keeps the
    projection as a tensor with requires_grad (torch.randn(...).requires_grad_()), not
    an nn.Parameter: model.parameters() never lists it, so no optimizer updates it and
    the model trains on a random projection to fewer dimensions."""

    def __init__(self, fixed: bool, d_in=16, d_proj=4):
        super().__init__()
        weight = torch.randn(d_in, d_proj) / math.sqrt(d_in)
        if fixed:
            self.proj = nn.Parameter(weight)
        else:
            self.proj = weight.requires_grad_()  # BUG: not registered
        self.head = _mlp(d_in=d_proj)

    def forward(self, x):
        return self.head(x @ self.proj)


def _wide_regression(g, d=16):
    n = N_TRAIN + N_VAL
    X = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g) / math.sqrt(d)
    y = torch.tanh(1.5 * X @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return X, (y - y.mean()) / y.std()


def _unregistered_weight(fixed: bool) -> dict:
    X, y = _wide_regression(_gen("unregistered_weight"))
    return dict(model=partial(Projected, fixed), optimizer=partial(_optimizer, torch.optim.Adam, 3e-3),
                batches=_batches(X[:N_TRAIN], y[:N_TRAIN]), step=partial(_plain_step, F.mse_loss),
                loss=F.mse_loss, val_batches=[(X[N_TRAIN:], y[N_TRAIN:])], steps=STEPS)


def _score(loss_fn, model, val_batches):
    return _held_out(loss_fn, model, val_batches)


def _score_dict(model, val_batches):
    return _held_out(F.mse_loss, model, [(b["x"], b["y"]) for b in val_batches])


LOOPS = {o.name: o for o in (
    Outside("graph_cut", "the head reads a .detach()-ed copy of the features: the encoder "
            "never learns", _graph_cut, partial(_score, F.cross_entropy)),
    Outside("frozen_random_backbone", "a 'pretrained' backbone run under torch.no_grad() "
            "whose weights were never loaded: random frozen features", _frozen_random_backbone,
            partial(_score, F.cross_entropy)),
    Outside("time_major_tagger", "tag logits flattened time-major against batch-major tags: "
            "predictions scored against other samples' tags", _time_major_tagger,
            partial(_score, partial(_tag_loss, True))),
    Outside("forgotten_square", "regression loss (pred - y).mean(): the square forgotten, "
            "the loss falls without bound as outputs go negative", _forgotten_square,
            partial(_score, F.mse_loss)),
    Outside("first_target_collate", "collate_fn gives the whole batch its first sample's "
            "target, broadcast by MSE", _first_target_collate, _score_dict),
    Outside("seq_first_flatten", "a seq-first GRU's (T, B, H) states flattened with "
            "view(B, -1): each row mixes several samples", _seq_first_flatten,
            partial(_score, F.cross_entropy)),
    Outside("nll_on_logits", "NLLLoss handed raw logits (log_softmax forgotten): the loss "
            "is minus the true logit, unbounded below", _nll_on_logits,
            partial(_score, F.cross_entropy)),
    Outside("softmax_over_batch", "per-token LogSoftmax over dim 0, the batch (a 3-d "
            "input's implicit dim): each sample normalised against the others",
            _softmax_over_batch, _score_tags),
    Outside("unregistered_weight", "a projection kept as a tensor with requires_grad, not "
            "an nn.Parameter: never in model.parameters(), never trained",
            _unregistered_weight, partial(_score, F.mse_loss)),
)}


def parts(name: str, fixed: bool = False, seed: int = 0) -> dict:
    """`fl.investigate`'s keyword arguments for loop `name`, buggy or fixed."""
    if name not in LOOPS:
        raise KeyError(f"unknown loop {name!r}; known: {', '.join(LOOPS)}")
    return {**LOOPS[name].make(fixed), "seed": seed}


def trained_loss(name: str, fixed: bool, seed: int) -> float:
    """The held-out loss, measured correctly, after the loop's plain run (inf if the run
    ended non-finite)."""
    kwargs = parts(name, fixed, seed)
    history, model = run_parts(kwargs)
    if not math.isfinite(float(history["loss"].iloc[-1])):
        return math.inf
    value = LOOPS[name].score(model, kwargs["val_batches"])
    return value if math.isfinite(value) else math.inf


def harm(names=None, seeds=(0, 1, 2)) -> list[dict]:
    """Buggy and fixed held-out loss per loop and seed; `hurts` on every seed?"""
    rows = []
    for name in names or LOOPS:
        buggy = [trained_loss(name, False, s) for s in seeds]
        fixed = [trained_loss(name, True, s) for s in seeds]
        rows.append(dict(loop=name, buggy=buggy, fixed=fixed,
                         hurts=all(b > HURTS * f for b, f in zip(buggy, fixed, strict=True))))
    return rows


def _fmt(values) -> str:
    return " ".join(fl_fmt(v) for v in values)


def fl_fmt(v: float) -> str:
    return "inf" if not math.isfinite(v) else f"{v:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--loops", default=None, help="comma-separated (default: all)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Using a target size")  # the collate bug's
    names = args.loops.split(",") if args.loops else list(LOOPS)
    seeds = fl.parse_seeds(args.seeds)
    start = time.perf_counter()
    rows = harm(names, seeds)
    print(f"held-out loss measured correctly, seeds {args.seeds} (buggy vs fixed; "
          f"'hurts': buggy > {HURTS}x fixed on every seed)")
    for r in rows:
        print(f"  {r['loop']:24s} buggy {_fmt(r['buggy']):24s} fixed {_fmt(r['fixed']):24s} "
              f"{'hurts' if r['hurts'] else 'DOES NOT HURT'}")
        print(f"  {'':24s} {LOOPS[r['loop']].wrong}")
    print(f"{time.perf_counter() - start:.0f} s")
    return 0 if all(r["hurts"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
