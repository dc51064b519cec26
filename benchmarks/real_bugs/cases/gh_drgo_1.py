"""A diffusion model's denoising MLP barely learns: every layer's input is detached.

Source: https://github.com/user683/DRGO/issues/1 (2025-04-17), on models/MLP_model.py
(commit 8948440).
Root cause (as the author confirmed it): the forward pass of the reverse-diffusion MLP
calls `h.detach()` before each linear layer and each tanh ("This was temporarily added
during our debugging process and was accidentally left in ... It should be
`h = torch.tanh(h)`").  No gradient reaches the timestep embedding layer or any layer but
the last, so those keep their random initial weights and only the final linear map is
fitted.  (Outside the catalogue: the graph is cut by .detach(); the parameters are in the
optimizer and get updated, by zero gradients.)
Re-created: the MLP's structure -- a linear timestep-embedding layer (sinusoidal 10-d
embedding), input dropout 0.5, in_layers [64 + 10 -> 256] and out_layers [256 -> 64]
with tanh between, Xavier-normal weights and N(0, 0.001) biases -- trained to predict
x0 from x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise (MSE), Adam lr 1e-3, batch 256;
differs from the original: x0 are seeded 64-d vectors with an 8-d latent structure
instead of the recommender's graph embeddings; 50 diffusion steps with a linear beta
schedule 1e-4..0.02 (the repository's schedule settings are not re-created); 300 steps.
Fix: no detach in the forward pass.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
DIM, EMB, HIDDEN, T = 64, 10, 256, 50


def timestep_embedding(t, dim=EMB, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def xavier_(layer: nn.Linear) -> nn.Linear:
    fan_out, fan_in = layer.weight.shape
    nn.init.normal_(layer.weight, 0.0, math.sqrt(2.0 / (fan_in + fan_out)))
    nn.init.normal_(layer.bias, 0.0, 0.001)
    return layer


class MLP(nn.Module):
    def __init__(self, detach: bool):
        super().__init__()
        self.detach = detach
        self.emb_layer = xavier_(nn.Linear(EMB, EMB))
        self.in_layers = nn.ModuleList([xavier_(nn.Linear(DIM + EMB, HIDDEN))])
        self.out_layers = nn.ModuleList([xavier_(nn.Linear(HIDDEN, DIM))])
        self.drop = nn.Dropout(0.5)

    def cut(self, h):
        if self.detach:
            return h.detach()  # BUG: layer(h.detach()), torch.tanh(h.detach())
        return h  # FIX: layer(h), torch.tanh(h)

    def forward(self, batch):
        x, t = batch[:, :DIM], batch[:, DIM]
        emb = self.emb_layer(timestep_embedding(t))
        h = torch.cat([self.drop(x), emb], dim=-1)
        for layer in self.in_layers:
            h = torch.tanh(self.cut(layer(self.cut(h))))
        for i, layer in enumerate(self.out_layers):
            h = layer(self.cut(h))
            if i != len(self.out_layers) - 1:
                h = torch.tanh(self.cut(h))
        return h


def noised(seed: int, n: int):
    """Model input [x_t, t] (n, DIM + 1) and target x0 (n, DIM)."""
    g = generator(seed)
    basis = torch.randn(8, DIM, generator=g) / math.sqrt(8)
    x0 = torch.randn(n, 8, generator=g) @ basis
    betas = torch.linspace(1e-4, 0.02, T)
    alpha_bar = torch.cumprod(1 - betas, 0)
    t = torch.randint(T, (n,), generator=g)
    ab = alpha_bar[t].unsqueeze(1)
    x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * torch.randn(n, DIM, generator=g)
    return torch.cat([x_t, t.unsqueeze(1).float()], 1), x0


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, x0 = noised(seed, 9216)
    loss_fn = nn.MSELoss()

    def step(model, optimizer, batch):
        inputs, target = batch
        loss = loss_fn(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    train = [(X[i:i + 256], x0[i:i + 256]) for i in range(0, 8192, 256)]
    val = [(X[8192:], x0[8192:])]
    return dict(model=lambda: MLP(detach=not fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=train, step=step, loss=loss_fn, val_batches=val, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
