"""Healthy trends: does the loss-curve shape read "healthy" on short, untuned, healthy loops?

`healthy_probe.py`'s loops are tuned and run to convergence.  These are written the way
people write a first loop: a step cap of 100-300, per-epoch validation on a small
held-out set, noisy minibatches, a loss whose floor sits far above zero (noisy labels,
low signal-to-noise regression, distillation), regression targets on their raw scale,
a model still improving when the cap stops it, fine-tuning that starts near its floor,
and mild overfitting late in the run.  Nothing is planted: every loop is correct, and
each one trains (the `val_end` and `trivial` columns show how far: the last validation
loss against the best constant predictor's).  What is read is the trend verdict
(`shapes.classify`: plateau / degrading / oscillating / ...) and, for reference, the
top cause of `fl.diagnose`.

    OMP_NUM_THREADS=1 python benchmarks/healthy_trends.py [--seeds 0-2] [--loops a,b]
                                                          [--part old|new|held]

Each run takes about a second; every loop on three seeds about a minute.  Written to
find the general causes of the real-bug corpus's false alarms (issue 32) without
looking at the held-out cases: every loop here was designed from a pattern of common
practice, not from a case.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

import failurelab as fl
from failurelab.evidence import shapes
from failurelab.evidence.quantities import measure


@dataclass
class Loop:
    """Everything one healthy run is made of."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batches: list  # (x, y) pairs, cycled until `steps`
    loss: Callable  # (output, target) -> loss
    steps: int
    val: list | None = None  # (x, y) pairs
    val_every: int = 10  # steps between validation passes ("an epoch")
    scheduler: object = None
    val_loss: Callable | None = None  # the validation yardstick (default: `loss`)
    before: Callable | None = None  # () -> None, run unmonitored before the loop


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _batches(x: torch.Tensor, y: torch.Tensor, size: int) -> list:
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def _clusters(seed: int, n: int, d: int, k: int, noise: float):
    g = _g(seed)
    centres = torch.randn(k, d, generator=g)
    y = torch.randint(k, (n,), generator=g)
    return centres[y] + noise * torch.randn(n, d, generator=g), y


def _mlp(d_in: int, hidden: int, d_out: int, layers: int = 1) -> nn.Module:
    mods, d = [], d_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    return nn.Sequential(*mods, nn.Linear(d, d_out))


# --- the loops -------------------------------------------------------------------------------
# Each takes a seed and returns a Loop; torch.manual_seed(seed) is set before it is built.

def cls_adam_short(seed):
    """5 overlapping clusters, MLP, Adam 1e-3, batch 32, 150 steps, val (64) every 10."""
    x, y = _clusters(seed, 1024 + 64, 20, 5, 1.5)
    m = _mlp(20, 64, 5)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-64], y[:-64], 32),
                nn.CrossEntropyLoss(), 150, _batches(x[-64:], y[-64:], 64))


def cls_sgd_steplr(seed):
    """Clusters, 2-layer MLP, SGD momentum 0.9 lr 0.05, StepLR(100, 0.5), 300 steps."""
    x, y = _clusters(seed, 2048 + 128, 32, 10, 1.2)
    m = _mlp(32, 128, 10, layers=2)
    opt = torch.optim.SGD(m.parameters(), 0.05, momentum=0.9)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 64), nn.CrossEntropyLoss(), 300,
                _batches(x[-128:], y[-128:], 128), val_every=32,
                scheduler=torch.optim.lr_scheduler.StepLR(opt, 100, 0.5))


def noisy_binary(seed):
    """Binary labels, 20% flipped at random: the loss floor is ~0.5 nats, start 0.69."""
    g = _g(seed)
    x = torch.randn(4096 + 256, 16, generator=g)
    clean = (x[:, :4].sum(1) > 0).long()
    flip = torch.rand(len(x), generator=g) < 0.2
    y = torch.where(flip, 1 - clean, clean).float()
    m = _mlp(16, 32, 1)
    return Loop(m, torch.optim.Adam(m.parameters(), 3e-3),
                _batches(x[:-256], y[:-256, None], 64), nn.BCEWithLogitsLoss(), 200,
                _batches(x[-256:], y[-256:, None], 256), val_every=64)


