"""Control: "loss fluctuates during training" while pre-training MAE -- a zoomed-in plot.

Source: https://github.com/facebookresearch/mae/issues/21 (2022-01-20, answered by the
author the same day, closed).
What the thread established: nothing is wrong.  The reporter pre-trained
mae_vit_base_patch16 on ImageNet-1k and saw the loss curve jump up and down; the author
(K. He) answered that the plot was zoomed in to iterations 303k-309k and to loss values
near 0.42, that the full curve is smooth overall (the reference curve he posted falls
steadily), and that the fluctuation is small and only looks big when zoomed in (the
plotting density also changed when the job was resumed).  Plotting the whole run is a
change to the picture, not to training.
Healthy training: there is no fix.
Re-created: MAE's pre-training loop -- a ViT encoder over the visible 25 % of the patches
(mask ratio 0.75, per-sample random masking by argsort of uniform noise), fixed 2-D
sin-cos position embeddings and a class token, pre-norm transformer blocks with GELU MLPs
of ratio 4, a lighter decoder with mask tokens, per-patch normalised pixel targets
(norm_pix_loss), the loss averaged over the masked patches only; AdamW with betas
(0.9, 0.95), weight decay 0.05 (none on biases and norms), the original's absolute
learning rate (blr 1.5e-4 x 4096 / 256 = 2.4e-3) with linear warm-up then half-cycle
cosine, set every iteration; zero_grad after the step, as engine_pretrain does;
differs from the original: ImageNet replaced by seeded 3x32x32 images (one of 10 smooth
templates per image, randomly scaled, plus a smooth random field and pixel noise, so
that masked patches are predictable from visible ones); patch 8 (16 patches), encoder
width 64 and depth 2, decoder width 32 and depth 1, batch 64 instead of 4096, no mixed
precision, 200 steps (warm-up 20) instead of 800-1600 epochs.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 200
WARMUP = 20
BATCH = 64
HARM_METRIC = "val_loss"
SIDE, PATCH, CLASSES = 32, 8, 10
GRID = SIDE // PATCH
MASK_RATIO = 0.75
LR = 1.5e-4 * 4096 / 256


def images(seed: int, n: int):
    g = generator(seed)
    templates = F.interpolate(torch.rand(CLASSES, 3, 8, 8, generator=g), size=SIDE,
                              mode="bilinear", align_corners=False)
    y = torch.randint(CLASSES, (n,), generator=g)
    field = F.interpolate(torch.randn(n, 3, 2, 2, generator=g), size=SIDE, mode="bilinear",
                          align_corners=False)
    scale = 0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)
    x = scale * templates[y] + 0.3 * field + 0.05 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    return (x - x.mean()) / x.std(), y


def sincos_2d(dim: int, grid: int) -> torch.Tensor:
    """Fixed 2-D sin-cos position embeddings, (grid*grid, dim), as MAE's pos_embed."""
    omega = 1.0 / 10000 ** (torch.arange(dim // 4).float() / (dim // 4))
    ys, xs = torch.meshgrid(torch.arange(grid).float(), torch.arange(grid).float(),
                            indexing="ij")
    parts = []
    for pos in (ys.flatten(), xs.flatten()):
        out = pos[:, None] * omega[None]
        parts += [out.sin(), out.cos()]
    return torch.cat(parts, 1)


def blocks(dim: int, depth: int) -> nn.Module:
    layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)


class MaskedAutoencoder(nn.Module):
    def __init__(self, dim=64, depth=2, dec_dim=32, dec_depth=1):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, PATCH, PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.register_buffer("pos_embed", torch.cat([torch.zeros(1, dim),
                                                     sincos_2d(dim, GRID)])[None])
        self.encoder, self.norm = blocks(dim, depth), nn.LayerNorm(dim)
        self.decoder_embed = nn.Linear(dim, dec_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_dim))
        self.register_buffer("decoder_pos_embed", torch.cat([torch.zeros(1, dec_dim),
                                                             sincos_2d(dec_dim, GRID)])[None])
        self.decoder, self.decoder_norm = blocks(dec_dim, dec_depth), nn.LayerNorm(dec_dim)
        self.decoder_pred = nn.Linear(dec_dim, PATCH * PATCH * 3)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    @staticmethod
    def patchify(imgs):
        n = imgs.shape[0]
        x = imgs.reshape(n, 3, GRID, PATCH, GRID, PATCH)
        return torch.einsum("nchpwq->nhwpqc", x).reshape(n, GRID * GRID, PATCH * PATCH * 3)

    def forward(self, imgs, mask_ratio=MASK_RATIO, noise=None):
        x = self.patch_embed(imgs).flatten(2).transpose(1, 2) + self.pos_embed[:, 1:]
        n, length, dim = x.shape
        keep = int(length * (1 - mask_ratio))
        noise = torch.rand(n, length) if noise is None else noise
        ids_shuffle = noise.argsort(1)
        ids_restore = ids_shuffle.argsort(1)
        x = x.gather(1, ids_shuffle[:, :keep, None].expand(-1, -1, dim))
        mask = torch.ones(n, length)
        mask[:, :keep] = 0
        mask = mask.gather(1, ids_restore)
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(n, -1, -1)
        latent = self.norm(self.encoder(torch.cat([cls, x], 1)))
        z = self.decoder_embed(latent)
        tokens = torch.cat([z[:, 1:], self.mask_token.expand(n, length - keep, -1)], 1)
        tokens = tokens.gather(1, ids_restore[:, :, None].expand(-1, -1, z.shape[2]))
        z = torch.cat([z[:, :1], tokens], 1) + self.decoder_pos_embed
        pred = self.decoder_pred(self.decoder_norm(self.decoder(z)))[:, 1:]
        target = self.patchify(imgs)  # norm_pix_loss
        mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
        target = (target - mean) / (var + 1e-6) ** 0.5
        loss = ((pred - target) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum(), pred, mask


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                                   {"params": decay, "weight_decay": 0.05}],
                                  lr=LR, betas=(0.9, 0.95))

    def schedule(i):  # adjust_learning_rate: linear warm-up, then half-cycle cosine
        if i < WARMUP:
            return i / WARMUP
        return 0.5 * (1 + math.cos(math.pi * (i - WARMUP) / (STEPS - WARMUP)))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    x, y = images(seed, 2048 + 256)
    g = generator(seed + 1)
    train = x[:2048], y[:2048]
    batches = []
    while len(batches) < STEPS:  # a shuffling DataLoader, epoch after epoch
        order = torch.randperm(2048, generator=g)
        batches += batched(train[0][order], train[1][order], BATCH)

    def step(model, optimizer, batch):
        samples, _ = batch
        loss, _, _ = model(samples, mask_ratio=MASK_RATIO)
        loss.backward()  # loss_scaler(loss, optimizer, parameters=model.parameters())
        optimizer.step()
        optimizer.zero_grad()
        return loss  # the value logged every iteration and plotted

    return dict(model=MaskedAutoencoder, optimizer=make_optimizer, batches=batches[:STEPS],
                step=step, loss=None, val_batches=batched(x[2048:], y[2048:], 128),
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The masked-patch reconstruction loss on held-out images, with fixed masks."""
    g = generator(1234)
    was = model.training
    model.eval()
    with torch.no_grad():
        losses = [float(model(x, noise=torch.rand(len(x), GRID * GRID, generator=g))[0])
                  for x, _ in val_batches]
    model.train(was)
    return {"val_loss": sum(losses) / len(losses)}
