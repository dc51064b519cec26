"""A Gumbel-softmax VAE's KL term carries a stray minus sign: training maximises it.

Source: https://github.com/dev4488/VAE_gumble_softmax/issues/1 (2018-08-29); the author
agreed and changed the line (2018-09-04).
Root cause (as the issue established it): the loss computed
`KLD = -torch.sum(qy * (log_qy - g))`, the negative of the KL divergence between the
categorical posterior and the uniform prior, so minimising BCE + KLD *maximised* the
divergence; the reporter got better images once the minus was removed.
Re-created: the repository's MNIST model (encoder 784-512-256 -> 30 categorical latents
of 10 classes, Gumbel-softmax sample at temperature 1, decoder 300-256-512-784 with a
sigmoid; ReLU hidden layers), loss = summed BCE per image + KLD, Adam lr 1e-3, batch
100; differs from the original: seeded 28x28 stroke images in [0, 1] instead of MNIST,
no temperature annealing (200 steps, less than one of its epochs), the CPU instead of
CUDA.  The harm is read as the correct negative ELBO (BCE + the KL with the right sign)
on held-out images, Gumbel noise drawn from a fixed generator.
Fix: KLD = torch.sum(qy * (log_qy - g), dim=-1).mean().  Run fixed: FAILURELAB_FIX=1
or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
LATENT, CATEGORIES, TEMPERATURE = 30, 10, 1.0


def gumbel_softmax(logits, generator=None):
    u = torch.rand(logits.shape, generator=generator)
    return F.softmax((logits - torch.log(-torch.log(u + 1e-20) + 1e-20)) / TEMPERATURE, -1)


class GumbelVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                                     nn.ReLU(), nn.Linear(256, LATENT * CATEGORIES))
        self.decoder = nn.Sequential(nn.Linear(LATENT * CATEGORIES, 256), nn.ReLU(),
                                     nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 784),
                                     nn.Sigmoid())
        self.noise = None  # a torch.Generator for the Gumbel noise when measuring

    def forward(self, x):
        logits = self.encoder(x.view(-1, 784)).view(-1, LATENT, CATEGORIES)
        z = gumbel_softmax(logits, self.noise).view(-1, LATENT * CATEGORIES)
        return self.decoder(z), F.softmax(logits, -1)


def kl_to_uniform(qy):
    """KL(q || uniform) per image, summed over the latents."""
    return torch.sum(qy * (torch.log(qy + 1e-20) - math.log(1.0 / CATEGORIES)), (1, 2))


def make_loss(fixed: bool):
    def loss_function(output, x):
        recon, qy = output
        bce = F.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum") / len(x)
        # BUG: KLD = -torch.sum(qy * (log_qy - g))  # FIX: KLD = torch.sum(qy * (log_qy - g))
        kld = kl_to_uniform(qy).mean() * (1 if fixed else -1)
        return bce + kld
    return loss_function


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, _ = pixels(seed, 2500, 28, 10)
    Xt, _, Xv, _ = split(X, X, 500)
    loss_function = make_loss(fixed)

    def step(model, optimizer, batch):
        data, _ = batch
        optimizer.zero_grad()
        loss = loss_function(model(data), data)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=GumbelVAE,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, Xt, 100), step=step, loss=loss_function,
                val_batches=batched(Xv, Xv, 250), steps=STEPS, seed=seed)


@evaluating
def negative_elbo(model, batches) -> float:
    correct = make_loss(True)
    model.noise = torch.Generator().manual_seed(0)
    try:
        values = [float(correct(model(x), x)) for x, _ in batches]
    finally:
        model.noise = None
    return sum(values) / len(values)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": negative_elbo(model, val_batches)}