def hard_multiclass(seed):
    """10 heavily overlapping clusters: the best reachable loss is well above zero."""
    x, y = _clusters(seed, 4096 + 256, 16, 10, 3.0)
    m = _mlp(16, 64, 10)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-256], y[:-256], 64),
                nn.CrossEntropyLoss(), 200, _batches(x[-256:], y[-256:], 256), val_every=64)


def reg_raw_scale(seed):
    """Regression on raw targets (scores 0-16, like ratings), MSE, AdamW 1e-3, batch 32."""
    g = _g(seed)
    x = torch.randn(2048 + 128, 64, generator=g)
    w = torch.randn(64, generator=g) / 8
    y = (8 + 4 * (x @ w) + 0.7 * torch.randn(len(x), generator=g)).clamp(0, 16)
    m = nn.Linear(64, 1)
    return Loop(m, torch.optim.AdamW(m.parameters(), 1e-2),
                _batches(x[:-128], y[:-128, None], 32), nn.MSELoss(), 300,
                _batches(x[-128:], y[-128:, None], 128))


def reg_low_snr(seed):
    """Standardised regression where noise carries most of the variance (R^2 about 0.3)."""
    g = _g(seed)
    x = torch.randn(4096 + 256, 8, generator=g)
    w = torch.randn(8, generator=g)
    signal = torch.tanh(x @ w / 3)
    y = signal / signal.std() * 0.65 + 0.75 * torch.randn(len(x), generator=g)
    m = _mlp(8, 32, 1)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3),
                _batches(x[:-256], y[:-256, None], 64), nn.MSELoss(), 200,
                _batches(x[-256:], y[-256:, None], 256), val_every=64)


def reg_house_prices(seed):
    """Prices in units of 100k (1-9) from 13 standardised features, SGD lr 1e-2, batch 16."""
    g = _g(seed)
    x = torch.randn(512 + 64, 13, generator=g)
    w = torch.randn(13, generator=g) / 3
    y = 5 + x @ w + 0.3 * (x[:, 0] * x[:, 1]) + 0.4 * torch.randn(len(x), generator=g)
    m = _mlp(13, 32, 1)
    return Loop(m, torch.optim.SGD(m.parameters(), 1e-2), _batches(x[:-64], y[:-64, None], 16),
                nn.MSELoss(), 200, _batches(x[-64:], y[-64:, None], 64), val_every=32)


def reg_prices_raw(seed):
    """Prices around 100 (spread 30, noise 10) from 13 standardised features, a linear
    model, SGD lr 5e-3, batch 16: the validation MSE near its floor of ~100 wanders by
    units, on a first value of ~10^4."""
    g = _g(seed)
    x = torch.randn(1024 + 64, 13, generator=g)
    w = torch.randn(13, generator=g) / math.sqrt(13)
    y = 100 + 30 * (x @ w) + 10 * torch.randn(len(x), generator=g)
    m = nn.Linear(13, 1)
    return Loop(m, torch.optim.SGD(m.parameters(), 5e-3), _batches(x[:-64], y[:-64, None], 16),
                nn.MSELoss(), 300, _batches(x[-64:], y[-64:, None], 64), val_every=16)


def slow_cnn(seed):
    """A small CNN on 16x16 images at Adam 1e-4: still improving when the cap stops it."""
    g = _g(seed)
    k = 10
    protos = torch.randn(k, 1, 16, 16, generator=g)
    y = torch.randint(k, (2048 + 128,), generator=g)
    x = protos[y] + 1.5 * torch.randn(len(y), 1, 16, 16, generator=g)
    m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(16 * 16, k))
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-4), _batches(x[:-128], y[:-128], 64),
                nn.CrossEntropyLoss(), 200, _batches(x[-128:], y[-128:], 128), val_every=32)


def finetune_near_floor(seed):
    """Fine-tuning: the model was trained first (unmonitored), then fine-tuned at a tenth
    of the rate on fresh samples of the same task: it starts near its floor."""
    x, y = _clusters(seed, 4096 + 256, 20, 5, 1.5)
    m = _mlp(20, 64, 5)
    loss = nn.CrossEntropyLoss()

    def pretrain():
        opt = torch.optim.Adam(m.parameters(), 1e-3)
        for xb, yb in _batches(x[2048:-256], y[2048:-256], 32) * 2:
            opt.zero_grad()
            loss(m(xb), yb).backward()
            opt.step()
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-4), _batches(x[:2048], y[:2048], 32),
                loss, 100, _batches(x[-256:], y[-256:], 256), val_every=20, before=pretrain)


