"""The zoo's tiny models.  Every one is a `Net`: a body (an `nn.Sequential`) and a
linear head, so the model faults (init scale, a saturating or dead first layer, an
accidental `.detach()`, probabilities at the output) enter each family the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .data import PAD
from .knobs import Knobs


class Net(nn.Module):
    """body -> head, optionally with the accidental `.detach()` of `cut_at`."""

    def __init__(self, body: nn.Sequential, head: nn.Module, output: Callable | None = None,
                 cut_at: int | None = None):
        super().__init__()
        self.body, self.head, self.output = body, head, output
        self.cut_at = cut_at

    def forward(self, x):
        for i, layer in enumerate(self.body):
            if i == self.cut_at:
                x = x.detach()  # the bug: everything before this line stops learning
            x = layer(x)
        if self.cut_at == len(self.body):
            x = x.detach()
        x = self.head(x)
        return self.output(x) if self.output is not None else x


class LastState(nn.Module):
    """A GRU over (B, T, C) sequences; returns the last hidden state (B, H)."""

    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.gru = nn.GRU(channels, hidden, batch_first=True)

    def forward(self, x):
        return self.gru(x)[1][0]


class Encoder(nn.Module):
    """Token ids (B, T) -> embedding, self-attention with a key padding mask, LayerNorm,
    mean over the real tokens -> (B, D)."""

    def __init__(self, vocab: int, dim: int, heads: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(0.1 * torch.randn(1, 32, dim))
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens):
        pad = tokens == PAD  # (B, T), True where there is no token
        x = self.embed(tokens) + self.position[:, :tokens.shape[1]]
        attended, _ = self.attention(x, x, x, key_padding_mask=pad, need_weights=False)
        x = self.norm(x + attended)
        keep = (~pad).unsqueeze(-1).float()
        return (x * keep).sum(1) / keep.sum(1).clamp(min=1)


class Block(nn.Module):
    """Residual MLP block: x + scale * W2 relu(W1 norm(x)).

    Unnormalised: no LayerNorm, scale 1 and He init (as ReLU tutorials advise), so each
    block roughly doubles the variance of what flows through it, forward and back."""

    def __init__(self, dim: int, normalized: bool, scale: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim) if normalized else nn.Identity()
        self.inner = nn.Linear(dim, dim)
        self.relu = nn.ReLU()
        self.outer = nn.Linear(dim, dim)
        self.scale = scale
        if not normalized:
            nn.init.kaiming_normal_(self.inner.weight, nonlinearity="relu")
            nn.init.kaiming_normal_(self.outer.weight, nonlinearity="relu")

    def forward(self, x):
        return x + self.scale * self.outer(self.relu(self.inner(self.norm(x))))


def cnn(k: Knobs) -> Net:
    body = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(6, 12, 3, padding=1), nn.BatchNorm2d(12),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    with torch.no_grad():
        body[1].bias.fill_(k.relu_bias)  # BatchNorm's shift is what feeds the ReLU
    return _finish(body, nn.Linear(12, 4), k, "softmax")


def gru(k: Knobs) -> Net:
    return _finish(nn.Sequential(LastState(3, 16)), nn.Linear(16, 2), k, "softmax")


def attention(k: Knobs) -> Net:
    body = nn.Sequential(Encoder(16, 16), nn.Linear(16, 16), nn.ReLU())
    _shift(body[1], k.relu_bias)
    return _finish(body, nn.Linear(16, 3), k, "softmax")


def regressor(k: Knobs) -> Net:
    body = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Dropout(_dropout(k, 0.0)))
    _gain(body[0], k.saturating_gain)
    _shift(body[2], k.relu_bias)
    return _finish(body, nn.Linear(32, 1), k, None)


def residual(k: Knobs) -> Net:
    depth = k.depth or 4
    scale = 1 / math.sqrt(2 * depth) if k.normalized else 1.0
    body = nn.Sequential(nn.Linear(12, 24),
                         *[Block(24, k.normalized, scale) for _ in range(depth)])
    _shift(body[1].inner, k.relu_bias)
    return _finish(body, nn.Linear(24, 4), k, "softmax")


def binary(k: Knobs) -> Net:
    body = nn.Sequential(nn.Linear(10, 32), nn.Sigmoid(), nn.Dropout(_dropout(k, 0.1)),
                         nn.Linear(32, 16), nn.ReLU())
    _gain(body[0], k.saturating_gain)
    _shift(body[3], k.relu_bias)
    return _finish(body, nn.Linear(16, 1), k, "sigmoid")


def bag(k: Knobs) -> Net:
    body = nn.Sequential(nn.EmbeddingBag(24, 16, mode="mean"), nn.Linear(16, 32), nn.ReLU(),
                         nn.Dropout(_dropout(k, 0.1)))
    _shift(body[1], k.relu_bias)
    return _finish(body, nn.Linear(32, 3), k, "softmax")


def autoencoder(k: Knobs) -> Net:
    body = nn.Sequential(nn.Linear(16, 6), nn.Tanh())
    _gain(body[0], k.saturating_gain)
    return _finish(body, nn.Linear(6, 16), k, None)


def _finish(body: nn.Sequential, head: nn.Module, k: Knobs, probs: str | None) -> Net:
    """Apply the knobs every family shares: init scale, output, cut."""
    with torch.no_grad():
        for p in [*body.parameters(), *head.parameters()]:
            if p.dim() >= 2:
                p.mul_(k.init_scale)
    output = None
    if k.output in ("probs", "probs_nll"):
        output = nn.Softmax(dim=-1) if probs == "softmax" else nn.Sigmoid()
    elif k.output in ("relu", "shared_relu"):  # every negative logit clipped to 0
        # "shared_relu": the body's own ReLU module called once more on the logits
        shared = [m for m in body.modules() if isinstance(m, nn.ReLU)][:1]
        output = shared[0] if k.output == "shared_relu" and shared else nn.ReLU()
    elif k.output == "functional_relu":  # return F.relu(self.head(x)): no module to see
        output = torch.relu
    cut_at = None if k.cut is None else round(k.cut * len(body))
    return Net(body, head, output, cut_at)


def _dropout(k: Knobs, default: float) -> float:
    return default if k.dropout is None else k.dropout


def _gain(layer: nn.Linear, gain: float) -> None:
    with torch.no_grad():
        layer.weight.mul_(gain)


def _shift(layer: nn.Linear, bias: float) -> None:
    with torch.no_grad():
        layer.bias.add_(bias)
