"""Control: HiFi-GAN's training loss wavers while its validation loss falls -- normal for a GAN.

Source: https://github.com/jik876/hifi-gan/issues/60 (2021-02-19; answered by the author
2021-02-24).
What the thread established: nothing is wrong.  The reporter trained HiFi-GAN on a 20-hour
corpus and saw the validation (mel-spectrogram) error go down while the training loss
"is wavering around"; the author answered that in the early stage of training the losses
can increase and decrease depending on the dataset, and that one should watch the loss
trend.  The training loss train.py logs is the generator's total loss -- adversarial
(least-squares) terms against discriminators that are trained at the same time, feature
matching, and 45 x the mel L1 -- so it need not fall while the mel error does.
Healthy training: there is no fix.
Re-created: train.py's loop -- a generator from log-mel frames to waveform (conv_pre,
transposed-convolution upsampling by the hop length with residual blocks of dilated
convolutions, LeakyReLU 0.1, conv_post, tanh, weight norm), a multi-period discriminator
and a multi-scale discriminator, each step a discriminator update on the detached
generator output (least-squares real/fake loss) and then a generator update with
loss_gen_all = adversarial + feature-matching (x 2) + 45 x mel L1; AdamW lr 2e-4,
betas (0.8, 0.99) for both networks; the validation mel error as train.py computes it
(L1 between log-mel spectrograms of real and generated audio);
differs from the original: LJSpeech-like speech replaced by seeded 512-sample clips of
harmonic tones with envelopes and noise (8 kHz); a 20-band log-mel with n_fft 256, hop 64
instead of 80 bands, n_fft 1024, hop 256 and 8192-sample segments; batch 8 instead of
16; two upsampling stages of 8 with 32/16 channels and one residual block each instead
of HiFi-GAN V1's [8, 8, 2, 2] with 512 channels; periods (2, 3) and two scales with
narrow, ungrouped convolutions instead of periods (2, 3, 5, 7, 11) and three scales of
grouped kernel-41 convolutions; each discriminator scores real and generated audio in
one concatenated pass (no batch statistics, so the same as two calls); the per-epoch
ExponentialLR(0.999) left out (it moves the rate by under 0.1 % over the run); 200 steps.
The discriminators' optimizer is built with the generator's and kept on the model
(model.optim_d), since a case hands over one optimizer.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import weight_norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 200
BATCH = 8
SEGMENT, N_FFT, HOP, N_MELS, RATE = 512, 256, 64, 20, 8000
HARM_METRIC = "val_loss"


def clips(seed: int, n: int):
    """Seeded 'speech': 1-3 harmonic tones with random pitch and envelope, plus noise."""
    g = generator(seed)
    t = torch.arange(SEGMENT) / RATE
    audio = torch.zeros(n, SEGMENT)
    for _ in range(3):
        f0 = 100 + 300 * torch.rand(n, 1, generator=g)
        on = (torch.rand(n, 1, generator=g) < 0.7).float()
        env = F.interpolate(torch.rand(n, 1, 4, generator=g), size=SEGMENT, mode="linear",
                            align_corners=False)[:, 0]
        for h in (1, 2, 3):
            audio += on * env * torch.sin(2 * math.pi * h * f0 * t) / h
    audio += 0.02 * torch.randn(n, SEGMENT, generator=g)
    return 0.9 * audio / audio.abs().amax(1, keepdim=True)


def mel_basis() -> torch.Tensor:
    """Triangular mel filters, (N_MELS, N_FFT // 2 + 1)."""
    def mel(f):
        return 2595 * math.log10(1 + f / 700)
    edges = torch.linspace(0, mel(RATE / 2), N_MELS + 2)
    hz = 700 * (10 ** (edges / 2595) - 1)
    bins = torch.linspace(0, RATE / 2, N_FFT // 2 + 1)
    lo, mid, hi = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    return torch.clamp(torch.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), min=0)


MEL = mel_basis()


def mel_spectrogram(y):
    """train.py's mel_spectrogram: reflect padding, magnitude STFT, mel, log(clamp 1e-5)."""
    pad = (N_FFT - HOP) // 2
    y = F.pad(y[:, None], (pad, pad), mode="reflect")[:, 0]
    spec = torch.stft(y, N_FFT, HOP, N_FFT, torch.hann_window(N_FFT), center=False,
                      return_complex=True)
    spec = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)
    return torch.log(torch.clamp(MEL @ spec, min=1e-5))