def distill_soft_targets(seed):
    """Distillation: KL to a teacher's T=4 soft targets (x T^2) plus 0.1 CE; the student
    cannot match the teacher's per-sample noise, so the training loss keeps a floor."""
    x, y = _clusters(seed, 2048 + 128, 20, 10, 1.5)
    g = _g(seed + 1)  # a teacher that is right on most samples, unsure on some
    t_logits = 4 * nn.functional.one_hot(y, 10) + 1.5 * torch.randn(len(y), 10, generator=g)
    targets = torch.cat([y[:, None].float(), t_logits], 1)  # label, then teacher logits
    m = _mlp(20, 32, 10)
    t = 4.0

    def kd(out, tgt):
        soft = nn.functional.kl_div(nn.functional.log_softmax(out / t, 1),
                                    nn.functional.softmax(tgt[:, 1:] / t, 1),
                                    reduction="batchmean") * t * t
        return 0.9 * soft + 0.1 * nn.functional.cross_entropy(out, tgt[:, 0].long())
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3),
                _batches(x[:-128], targets[:-128], 64), kd, 200,
                _batches(x[-128:], targets[-128:], 128), val_every=32,
                val_loss=lambda out, tgt: nn.functional.cross_entropy(out, tgt[:, 0].long()))


def small_batch_sgd(seed):
    """Batch size 4, plain SGD lr 0.01: every loss is one tiny, noisy batch."""
    x, y = _clusters(seed, 1200 + 64, 10, 4, 1.2)
    m = _mlp(10, 32, 4)
    return Loop(m, torch.optim.SGD(m.parameters(), 1e-2), _batches(x[:-64], y[:-64], 4),
                nn.CrossEntropyLoss(), 300, _batches(x[-64:], y[-64:], 64), val_every=50)


def mild_overfit(seed):
    """256 training samples, a 256-unit MLP, Adam 1e-3 for 300 steps (37 epochs): the
    validation loss bottoms out and creeps up a little at the end, as it often does."""
    x, y = _clusters(seed, 256 + 128, 20, 4, 1.6)
    m = _mlp(20, 256, 4)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-128], y[:-128], 32),
                nn.CrossEntropyLoss(), 300, _batches(x[-128:], y[-128:], 128), val_every=8)


def onecycle_lstm(seed):
    """LSTM sequence classifier (sign of a running sum), OneCycleLR to 1e-2, 200 steps."""
    g = _g(seed)
    x = torch.randn(2048 + 128, 12, 4, generator=g)
    y = (x[:, :, 0].sum(1) > 0).long()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 32, batch_first=True)
            self.head = nn.Linear(32, 2)

        def forward(self, inp):
            return self.head(self.rnn(inp)[0][:, -1])
    m = Net()
    opt = torch.optim.Adam(m.parameters(), 1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 1e-2, total_steps=200)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 32), nn.CrossEntropyLoss(), 200,
                _batches(x[-128:], y[-128:], 128), val_every=20, scheduler=sched)


def fast_floor_long_tail(seed):
    """Easy clusters: the loss reaches its floor in 30 steps, then 270 steps at the floor."""
    x, y = _clusters(seed, 2048 + 128, 20, 3, 0.6)
    m = _mlp(20, 64, 3)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-2), _batches(x[:-128], y[:-128], 32),
                nn.CrossEntropyLoss(), 300, _batches(x[-128:], y[-128:], 128), val_every=32)


def autoencoder_mse(seed):
    """An MSE autoencoder (64 -> 8 -> 64) of data with 8 latent factors plus noise."""
    g = _g(seed)
    z = torch.randn(2048 + 128, 8, generator=g)
    x = z @ torch.randn(8, 64, generator=g) / 3 + 0.3 * torch.randn(len(z), 64, generator=g)
    m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8), nn.Linear(8, 32),
                      nn.ReLU(), nn.Linear(32, 64))
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-128], x[:-128], 64),
                nn.MSELoss(), 250, _batches(x[-128:], x[-128:], 128), val_every=32)


