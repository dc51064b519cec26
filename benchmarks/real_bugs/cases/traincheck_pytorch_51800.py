"""Control: a spectral-normalised network evaluated before any training forward gives huge outputs.

Source: https://github.com/pytorch/pytorch/issues/51800, as collected in
OrderLab/TrainCheck-Evaluation-Workloads, silent-issue-detection/bug-reprod-scripts/
pytorch-51800 (bug_repro.py, commit 2de9268).
Root cause (as the issue and the reproduction establish it): nn.utils.spectral_norm only
runs its power iteration in a training-mode forward; a model put in eval mode before its
first training forward uses unnormalised weights, so a "baseline" evaluation looks wildly
off.  Training itself is healthy: the first training-mode forward normalises the weights.
Re-created: Linear -> spectral_norm -> PReLU twice, then a Linear output, orthogonal
weights and zero biases as in the reproduction, trained as a regressor with Adam on a
seeded target;
differs from the original: 64 features instead of 1000; a training loop added (the
reproduction only evaluates); 200 steps.
Fix: one training-mode forward before the baseline evaluation.  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 200
FEATURES = 64


def linear(n_in: int, n_out: int, spectral: bool) -> nn.Module:
    layer = nn.Linear(n_in, n_out)
    nn.init.zeros_(layer.bias)
    nn.init.orthogonal_(layer.weight, 1)
    return nn.utils.spectral_norm(layer) if spectral else layer


def make_model(fixed: bool, probe: torch.Tensor) -> nn.Module:
    model = nn.Sequential(linear(FEATURES, FEATURES, True), nn.PReLU(FEATURES),
                          linear(FEATURES, FEATURES, True), nn.PReLU(FEATURES),
                          linear(FEATURES, 1, False))
    if fixed:
        model.train()
        with torch.no_grad():
            model(probe)  # FIX: one training-mode forward runs the power iteration first
    model.eval()
    with torch.no_grad():
        model.baseline = float(model(probe).abs().mean())  # BUG (without the FIX): unnormalised weights
    model.train()
    return model


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    x = torch.randn(3000, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g) / FEATURES ** 0.5
    y = torch.tanh(x @ w) + 0.1 * torch.randn(3000, 1, generator=g)
    loss_fn = nn.MSELoss()

    def step(model, optimizer, batch):
        inputs, targets = batch
        loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed, x[:100]),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x[:2500], y[:2500], 32), step=step, loss=loss_fn,
                val_batches=batched(x[2500:], y[2500:], 250), steps=STEPS, seed=seed)