class ResBlock(nn.Module):
    def __init__(self, c, dilations=(1, 3)):
        super().__init__()
        self.convs = nn.ModuleList(weight_norm(nn.Conv1d(c, c, 3, 1, d, dilation=d))
                                   for d in dilations)

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, 0.1))
        return x


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_pre = weight_norm(nn.Conv1d(N_MELS, 64, 7, 1, 3))
        self.ups = nn.ModuleList([weight_norm(nn.ConvTranspose1d(64, 32, 16, 8, 4)),
                                  weight_norm(nn.ConvTranspose1d(32, 16, 16, 8, 4))])
        self.resblocks = nn.ModuleList([ResBlock(32), ResBlock(16)])
        self.conv_post = weight_norm(nn.Conv1d(16, 1, 7, 1, 3))

    def forward(self, x):
        x = self.conv_pre(x)
        for up, res in zip(self.ups, self.resblocks, strict=True):
            x = res(up(F.leaky_relu(x, 0.1)))
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class DiscriminatorP(nn.Module):
    def __init__(self, period):
        super().__init__()
        self.period = period
        self.convs = nn.ModuleList([weight_norm(nn.Conv2d(1, 8, (5, 1), (3, 1), (2, 0))),
                                    weight_norm(nn.Conv2d(8, 16, (5, 1), (3, 1), (2, 0))),
                                    weight_norm(nn.Conv2d(16, 16, (5, 1), 1, (2, 0)))])
        self.conv_post = weight_norm(nn.Conv2d(16, 1, (3, 1), 1, (1, 0)))

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period:
            x = F.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(b, c, -1, self.period)
        fmap = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return x.flatten(1), fmap


class DiscriminatorS(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([weight_norm(nn.Conv1d(1, 16, 7, 1, 3)),
                                    weight_norm(nn.Conv1d(16, 16, 11, 4, 5)),
                                    weight_norm(nn.Conv1d(16, 32, 11, 4, 5)),
                                    weight_norm(nn.Conv1d(32, 32, 5, 1, 2))])
        self.conv_post = weight_norm(nn.Conv1d(32, 1, 3, 1, 1))

    def forward(self, x):
        fmap = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return x.flatten(1), fmap


class Discriminators(nn.Module):
    """MPD and MSD together: (real scores, fake scores, real fmaps, fake fmaps)."""
    def __init__(self, multi_scale: bool):
        super().__init__()
        self.multi_scale = multi_scale
        self.discriminators = nn.ModuleList(
            [DiscriminatorS(), DiscriminatorS()] if multi_scale
            else [DiscriminatorP(2), DiscriminatorP(3)])

    def forward(self, y, y_hat):
        outs = ([], [], [], [])
        for i, d in enumerate(self.discriminators):
            if self.multi_scale and i > 0:
                y, y_hat = F.avg_pool1d(y, 4, 2, 2), F.avg_pool1d(y_hat, 4, 2, 2)
            score, fmap = d(torch.cat([y, y_hat]))  # d(y), d(y_hat) in one pass
            n = len(y)
            for out, v in zip(outs, (score[:n], score[n:], [f[:n] for f in fmap],
                                     [f[n:] for f in fmap]), strict=True):
                out.append(v)
        return outs


class HiFiGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = Generator()
        self.mpd, self.msd = Discriminators(False), Discriminators(True)

    def forward(self, mel):
        return self.generator(mel)


def feature_loss(fmap_r, fmap_g):
    return 2 * sum(torch.mean(torch.abs(r - g)) for dr, dg in zip(fmap_r, fmap_g, strict=True)
                   for r, g in zip(dr, dg, strict=True))


def discriminator_loss(real, fake):
    return sum(torch.mean((1 - dr) ** 2) + torch.mean(dg ** 2) for dr, dg in
               zip(real, fake, strict=True))


def generator_loss(fake):
    return sum(torch.mean((1 - dg) ** 2) for dg in fake)


def make_optimizer(model):
    model.optim_d = torch.optim.AdamW(list(model.msd.parameters()) + list(model.mpd.parameters()),
                                      2e-4, betas=(0.8, 0.99))
    return torch.optim.AdamW(model.generator.parameters(), 2e-4, betas=(0.8, 0.99))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    audio = clips(seed, 640 + 64)
    mels = mel_spectrogram(audio)
    batches = [(mels[i:i + BATCH], audio[i:i + BATCH, None])
               for i in range(0, 640, BATCH)]
    val = [(mels[640:], audio[640:, None])]

    def step(model, optim_g, batch):
        x, y = batch
        y_mel = x
        y_g_hat = model.generator(x)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1))

        model.optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = model.mpd(y, y_g_hat.detach())
        loss_disc_f = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = model.msd(y, y_g_hat.detach())
        loss_disc_s = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        loss_disc_all.backward()
        model.optim_d.step()

        optim_g.zero_grad()
        loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = model.mpd(y, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = model.msd(y, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f = generator_loss(y_df_hat_g)
        loss_gen_s = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel
        loss_gen_all.backward()
        optim_g.step()
        return loss_gen_all  # "Gen Loss Total", the training loss that wavers

    return dict(model=HiFiGAN, optimizer=make_optimizer, batches=batches, step=step,
                loss=None, val_batches=val, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """train.py's validation: the mel-spectrogram L1 error of the generated audio."""
    was = model.training
    model.eval()
    with torch.no_grad():
        errors = [float(F.l1_loss(x, mel_spectrogram(model.generator(x).squeeze(1))))
                  for x, _ in val_batches]
    model.train(was)
    return {"val_loss": sum(errors) / len(errors)}
