"""A linear autoencoder whose loss never moves: the optimizer was handed the data.

Source: https://stackoverflow.com/questions/69284837 ("Linear autoencoder using Pytorch");
code as reproduced in mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/067 (commit 11b01d6).
Root cause (as the reproduction shows): the optimizer is built over the data columns,
`SGD([x[:,0], x[:,1]], lr=0.01)`, instead of the encoder/decoder weights; those data
tensors never receive a gradient, so step() changes nothing and the loss stays where it
started.  The fix passes the four weight tensors to the optimizer.
Re-created: D=2 inputs, x = rand(100, 2) with x0 += x1 and x1 = 0.5*x0 + x1, a linear
encoder D->1 and decoder 1->D with weights drawn from randn (as in the post), MSELoss,
SGD lr 0.01, full-batch steps;
differs from the original: the weights live in an nn.Module so the harness can seed and
watch them (the post used free tensors); 600 steps instead of 1000 epochs; the post's
undefined `x_reconstructed` is computed in the step as the answerer's version does.
Fix: SGD(model.parameters(), lr=0.01).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 600
D = 2


class LinearAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_encoder = nn.Parameter(torch.randn(D, 1))
        self.w_decoder = nn.Parameter(torch.randn(1, D))
        self.b_encoder = nn.Parameter(torch.randn(1))
        self.b_decoder = nn.Parameter(torch.randn(1, D))

    def forward(self, x):
        return (x @ self.w_encoder + self.b_encoder) @ self.w_decoder + self.b_decoder


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x = torch.rand(100, D, generator=generator(seed))
    x[:, 0] = x[:, 0] + x[:, 1]
    x[:, 1] = 0.5 * x[:, 0] + x[:, 1]
    loss_fn = nn.MSELoss()

    def make_optimizer(model):
        if fixed:
            return torch.optim.SGD(model.parameters(), lr=0.01)  # FIX: the weights
        return torch.optim.SGD([x[:, 0], x[:, 1]], lr=0.01)  # BUG: the data, not the weights

    def step(model, optimizer, batch):
        inputs, targets = batch
        x_reconstructed = model(inputs)
        loss = loss_fn(x_reconstructed, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return dict(model=LinearAutoencoder, optimizer=make_optimizer, batches=[(x, x)],
                step=step, loss=loss_fn, val_batches=None, steps=STEPS, seed=seed)