def label_smoothing_cos(seed):
    """CrossEntropy(label_smoothing=0.2), SGD momentum, cosine to zero over 200 steps."""
    x, y = _clusters(seed, 2048 + 128, 20, 10, 1.0)
    m = _mlp(20, 64, 10)
    opt = torch.optim.SGD(m.parameters(), 0.05, momentum=0.9)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 64),
                nn.CrossEntropyLoss(label_smoothing=0.2), 200,
                _batches(x[-128:], y[-128:], 128), val_every=32,
                scheduler=torch.optim.lr_scheduler.CosineAnnealingLR(opt, 200))


# --- more families (round 5, issue 32's "fixed programs read healthy") ------------------
# Each loop below is a correct, clean program; its docstring says what makes it healthy:
# the floor its loss can reach (label noise, target noise) and what it reaches, against
# the trivial baseline (predicting the class prior or the target mean), which the
# `trivial` column prints for every loop.  They were written before any rule was changed, from common
# practice; `HELD` families were read only before and after the change, never to tune it.

def _noisy_labels(seed, n, d, k, noise, flip):
    """Clusters whose labels are replaced by a uniformly random class with chance
    `flip`: the Bayes loss sits far above zero."""
    x, y = _clusters(seed, n, d, k, noise)
    g = _g(seed + 7)
    swap = torch.rand(n, generator=g) < flip
    return x, torch.where(swap, torch.randint(k, (n,), generator=g), y)


def noisy_labels_10(seed):
    """10 well-separated clusters, 30% of labels redrawn at random (27% wrong): the best
    loss is ~1.1 nats against ln 10 = 2.3 at the start; Adam 1e-3, batch 64, 250 steps.
    Reaches validation accuracy ~0.7 (the clean ceiling 0.73) vs 0.1 by chance."""
    x, y = _noisy_labels(seed, 4096 + 256, 20, 10, 0.8, 0.3)
    m = _mlp(20, 64, 10)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-256], y[:-256], 64),
                nn.CrossEntropyLoss(), 250, _batches(x[-256:], y[-256:], 256), val_every=64)


def noisy_labels_binary_sgd(seed):
    """Binary task with 25% of labels flipped, SGD momentum 0.9 lr 0.02, batch 32: the
    loss can only go from ln 2 = 0.69 to H(0.25) = 0.56; in 250 steps the validation loss
    reaches 0.64 (measured, seeds 0-2), about 60% of the way, and is still improving."""
    g = _g(seed)
    x = torch.randn(4096 + 256, 10, generator=g)
    clean = (x[:, 0] - x[:, 1] + 0.5 * x[:, 2] > 0).long()
    y = torch.where(torch.rand(len(x), generator=g) < 0.25, 1 - clean, clean)
    m = _mlp(10, 32, 2)
    return Loop(m, torch.optim.SGD(m.parameters(), 0.02, momentum=0.9),
                _batches(x[:-256], y[:-256], 32), nn.CrossEntropyLoss(), 250,
                _batches(x[-256:], y[-256:], 256), val_every=50)


def low_snr_linear(seed):
    """Linear regression where the noise variance is 4x the signal's (R^2 = 0.2):
    standardised targets, so the loss can only fall from ~1 to ~0.8; SGD lr 0.01, batch 32."""
    g = _g(seed)
    x = torch.randn(4096 + 256, 6, generator=g)
    w = torch.randn(6, generator=g)
    signal = x @ w / w.norm()
    y = (signal + 2 * torch.randn(len(x), generator=g)) / math.sqrt(5)
    m = nn.Linear(6, 1)
    return Loop(m, torch.optim.SGD(m.parameters(), 1e-2), _batches(x[:-256], y[:-256, None], 32),
                nn.MSELoss(), 200, _batches(x[-256:], y[-256:, None], 256), val_every=40)


def warmup_cosine(seed):
    """Linear warmup over 30 steps, then cosine decay to 0 (LambdaLR), AdamW 3e-3 with
    weight decay 0.05, a 2-layer MLP on 8 clusters: the loss barely moves during warmup."""
    x, y = _clusters(seed, 2048 + 128, 24, 8, 1.3)
    m = _mlp(24, 96, 8, layers=2)
    opt = torch.optim.AdamW(m.parameters(), 3e-3, weight_decay=0.05)
    total, warm = 250, 30

    def factor(i):
        if i < warm:
            return (i + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (i - warm) / (total - warm)))
    return Loop(m, opt, _batches(x[:-128], y[:-128], 32), nn.CrossEntropyLoss(), total,
                _batches(x[-128:], y[-128:], 128), val_every=64,
                scheduler=torch.optim.lr_scheduler.LambdaLR(opt, factor))


