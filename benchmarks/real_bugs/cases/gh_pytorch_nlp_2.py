"""A dot-product attention layer's weights are normalised over the batch, not the context.

Source: https://github.com/PetrochukM/PyTorch-NLP/issues/2 (2018-03-21, closed).
Root cause (as the issue established it): `torchnlp.nn.Attention` reshaped its scores to
(batch * output_len, query_len) and applied `nn.Softmax(dim=0)`, which normalises each
context position across the rows of the batch (with a batch of one, every weight is
exactly 1); the weights must be normalised over the context, `dim=-1`.
Re-created: the layer's 'dot' form (scores = query . context, weights, mix = weights @
context, output = tanh(Linear([mix, query]))) on top of learned query/context encoders,
a linear classifier on the output; Adam lr 1e-3, batch 32; differs from the original:
a seeded retrieval task (8 context slots, each a random 16-d key with one of 10 labels;
the query is a noisy copy of one key; the answer is that slot's label) instead of the
library's examples, 300 steps.
Fix: nn.Softmax(dim=-1).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
SLOTS, KEY, LABELS, D = 8, 16, 10, 32


class Attention(nn.Module):
    """Dot attention: weights over the context, the mix concatenated with the query."""

    def __init__(self, dim: int, fixed: bool):
        super().__init__()
        self.linear_out = nn.Linear(2 * dim, dim, bias=False)
        # BUG: nn.Softmax(dim=0)  # FIX: nn.Softmax(dim=-1)
        self.softmax = nn.Softmax(dim=-1 if fixed else 0)

    def forward(self, query, context):
        batch, output_len, dim = query.shape
        scores = torch.bmm(query, context.transpose(1, 2))
        weights = self.softmax(scores.view(batch * output_len, -1)).view(batch, output_len, -1)
        mix = torch.bmm(weights, context)
        return torch.tanh(self.linear_out(torch.cat([mix, query], 2))), weights


class Retriever(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.query = nn.Linear(KEY, D)
        self.key = nn.Linear(KEY, D)
        self.label = nn.Embedding(LABELS, D)
        self.attention = Attention(D, fixed)
        self.head = nn.Linear(D, LABELS)

    def forward(self, inputs):
        keys, labels, query = inputs[..., :KEY], inputs[..., KEY].long(), inputs[:, 0, KEY + 1:]
        context = self.key(keys) + self.label(labels)
        out, _ = self.attention(self.query(query).unsqueeze(1), context)
        return self.head(out.squeeze(1))


def tasks(seed: int, n: int):
    """Per sample: SLOTS keys with labels, a query near one key; packed in one tensor
    (key | label | query) per slot so that a batch is an (inputs, answer) pair."""
    g = generator(seed)
    keys = torch.randn(n, SLOTS, KEY, generator=g)
    labels = torch.randint(LABELS, (n, SLOTS), generator=g)
    pick = torch.randint(SLOTS, (n,), generator=g)
    query = keys[torch.arange(n), pick] + 0.3 * torch.randn(n, KEY, generator=g)
    inputs = torch.cat([keys, labels.unsqueeze(2).float(),
                        query.unsqueeze(1).expand(n, SLOTS, KEY)], 2)
    return inputs, labels[torch.arange(n), pick]


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = tasks(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 600)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, answer = batch
        optimizer.zero_grad()
        loss = criterion(model(x), answer)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Retriever(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 200), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
