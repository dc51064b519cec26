"""Control: "is the sign of the KL term in the VAE example a typo?" -- it is right.

Source: https://github.com/pytorch/examples/issues/824 (2020-09-24); the reporter closed
it having found the answer (2020-11-18).
What the thread established: nothing is wrong. vae/main.py's loss is BCE +
`-0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())`; the paper's closed form is
for -KL, and the loss minimises the negative ELBO, so the minus in front is the correct
sign (the reporter: "the sign of the KLD term is correct").  Healthy training: there is
no fix.
Re-created: the example's model and loop -- fc1 784-400 ReLU, fc21/fc22 400-20 (mean,
log-variance), reparameterisation, fc3 20-400 ReLU, fc4 400-784 sigmoid; loss = summed
BCE + that KLD, Adam lr 1e-3, batch 128; the step returns the loss per image, as the
example prints it; differs from the original: seeded 28x28 stroke images in [0, 1]
instead of MNIST, 200 steps instead of 10 epochs.  Its metric is the held-out negative
ELBO per image, the noise of the reparameterisation drawn from a fixed generator.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, pixels, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_loss"


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)
        self.noise = None  # a torch.Generator for the reparameterisation when measuring

    def forward(self, x):
        h1 = F.relu(self.fc1(x.view(-1, 784)))
        mu, logvar = self.fc21(h1), self.fc22(h1)
        std = torch.exp(0.5 * logvar)
        z = mu + torch.randn(std.shape, generator=self.noise) * std
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def loss_function(output, x):
    """The negative ELBO per image: summed BCE + KL(q || N(0, I)), divided by the batch."""
    recon, mu, logvar = output
    bce = F.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kld) / len(x)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    X, _ = pixels(seed, 2500, 28, 10)
    Xt, _, Xv, _ = split(X, X, 500)

    def step(model, optimizer, batch):
        data, _ = batch
        optimizer.zero_grad()
        loss = loss_function(model(data), data)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=VAE,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, Xt, 128), step=step, loss=loss_function,
                val_batches=batched(Xv, Xv, 250), steps=STEPS, seed=seed)


@evaluating
def negative_elbo(model, batches) -> float:
    model.noise = torch.Generator().manual_seed(0)
    try:
        values = [float(loss_function(model(x), x)) for x, _ in batches]
    finally:
        model.noise = None
    return sum(values) / len(values)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": negative_elbo(model, val_batches)}
