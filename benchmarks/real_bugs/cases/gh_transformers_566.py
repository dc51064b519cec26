"""BERT fine-tuning in fp16: the hand-applied warm-up gets a progress fraction, not a step.

Source: https://github.com/huggingface/transformers/issues/566 (2019-05-01), fixed by
pull request #598 (merged 2019-05-10).
Root cause (as the issue established it and the fix confirmed): after
`WarmupLinearSchedule.get_lr` changed to take the step count and divide by t_total
itself, examples/run_classifier.py's fp16 branch still called
`get_lr(global_step / num_train_optimization_steps)`; the progress was divided twice,
so the learning rate stayed in its warm-up, rising by a tiny amount each step ("keeps
increasing", "too small"), and never reached its set value.  The fix passes
`global_step`.
Re-created: the example's fp16 branch, which sets every parameter group's rate by hand
before `optimizer.step()` (lr * warmup_linear(progress), warm-up proportion 0.1, then
linear decay to 0 at t_total), a sequence classifier (token + position embeddings,
2-layer transformer encoder of width 32, 4 heads, mean pooling, linear head), Adam,
batch 32; differs from the original: a small encoder trained from its seeded init
instead of pre-trained BERT-base, so the set rate is 2e-3 instead of 5e-5; fp32 (the
bug is in the schedule call, not the precision); seeded token sequences labelled by
whether "positive" tokens outnumber "negative" ones instead of a GLUE task; 300 steps.
Fix: get_lr(global_step).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
LEARNING_RATE, WARMUP = 2e-3, 0.1
VOCAB, LENGTH, D = 60, 16, 32


def warmup_linear(progress: float) -> float:
    """The schedule's multiplier at `progress` = step / t_total."""
    if progress < WARMUP:
        return progress / WARMUP
    return max((progress - 1.0) / (WARMUP - 1.0), 0.0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, D)
        self.positions = nn.Parameter(0.02 * torch.randn(LENGTH, D))
        layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D, 2)

    def forward(self, ids):
        return self.head(self.encoder(self.tokens(ids) + self.positions).mean(1))


def sentences(seed: int, n: int):
    """Tokens 1-5 are 'positive', 6-10 'negative', the rest neutral; ties are dropped."""
    g = generator(seed)
    ids = torch.randint(11, VOCAB, (n, LENGTH), generator=g)
    kind = torch.rand(n, LENGTH, generator=g)
    ids = torch.where(kind < 0.15, torch.randint(1, 6, (n, LENGTH), generator=g), ids)
    ids = torch.where((kind >= 0.15) & (kind < 0.3),
                      torch.randint(6, 11, (n, LENGTH), generator=g), ids)
    pos = ((ids >= 1) & (ids <= 5)).sum(1)
    neg = ((ids >= 6) & (ids <= 10)).sum(1)
    keep = pos != neg
    return ids[keep], (pos > neg).long()[keep]


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = sentences(seed, 4000)
    Xt, yt, Xv, yv = split(X, y, 600)
    criterion = nn.CrossEntropyLoss()
    t_total = STEPS

    def step(model, optimizer, batch):
        ids, labels = batch
        loss = criterion(model(ids), labels)
        loss.backward()
        global_step = getattr(optimizer, "global_step", 0)  # one count per optimizer
        # BUG: warmup_linear.get_lr(global_step / num_train_optimization_steps)
        # FIX: warmup_linear.get_lr(global_step)
        progress = global_step / t_total if fixed else (global_step / t_total) / t_total
        lr_this_step = LEARNING_RATE * warmup_linear(progress)
        for group in optimizer.param_groups:
            group["lr"] = lr_this_step
        optimizer.step()
        optimizer.zero_grad()
        optimizer.global_step = global_step + 1
        return loss

    return dict(model=Classifier,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=LEARNING_RATE),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 200), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