def step_decay_sgd(seed):
    """SGD lr 0.1 momentum 0.9, MultiStepLR dividing by 10 at steps 80 and 160: the loss
    drops in steps after each decay, as every ResNet recipe's does."""
    x, y = _clusters(seed, 2048 + 128, 16, 6, 1.4)
    m = _mlp(16, 64, 6)
    opt = torch.optim.SGD(m.parameters(), 0.1, momentum=0.9)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 64), nn.CrossEntropyLoss(), 240,
                _batches(x[-128:], y[-128:], 128), val_every=32,
                scheduler=torch.optim.lr_scheduler.MultiStepLR(opt, [80, 160], 0.1))


def tiny_memorise(seed):
    """The overfit-a-small-set sanity check: 64 samples in 4 batches of 16, 200 steps (50
    epochs) of Adam 1e-2 on a wide MLP, no validation (its point is that the training
    loss reaches ~0, which it does within a few dozen steps).  Written first with a
    validation set of 64, seed 0's validation loss rose 0.20 nats above its minimum of
    0.27 while training reached 0: that is overfitting, which the diagnosis rightly
    named, so the check runs as the sanity check is run, on the training set alone."""
    x, y = _clusters(seed, 64, 12, 4, 1.0)
    m = _mlp(12, 128, 4)
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-2), _batches(x, y, 16),
                nn.CrossEntropyLoss(), 200)


def pretrained_head(seed):
    """Fine-tuning a pretrained-like body: the body was fitted (unmonitored) on
    other samples of the same task, then a new head and the body are trained together at
    a small rate: the body's features are ready, the fresh head learns fast."""
    x, y = _clusters(seed, 4096 + 256, 16, 5, 1.3)
    body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    m = nn.Sequential(body, nn.Linear(64, 5))
    loss = nn.CrossEntropyLoss()

    def pretrain():
        opt = torch.optim.Adam(m.parameters(), 2e-3)
        for xb, yb in _batches(x[2048:-256], y[2048:-256], 64) * 3:
            opt.zero_grad()
            loss(m(xb), yb).backward()
            opt.step()
        m[1].reset_parameters()  # the new task's head: the body stays
    return Loop(m, torch.optim.Adam(m.parameters(), 3e-4), _batches(x[:2048], y[:2048], 32),
                loss, 150, _batches(x[-256:], y[-256:], 256), val_every=30, before=pretrain)


def bow_text(seed):
    """A bag-of-words text classifier: EmbeddingBag (mean) over 30-token documents of a
    2000-word vocabulary, 4 topics that each prefer 50 words; Adam 5e-3, batch 32."""
    g = _g(seed)
    n, vocab, k, length = 2048 + 128, 2000, 4, 30
    y = torch.randint(k, (n,), generator=g)
    topical = torch.rand(n, length, generator=g) < 0.3
    topic_word = y[:, None] * 50 + torch.randint(50, (n, length), generator=g)
    other = torch.randint(200, vocab, (n, length), generator=g)
    x = torch.where(topical, topic_word, other)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.EmbeddingBag(vocab, 32, mode="mean")
            self.head = nn.Linear(32, k)

        def forward(self, tokens):
            return self.head(self.emb(tokens))
    m = Net()
    return Loop(m, torch.optim.Adam(m.parameters(), 5e-3), _batches(x[:-128], y[:-128], 32),
                nn.CrossEntropyLoss(), 200, _batches(x[-128:], y[-128:], 128), val_every=32)


def batch_two_sgd(seed):
    """Batch size 2, SGD lr 5e-3: every recorded loss is the mean of two samples."""
    x, y = _clusters(seed, 800 + 64, 8, 3, 1.0)
    m = _mlp(8, 32, 3)
    return Loop(m, torch.optim.SGD(m.parameters(), 5e-3), _batches(x[:-64], y[:-64], 2),
                nn.CrossEntropyLoss(), 300, _batches(x[-64:], y[-64:], 64), val_every=50)


def nesterov_clip(seed):
    """SGD momentum 0.9 nesterov lr 0.05 with clip_grad_norm_(1.0) in the step."""
    x, y = _clusters(seed, 2048 + 128, 20, 6, 1.3)
    m = _mlp(20, 64, 6, layers=2)
    opt = _ClippedSGD(m.parameters(), 0.05, momentum=0.9, nesterov=True)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 32), nn.CrossEntropyLoss(), 200,
                _batches(x[-128:], y[-128:], 128), val_every=32)


