"""An LSTM on Widar gesture data does not fit: the permute puts the features on the time axis.

Source: https://github.com/xyanchen/WiFi-CSI-Sensing-Benchmark/issues/9 (2023-07-08); the
maintainer's answer (2024-05-29).
Root cause (as the maintainer established it): the LSTM model reshapes its input and then
`permute(2, 0, 1)`s it, which puts the time axis first for the NTU-Fi data (batch,
feature, time) but not for Widar, whose samples are (batch, time, velocity grid): there
it runs the LSTM across the 400 velocity cells with the time steps as features, and
the model does not fit; `permute(1, 0, 2)` puts Widar's time axis first, and "only when
dim 0 is time can the LSTM fit".
Re-created: the benchmark's LSTM classifier (one `nn.LSTM` layer of 64 units on
seq-first input, the last hidden state into a linear layer), cross-entropy, Adam lr
1e-3, batch 64; the reporter's edit that made the buggy permute run (the LSTM's input
size set to the axis the permute puts last); differs from the original: seeded
body-velocity profiles on a 10x10 grid (100 cells instead of 20x20 = 400, to keep a
run to seconds) over 22 time steps, 6 gestures (a blob crossing the grid along one of
three paths in one of two directions) instead of Widar's 22; 200 steps.
Fix: x.permute(1, 0, 2) (time first) with input size 100.  Run fixed: FAILURELAB_FIX=1
or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
TIME, GRID, CLASSES = 22, 10, 6
CELLS = GRID * GRID


class WidarLSTM(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.lstm = nn.LSTM(CELLS if fixed else TIME, 64, num_layers=1)
        self.fc = nn.Linear(64, CLASSES)

    def forward(self, x):
        x = x.view(-1, TIME, CELLS)
        # BUG: x = x.permute(2, 0, 1)  (cells, batch, time)  # FIX: x.permute(1, 0, 2)
        x = x.permute(1, 0, 2) if self.fixed else x.permute(2, 0, 1)
        _, (ht, _) = self.lstm(x)
        return self.fc(ht[-1])


def gestures(seed: int, n: int):
    """A Gaussian blob crossing the velocity grid over time: 3 paths x 2 directions."""
    g = generator(seed)
    y = torch.randint(CLASSES, (n,), generator=g)
    t = torch.linspace(0, 1, TIME).view(1, TIME)
    path, backwards = y // 2, (y % 2).bool()
    s = torch.where(backwards.view(-1, 1), 1 - t, t)  # (n, TIME) progress along the path
    jitter = 0.1 * torch.randn(n, 2, 1, generator=g)
    starts = torch.tensor([[0.1, 0.1], [0.1, 0.9], [0.5, 0.1]])
    ends = torch.tensor([[0.9, 0.9], [0.9, 0.1], [0.5, 0.9]])
    a, b = starts[path].unsqueeze(2), ends[path].unsqueeze(2)
    centre = (a + (b - a) * s.unsqueeze(1) + jitter) * (GRID - 1)  # (n, 2, TIME)
    cells = torch.arange(GRID).float()
    dx = (cells.view(1, 1, GRID) - centre[:, 0].unsqueeze(2)) ** 2
    dy = (cells.view(1, 1, GRID) - centre[:, 1].unsqueeze(2)) ** 2
    blob = torch.exp(-(dy.unsqueeze(3) + dx.unsqueeze(2)) / 2.0)  # (n, TIME, GRID, GRID)
    x = blob + 0.2 * torch.randn(n, TIME, GRID, GRID, generator=g)
    return x, y


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = gestures(seed, 2400)
    Xt, yt, Xv, yv = split(X, y, 480)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: WidarLSTM(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 240), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
