"""Control: a sound-event detector's frame F1 is computed by thresholding logits, not probabilities.

Source: https://github.com/dr-costas/dnd-sed/issues/1 (2020-03-25); the author replied
"you are absolutely right, this is a bug" and fixed it (2020-03-30): the training and
validation F1 and error rate are now computed on `hat.sigmoid()`.
What the thread established: nothing is wrong with training. The model ends in a Linear
layer and is trained with BCEWithLogitsLoss, but f1_per_frame and error_rate_per_frame
threshold their input at 0.5 as if it were a probability; given raw logits, a frame is
called active only when its probability exceeds sigmoid(0.5) = 0.62, so the printed F1
is not the model's. The fix applies sigmoid before the metrics; training is unchanged.
Healthy training: there is no fix to the training.
Re-created: a CNN over (frames, 40 mel bands) with batch norm, ReLU, max-pooling over
frequency and dropout 0.25, a per-frame Linear classifier over 16 classes, multi-label
targets per frame, BCEWithLogitsLoss, Adam lr 1e-3, batch 16, no gradient clipping
(grad_norm -1); frame F1 as f1_per_frame computes it (TP, FP, FN over every frame and
class, threshold 0.5);
differs from the original: TUT-SED Synthetic 2016 replaced by seeded 64-frame
log-mel-like clips in which each of 16 event classes, with its own spectral template,
is active over random time spans (polyphonic), plus noise; 64/64 channels instead of
256, no dilated or recurrent block; 300 steps.
Fix: none for training.  FAILURELAB_FIX applies sigmoid before the metric, which is
the only thing it changes.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
FRAMES, MELS, CLASSES = 64, 40, 16


def clips(seed: int, n: int):
    """Seeded clips (n, frames, mels) and frame-level multi-label targets (n, frames, 16)."""
    g = generator(seed)
    templates = torch.rand(CLASSES, MELS, generator=g) ** 3
    onset = torch.randint(0, FRAMES, (n, CLASSES), generator=g)
    length = torch.randint(6, 24, (n, CLASSES), generator=g)
    present = torch.rand(n, CLASSES, generator=g) < 0.3
    t = torch.arange(FRAMES).view(1, FRAMES, 1)
    active = ((t >= onset.unsqueeze(1)) & (t < (onset + length).unsqueeze(1))
              & present.unsqueeze(1)).float()
    x = active @ templates + 0.3 * torch.randn(n, FRAMES, MELS, generator=g)
    return x, active


class SEDNet(nn.Module):
    def __init__(self, channels: int = 64):
        super().__init__()

        def block(cin, cout, pool):
            return [nn.Conv2d(cin, cout, 5, padding=2), nn.BatchNorm2d(cout), nn.ReLU(),
                    nn.MaxPool2d((1, pool)), nn.Dropout(0.25)]
        self.dnn = nn.Sequential(*block(1, channels, 5), *block(channels, channels, 4))
        self.classifier = nn.Linear(channels * 2, CLASSES)

    def forward(self, x):
        out = self.dnn(x.unsqueeze(1))  # (batch, channels, frames, 2)
        out = out.permute(0, 2, 1, 3).reshape(x.shape[0], FRAMES, -1)
        return self.classifier(out)


def f1_per_frame(y_hat, y_true):
    y_hat_positive = y_hat.ge(0.5)
    y_true_positive = y_true.eq(1.)
    tp = (y_hat_positive & y_true_positive).sum()
    fp = (y_hat_positive & ~y_true_positive).sum()
    fn = (~y_hat_positive & y_true_positive).sum()
    return float(2 * tp / (2 * tp + fp + fn + 1e-12))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = clips(seed, 1280 + 256)
    objective = nn.BCEWithLogitsLoss()

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        x_, y_ = batch
        y_hat = model(x_)
        loss = objective(y_hat, y_)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=SEDNet, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x[:1280], y[:1280], 16), step=step, loss=objective,
                val_batches=batched(x[1280:], y[1280:], 16), steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """Validation frame F1 as the program prints it (in the val_acc column)."""
    hat = torch.cat([model(x_) for x_, _ in val_batches])
    true = torch.cat([y_ for _, y_ in val_batches])
    if fixed:
        return {"val_acc": f1_per_frame(hat.sigmoid(), true)}  # FIX: probabilities
    return {"val_acc": f1_per_frame(hat, true)}  # BUG: raw logits thresholded at 0.5
