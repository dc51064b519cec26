"""A wide & deep regressor feeds the raw, unscaled features to its output layer (Keras port).

Source: https://github.com/ageron/handson-ml3/pull/20 (2022-06-27), merged; the author
replied "Oh great catch, thanks a lot!" (2022-09-27).
Root cause (as the pull request established it): the chapter-10 wide & deep model on the
California housing data normalised its input for the deep path, but the wide path
concatenated the raw input with the last hidden layer
(`Concatenate()([input_, hidden2])`), so the output layer saw features in their own
units (population in the thousands, longitude near -120) -- "non-normalized inputs which
leads to performance degradation". The fix concatenates the normalised input.
Re-created (Keras port): a Normalization layer adapted on the training set, Dense(30,
ReLU), Dense(30, ReLU), concatenation of the wide input with the second hidden layer,
Dense(1); Glorot-uniform kernels and zero biases as Keras builds them; MSE, Adam lr 1e-3,
batch 32; validation MSE;
differs from the original: California housing replaced by 4000 seeded districts with
its eight features at their scales (median income ~3.9, house age 1-52, rooms ~5.4,
bedrooms ~1.1, population ~1400 with a long tail, occupancy ~3, latitude 32-42,
longitude -124 to -114) and a seeded nonlinear price in units of $100k; 300 steps
instead of 20 epochs.
Fix: concatenate the normalised input.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"


def districts(seed: int, n: int):
    """Seeded housing-like features in their own units and a price in $100k."""
    g = generator(seed)

    def randn():
        return torch.randn(n, generator=g)
    income = (1.25 + 0.45 * randn()).exp().clamp(0.5, 15)
    age = torch.randint(1, 53, (n,), generator=g).float()
    rooms = (5.4 + 1.5 * randn()).clamp(1, 20)
    bedrooms = (1.1 + 0.2 * randn()).clamp(0.5, 4)
    population = (7.0 + 0.75 * randn()).exp().clamp(3, 35000)
    occupancy = (1.0 + 0.3 * randn()).exp().clamp(1, 12)
    latitude = 32.5 + 9.5 * torch.rand(n, generator=g)
    longitude = -124.3 + 10 * torch.rand(n, generator=g)
    X = torch.stack([income, age, rooms, bedrooms, population, occupancy, latitude,
                     longitude], 1)
    coast = (-(longitude + 122.0).abs() / 2).exp() + (-(latitude - 34.0).abs() / 2).exp()
    price = (0.42 * income + 0.006 * age + 0.8 * coast - 0.12 * occupancy
             - 0.03 * (rooms - 5.4) + 0.1 * randn())
    return X, price.clamp(0.15, 5.0).unsqueeze(1)


class Normalization(nn.Module):
    """keras.layers.Normalization: (x - mean) / std, statistics adapted on training data."""

    def __init__(self, data):
        super().__init__()
        self.register_buffer("mean", data.mean(0))
        self.register_buffer("std", data.std(0, unbiased=False))

    def forward(self, x):
        return (x - self.mean) / self.std


def dense(n_in, n_out):
    layer = nn.Linear(n_in, n_out)
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class WideAndDeep(nn.Module):
    def __init__(self, train_X, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.normalization_layer = Normalization(train_X)
        self.hidden_layer1 = dense(8, 30)
        self.hidden_layer2 = dense(30, 30)
        self.output_layer = dense(38, 1)

    def forward(self, input_):
        normalized = self.normalization_layer(input_)
        hidden1 = torch.relu(self.hidden_layer1(normalized))
        hidden2 = torch.relu(self.hidden_layer2(hidden1))
        if self.fixed:
            concat = torch.cat([normalized, hidden2], 1)  # FIX: the normalised input
        else:
            concat = torch.cat([input_, hidden2], 1)  # BUG: the raw input on the wide path
        return self.output_layer(concat)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = districts(seed, 4000)
    X_train, y_train, X_valid, y_valid = split(X, y, 800)
    mse = nn.MSELoss()

    def step(model, optimizer, batch):
        x, target = batch
        loss = mse(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: WideAndDeep(X_train, fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(X_train, y_train, 32), step=step, loss=mse,
                val_batches=batched(X_valid, y_valid, 256), steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """Validation MSE, the model.evaluate() of the chapter."""
    values = [float(nn.functional.mse_loss(model(x), t)) for x, t in val_batches]
    return {"val_loss": sum(values) / len(values)}
