"""A multi-hop QA model scores candidates, applies a softmax, then CrossEntropyLoss.

Source: https://github.com/bowang-lab/Transformer-GCN-QA/pull/32 (merged 2019-06-05).
Root cause (as the PR states): "because we didn't realize that CrossEntropyLoss() itself
implements a softmax, we had a second, erroneous softmax at the output of our model",
smoothing the scores and weakening the gradient; the output layer is a linear score over
all candidates, so the fix simply drops the softmax.
Re-created: per-question candidate encodings -> MLP scorer -> one score per candidate ->
softmax over candidates -> CrossEntropyLoss against the answer's index, Adam lr 1e-3;
differs from the original: the Transformer + GCN encoder replaced by seeded 32-d candidate
encodings (20 candidates a question, the answer marked by a hidden direction), batch 32,
300 steps.
Fix: return the raw candidate scores.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
CANDIDATES, DIM = 20, 32


class CandidateScorer(nn.Module):
    def __init__(self, softmax_output: bool):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 1))
        self.softmax_output = softmax_output

    def forward(self, candidates):  # (B, CANDIDATES, DIM) -> (B, CANDIDATES)
        scores = self.fc(candidates).squeeze(-1)
        if self.softmax_output:
            return torch.softmax(scores, dim=-1)  # BUG: a second softmax before CrossEntropyLoss
        return scores  # FIX: raw scores


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, CANDIDATES, DIM, generator=g)
    w = torch.randn(DIM, generator=g) / DIM ** 0.5
    answer = torch.randint(CANDIDATES, (n,), generator=g)
    X[torch.arange(n), answer] += 1.0 * w * DIM ** 0.5 / 2
    return X, answer


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 5000)
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        candidates, answer = batch
        optimizer.zero_grad()
        loss = criterion(model(candidates), answer)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: CandidateScorer(softmax_output=not fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
