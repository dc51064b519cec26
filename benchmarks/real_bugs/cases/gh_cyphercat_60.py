"""A speaker classifier asked to train for 25 epochs stops after the first one.

Source: https://github.com/Lab41/cyphercat/pull/60 (2018-12-06), commit 0f13fbc ("Fixes bug
introduced in commit 3114be5e874b27340b32ba423e02d8ac95ac193b"); the bug came in with 3114be5
(2018-11-28), which made Utils/train.py's train() return the training and test accuracies.
Root cause (as the PR and its fix establish it): the new `return train_accuracy,
test_accuracy` was indented inside the `for epoch in range(n_epochs)` loop, so train()
returned after evaluating the first epoch and every model was trained for a single epoch
(the VOiCES/LibriSpeech notebook of that commit prints "[0/25]" and nothing after it, with
63 % training and 54 % test accuracy, where its 25-epoch table reports 99 % and 92-96 %).
The fix moves the return out of the loop.
Re-created: the notebook's STFT_CNN_classifier (three Conv1d(k=7, padding 1) - BatchNorm1d -
ReLU - MaxPool1d(4) blocks over the frequency axis with the STFT frames as channels, widening
x1, x2, x4, then Linear - ReLU - Linear), models.weights_init (Xavier-normal Linear weights;
its Conv2d/BatchNorm2d branches do not touch the Conv1d/BatchNorm1d layers), unnormalised STFT
magnitudes as input, CrossEntropyLoss, Adam lr 1e-3, batch 32 with shuffle and drop_last,
train()'s step (zero_grad, forward, loss, backward, step), test accuracy in eval mode as
eval_target_net computes it;
differs from the original: 3-second LibriSpeech clips (94 frames x 1025 bins, 325 speakers)
replaced by seeded spectrogram-like magnitudes of 24 frames x 257 bins for 20 "speakers"
(each a formant envelope over a harmonic comb at its own pitch, with per-frame loudness and
noise), 640 training and 320 test clips, hidden layer 128 instead of 512; 10 epochs (200
steps) requested instead of 25.
Fix: dedent the return so that all n_epochs run.  Run fixed: FAILURELAB_FIX=1 or
parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, fixed_from_env, generator  # noqa: E402

KIND = "failure"
N_EPOCHS, BATCH = 10, 32
N_TRAIN, N_TEST = 640, 320
STEPS = N_EPOCHS * (N_TRAIN // BATCH)  # 200
HARM_METRIC = "val_acc"
SPEAKERS, FRAMES, BINS = 20, 24, 257


def clips(seed: int, n: int):
    """Seeded STFT-like magnitudes (n, frames, bins): a speaker's formant envelope over a
    harmonic comb at the speaker's pitch, scaled per frame by loudness, with noise."""
    g = generator(seed)
    f = torch.arange(BINS).float()
    formants = 20 + 200 * torch.rand(SPEAKERS, 3, generator=g)
    widths = 8 + 12 * torch.rand(SPEAKERS, 3, generator=g)
    envelope = torch.exp(-((f - formants[..., None]) / widths[..., None]) ** 2).sum(1)
    pitch = 4 + 6 * torch.rand(SPEAKERS, generator=g)  # harmonic spacing in bins
    comb = 0.3 + 0.7 * torch.cos(2 * torch.pi * f / pitch[:, None]).clamp(min=0)
    voice = 10 * envelope * comb  # (speakers, bins)
    y = torch.randint(SPEAKERS, (n,), generator=g)
    loud = torch.rand(n, FRAMES, 1, generator=g) ** 2
    jitter = 1 + 0.6 * torch.randn(n, FRAMES, BINS, generator=g)
    noise = 1.5 * torch.rand(n, FRAMES, BINS, generator=g)
    return (loud * voice[y][:, None, :] * jitter).abs() + noise, y


class ConvBlock(nn.Module):
    def __init__(self, n_input, n_out, kernel_size):
        super().__init__()
        self.cnn_block = nn.Sequential(nn.Conv1d(n_input, n_out, kernel_size, padding=1),
                                       nn.BatchNorm1d(n_out), nn.ReLU(),
                                       nn.MaxPool1d(kernel_size=4, stride=4))

    def forward(self, x):
        return self.cnn_block(x)


class STFTCNNClassifier(nn.Module):
    def __init__(self, in_size, n_hidden, n_classes):
        super().__init__()
        self.down_path = nn.ModuleList([ConvBlock(in_size, in_size, 7),
                                        ConvBlock(in_size, in_size * 2, 7),
                                        ConvBlock(in_size * 2, in_size * 4, 7)])
        self.fc = nn.Sequential(nn.Linear(in_size * 4 * 2, n_hidden), nn.ReLU())
        self.out = nn.Linear(n_hidden, n_classes)

    def forward(self, x):
        for down in self.down_path:
            x = down(x)
        return self.out(self.fc(x.view(x.size(0), -1)))


def weights_init(m):
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.constant_(m.bias, 0)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.constant_(m.weight, 1)
        nn.init.constant_(m.bias, 0)
    elif isinstance(m, nn.Linear):
        nn.init.xavier_normal_(m.weight.data)
        nn.init.constant_(m.bias, 0)


def make_model() -> nn.Module:
    net = STFTCNNClassifier(FRAMES, 128, SPEAKERS)
    net.apply(weights_init)
    return net


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = clips(seed, N_TRAIN + N_TEST)
    xtr, ytr = x[:N_TRAIN], y[:N_TRAIN]
    g = generator(seed + 1000)
    loader = []  # DataLoader(shuffle=True, drop_last=True): a fresh order every epoch
    for _ in range(N_EPOCHS):
        order = torch.randperm(N_TRAIN, generator=g)
        loader += [(xtr[order[i:i + BATCH]], ytr[order[i:i + BATCH]])
                   for i in range(0, N_TRAIN - BATCH + 1, BATCH)]
    per_epoch = N_TRAIN // BATCH
    if fixed:
        steps = N_EPOCHS * per_epoch  # FIX: `return` after the epoch loop: all n_epochs run
    else:
        steps = per_epoch  # BUG: `return` inside the epoch loop: train() ends after epoch 0
    criterion = nn.CrossEntropyLoss()

    def step(net, optimizer, batch):
        imgs, labels = batch
        optimizer.zero_grad()
        outputs = net(imgs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    test = [(x[N_TRAIN:][i:i + BATCH], y[N_TRAIN:][i:i + BATCH])
            for i in range(0, N_TEST, BATCH)]
    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=loader, step=step, loss=criterion, val_batches=test,
                steps=steps, seed=seed)


def measure(net, test_loader, fixed: bool) -> dict:
    """eval_target_net: test accuracy in eval mode, without gradients."""
    return {"val_acc": accuracy(net, test_loader)}
