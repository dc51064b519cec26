"""Control: a bag-of-words text classifier trains fine; predicting one query fails (ported from Keras).

Source: https://stackoverflow.com/questions/51421885; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/007 (commit 11b01d6).
Root cause (as the reproduction shows): a prediction bug, not a training bug.
`model.predict(x_data[0])` passes one 100-long row without its batch dimension, so the
prediction step goes wrong; training (Tokenizer matrix -> Dense(512, relu) ->
Dense(5, softmax), categorical cross-entropy, Adam, batch 8) is healthy.
Re-created, ported line by line to PyTorch: 100-word binary bag-of-words inputs,
Dense(512, relu) -> Dense(5) with softmax folded into the cross-entropy; Adam (Keras
default lr 1e-3); batch 8;
differs from the original: the post's text_class.csv replaced by seeded bag-of-words rows
whose words depend on the tag; 150 steps instead of 10 epochs; the prediction call is
kept as a function outside training.
Fix: predict on x_data[0:1] (keep the batch dimension).  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 150
WORDS, TAGS = 100, 5


def texts(seed: int, n: int = 1200):
    g = generator(seed)
    word_rates = torch.rand(TAGS, WORDS, generator=g) ** 4  # each tag uses its own words
    y = torch.randint(TAGS, (n,), generator=g)
    x = (torch.rand(n, WORDS, generator=g) < word_rates[y] + 0.02).float()
    return x, y


def predict_first(model, x_data, fixed: bool):
    """The user's prediction of the first query (not part of training)."""
    with torch.no_grad():
        if fixed:
            return model(x_data[0:1]).argmax(1)  # FIX: one query, batch dimension kept
        return model(x_data[0]).argmax(-1)  # BUG: no batch dimension


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = texts(seed)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        inputs, labels = batch
        loss = loss_fn(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(WORDS, 512), nn.ReLU(),
                                            nn.Linear(512, TAGS)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x[:1000], y[:1000], 8), step=step, loss=loss_fn,
                val_batches=batched(x[1000:], y[1000:], 200), steps=STEPS, seed=seed)
