"""A VQGAN-style autoencoder whose codebook loss carries the commitment weight beta.

Source: https://github.com/CompVis/taming-transformers/issues/57 (2021-06-12; also #46),
fixed by PR #58 (merged 2021-06-24, behind `legacy=False` so that old checkpoints
reproduce), taming/modules/vqvae/quantize.py.
Root cause (as the thread and fix established it): the VQ-VAE loss is
||sg(z_q) - z||^2 * beta + ||z_q - sg(z)||^2 (commitment weighted by beta = 0.25, the
codebook term unweighted), but the code wrote
`mean((z_q.detach() - z)**2) + beta * mean((z_q - z.detach())**2)`: the encoder is
pulled towards its codes at full weight and the codebook follows its encoder outputs at a
quarter of the intended weight.  The maintainers agreed and merged the swap.
Re-created: the quantizer as written (nearest codebook entry by squared distance,
straight-through estimator z + (z_q - z).detach(), beta 0.25, codebook initialised
uniform(-1/n_e, 1/n_e)), a convolutional encoder/decoder with two stride-2 stages,
images scaled to [-1, 1], loss = L1 reconstruction + codebook_weight 1.0 * the
quantizer loss, Adam with taming's betas (0.5, 0.9); the harm yardstick is the L1
reconstruction error on held-out images;
differs from the original: ImageNet/FFHQ crops at 256 px replaced by seeded 16x16 RGB
images of a few soft coloured blobs, widths scaled down (64 channels, 16-dimensional
codes, 128 codebook entries instead of 1024 x 256), no LPIPS perceptual loss and no
discriminator (the GAN loss starts only after disc_start steps in taming's configs),
learning rate 1e-3 instead of 4.5e-6 x batch size (a small model from scratch),
batch 32, 300 steps.
Fix: beta on the commitment term, `beta * mean((z_q.detach() - z)**2) +
mean((z_q - z.detach())**2)`.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
BATCH = 32
HARM_METRIC = "val_loss"
SIDE, N_E, E_DIM, WIDTH, BETA = 16, 128, 16, 64, 0.25


def blob_images(seed: int, n: int):
    """n RGB images in [-1, 1]: 3 soft Gaussian blobs of random colour on a dark ground."""
    g = generator(seed)
    coords = torch.linspace(0, 1, SIDE)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    centre = torch.rand(n, 3, 2, generator=g)
    width = 0.08 + 0.15 * torch.rand(n, 3, 1, 1, generator=g)
    colour = torch.rand(n, 3, 3, generator=g)
    d2 = (xx - centre[..., 0, None, None]) ** 2 + (yy - centre[..., 1, None, None]) ** 2
    mass = torch.exp(-d2 / (2 * width ** 2))                      # (n, blob, H, W)
    image = torch.einsum("nbhw,nbc->nchw", mass, colour).clamp(0, 1)
    return image * 2 - 1


class VectorQuantizer(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.embedding = nn.Embedding(N_E, E_DIM)
        self.embedding.weight.data.uniform_(-1.0 / N_E, 1.0 / N_E)

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()                       # (B, H, W, C)
        flat = z.view(-1, E_DIM)
        d = (flat ** 2).sum(1, keepdim=True) + (self.embedding.weight ** 2).sum(1) \
            - 2 * flat @ self.embedding.weight.t()
        z_q = self.embedding(d.argmin(1)).view(z.shape)
        if self.fixed:  # FIX: beta weights the commitment term
            loss = BETA * torch.mean((z_q.detach() - z) ** 2) + torch.mean((z_q - z.detach()) ** 2)
        else:  # BUG: beta weights the codebook term instead
            loss = torch.mean((z_q.detach() - z) ** 2) + BETA * torch.mean((z_q - z.detach()) ** 2)
        z_q = z + (z_q - z).detach()                                 # straight-through
        return z_q.permute(0, 3, 1, 2).contiguous(), loss


class VQModel(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, WIDTH, 4, 2, 1), nn.SiLU(),
                                     nn.Conv2d(WIDTH, WIDTH, 4, 2, 1), nn.SiLU(),
                                     nn.Conv2d(WIDTH, E_DIM, 1))     # quant_conv
        self.quantize = VectorQuantizer(fixed)
        self.decoder = nn.Sequential(nn.Conv2d(E_DIM, WIDTH, 1), nn.SiLU(),  # post_quant_conv
                                     nn.ConvTranspose2d(WIDTH, WIDTH, 4, 2, 1), nn.SiLU(),
                                     nn.ConvTranspose2d(WIDTH, 3, 4, 2, 1))

    def forward(self, x):
        quant, qloss = self.quantize(self.encoder(x))
        return self.decoder(quant), qloss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    images = blob_images(seed, BATCH * 40 + 256)
    train, val = images[:BATCH * 40], images[BATCH * 40:]
    g = generator(seed + 1)
    batches = []  # shuffled every epoch
    while len(batches) < STEPS:
        order = torch.randperm(len(train), generator=g)
        batches += [(train[i], train[i]) for i in order.split(BATCH)]

    def step(model, optimizer, batch):  # the autoencoder's training step (no GAN yet)
        x, _ = batch
        xrec, qloss = model(x)
        loss = torch.abs(x - xrec).mean() + 1.0 * qloss     # codebook_weight 1.0
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: VQModel(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.5, 0.9)),
                batches=batches[:STEPS], step=step, loss=None,
                val_batches=batched(val, val, 128), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """L1 reconstruction error on held-out images, eval mode."""
    model.eval()
    with torch.no_grad():
        errors = [float(torch.abs(model(x)[0] - x).mean()) for x, _ in val_batches]
    model.train()
    return {"val_loss": sum(errors) / len(errors)}
