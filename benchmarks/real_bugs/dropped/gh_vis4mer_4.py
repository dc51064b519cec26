"""A plateau scheduler fed the validation ACCURACY in its default 'min' mode: the rate is cut while accuracy rises.

Source: https://github.com/md-mohaiminul/ViS4mer/issues/4 (2022-10-11); the author (2022-10-28):
"That's a very good observation. I guess it was not intended. You can try changing the
mode of ReduceLROnPlateau to 'max'."
Root cause (as the thread established it): run_lvu.py builds
`ReduceLROnPlateau(optimizer, patience=1, factor=0.2)` -- mode 'min' by default -- and
calls `scheduler.step(val_acc)` after each evaluation (every 10 epochs).  In 'min' mode
a RISING accuracy counts as no improvement, so every other evaluation cuts the rate by 5
while the model is still improving.  The fix is mode='max'.
Re-created: run_lvu.py's loop -- AdamW lr 1e-3, weight decay 0.01, cross-entropy, train
batch 16 from an unshuffled loader, evaluation every 10 epochs (model.eval(), argmax
accuracy on the validation split), then scheduler.step(val_acc) with patience 1 and
factor 0.2 -- on a sequence classifier for the 4-class 'relationship' task (prenorm
residual blocks with dropout 0.2 and temporal downsampling, mean-pooled, linear head);
differs from the original: ViS4mer's S4 layers over 60 s of ViT features (11,820 x 1024)
replaced by depthwise temporal convolutions over seeded feature sequences of 32 steps x
32 channels (a class-specific temporal pattern under noise); 160 training videos, so an
epoch is 10 steps, and 60 epochs instead of 100.
Fix: ReduceLROnPlateau(..., mode='max').  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
EPOCH_STEPS, EPOCHS, EVAL_EVERY = 10, 60, 10
STEPS = EPOCH_STEPS * EPOCHS
HARM_METRIC = "val_acc"
CLASSES, LENGTH, D_INPUT, D_MODEL = 4, 32, 32, 32


def videos(seed: int, n: int):
    """Feature sequences: a class pattern (a few channels, a few time spans) plus noise."""
    g = generator(seed)
    patterns = F.avg_pool1d(torch.randn(CLASSES, D_INPUT, LENGTH, generator=g), 5, 1, 2)
    y = torch.randint(CLASSES, (n,), generator=g)
    shift = torch.randint(-4, 5, (n,), generator=g)
    x = torch.stack([torch.roll(patterns[c], int(s), dims=1) for c, s in zip(y, shift,
                                                                               strict=True)])
    x = 0.6 * x + torch.randn(n, D_INPUT, LENGTH, generator=g)
    return x.transpose(1, 2).contiguous(), y  # (n, LENGTH, D_INPUT)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D_MODEL)
        self.mix = nn.Conv1d(D_MODEL, D_MODEL, 5, padding=2, groups=D_MODEL)
        self.out = nn.Linear(D_MODEL, D_MODEL)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):  # prenorm residual, then halve the length
        z = self.mix(self.norm(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.drop(self.out(F.gelu(z)))
        return F.max_pool1d(x.transpose(1, 2), 2).transpose(1, 2)


class SequenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(D_INPUT, D_MODEL)
        self.layers = nn.Sequential(Block(), Block(), Block())
        self.decoder = nn.Linear(D_MODEL, CLASSES)

    def forward(self, x):
        return self.decoder(self.layers(self.encoder(x)).mean(dim=1))


def accuracy(model, batches):
    was = model.training
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in batches)
    model.train(was)
    return 100.0 * correct / sum(len(y) for _, y in batches)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = videos(seed, 160 + 200)
    train_batches = batched(x[:160], y[:160], 16)  # shuffle=False, as the loader
    val_batches = batched(x[160:], y[160:], 32)
    criterion = nn.CrossEntropyLoss()
    state = {"step": 0}

    def make_optimizer(model):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        if fixed:
            mode = "max"  # FIX: the monitored quantity is an accuracy
        else:
            mode = "min"  # BUG: the default mode, for a quantity that should rise
        state["scheduler"] = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode=mode, patience=1, factor=0.2)
        return optimizer

    def step(model, optimizer, batch):
        inputs, targets = batch
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        state["step"] += 1
        if state["step"] % (EVAL_EVERY * EPOCH_STEPS) == 0:  # every 10 epochs
            state["scheduler"].step(accuracy(model, val_batches))
        return loss

    return dict(model=SequenceClassifier, optimizer=make_optimizer,
                batches=train_batches, step=step, loss=criterion,
                val_batches=val_batches, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches) / 100.0}
