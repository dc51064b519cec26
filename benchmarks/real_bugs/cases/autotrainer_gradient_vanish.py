"""A deep sigmoid MLP on the two-circles data stays at chance (ported from Keras).

Source: https://github.com/shiningrain/AUTOTRAINER, AutoTrainer/demo_case/
Gradient_Vanish_Case (model.h5's architecture, config.pkl's settings, data/simplednn.py),
commit 03a463e: the AUTOTRAINER authors' demonstration of vanishing gradients (a Keras
program built to show the problem, not a user's report).
Root cause (as the demo sets it up and AUTOTRAINER repairs it): eight stacked Dense(5)
layers with sigmoid activations; each sigmoid passes back at most 1/4 of the gradient,
so the first layers receive almost none and the network cannot bend its decision
boundary into a circle.  AUTOTRAINER's repairs replace the activation (ReLU/SELU) or add
batch normalisation; the ReLU repair is used here.
Re-created, ported line by line to PyTorch: 2 -> 8 x Dense(5, sigmoid) -> Dense(1,
sigmoid), all he_uniform with zero bias; binary cross-entropy on the probability (Keras
clips it to [1e-7, 1 - 1e-7]); Adam lr 1e-3, batch 128; make_circles(1000, noise=0.1)
split 700 / 300, as simplednn's 'circle' data (x100 then /100 in its preprocess);
differs from the original: the circles are drawn from a seeded torch.Generator (outer
radius 1, inner 0.8, Gaussian noise 0.1, as make_circles does); 300 steps (~55 epochs)
instead of 300 epochs.
Fix: ReLU instead of sigmoid in the hidden layers.  Run fixed: FAILURELAB_FIX=1.
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
EPSILON = 1e-7  # Keras' backend epsilon


def circles(seed: int, n: int = 1000, noise: float = 0.1, factor: float = 0.8):
    """make_circles' recipe: half the points on the unit circle (label 0), half on a circle
    of radius `factor` (label 1), plus Gaussian noise; shuffled."""
    g = generator(seed)
    angle = torch.rand(n, generator=g) * 2 * math.pi
    y = (torch.arange(n) >= n // 2).long()
    radius = torch.where(y == 1, torch.tensor(factor), torch.tensor(1.0))
    x = torch.stack([radius * angle.cos(), radius * angle.sin()], 1)
    x = x + noise * torch.randn(n, 2, generator=g)
    order = torch.randperm(n, generator=g)
    return x[order], y[order]


def make_model(fixed: bool) -> nn.Module:
    layers, width = [], 2
    for _ in range(8):
        linear = nn.Linear(width, 5)
        nn.init.kaiming_uniform_(linear.weight, nonlinearity="relu")  # he_uniform
        nn.init.zeros_(linear.bias)
        layers += [linear, nn.ReLU() if fixed  # FIX: Dense(5, activation='relu')
                   else nn.Sigmoid()]  # BUG: Dense(5, activation='sigmoid') x 8
        width = 5
    out = nn.Linear(5, 1)
    nn.init.kaiming_uniform_(out.weight, nonlinearity="relu")
    nn.init.zeros_(out.bias)
    return nn.Sequential(*layers, out, nn.Sigmoid())


def loss_fn(prob, labels):
    """Keras' binary_crossentropy on a probability."""
    p = prob.squeeze(1).clamp(EPSILON, 1 - EPSILON)
    y = labels.float()
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = circles(seed)

    def step(model, optimizer, batch):
        x, labels = batch
        loss = loss_fn(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(X[:700], y[:700], 128), step=step, loss=loss_fn,
                val_batches=batched(X[700:], y[700:], 300), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int(((model(x).squeeze(1) > 0.5).long() == y).sum())
                    for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
