"""A tabular transformer's encoder gets (batch, fields, dim) where it expects (fields, batch, dim).

Source: https://github.com/IBM/TabFormer/pull/14 (merged 2021-06-10; the maintainer
re-applied it as commit 600d4e9).
Root cause (as the PR established it): `nn.TransformerEncoder` (PyTorch 1.6, no
`batch_first`) expects its input as (sequence, batch, embedding), but the model handed it
(batch, fields, embedding), so self-attention ran across the rows of the batch at each
field position and never across the fields of one row; the fix transposes the input to
(fields, batch, embedding) before the encoder and back after it.
Re-created: the field-level encoder of a tabular model (one embedding table per
categorical field plus a field-position embedding, a 2-layer `nn.TransformerEncoder`
with d_model 32, 4 heads, feed-forward 64, default dropout 0.1, mean over fields,
linear classifier), Adam lr 1e-3, batch 64; differs from the original: seeded rows of
8 categorical fields (vocabulary 4 each) whose label is whether fields 0 and 1 agree
(a rule across fields, as a transaction's label depends on several of its fields)
instead of the credit-card transactions, a direct classifier instead of the
pre-trained tabular BERT, 300 steps.
Fix: x = x.transpose(0, 1) before the encoder (and back after).  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
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
FIELDS, VOCAB, D = 8, 4, 32


class FieldTransformer(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.embed = nn.ModuleList(nn.Embedding(VOCAB, D) for _ in range(FIELDS))
        self.position = nn.Parameter(0.02 * torch.randn(FIELDS, D))
        layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=64)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D, 2)

    def forward(self, rows):
        x = torch.stack([e(rows[:, i]) for i, e in enumerate(self.embed)], 1) + self.position
        if self.fixed:
            x = self.encoder(x.transpose(0, 1)).transpose(0, 1)  # FIX: (fields, batch, dim)
        else:
            x = self.encoder(x)  # BUG: (batch, fields, dim) read as (seq, batch, dim)
        return self.head(x.mean(1))


def rows(seed: int, n: int):
    g = generator(seed)
    x = torch.randint(VOCAB, (n, FIELDS), generator=g)
    x[: n // 2, 1] = x[: n // 2, 0]  # half the rows agree on fields 0 and 1
    x = x[torch.randperm(n, generator=g)]
    return x, (x[:, 0] == x[:, 1]).long()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = rows(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 600)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: FieldTransformer(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 200), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