class _Clipped:
    """Clips the gradients' total norm to 1 before each step, as a loop does with
    clip_grad_norm_ between backward and step; mixed into an optimizer class."""

    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        nn.utils.clip_grad_norm_(params, 1.0)
        return super().step(closure)


class _ClippedSGD(_Clipped, torch.optim.SGD):
    pass


class _ClippedAdam(_Clipped, torch.optim.Adam):
    pass


def classes_100(seed):
    """100 classes (loss starts at ln 100 = 4.6), 20 samples per class, Adam 2e-3."""
    x, y = _clusters(seed, 2000 + 500, 32, 100, 0.6)
    m = _mlp(32, 128, 100)
    return Loop(m, torch.optim.Adam(m.parameters(), 2e-3), _batches(x[:-500], y[:-500], 50),
                nn.CrossEntropyLoss(), 250, _batches(x[-500:], y[-500:], 250), val_every=40)


# held-out families: GRU, 1-D CNN, heavy dropout + augmentation, standardised inputs
# of mixed raw scales, a convolutional autoencoder, AdamW fine-tuning of a big MLP

def gru_sequence(seed):
    """A GRU over 16 steps of 3 features: is the running mean of feature 0 above 0.1 at the
    end; Adam 3e-3, batch 32, gradient clipping at 1 (as RNN loops do)."""
    g = _g(seed)
    x = torch.randn(2048 + 128, 16, 3, generator=g)
    y = (x[:, :, 0].mean(1) > 0.1).long()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 24, batch_first=True)
            self.head = nn.Linear(24, 2)

        def forward(self, inp):
            return self.head(self.rnn(inp)[1][-1])
    m = Net()
    opt = _ClippedAdam(m.parameters(), 3e-3)
    return Loop(m, opt, _batches(x[:-128], y[:-128], 32), nn.CrossEntropyLoss(), 250,
                _batches(x[-128:], y[-128:], 128), val_every=32)


def conv1d_signal(seed):
    """A 1-D CNN classifying noisy signals (3 waveforms at random phase, SNR ~1)."""
    g = _g(seed)
    n, length = 2048 + 128, 64
    y = torch.randint(3, (n,), generator=g)
    t = torch.linspace(0, 4 * math.pi, length)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    waves = torch.stack([torch.sin(t + phase), torch.sign(torch.sin(t + phase)),
                         torch.sin(2 * t + phase)], 1)[torch.arange(n), y]
    x = (waves + torch.randn(n, length, generator=g))[:, None]
    m = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                      nn.Conv1d(8, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                      nn.Flatten(), nn.Linear(16, 3))
    return Loop(m, torch.optim.Adam(m.parameters(), 3e-3), _batches(x[:-128], y[:-128], 32),
                nn.CrossEntropyLoss(), 250, _batches(x[-128:], y[-128:], 128), val_every=32)


def dropout_augment(seed):
    """Dropout 0.5 after each hidden layer and Gaussian input noise (augmentation) at
    every step: the training loss is noisy and sits above the validation loss."""
    x, y = _clusters(seed, 2048 + 128, 20, 5, 1.3)
    m = nn.Sequential(_GaussianNoise(0.5), nn.Linear(20, 128), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 5))
    return Loop(m, torch.optim.Adam(m.parameters(), 1e-3), _batches(x[:-128], y[:-128], 32),
                nn.CrossEntropyLoss(), 250,
                _batches(x[-128:], y[-128:], 128), val_every=32)


class _GaussianNoise(nn.Module):
    """Input augmentation: Gaussian noise of std `std` in training mode only."""

    def __init__(self, std):
        super().__init__()
        self.std = std

    def forward(self, x):
        return x + self.std * torch.randn_like(x) if self.training else x


