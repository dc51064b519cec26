"""Healthy trends: does the loss-curve shape read "healthy" on short, untuned, healthy loops?

`healthy_probe.py`'s loops are tuned and run to convergence.  These are written the way
people write a first loop: a step cap of 100-300, per-epoch validation on a small
held-out set, noisy minibatches, a loss whose floor sits far above zero (noisy labels,
low signal-to-noise regression, distillation), regression targets on their raw scale,
a model still improving when the cap stops it, fine-tuning that starts near its floor,
and mild overfitting late in the run.  Nothing is planted: every loop is correct, and
each one trains (the `--tune` column shows how far).  What is read is the trend verdict
(`shapes.classify`: plateau / degrading / oscillating / ...) and, for reference, the
top cause of `fl.diagnose`.

    OMP_NUM_THREADS=1 python benchmarks/healthy_trends.py [--seeds 0-2] [--loops a,b]

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


LOOPS = {f.__name__: f for f in (
    cls_adam_short, cls_sgd_steplr, noisy_binary, hard_multiclass, reg_raw_scale,
    reg_low_snr, reg_house_prices, reg_prices_raw, slow_cnn, finetune_near_floor, distill_soft_targets,
    small_batch_sgd, mild_overfit, onecycle_lstm, fast_floor_long_tail, autoencoder_mse,
    label_smoothing_cos)}


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


def reading(name: str, seed: int) -> dict:
    h = history(name, seed)
    q = measure(h)
    shape, evidence, _ = shapes.classify(q)
    d = fl.diagnose(h)
    return dict(loop=name, seed=seed, shape=shape, top=d.top, confidence=d.confidence,
                evidence=evidence, progress=q["loss_progress"], spread=q["loss_end_spread"],
                swing=q["loss_swing"], late=q.get("loss_late_fall", math.nan),
                val_rise=q["val_loss_rise"], val_progress=q.get("val_loss_progress", math.nan))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0-2")
    p.add_argument("--loops", help="comma-separated loop names (default: all)")
    args = p.parse_args(argv)
    names = args.loops.split(",") if args.loops else list(LOOPS)
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
              f"swing {r['swing']:.2f} late {r['late']:.2f}{rise}  | {r['evidence']}{flag}", flush=True)
    flagged = [r for r in rows if not (r["shape"] == "healthy" and r["top"] is None)]
    print(f"\nhealthy reading {len(rows) - len(flagged)}/{len(rows)} "
          f"(shape healthy and no cause); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
