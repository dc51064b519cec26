"""Healthy probe: does `fl.diagnose` name a fault on healthy loops it has never seen?

Twelve correct, tuned training loops (plus an edge group of six, below) unlike the
lab's, the zoo's, `held_out_loops.py`'s and `fresh_loops.py`'s, on synthetic, learnable data drawn from a fixed
torch.Generator, each run on seeds 0, 1, 2 and diagnosed.  Nothing is planted: every
run should read shape "healthy" with no cause.

    OMP_NUM_THREADS=1 python benchmarks/healthy_probe.py [--seeds 0-2] [--loops a,b]
        [--out results.json] [--tune]

`--tune` trains without the Monitor and prints loss start/end and the accuracy (or R^2)
reached, never a diagnosis.  The learning rates below were set with `--tune` alone,
BEFORE any diagnosis was looked at (tuning notes in TUNING at the bottom of the file).

The loops:
  resnet_cosine   small ResNet (BatchNorm, 2 residual blocks) on 16x16 shape images,
                  SGD momentum 0.9 + weight decay 5e-4 + cosine LR; val_loss
  mlp_warmup_sgd  ReLU MLP on Gaussian clusters, SGD momentum 0.9 with 30-step linear
                  warmup then constant
  bilstm_tagger   bidirectional LSTM per-token tagger (tag depends on the left and the
                  right neighbour), Adam; val_loss
  tiny_vit        patch embedding (4x4) + CLS token + 2-layer transformer encoder on the
                  shape images, AdamW, warmup + cosine
  imbalanced_cw   4 classes with priors 70/20/7/3 %, CrossEntropyLoss(weight=inverse
                  frequency), Adam; val_loss
  bf16_ln_clip    GELU MLP with LayerNorm under torch.autocast("cpu", bfloat16), AdamW
                  weight decay 0.05, clip_grad_norm_(1.0) every step
  ema_silu        SiLU MLP, Adam, an EMA copy (copy.deepcopy, decay 0.98) updated each
                  step; val_loss of the EMA model
  frozen_embed    frozen "pretrained" word embedding (topic-structured vectors,
                  Embedding.from_pretrained(freeze=True)) + mean pooling + trained head
  siamese         shared encoder over pairs (input (B, 2, D)), contrastive margin loss
  dropout_val     3-hidden-layer MLP with dropout 0.3, Adam; val_loss every 20 steps
  huber_bs512     multi-output (3) Huber regression with outliers, batch 512, Adam
  cnn1d_bs8       1D CNN on time series (4 waveforms), SGD momentum, batch size 8; val_loss
Edge group (EDGE), healthy patterns whose telemetry is unusual by design:
  tagger_pad_ignore   the BiLSTM tagger on padded sequences (lengths 8-24), padding tag
                      ignore_index=-100; val_loss
  finetune_frozen_bn  a pretrained BN CNN (trained unmonitored first), fresh 2-class head,
                      BatchNorm kept in eval mode, SGD with body lr / head lr = 1/10; val_loss
  label_noise_25      25% of the training labels uniformly random (clean validation)
  multistep_lr        SGD momentum lr 0.1, MultiStepLR x0.1 at steps 150 and 250; val_loss
  cyclic_lr           CyclicLR triangular 0.005-0.1, 50 steps up (3 cycles)
  mixup               mixup (Beta(0.4, 0.4)) with the two-label loss, AdamW; val_loss

History: written by a helper who had not seen the diagnosis tuned; seeds 0-2 diagnosed
once: 51/54 runs healthy with no cause, the three others mixup named shuffled_labels
from its training loss above validation, which led to the soft_target_share guard.
Seeds 3 and above were first run after that.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import time
import warnings
from dataclasses import dataclass

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import failurelab as fl  # noqa: E402
from failurelab.evidence.quantities import measure  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=UserWarning, module="torch")

N_TRAIN, N_VAL = 1024, 256
N = N_TRAIN + N_VAL


# ----------------------------------------------------------------------------- data
def data_shapes(seed, n=N, noise=0.35):
    """1x16x16 images of 4 shapes (filled square, ring, plus, X) of random size and
    position, plus Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    X = noise * torch.randn(n, 1, 16, 16, generator=g)
    size = torch.randint(2, 5, (n,), generator=g)  # half-width 2..4
    cen = torch.randint(4, 12, (n, 2), generator=g)
    for i in range(n):
        s, r, c, k = int(size[i]), int(cen[i, 0]), int(cen[i, 1]), int(y[i])
        r0, r1, c0, c1 = max(r - s, 0), min(r + s + 1, 16), max(c - s, 0), min(c + s + 1, 16)
        if k == 0:
            X[i, 0, r0:r1, c0:c1] += 1.0
        elif k == 1:
            X[i, 0, r0, c0:c1] += 1.0
            X[i, 0, r1 - 1, c0:c1] += 1.0
            X[i, 0, r0:r1, c0] += 1.0
            X[i, 0, r0:r1, c1 - 1] += 1.0
        elif k == 2:
            X[i, 0, r, c0:c1] += 1.0
            X[i, 0, r0:r1, c] += 1.0
        else:
            for d in range(-s, s + 1):
                for rr, cc in ((r + d, c + d), (r + d, c - d)):
                    if 0 <= rr < 16 and 0 <= cc < 16:
                        X[i, 0, rr, cc] = X[i, 0, rr, cc] + 1.0
    return X, y