def mixed_scales_standardised(seed):
    """Tabular features on raw scales 1e-3 to 1e4 (ages, incomes, ratios), standardised
    with the training set's mean and std before the model, as a correct pipeline does."""
    g = _g(seed)
    n = 2048 + 128
    scales = torch.tensor([1e-3, 0.1, 1.0, 30.0, 1e3, 1e4, 5.0, 0.5])
    z = torch.randn(n, 8, generator=g)
    raw = 2 * scales + z * scales
    y = (z[:, 0] + z[:, 4] - z[:, 5] + 0.5 * torch.randn(n, generator=g) > 0).long()
    mean, std = raw[:-128].mean(0), raw[:-128].std(0)
    x = (raw - mean) / std
    m = _mlp(8, 32, 2)
    return Loop(m, torch.optim.Adam(m.parameters(), 2e-3), _batches(x[:-128], y[:-128], 64),
                nn.CrossEntropyLoss(), 200, _batches(x[-128:], y[-128:], 128), val_every=32)


def conv_autoencoder(seed):
    """A convolutional autoencoder (MSE) of 1x16x16 images made of 2 blobs plus noise."""
    g = _g(seed)
    n = 1024 + 128
    grid = torch.stack(torch.meshgrid(torch.arange(16.), torch.arange(16.), indexing="ij"))
    centres = 3 + 10 * torch.rand(n, 2, 2, 1, 1, generator=g)
    d2 = ((grid[None, None] - centres) ** 2).sum(2)
    x = torch.exp(-d2 / 8).sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, 16, 16, generator=g)
    m = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                      nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
                      nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1))
    return Loop(m, torch.optim.Adam(m.parameters(), 2e-3), _batches(x[:-128], x[:-128], 32),
                nn.MSELoss(), 200, _batches(x[-128:], x[-128:], 128), val_every=32)


def adamw_wide_noisy(seed):
    """AdamW 1e-3 with weight decay 0.1 on a wide 3-layer MLP, 15% label noise over 4
    classes: a floor of ~0.6 nats against ln 4 = 1.39."""
    x, y = _noisy_labels(seed, 2048 + 256, 16, 4, 1.0, 0.15)
    m = _mlp(16, 256, 4, layers=3)
    return Loop(m, torch.optim.AdamW(m.parameters(), 1e-3, weight_decay=0.1),
                _batches(x[:-256], y[:-256], 64), nn.CrossEntropyLoss(), 200,
                _batches(x[-256:], y[-256:], 256), val_every=32)


LOOPS = {f.__name__: f for f in (
    cls_adam_short, cls_sgd_steplr, noisy_binary, hard_multiclass, reg_raw_scale,
    reg_low_snr, reg_house_prices, reg_prices_raw, slow_cnn, finetune_near_floor,
    distill_soft_targets, small_batch_sgd, mild_overfit, onecycle_lstm, fast_floor_long_tail, autoencoder_mse,
    label_smoothing_cos,
    noisy_labels_10, noisy_labels_binary_sgd, low_snr_linear, warmup_cosine, step_decay_sgd,
    tiny_memorise, pretrained_head, bow_text, batch_two_sgd, nesterov_clip, classes_100,
    gru_sequence, conv1d_signal, dropout_augment, mixed_scales_standardised, conv_autoencoder,
    adamw_wide_noisy)}
# The parts: the loops of rounds 1-4 and the first new families calibrate the rules; the
# held families were run only before and after the change, never read to set it.
HELD = ("gru_sequence", "conv1d_signal", "dropout_augment", "mixed_scales_standardised",
        "conv_autoencoder", "adamw_wide_noisy")
ROUND5 = ("noisy_labels_10", "noisy_labels_binary_sgd", "low_snr_linear", "warmup_cosine",
          "step_decay_sgd", "tiny_memorise", "pretrained_head", "bow_text", "batch_two_sgd",
          "nesterov_clip", "classes_100") + HELD
PARTS = {"old": [n for n in LOOPS if n not in ROUND5],
         "new": [n for n in ROUND5 if n not in HELD], "held": list(HELD)}


def history(name: str, seed: int):
    """The loop's history under fl.Monitor: the user's own loop, validated every
    `val_every` steps and at the last step."""
    torch.manual_seed(seed)
    loop = LOOPS[name](seed)
    if loop.before is not None:
        loop.before()
    val_loss = loop.val_loss or loop.loss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fl.Monitor(loop.model, loop.optimizer) as mon:
            for i in range(loop.steps):
                x, y = loop.batches[i % len(loop.batches)]
                loop.optimizer.zero_grad()
                loss = loop.loss(loop.model(x), y)
                loss.backward()
                loop.optimizer.step()
                if loop.scheduler is not None:
                    loop.scheduler.step()
                extra = {}
                if loop.val and (i % loop.val_every == loop.val_every - 1
                                 or i == loop.steps - 1):
                    extra["val_loss"] = _validate(loop.model, loop.val, val_loss)
                mon.record(loss, **extra)
    return mon.history


