"""A binary Keras 1-D CNN always predicts class 1 (ported from Keras).

Source: https://stackoverflow.com/questions/45378493 ("Why does a binary Keras CNN always
predict 1?"); code as reproduced in mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/015
(commit 11b01d6).
Root cause (as the thread's answer and the reproduction establish it): the single output
unit goes through Activation('softmax'); a softmax over one value is exp(z)/exp(z) = 1
for every input, so the prediction is always 1 and binary cross-entropy has no gradient
to pass back.  The fix is a sigmoid output.
Re-created, ported line by line to PyTorch: input (10 steps, 4 features); Conv1D(16, 4)
-> BatchNorm -> LeakyReLU -> Dropout 0.2 -> Conv1D(8, 4) -> BatchNorm -> LeakyReLU ->
Dropout 0.2 -> Flatten -> Dense(64) -> BatchNorm -> LeakyReLU -> Dense(1) -> softmax;
Keras binary cross-entropy on the probability (clipped to [1e-7, 1 - 1e-7]); Adam (Keras
default lr 1e-3); batch 128; ~6000 rows as in the post;
differs from the original: the post's price windows replaced by seeded windows whose
label is whether the last feature trends up (the reproduction used random labels, which
nothing can learn); ReduceLROnPlateau (patience 30 epochs) left out; 200 steps.
Fix: Activation('sigmoid').  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
EPSILON = 1e-7


def windows(seed: int, n: int = 6000):
    g = generator(seed)
    trend = torch.randn(n, 1, generator=g)
    t = torch.linspace(-1, 1, 10)
    x = 0.3 * torch.randn(n, 10, 4, generator=g)
    x[:, :, 3] += trend * t  # the 4th feature drifts up or down over the window
    return x, (trend.squeeze(1) > 0).float()


class Net(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(4, 16, 4), nn.BatchNorm1d(16), nn.LeakyReLU(0.3), nn.Dropout(0.2),
            nn.Conv1d(16, 8, 4), nn.BatchNorm1d(8), nn.LeakyReLU(0.3), nn.Dropout(0.2),
            nn.Flatten(), nn.Linear(8 * 4, 64), nn.BatchNorm1d(64), nn.LeakyReLU(0.3),
            nn.Linear(64, 1))
        self.fixed = fixed

    def forward(self, x):  # x: (batch, steps, features), Keras' channels-last layout
        z = self.features(x.transpose(1, 2))
        if self.fixed:
            return torch.sigmoid(z)  # FIX: Activation('sigmoid')
        return torch.softmax(z, dim=-1)  # BUG: Activation('softmax') over one unit


def loss_fn(prob, y):
    p = prob.squeeze(1).clamp(EPSILON, 1 - EPSILON)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = windows(seed)

    def step(model, optimizer, batch):
        inputs, labels = batch
        loss = loss_fn(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Net(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x[:5000], y[:5000], 128), step=step, loss=loss_fn,
                val_batches=batched(x[5000:], y[5000:], 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int(((model(x).squeeze(1) > 0.5).float() == y).sum())
                    for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