def data_clusters(seed, n=N, d=16, k=5, spread=1.3, priors=None):
    """Gaussian clusters: k means (scaled by `spread`) in d dimensions, unit noise."""
    g = torch.Generator().manual_seed(seed)
    means = spread * torch.randn(k, d, generator=g)
    if priors is None:
        y = torch.randint(0, k, (n,), generator=g)
    else:
        y = torch.multinomial(torch.tensor(priors), n, replacement=True, generator=g)
    X = means[y] + torch.randn(n, d, generator=g)
    return X, y


def data_teacher(seed, n=N, d=20, k=5):
    """A random tanh teacher network's argmax class."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    W1 = torch.randn(d, 32, generator=g) / math.sqrt(d)
    W2 = torch.randn(32, k, generator=g)
    return X, (torch.tanh(X @ W1) @ W2).argmax(1)


def data_tagging(seed, n=N, V=20, T=24, K=5):
    """Per-token tags: tag = class_of[token], shifted by 1 when the left neighbour is
    < V/2, and set to K-1 when the right neighbour is token 0..3 (needs both sides)."""
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(0, V, (n, T), generator=g)
    class_of = torch.randint(0, K - 1, (V,), generator=g)
    tags = class_of[tok]
    left = torch.cat([torch.full((n, 1), V - 1), tok[:, :-1]], 1)
    right = torch.cat([tok[:, 1:], torch.full((n, 1), V - 1)], 1)
    tags = torch.where(left < V // 2, (tags + 1) % (K - 1), tags)
    tags = torch.where(right < 4, torch.full_like(tags, K - 1), tags)
    flip = torch.rand(n, T, generator=g) < 0.05  # 5% tagging noise
    tags = torch.where(flip, torch.randint(0, K, (n, T), generator=g), tags)
    return tok, tags


def data_bow(seed, n=N, V=200, L=20, K=4, E=32):
    """Bag-of-words documents over K topics (each topic favours 50 words); a
    "pretrained" embedding whose vectors cluster by topic. Returns X, y, embedding."""
    g = torch.Generator().manual_seed(seed)
    topic_of = torch.arange(V) % K
    y = torch.randint(0, K, (n,), generator=g)
    on_topic = torch.rand(n, L, generator=g) < 0.45
    own = (torch.randint(0, V // K, (n, L), generator=g) * K + y[:, None])
    rnd = torch.randint(0, V, (n, L), generator=g)
    X = torch.where(on_topic, own, rnd)
    centroids = torch.randn(K, E, generator=g)
    emb = 0.6 * centroids[topic_of] + torch.randn(V, E, generator=g)
    return X, y, emb


def data_pairs(seed, n=N, d=16, k=8):
    """Pairs of cluster points, half from the same cluster: X (n, 2, d), y 1 = same."""
    g = torch.Generator().manual_seed(seed)
    means = 1.0 * torch.randn(k, d, generator=g)
    a = torch.randint(0, k, (n,), generator=g)
    same = torch.rand(n, generator=g) < 0.5
    b = torch.where(same, a, (a + torch.randint(1, k, (n,), generator=g)) % k)
    X = torch.stack([means[a], means[b]], 1) + 0.8 * torch.randn(n, 2, d, generator=g)
    return X, (a == b).float()


def data_regression(seed, n=4096 + 512, d=10, m=3):
    """A random teacher's 3 outputs + noise, with 3% outliers (x10 noise)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    W1 = torch.randn(d, 32, generator=g) / math.sqrt(d)
    W2 = torch.randn(32, m, generator=g) / math.sqrt(32) * 2
    Y = torch.tanh(X @ W1) @ W2
    noise = 0.1 * torch.randn(n, m, generator=g)
    out = torch.rand(n, 1, generator=g) < 0.03
    return X, Y + torch.where(out, 10 * noise, noise)


