"""Fine-tuning a zero-terminal-SNR diffusion UNet with Min-SNR weighting: "loss is nan".

Source: https://github.com/Lizb6626/IDArb/issues/11 (2025-04-11); the author replied "The
issue has been resolved in the latest version" the same day; fix commit fc7090a ("fix
training bug", 2025-04-11), one line in train.py.
Root cause (as the fix commit established it): the config sets zero_snr, so the DDPM
noise schedule is rescaled to zero terminal SNR (rescale_betas_zero_snr, v-prediction):
alphas_cumprod at the last timestep is exactly 0 and compute_snr gives snr = 0 there.
The Min-SNR loss weight min(snr, snr_gamma) / snr is then 0 / 0 = NaN for any sample
drawn at t = 999, the batch loss is NaN, and the NaN gradients reach the weights.  The
commit adds mse_loss_weights = torch.nan_to_num(mse_loss_weights, nan=1.0).
Re-created: train.py's loss as written -- timesteps uniform in [0, 1000), noisy latents
from the DDPM schedule with a linear beta schedule (SD's beta_start 0.00085, beta_end
0.012; the config's linear_noise_schedule) rescaled to zero terminal SNR exactly as
diffusers' rescale_zero_terminal_snr, v-prediction target, the conditioning latents
concatenated to the noisy latents (8 input channels), conditioning dropped for 5% of the
samples (condition_drop_rate, classifier-free guidance), compute_snr, the Min-SNR weight
with snr_gamma 5 and the per-sample MSE times that weight; AdamW lr 1e-4, betas
(0.9, 0.999), weight decay 1e-2, eps 1e-8, constant_with_warmup (100 steps),
clip_grad_norm_ 1.0, batch 16;
differs from the original: the multi-view SD-2.1 UNet on 4x32x32 VAE latents of rendered
objects replaced by a 3-layer conv denoiser with a sinusoidal timestep embedding on seeded
4x8x8 latent pairs (the target latent is a fixed blur-and-mix of the conditioning latent),
one view per object, no EMA, and fp32 instead of fp16 mixed precision: here the first
NaN gradient turns the weights into NaN at once, while the original's fp16 GradScaler
skips such steps (the reporter saw NaN after 8k steps); 200 steps.
Fix: mse_loss_weights = torch.nan_to_num(mse_loss_weights, nan=1.0).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
BATCH = 16
HARM_METRIC = "val_loss"
T = 1000
SNR_GAMMA = 5.0
CONDITION_DROP_RATE = 0.05
CH, SIDE = 4, 8


def zero_snr_alphas_cumprod():
    """DDPMScheduler(beta_schedule='linear', rescale_betas_zero_snr=True).alphas_cumprod."""
    betas = torch.linspace(0.00085, 0.012, T, dtype=torch.float32)
    alphas_bar_sqrt = torch.cumprod(1.0 - betas, dim=0).sqrt()
    first, last = alphas_bar_sqrt[0].clone(), alphas_bar_sqrt[-1].clone()
    alphas_bar_sqrt -= last
    alphas_bar_sqrt *= first / (first - last)
    alphas_bar = alphas_bar_sqrt ** 2
    alphas = torch.cat([alphas_bar[0:1], alphas_bar[1:] / alphas_bar[:-1]])
    betas = 1 - alphas
    return torch.cumprod(1.0 - betas, dim=0)


ALPHAS_CUMPROD = zero_snr_alphas_cumprod()  # the last one is exactly 0


def compute_snr(timesteps):
    alpha = ALPHAS_CUMPROD[timesteps] ** 0.5
    sigma = (1.0 - ALPHAS_CUMPROD[timesteps]) ** 0.5
    return (alpha / sigma) ** 2


def latent_pairs(seed: int, n: int):
    """Seeded (conditioning latent, target latent): smooth 4x8x8 fields, the target a
    fixed channel mix of a blurred copy of the conditioning latent."""
    g = generator(seed)
    cond = F.avg_pool2d(torch.randn(n, CH, SIDE, SIDE, generator=g), 3, 1, 1) * 2
    mix = torch.randn(CH, CH, generator=generator(99)) / CH ** 0.5
    blurred = F.avg_pool2d(F.pad(cond, (1, 1, 1, 1), mode="replicate"), 3, 1)
    target = torch.einsum("oc,nchw->nohw", mix, blurred)
    return cond, target / target.std()


def timestep_embedding(t, dim=32):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([args.cos(), args.sin()], dim=1)


class Denoiser(nn.Module):
    """unet(cat(noisy_latents, cond_latents), timesteps) -> v-prediction."""

    def __init__(self):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 64))
        self.conv_in = nn.Conv2d(2 * CH, 64, 3, padding=1)
        self.mid = nn.Conv2d(64, 64, 3, padding=1)
        self.conv_out = nn.Conv2d(64, CH, 3, padding=1)

    def forward(self, x, timesteps):
        h = F.silu(self.conv_in(x) + self.time(timestep_embedding(timesteps))[:, :, None, None])
        return self.conv_out(F.silu(self.mid(h)))


def noisy_input(latents, cond, noise, timesteps):
    a = ALPHAS_CUMPROD[timesteps].sqrt()[:, None, None, None]
    s = (1 - ALPHAS_CUMPROD[timesteps]).sqrt()[:, None, None, None]
    noisy = a * latents + s * noise
    target = a * noise - s * latents  # noise_scheduler.get_velocity
    return torch.cat([noisy, cond], dim=1), target


def make_optimizer(unet):
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4, betas=(0.9, 0.999),
                                  weight_decay=1e-2, eps=1e-8)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, s / 100))
    return optimizer, warmup  # constant_with_warmup, stepped by the harness


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    cond, target = latent_pairs(seed, 1600)

    def step(unet, optimizer, batch):
        cond_latents, latents = batch
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, T, (len(latents),)).long()
        keep = (torch.rand(len(latents)) >= CONDITION_DROP_RATE).float()
        cond_latents = cond_latents * keep[:, None, None, None]
        model_input, v_target = noisy_input(latents, cond_latents, noise, timesteps)
        model_pred = unet(model_input, timesteps)
        snr = compute_snr(timesteps)
        mse_loss_weights = (
            torch.stack([snr, SNR_GAMMA * torch.ones_like(timesteps)], dim=1).min(dim=1)[0] / snr
        )
        if fixed:
            mse_loss_weights = torch.nan_to_num(mse_loss_weights, nan=1.0)  # FIX: 0/0 -> 1
        # BUG: at t = 999 snr = 0 and the weight min(0, 5) / 0 is NaN, left as it is
        loss = F.mse_loss(model_pred.float(), v_target.float(), reduction="none")
        loss = (loss.mean(dim=[1, 2, 3]) * mse_loss_weights).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return dict(model=Denoiser, optimizer=make_optimizer,
                batches=batched(cond[:1280], target[:1280], BATCH), step=step, loss=None,
                val_batches=batched(cond[1280:], target[1280:], 64), steps=STEPS, seed=seed)


@evaluating
def measure(unet, val_batches, fixed: bool) -> dict:
    """Held-out v-prediction MSE (unweighted) with a fixed draw of noise and timesteps."""
    g = generator(1234)
    losses = []
    for cond, latents in val_batches:
        noise = torch.randn(latents.shape, generator=g)
        timesteps = torch.randint(0, T, (len(latents),), generator=g)
        model_input, v_target = noisy_input(latents, cond, noise, timesteps)
        losses.append(float(F.mse_loss(unet(model_input, timesteps), v_target)))
    return {"val_loss": sum(losses) / len(losses)}
