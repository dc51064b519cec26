"""A text classifier's label attention attends to the padding instead of the words.

Source: https://github.com/InseeFrLab/torchTextClassifiers/pull/92 (merged 2026-05-07,
commit 9a8b215, "fix: invert attention mask in LabelAttention to correctly ignore padding
tokens").
Root cause (as the fix established it): LabelAttention turned the tokenizer's attention
mask (1 = real token, 0 = padding) into `attention_mask == 0` and passed it as the boolean
attn_mask of F.scaled_dot_product_attention, where True means "take part in attention"
-- so every label query attended only to the padding positions and never to a real
token. The fix passes `attention_mask == 1`.
Re-created: the library's model as its multilevel example configures it, for one level of
labels -- token embedding (dim 10, N(0, 1) init, RMS norm), two pre-norm transformer
blocks (5 heads, QK norm, ReLU^2 MLP, zero-initialised output projections, no positional
encoding, no padding mask in self-attention), label attention (2 heads, one learned
query per label), a Linear(10, 1) head per label, cross-entropy, Adam lr 1e-3; the
tokenizer pads every text to output_dim = 50;
differs from the original: the example's toy texts replaced by seeded token sequences
(4 classes, vocabulary 200, 5-20 tokens, each class with its own 10 indicative tokens
among random filler); batch 32 instead of the example's 6 and 200 steps instead of one
epoch, so that the fixed model has time to learn.
Fix: attn_mask = attention_mask == 1.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
VOCAB, PAD, OUTPUT_DIM, CLASSES, DIM = 200, 0, 50, 4, 10


def norm(x):
    return F.rms_norm(x, (x.size(-1),))


def texts(seed: int, n: int):
    """Token ids padded to OUTPUT_DIM with PAD, the tokenizer's attention mask, labels."""
    g = generator(seed)
    keywords = torch.randperm(VOCAB - 1, generator=g)[:CLASSES * 10].reshape(CLASSES, 10) + 1
    y = torch.randint(CLASSES, (n,), generator=g)
    lengths = torch.randint(5, 21, (n,), generator=g)
    ids = torch.randint(1, VOCAB, (n, OUTPUT_DIM), generator=g)  # filler words
    pick = torch.randint(10, (n, OUTPUT_DIM), generator=g)
    is_keyword = torch.rand(n, OUTPUT_DIM, generator=g) < 0.3
    ids = torch.where(is_keyword, keywords[y[:, None], pick], ids)
    mask = (torch.arange(OUTPUT_DIM)[None] < lengths[:, None]).long()
    return ids * mask + PAD * (1 - mask), mask, y


class Block(nn.Module):
    """Pre-norm self-attention + ReLU^2 MLP, as the library's (no padding mask)."""

    def __init__(self, heads: int = 5):
        super().__init__()
        self.heads = heads
        self.c_q, self.c_k, self.c_v, self.c_proj = (nn.Linear(DIM, DIM, bias=False)
                                                     for _ in range(4))
        self.c_fc, self.mlp_proj = nn.Linear(DIM, 4 * DIM, bias=False), nn.Linear(4 * DIM, DIM,
                                                                                 bias=False)

    def attn(self, x):
        B, T, _ = x.shape
        q, k, v = (f(x).view(B, T, self.heads, -1) for f in (self.c_q, self.c_k, self.c_v))
        q, k = norm(q), norm(k)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.c_proj(y.transpose(1, 2).reshape(B, T, DIM))

    def forward(self, x):
        x = x + self.attn(norm(x))
        return x + self.mlp_proj(F.relu(self.c_fc(norm(x))).square())


class Classifier(nn.Module):
    def __init__(self, fixed: bool, label_heads: int = 2):
        super().__init__()
        self.fixed, self.label_heads = fixed, label_heads
        self.embedding = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.label_embeds = nn.Embedding(CLASSES, DIM)
        self.c_q, self.c_k, self.c_v, self.c_proj = (nn.Linear(DIM, DIM, bias=False)
                                                     for _ in range(4))
        self.head = nn.Linear(DIM, 1)
        for m in self.modules():  # TokenEmbedder.init_weights and the torch defaults
            if isinstance(m, nn.Linear):
                fan_out, fan_in = m.weight.shape
                std = 1.0 / math.sqrt(fan_in) * min(1.0, math.sqrt(fan_out / fan_in))
                nn.init.normal_(m.weight, 0.0, std)
        nn.init.normal_(self.embedding.weight, 0.0, 1.0)
        for block in self.blocks:
            nn.init.zeros_(block.c_proj.weight)
            nn.init.zeros_(block.mlp_proj.weight)

    def forward(self, batch):
        ids, attention_mask = batch
        x = norm(self.embedding(ids))
        for block in self.blocks:
            x = block(x)
        x = norm(x)
        B, T, _ = x.shape
        labels = norm(self.label_embeds(torch.arange(CLASSES).expand(B, -1)))
        q = norm(self.c_q(labels).view(B, CLASSES, self.label_heads, -1))
        k = norm(self.c_k(x).view(B, T, self.label_heads, -1))
        v = self.c_v(x).view(B, T, self.label_heads, -1)
        if self.fixed:
            attn_mask = attention_mask == 1  # FIX: True = a real token, attended
        else:
            attn_mask = attention_mask == 0  # BUG: True = padding, so only pads are attended
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2),
                                           attn_mask=attn_mask[:, None, None, :])
        y = self.c_proj(y.transpose(1, 2).reshape(B, CLASSES, DIM))
        return self.head(y).squeeze(-1)  # one logit per label


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    ids, mask, y = texts(seed, 4000)

    def batched(lo, hi, size):
        return [((ids[i:i + size], mask[i:i + size]), y[i:i + size])
                for i in range(lo, hi, size)]

    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        inputs, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Classifier(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(0, 3200, 32), step=step, loss=criterion,
                val_batches=batched(3200, 4000, 400), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