def data_waves(seed, n=N, T=64):
    """Time series of 4 classes: slow sine, fast sine, square wave, chirp; random
    phase and amplitude, noise 0.5.  X (n, 1, T)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.linspace(0, 1, T)[None, :]
    ph = 2 * math.pi * torch.rand(n, 1, generator=g)
    amp = 0.7 + 0.6 * torch.rand(n, 1, generator=g)
    f = 2 + 2 * torch.rand(n, 1, generator=g)
    slow = torch.sin(2 * math.pi * f * t + ph)
    fast = torch.sin(2 * math.pi * 3 * f * t + ph)
    square = torch.sign(torch.sin(2 * math.pi * f * t + ph))
    chirp = torch.sin(2 * math.pi * (f * t + 6 * t * t) + ph)
    waves = torch.stack([slow, fast, square, chirp], 1)[torch.arange(n), y]
    X = amp * waves + 0.5 * torch.randn(n, T, generator=g)
    return X[:, None, :], y


def data_padded_tagging(seed, n=N, V=20, T=24, K=5, pad=-100):
    """data_tagging's sequences cut to lengths 8..24: padding token V (its own
    embedding row) and tag `pad` (ignore_index) after the end."""
    tok, tags = data_tagging(seed, n, V, T, K)
    g = torch.Generator().manual_seed(seed + 11)
    L = torch.randint(8, T + 1, (n,), generator=g)
    past = torch.arange(T)[None, :] >= L[:, None]
    return tok.masked_fill(past, V), tags.masked_fill(past, pad)


def split(X, y, n_val):
    return (X[:-n_val], y[:-n_val]), (X[-n_val:], y[-n_val:])


# --------------------------------------------------------------------------- models
class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(c_out)
        self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(c_out)
        self.skip = (nn.Identity() if stride == 1 and c_in == c_out else
                     nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                   nn.BatchNorm2d(c_out)))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(h)) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self, K=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        self.l1 = Block(16, 16, 1)
        self.l2 = Block(16, 32, 2)
        self.fc = nn.Linear(32, K)

    def forward(self, x):
        h = self.l2(self.l1(self.stem(x)))
        return self.fc(h.mean((2, 3)))


class BiLSTMTagger(nn.Module):
    def __init__(self, V=20, E=24, H=32, K=5):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * H, K)

    def forward(self, tok):
        return self.out(self.lstm(self.emb(tok))[0])  # (B, T, K)


class TinyViT(nn.Module):
    def __init__(self, K=4, d=32, patch=4, img=16):
        super().__init__()
        self.patch = nn.Conv2d(1, d, patch, patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, n + 1, d))
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, K)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)  # (B, n, d)
        p = torch.cat([self.cls.expand(len(p), -1, -1), p], 1) + self.pos
        return self.head(self.norm(self.enc(p)[:, 0]))


class FrozenEmbedClassifier(nn.Module):
    def __init__(self, emb, K=4):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(emb, freeze=True)
        self.head = nn.Sequential(nn.Linear(emb.shape[1], 64), nn.ReLU(), nn.Linear(64, K))

    def forward(self, tok):
        return self.head(self.emb(tok).mean(1))


class Siamese(nn.Module):
    def __init__(self, d=16, E=8):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, E))

    def forward(self, x):  # (B, 2, d) -> (B, 2, E)
        return self.enc(x)


class SmallBNCNN(nn.Module):
    def __init__(self, K=4):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, K)

    def forward(self, x):
        return self.head(self.body(x))


def pretrained_cnn(seed):
    """SmallBNCNN trained (unmonitored, 120 Adam steps) on the shape labels, then a
    fresh head of 2 classes for the downstream task (data_shapes_boxlike)."""
    X, y = data_shapes(seed + 200, n=1024)
    torch.manual_seed(seed + 200)
    m = SmallBNCNN()
    o = torch.optim.Adam(m.parameters(), lr=3e-3)
    for i in range(120):
        rows = torch.randint(0, len(X), (32,))
        o.zero_grad()
        F.cross_entropy(m(X[rows]), y[rows]).backward()
        o.step()
    m.head = nn.Linear(32, 2)
    return m


def data_shapes_boxlike(seed, n=N):
    """Downstream task: noisier (0.5) shape images, label 1 for a box (square or ring)
    and 0 for a cross (plus or X)."""
    X, y = data_shapes(seed, n, noise=0.5)
    return X, (y <= 1).long()


def contrastive(out, same, margin=2.0):
    dist = (out[:, 0] - out[:, 1]).norm(dim=1)
    return (same * dist.pow(2) + (1 - same) * F.relu(margin - dist).pow(2)).mean() / 2


class CNN1d(nn.Module):
    def __init__(self, K=4):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
            nn.Flatten(), nn.Linear(32, K))

    def forward(self, x):
        return self.net(x)


# ---------------------------------------------------------------------------- loops
@dataclass
class Loop:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: object  # (out, y) -> mean loss
    train: tuple  # X, y
    val: tuple  # Xv, yv
    metric: object  # (out, y) -> accuracy-like float
    steps: int = 200
    batch: int = 32
    schedule: object = None
    validate: bool = False  # pass val_loss every 20 steps
    clip: float | None = None
    bf16: bool = False
    ema: float | None = None  # EMA decay; val_loss is then the EMA model's
    frozen_bn: bool = False  # BatchNorm layers kept in eval mode (fine-tuning)
    mixup: float | None = None  # Beta(a, a) mixup of the batch (two-label loss)


def acc(out, y):
    return float((out.argmax(-1) == y).float().mean())


def pair_acc(out, same, margin=2.0):
    dist = (out[:, 0] - out[:, 1]).norm(dim=1)
    return float(((dist < margin / 2).float() == same).float().mean())


def r2(out, y):
    return float(1 - ((out - y) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())


def ce_tokens(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def warmup_cosine(opt, warm, total):
    def f(s):
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))
    return torch.optim.lr_scheduler.LambdaLR(opt, f)


def build(name: str, seed: int) -> Loop:
    torch.manual_seed(seed)
    opt = torch.optim
    ce = nn.CrossEntropyLoss()
    if name == "resnet_cosine":
        X, y = data_shapes(seed)
        m = ResNet()
        o = opt.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        steps = 160
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=steps, batch=32,
                    schedule=opt.lr_scheduler.CosineAnnealingLR(o, steps), validate=True)
    if name == "mlp_warmup_sgd":
        X, y = data_clusters(seed, n=4096 + N_VAL, spread=0.55)
        m = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 5))
        o = opt.SGD(m.parameters(), lr=float(os.environ.get("LR_A", 0.02)), momentum=0.9)
        warm = opt.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / 30))
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=64, schedule=warm)
    if name == "bilstm_tagger":
        X, y = data_tagging(seed)
        m = BiLSTMTagger()
        o = opt.Adam(m.parameters(), lr=1e-2)
        return Loop(m, o, ce_tokens, *split(X, y, N_VAL), acc, steps=250, batch=32,
                    validate=True)
    if name == "tiny_vit":
        X, y = data_shapes(seed + 100)
        m = TinyViT()
        o = opt.AdamW(m.parameters(), lr=2e-3, weight_decay=0.05)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=32,
                    schedule=warmup_cosine(o, 30, 300))
    if name == "imbalanced_cw":
        pri = [0.70, 0.20, 0.07, 0.03]
        X, y = data_clusters(seed, n=4096 + N_VAL, d=12, k=4, spread=0.9, priors=pri)
        (Xt, yt), val = split(X, y, N_VAL)
        freq = torch.bincount(yt, minlength=4).float() / len(yt)
        w = 1 / freq.clamp_min(1e-3)
        w = w / w.sum() * 4
        m = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 4))
        o = opt.Adam(m.parameters(), lr=3e-3)
        return Loop(m, o, nn.CrossEntropyLoss(weight=w), (Xt, yt), val, acc, steps=250,
                    batch=64, validate=True)
    if name == "bf16_ln_clip":
        X, y = data_teacher(seed, n=4096 + N_VAL)
        m = nn.Sequential(nn.Linear(20, 128), nn.LayerNorm(128), nn.GELU(),
                          nn.Linear(128, 128), nn.LayerNorm(128), nn.GELU(),
                          nn.Linear(128, 5))
        o = opt.AdamW(m.parameters(), lr=2e-3, weight_decay=0.05)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=64, clip=1.0,
                    bf16=True)
    if name == "ema_silu":
        X, y = data_teacher(seed + 7, d=16, k=4)
        m = nn.Sequential(nn.Linear(16, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(),
                          nn.Linear(96, 4))
        o = opt.Adam(m.parameters(), lr=2e-3)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=32, ema=0.98,
                    validate=True)
    if name == "frozen_embed":
        X, y, emb = data_bow(seed)
        m = FrozenEmbedClassifier(emb)
        o = opt.Adam(m.head.parameters(), lr=3e-3)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=200, batch=32)
    if name == "siamese":
        X, y = data_pairs(seed)
        m = Siamese()
        o = opt.Adam(m.parameters(), lr=2e-3)
        return Loop(m, o, contrastive, *split(X, y, N_VAL), pair_acc, steps=300, batch=64)
    if name == "dropout_val":
        X, y = data_teacher(seed + 3)
        m = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(128, 5))
        o = opt.Adam(m.parameters(), lr=1e-3)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=32, validate=True)
    if name == "huber_bs512":
        X, Y = data_regression(seed)
        m = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 3))
        o = opt.Adam(m.parameters(), lr=3e-3)
        return Loop(m, o, nn.HuberLoss(delta=1.0), *split(X, Y, 512), r2, steps=200,
                    batch=512)
    if name == "cnn1d_bs8":
        X, y = data_waves(seed)
        m = CNN1d()
        o = opt.SGD(m.parameters(), lr=float(os.environ.get("LR_B", 0.02)), momentum=0.9)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=400, batch=8, validate=True)
    # ---- edge group: healthy patterns with unusual telemetry
    if name == "tagger_pad_ignore":
        X, y = data_padded_tagging(seed)
        m = BiLSTMTagger(V=21)
        o = opt.Adam(m.parameters(), lr=1e-2)
        def loss(out, t):
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1),
                                   ignore_index=-100)

        def metric(out, t):
            return float((out.argmax(-1) == t)[t != -100].float().mean())
        return Loop(m, o, loss, *split(X, y, N_VAL), metric, steps=250, batch=32,
                    validate=True)
    if name == "finetune_frozen_bn":
        X, y = data_shapes_boxlike(seed)
        m = pretrained_cnn(seed)
        lr = float(os.environ.get("LR_G", 3e-3))
        o = opt.SGD([{"params": m.body.parameters(), "lr": lr},
                     {"params": m.head.parameters(), "lr": 10 * lr}], momentum=0.9)
        return Loop(m, o, nn.CrossEntropyLoss(), *split(X, y, N_VAL), acc, steps=200,
                    batch=32, validate=True, frozen_bn=True)
    if name == "label_noise_25":
        X, y = data_clusters(seed, n=4096 + N_VAL, d=16, k=5, spread=0.8)
        g = torch.Generator().manual_seed(seed + 5)
        noisy = torch.rand(len(y), generator=g) < 0.25
        y_noisy = torch.where(noisy, torch.randint(0, 5, (len(y),), generator=g), y)
        (Xt, yt), _ = split(X, y_noisy, N_VAL)
        _, val = split(X, y, N_VAL)  # clean validation labels
        m = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
        o = opt.Adam(m.parameters(), lr=float(os.environ.get("LR_C", 3e-3)))
        return Loop(m, o, ce, (Xt, yt), val, acc, steps=250, batch=64)
    if name == "multistep_lr":
        X, y = data_teacher(seed + 9, n=4096 + N_VAL)
        m = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 5))
        o = opt.SGD(m.parameters(), lr=float(os.environ.get("LR_D", 0.1)), momentum=0.9,
                    weight_decay=1e-4)
        sch = opt.lr_scheduler.MultiStepLR(o, [150, 250], gamma=0.1)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=320, batch=64, schedule=sch,
                    validate=True)
    if name == "cyclic_lr":
        X, y = data_clusters(seed + 4, n=4096 + N_VAL, d=16, k=6, spread=0.7)
        m = nn.Sequential(nn.Linear(16, 96), nn.ReLU(), nn.Linear(96, 6))
        o = opt.SGD(m.parameters(), lr=0.01, momentum=0.9)
        sch = opt.lr_scheduler.CyclicLR(o, base_lr=float(os.environ.get("LR_E", 0.005)),
                                        max_lr=float(os.environ.get("LR_E2", 0.1)),
                                        step_size_up=50)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=64, schedule=sch)
    if name == "mixup":
        X, y = data_teacher(seed + 13, d=16, k=4)
        m = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 4))
        o = opt.AdamW(m.parameters(), lr=float(os.environ.get("LR_F", 2e-3)),
                      weight_decay=0.01)
        return Loop(m, o, ce, *split(X, y, N_VAL), acc, steps=300, batch=32, validate=True,
                    mixup=0.4)
    raise KeyError(name)


EDGE = ("tagger_pad_ignore", "finetune_frozen_bn", "label_noise_25", "multistep_lr",
        "cyclic_lr", "mixup")
LOOPS = ("resnet_cosine", "mlp_warmup_sgd", "bilstm_tagger", "tiny_vit", "imbalanced_cw",
         "bf16_ln_clip", "ema_silu", "frozen_embed", "siamese", "dropout_val", "huber_bs512",
         "cnn1d_bs8")


def run(name: str, seed: int, monitor: bool = True):
    """Train loop `name` on `seed`; returns (history or None, summary dict)."""
    loop = build(name, seed)
    model, opt = loop.model, loop.optimizer
    (X, y), (Xv, yv) = loop.train, loop.val
    ema = copy.deepcopy(model) if loop.ema else None
    if ema is not None:
        for p in ema.parameters():
            p.requires_grad_(False)
    order_g = torch.Generator().manual_seed(seed + 1)
    per_epoch = len(X) // loop.batch
    losses, vals = [], []

    def evaluate(net):
        net.eval()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=loop.bf16):
            out = net(Xv)
        net.train()
        out = out.float()
        return float(loop.loss_fn(out, yv)), loop.metric(out, yv)

    mon = fl.Monitor(model, opt) if monitor else None
    if mon is not None:
        mon.__enter__()
    try:
        for step in range(loop.steps):
            if step % per_epoch == 0:
                order = torch.randperm(len(X), generator=order_g)
            rows = order[(step % per_epoch) * loop.batch:(step % per_epoch + 1) * loop.batch]
            model.train()
            if loop.frozen_bn:
                for mod in model.modules():
                    if isinstance(mod, nn.BatchNorm2d):
                        mod.eval()
            opt.zero_grad()
            xb, yb = X[rows], y[rows]
            if loop.mixup:
                lam = float(torch.distributions.Beta(loop.mixup, loop.mixup).sample())
                perm = torch.randperm(len(rows), generator=order_g)
                xb = lam * xb + (1 - lam) * xb[perm]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=loop.bf16):
                out = model(xb)
            if loop.mixup:
                out = out.float()
                loss = lam * loop.loss_fn(out, yb) + (1 - lam) * loop.loss_fn(out, yb[perm])
            else:
                loss = loop.loss_fn(out.float(), yb)
            loss.backward()
            if loop.clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), loop.clip)
            opt.step()
            if loop.schedule is not None:
                loop.schedule.step()
            if ema is not None:
                with torch.no_grad():
                    for pe, pm in zip(ema.parameters(), model.parameters(), strict=True):
                        pe.lerp_(pm, 1 - loop.ema)
                    for be, bm in zip(ema.buffers(), model.buffers(), strict=True):
                        be.copy_(bm)
            extra = {}
            if loop.validate and (step % 20 == 0 or step == loop.steps - 1):
                vl, _ = evaluate(ema if ema is not None else model)
                extra["val_loss"] = vl
                vals.append(vl)
            losses.append(float(loss.detach()))
            if mon is not None:
                mon.record(loss, **extra)
    finally:
        if mon is not None:
            mon.__exit__(None, None, None)
    k = 10
    vl, va = evaluate(ema if ema is not None else model)
    summary = {"loss_start": sum(losses[:k]) / k, "loss_end": sum(losses[-k:]) / k,
               "val_loss_end": vl, "val_metric": va}
    summary["removed"] = 1 - summary["loss_end"] / summary["loss_start"]
    return (mon.history if mon is not None else None), summary


EXTRA_Q = ("update_ratio_start", "update_ratio_peak", "update_ratio_median", "loss_peak_ratio",
           "train_eval_loss_gap", "loss_weight_median", "grad_cosine_end", "output_grad_floor",
           "float16_share", "zero_grad_median", "saturation_median", "dead_median")


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return v
    return None if math.isnan(v) else round(v, 4)


def diagnose_case(name, seed):
    t0 = time.time()
    h, s = run(name, seed)
    d = fl.diagnose(h)
    q = measure(h)
    rec = {"loop": name, "seed": seed, "seconds": round(time.time() - t0, 1),
           "loss_progress": _num(q.get("loss_progress")), **{k: _num(v) for k, v in s.items()},
           "shape": d.shape, "shape_evidence": d.shape_evidence, "top": d.top,
           "confidence": d.confidence,
           "causes": [(c[0], _num(c[1]), c[2]) for c in d.causes[:3]]}
    if d.top is not None or d.shape != "healthy":
        rec["quantities"] = {k: _num(q[k]) for k in EXTRA_Q if k in q}
        rec["all_quantities"] = {k: _num(v) for k, v in q.items()}
    return rec


def _seeds(text):
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--loops", default=",".join(LOOPS + EDGE))
    ap.add_argument("--out", default=None)
    ap.add_argument("--tune", action="store_true")
    a = ap.parse_args()
    loops, seeds = a.loops.split(","), _seeds(a.seeds)
    t_all = time.time()
    recs = []
    for name in loops:
        for seed in seeds:
            if a.tune:
                t0 = time.time()
                _, s = run(name, seed, monitor=False)
                print(f"{name:15s} s{seed} start {s['loss_start']:.3f} end {s['loss_end']:.3f}"
                      f" removed {s['removed']:.0%} val_loss {s['val_loss_end']:.3f}"
                      f" val_metric {s['val_metric']:.3f} ({time.time() - t0:.1f}s)", flush=True)
                continue
            r = diagnose_case(name, seed)
            recs.append(r)
            causes = "; ".join(f"{c[0]}={c[1]}" for c in r["causes"]) or "-"
            print(f"{name:15s} s{seed} prog {r['loss_progress']} removed {r['removed']:.0%}"
                  f" metric {r['val_metric']:.3f} shape {r['shape']} top {r['top']}"
                  f" conf {r['confidence']} causes [{causes}] ({r['seconds']}s)", flush=True)
            if r["top"] is not None or r["shape"] != "healthy":
                print("   shape_evidence:", r["shape_evidence"])
                for c in r["causes"]:
                    print(f"   {c[0]} ({c[1]}): {c[2]}")
                print("   quantities:", r["quantities"], flush=True)
    if not a.tune:
        ok = sum(r["shape"] == "healthy" and r["top"] is None for r in recs)
        print(f"\nhealthy with no cause: {ok}/{len(recs)}")
    print(f"total {time.time() - t_all:.0f}s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(recs, f, indent=1)


TUNING = """
Tuned with --tune only (no Monitor, no diagnosis looked at), seeds 0-2, then frozen:
- first pass on seed 0: mlp_warmup_sgd (cluster spread 1.3) and bilstm_tagger reached
  loss ~0 / 100% (too easy): spread cut to 0.55 with 4096 training rows; the tagger got
  5% tag noise.  bf16_ln_clip and imbalanced_cw overfit 1024 rows (train 0.01-0.08 vs
  val 0.35-0.86): both given 4096 training rows.
