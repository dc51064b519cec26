"""An MLP fitted to y = x**4 on x in [-100, 100) stays far from the curve (ported from Keras).

Source: https://stackoverflow.com/questions/52800582 ("Why do I fail to predict y=x**4 with
keras? (y=x**3 works)", 2018), as recorded with its patch in the DeepFD benchmark
(ArabelaTso/DeepFD, Benchmark/Benchmark-with-patches.xlsx row 17, commit 9fe0895; ground
truth "(1) Missing Preprocess").
Root cause (as the accepted answer and the patch establish it): the input and the output
are far too large for the network's initial weights.  x in [-100, 100) drives the first
Dense layer to pre-activations around 10, where its sigmoid saturates and passes back almost
no gradient; y = x**4 reaches 1e8, which an output layer fed by O(1) activations through
glorot-uniform weights can only approach through a huge number of Adam steps of about 1e-3.
The patch standardises both (StandardScaler on x and on y).
Re-created, ported line by line to PyTorch: the post's data (x = arange(-100, 100, 0.5),
400 points, y = x**4), Dense(1 -> 50) -> sigmoid -> Dense(50 -> 50) -> ELU -> Dense(50 -> 1)
with glorot-uniform weights and zero biases, MSE, Adam at Keras' defaults (lr 1e-3), one
full batch (batch_size=len(x)) per step;
differs from the original: 300 steps instead of 100 x 1000 epochs; the yardstick is the
post's own printed number, mean((prediction - y)**2) over the 400 points, divided by the
variance of y (the fraction of variance left unexplained; for the fixed run it is computed
on the standardised y, where it is the same number), because raw and standardised losses
are not comparable.
Fix: x = x_scaler.fit_transform(x); y = y_scaler.fit_transform(y).  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"


def data():
    """The post's data: x = np.arange(-100, 100, 0.5), y = x**4, as (400, 1) columns."""
    x = torch.arange(-100.0, 100.0, 0.5).unsqueeze(1)
    return x, x ** 4


def standard_scaler(values: torch.Tensor) -> torch.Tensor:
    """sklearn's StandardScaler().fit_transform: zero mean, unit (population) std."""
    return (values - values.mean()) / values.std(unbiased=False)


def make_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(1, 50), nn.Sigmoid(), nn.Linear(50, 50), nn.ELU(),
                          nn.Linear(50, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)  # Keras' default glorot_uniform
            nn.init.zeros_(layer.bias)
    return model


def mse(out, y):
    return ((out - y) ** 2).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = data()
    if fixed:  # FIX: x = x_scaler.fit_transform(x); y = y_scaler.fit_transform(y)
        x, y = standard_scaler(x), standard_scaler(y)
    # BUG: the raw x (-100 .. 99.5) and the raw y (up to 1e8) go into model.fit

    def step(model, optimizer, batch):
        inputs, target = batch
        loss = mse(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model, optimizer=lambda m: torch.optim.Adam(m.parameters()),
                batches=[(x, y)], step=step, loss=mse, val_batches=[(x, y)], steps=STEPS,
                seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """np.mean(np.square(predictions - y)) over the variance of y (unit-free)."""
    target_var = float(data()[1].var(unbiased=False))
    error = mean_loss(model, val_batches, mse)
    return {"val_loss": error if fixed else error / target_var}
