"""Fine-tuning with batches of 50 silently trains on one sample per step.

Source: https://github.com/huggingface/transformers/issues/34204 (PixtralProcessor), as
collected in OrderLab/TrainCheck-Evaluation-Workloads,
silent-issue-detection/bug-reprod-scripts/transformers-34204 (commit 2de9268).
Root cause (as the issue established it): the processor aggregated the list of images of
a batch into a single nested list, so a batch of 50 (images, texts) came back with
input_ids of shape [1, L] and pixel_values of one sample: every training step saw only
the batch's first sample, without any error.  The fix keeps one entry per sample.
Re-created: a collate ("processor") function that builds the model inputs from a list of
50 (image, label) samples, the buggy form keeping only the first after aggregation; a
small image classifier (flatten, 256 -> 64 -> 10 MLP) trained with AdamW lr 1e-3;
differs from the original: an MLP on seeded 16x16 stroke images instead of a
vision-language model on chat data; 200 steps.
Fix: one entry per sample in the aggregated batch.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
SIDE, CLASSES, BATCH = 16, 10, 50


def images(seed: int, n: int):
    """Seeded stroke images in [0, 1] (an MNIST-like stand-in), shape (n, 1, SIDE, SIDE)."""
    g = generator(seed)
    strokes = (torch.rand(CLASSES, SIDE * SIDE, generator=g) < 0.2).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = strokes[y] * 0.8 + 1.0 * torch.randn(n, SIDE * SIDE, generator=g)
    return x.clamp(0, 1).reshape(n, 1, SIDE, SIDE), y


def processor(samples: list, fixed: bool):
    """The user's collate: a list of (image, label) samples -> (pixel_values, labels)."""
    pixel_values = [image for image, _ in samples]
    labels = [label for _, label in samples]
    if fixed:
        entries = [[image] for image in pixel_values]  # FIX: one entry per sample
    else:
        entries = [pixel_values]  # BUG: all images aggregated into a single entry
    return (torch.stack([entry[0] for entry in entries]),
            torch.stack(labels[:len(entries)]))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = images(seed, 11000)
    X, y, Xv, yv = X[:10000], y[:10000], X[10000:], y[10000:]
    samples = list(zip(X, y, strict=True))
    batches = [processor(samples[i:i + BATCH], fixed) for i in range(0, len(samples), BATCH)]

    def step(model, optimizer, batch):
        pixel_values, labels = batch
        loss = F.cross_entropy(model(pixel_values), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    def make_model():
        return nn.Sequential(nn.Flatten(), nn.Linear(SIDE * SIDE, 64), nn.ReLU(),
                             nn.Linear(64, CLASSES))

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batches, step=step, loss=nn.CrossEntropyLoss(),
                val_batches=[(Xv[i:i + 500], yv[i:i + 500]) for i in range(0, 1000, 500)],
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
