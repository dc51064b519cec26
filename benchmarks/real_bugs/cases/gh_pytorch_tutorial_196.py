"""An LSTM MNIST classifier stays at 11% accuracy after batch_first=True was changed to False.

Source: https://github.com/yunjey/pytorch-tutorial/issues/196 (2019-11-22), on
tutorials/02-intermediate/recurrent_neural_network/main.py; the same report as issue
#89 (2017-12-22, "the accuracy drops to 11%").
Root cause (as the report's one change establishes it): the tutorial reshapes images to
(batch, seq_len, input_size) and builds nn.LSTM(..., batch_first=True); the reporter
set batch_first=False and kept the input's layout.  The LSTM then reads the 100 images
of the batch as 100 time steps and the 28 rows as 28 parallel sequences, and
`out[:, -1, :]` takes the last "sequence" (row 27 of every image) at every "time"
(image): each image's prediction depends on row 27 of itself and of the images before
it in the batch, not on its own rows.  (Outside the catalogue: the samples of a batch
are mixed by the dimension order.)  Loss about 2, accuracy 11.35%, as reported.
Re-created: the tutorial's model -- nn.LSTM(28, 128, num_layers=1), Linear(128, 10) on
out[:, -1, :] -- images reshaped to (-1, 28, 28), CrossEntropyLoss, Adam lr 0.01,
batch 100;
differs from the original: MNIST replaced by seeded 28x28 stroke images (common.pixels)
with MNIST's blank 4-pixel border (its digits sit in the central 20x20 box); 150 steps
instead of 2 epochs.  A first stand-in without the border put class strokes in row 27
as well, and the buggy run read the class from that one row (val_acc 0.975 vs fixed
1.0 over seeds 0-2, 18 s a run): the border is MNIST's, restored before any diagnosis.
Fix: batch_first=True (the tutorial's setting).  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
SEQ, INPUT, HIDDEN, LAYERS, CLASSES = 28, 28, 128, 1, 10


class RNN(nn.Module):
    def __init__(self, batch_first: bool):
        super().__init__()
        # BUG: batch_first=False with (batch, seq, input) images
        # FIX: batch_first=True, the tutorial's setting
        self.lstm = nn.LSTM(INPUT, HIDDEN, LAYERS, batch_first=batch_first)
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 7000, 28, CLASSES)
    border = torch.ones(28, 28, dtype=torch.bool)
    border[4:24, 4:24] = False
    X = X.masked_fill(border, 0.0)  # MNIST's digits leave a blank 4-pixel border
    X = X.reshape(-1, SEQ, INPUT)  # images.reshape(-1, sequence_length, input_size)
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        images, labels = batch
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: RNN(batch_first=fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=0.01),
                batches=batched(Xt, yt, 100), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
