"""Validation of an attention model is noisy and worse than it should be, with eval() set.

Source: https://github.com/huggingface/transformers/pull/33844 (M2M100FlashAttention2),
as collected in OrderLab/TrainCheck-Evaluation-Workloads,
silent-issue-detection/bug-reprod-scripts/transformers-33844 (commit 2de9268).
Root cause (as the PR established it): the attention module passed its dropout rate to
the attention kernel unconditionally, instead of `self.dropout if self.training else 0.0`,
so attention dropout stayed on after model.eval(): every validation pass scores a random
sub-network.  The fix makes the rate depend on self.training.
Re-created: a one-layer attention encoder (embedding, single-head self-attention with
attention dropout 0.1 as in M2M100's config, mean pooling, linear head) trained with AdamW
on a token-sequence classification task; validation under model.eval();
differs from the original: a 32-wide toy model instead of M2M100 (418M) on translation;
seeded token sequences (label: does token 1 occur more often than token 2, 10 %
of labels flipped); 200 steps.
Fix: dropout rate `self.p if self.training else 0.0`.  Run fixed: FAILURELAB_FIX=1.
"""
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
VOCAB, LENGTH, WIDTH = 16, 24, 32


class Attention(nn.Module):
    def __init__(self, width: int, p: float, fixed: bool):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.p, self.fixed = p, fixed

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(x.shape[-1]), dim=-1)
        if self.fixed:
            p = self.p if self.training else 0.0  # FIX: no dropout in eval mode
        else:
            p = self.p  # BUG: attention dropout regardless of self.training
        weights = F.dropout(weights, p=p, training=True)
        return self.out(weights @ v)


class Encoder(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.attn = Attention(WIDTH, 0.1, fixed)
        self.head = nn.Linear(WIDTH, 2)

    def forward(self, tokens):
        h = self.embed(tokens)
        h = h + self.attn(h)
        return self.head(h.mean(dim=1))


def _data(seed: int, n: int):
    g = generator(seed)
    tokens = torch.randint(VOCAB, (n, LENGTH), generator=g)
    labels = ((tokens == 1).sum(1) > (tokens == 2).sum(1)).long()
    flip = torch.rand(n, generator=g) < 0.1  # 10 % label noise: the task is not trivial
    return tokens, torch.where(flip, 1 - labels, labels)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = _data(seed, 4000)
    Xv, yv = _data(seed + 1000, 1000)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        tokens, labels = batch
        loss = loss_fn(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Encoder(fixed),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3),
                batches=batched(X, y, 32), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Validation loss under model.eval(), as the user's evaluation loop computes it."""
    model.eval()
    with torch.no_grad():
        losses = [float(F.cross_entropy(model(x), y)) for x, y in val_batches]
    model.train()
    return {"val_loss": sum(losses) / len(losses)}