def _validate(model, batches, loss_fn) -> float:
    model.eval()
    with torch.no_grad():
        values = [float(loss_fn(model(x), y)) for x, y in batches]
    model.train()
    return sum(values) / len(values)


def trivial_loss(loop: Loop) -> float:
    """The validation loss of the best constant prediction fitted on the training
    targets: the class prior for class labels (cross-entropy, or binary cross-entropy on
    0/1 floats), the mean target for a squared error.  NaN for a custom objective."""
    loss = loop.val_loss or loop.loss
    if not loop.val:
        return math.nan
    train = torch.cat([y for _, y in loop.batches])
    val = torch.cat([y for _, y in loop.val])
    if isinstance(loss, nn.CrossEntropyLoss) and loss.label_smoothing == 0:
        prior = torch.bincount(train, minlength=int(val.max()) + 1).float() / len(train)
        return float(-(prior.clamp_min(1e-12).log()[val]).mean())
    if isinstance(loss, nn.BCEWithLogitsLoss):
        p = float(train.float().mean())
        return float(-(val * math.log(p) + (1 - val) * math.log(1 - p)).mean())
    if isinstance(loss, nn.MSELoss):
        return float(((val - train.float().mean(0)) ** 2).mean())
    return math.nan


def reading(name: str, seed: int) -> dict:
    h = history(name, seed)
    q = measure(h)
    shape, evidence, _ = shapes.classify(q)
    d = fl.diagnose(h)
    torch.manual_seed(seed)
    trivial = trivial_loss(LOOPS[name](seed))
    val = h["val_loss"].dropna() if "val_loss" in h else None
    return dict(loop=name, seed=seed, shape=shape,
                val_end=float(val.iloc[-1]) if val is not None and len(val) else math.nan,
                trivial=trivial, top=d.top, confidence=d.confidence,
                evidence=evidence, progress=q["loss_progress"], spread=q["loss_end_spread"],
                swing=q["loss_swing"], late=q.get("loss_late_fall", math.nan),
                val_rise=q["val_loss_rise"], val_progress=q.get("val_loss_progress", math.nan))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0-2")
    p.add_argument("--loops", help="comma-separated loop names (default: all)")
    p.add_argument("--part", choices=sorted(PARTS),
                   help="only one part: old (rounds 1-4), new (round 5's calibration "
                        "families) or held (round 5's held-out families)")
    args = p.parse_args(argv)
    names = args.loops.split(",") if args.loops else PARTS[args.part] if args.part else \
        list(LOOPS)
    unknown = [n for n in names if n not in LOOPS]
    if unknown:
        raise SystemExit(f"unknown loop(s): {', '.join(unknown)}; known: {', '.join(LOOPS)}")
    seeds = fl.parse_seeds(args.seeds)
    t0 = time.perf_counter()
    rows = [reading(n, s) for n in names for s in seeds]
    for r in rows:
        flag = "" if r["shape"] == "healthy" and r["top"] is None else "  <- FLAGGED"
        rise = "" if math.isnan(r["val_rise"]) else \
            f" val_rise {r['val_rise']:.3g} val_progress {r['val_progress']:.2f}"
        print(f"{r['loop']:22s} seed {r['seed']}: {r['shape']:11s} {str(r['top']):22s} "
              f"{r['confidence']:6s} progress {r['progress']:.2f} spread {r['spread']:.2f} "
              f"swing {r['swing']:.2f} late {r['late']:.2f}{rise} val_end {r['val_end']:.3g} "
              f"trivial {r['trivial']:.3g}  | {r['evidence']}{flag}", flush=True)
    for part, members in PARTS.items():
        these = [r for r in rows if r["loop"] in members]
        ok = [r for r in these if r["shape"] == "healthy" and r["top"] is None]
        if these:
            print(f"{part:5s}: healthy reading {len(ok)}/{len(these)}")
    flagged = [r for r in rows if not (r["shape"] == "healthy" and r["top"] is None)]
    print(f"\nhealthy reading {len(rows) - len(flagged)}/{len(rows)} "
          f"(shape healthy and no cause); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