- mlp_warmup_sgd lr 0.01 / 0.02 / 0.05: all ~val acc 0.78-0.82 (near the Bayes limit of
  overlapping clusters) -> 0.02.  cnn1d_bs8 lr 0.005 / 0.01 / 0.02: val acc 0.77 / 0.80 /
  0.86 -> 0.02.  The others were fair on the first try.
- final (seeds 0-2, loss removed / val metric): resnet_cosine 91-97% / 0.97-0.99,
  mlp_warmup_sgd 64-71% / 0.75-0.82, bilstm_tagger 85-86% / 0.96 (token acc; 5% noise),
  tiny_vit 94-95% / 0.88-0.93, imbalanced_cw 90-91% / 0.92-0.96, bf16_ln_clip 77-83% /
  0.77-0.87, ema_silu 78-87% / 0.86-0.89 (EMA model), frozen_embed 95-96% / 0.95-0.98,
  siamese 91-94% / 0.97 (pair acc), dropout_val 70-73% / 0.75-0.83 (train loss read with
  dropout on), huber_bs512 91-92% / R^2 0.92-0.95, cnn1d_bs8 68-84% / 0.86-0.87.
Edge group (added after the twelve above all read healthy; tuned the same way, with
--tune only, before diagnosing them):
- finetune_frozen_bn: the first downstream task (shape size) stayed at val acc
  0.62-0.79 for body lr 3e-3/1e-2/3e-2 (a task the pooled features can't tell): changed
  to box-vs-cross on noisier images; body lr 3e-3 (head 10x) vs 1e-2: val acc
  0.88-0.93 vs 0.90-0.94, kept 3e-3.
- the rest fair on the first try: tagger_pad_ignore 84-85% / 0.94 (token acc on real
  tokens), label_noise_25 36-43% removed (the floor is the 25% label noise's entropy) /
  clean val acc 0.91-0.95, multistep_lr 80-83% / 0.83-0.87, cyclic_lr 83-86% / 0.88-0.91,
  mixup 52-64% (mixed targets keep the train loss high) / 0.82-0.86.
"""

if __name__ == "__main__":
    main()
