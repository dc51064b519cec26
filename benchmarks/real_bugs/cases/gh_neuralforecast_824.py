"""An N-BEATS forecaster of daily temperatures produces nothing but NaN forecasts.

Source: https://github.com/Nixtla/neuralforecast/issues/824 (2023-11-16).
Root cause (as the maintainer answered it): the daily-temperature series used as the
target has missing days (e.g. 5/17/2014 has no MinTemp, MaxTemp or AvgTemp); the
nulls enter the training windows, the loss and the weights become NaN and every
forecast is NaN. Filling the missing values makes it work.
Re-created: N-BEATS with input_size = 2 x horizon = 24 days and horizon 12, residual
blocks that each map the input window through an MLP to a backcast and a forecast, MAE
loss (the library's default), Adam lr 1e-3, windows sampled at random from the series,
no scaling (the default identity scaler), 100 steps;
differs from the original: the Kaggle Mauna Loa series replaced by a seeded five-year
daily temperature series (annual cycle around 55 F plus noise) with 3 missing days;
three generic blocks of two 256-unit layers instead of the default identity, trend and
seasonality stacks of 512-unit layers; 256 windows per batch instead of 1024; 100 steps
instead of 50 (so the fixed run has learned something to compare); validation on the
forecasts of the last 120 days, which have no missing values.
Fix: fill the missing days (forward fill) before fitting.  Run fixed: FAILURELAB_FIX=1
or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 100
HARM_METRIC = "val_loss"
HORIZON = 12
INPUT_SIZE = 2 * HORIZON
DAYS, VAL_DAYS, MISSING = 5 * 365, 120, 3
WINDOWS_PER_BATCH = 256


def temperatures(seed: int) -> torch.Tensor:
    """Seeded daily mean temperature (F): an annual cycle plus day-to-day noise."""
    g = generator(seed)
    day = torch.arange(DAYS, dtype=torch.float32)
    phase = float(torch.rand(1, generator=g)) * 6.28
    return 55 + 4 * torch.sin(2 * torch.pi * day / 365 + phase) \
        + 1.5 * torch.randn(DAYS, generator=g)


def forward_fill(y: torch.Tensor) -> torch.Tensor:
    y = y.clone()
    for i in range(1, len(y)):
        if torch.isnan(y[i]):
            y[i] = y[i - 1]
    return y


def windows(series: torch.Tensor, starts: torch.Tensor):
    idx = starts[:, None] + torch.arange(INPUT_SIZE + HORIZON)
    w = series[idx]
    return w[:, :INPUT_SIZE], w[:, INPUT_SIZE:]


class Block(nn.Module):
    def __init__(self, units: int = 256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(INPUT_SIZE, units), nn.ReLU(),
                                 nn.Linear(units, units), nn.ReLU())
        self.backcast = nn.Linear(units, INPUT_SIZE)
        self.forecast = nn.Linear(units, HORIZON)

    def forward(self, x):
        h = self.mlp(x)
        return self.backcast(h), self.forecast(h)


class NBEATS(nn.Module):
    def __init__(self, blocks: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, insample):
        residual, forecast = insample, 0
        for block in self.blocks:
            backcast, block_forecast = block(residual)
            residual = residual - backcast
            forecast = forecast + block_forecast
        return forecast


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    y = temperatures(seed)
    g = generator(seed + 1000)
    gaps = torch.randperm(DAYS - VAL_DAYS - INPUT_SIZE - 1, generator=g)[:MISSING] + 1
    y[gaps] = float("nan")  # the CSV's missing days
    if fixed:
        y = forward_fill(y)  # FIX: fill the missing values before fitting
    # BUG: the series goes into training with its NaN days
    train, val = y[:DAYS - VAL_DAYS], y[DAYS - VAL_DAYS - INPUT_SIZE:]
    last = len(train) - INPUT_SIZE - HORIZON
    batches = [windows(train, torch.randint(0, last + 1, (WINDOWS_PER_BATCH,), generator=g))
               for _ in range(STEPS)]
    val_batches = [windows(val, torch.arange(0, len(val) - INPUT_SIZE - HORIZON + 1))]
    mae = nn.L1Loss()

    def step(model, optimizer, batch):
        insample, outsample = batch
        optimizer.zero_grad()
        loss = mae(model(insample), outsample)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=NBEATS, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batches, step=step, loss=mae, val_batches=val_batches,
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.l1_loss)}
