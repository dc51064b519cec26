"""The two tiny models.  Every layer is a named module so telemetry columns read well
(`grad_norm/fc1.weight`, `saturated_frac/sigmoid`) and activation hooks have a target."""

from __future__ import annotations

import math

import torch
from torch import nn

from .data import N_CLASSES, N_FEATURES, PAD, SEQ_CLASSES, VOCAB


class Residual(nn.Module):
    """h + s W2 relu(W1 h): a residual block with no normalisation and default init.

    Each block adds its branch to the running activation, so L blocks grow it (and the
    gradients) with L unless the branch is scaled down, e.g. s = 1/sqrt(2L)."""

    def __init__(self, hidden: int, scale: float = 1.0):
        super().__init__()
        self.l1 = nn.Linear(hidden, hidden)
        self.relu = nn.ReLU()
        self.l2 = nn.Linear(hidden, hidden)
        self.scale = scale

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.scale * self.l2(self.relu(self.l1(h)))


class TabularMLP(nn.Module):
    """16 → sigmoid → ReLU → dropout → 3 (or 1, a regression's value): somewhere to
    saturate, to die and to drop.

    `depth` > 0 stacks that many residual blocks after the ReLU layer (none by default:
    no module is created and no random number drawn, so the baseline is unchanged)."""

    def __init__(self, hidden: int, dropout: float, output: str = "logits", depth: int = 0,
                 residual_scale: float = 1.0, outputs: int = N_CLASSES):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.sigmoid = nn.Sigmoid()
        self.fc2 = nn.Linear(hidden, hidden)
        self.relu = nn.ReLU()
        self.blocks = nn.Sequential(*[Residual(hidden, residual_scale)
                                      for _ in range(depth)]) if depth else None
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, outputs)
        self.output = output_layer(output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 16) -> (B, 3) or (B, 1)
        h = self.relu(self.fc2(self.sigmoid(self.fc1(x))))
        if self.blocks is not None:
            h = self.blocks(h)  # (B, hidden): each block adds to h, nothing rescales it
        h = self.drop(h)
        out = self.head(h)
        return self.output(out) if self.output is not None else out


class AttentionPool(nn.Module):
    """One learned query attends over the tokens; pads are hidden by a key padding mask."""

    def __init__(self, dim: int, mask_padding: bool, mask_inverted: bool):
        super().__init__()
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.query = nn.Parameter(torch.randn(dim) / math.sqrt(dim))
        self.mask_padding = mask_padding
        self.mask_inverted = mask_inverted
        self.weights: torch.Tensor | None = None  # last attention, (B, T), for telemetry

    def forward(self, e: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        scores = self.key(e) @ self.query / math.sqrt(e.shape[-1])  # (B, T)
        if self.mask_padding:
            # PyTorch's convention: True marks a position to ignore.  Passing the
            # "keep" mask of other libraries (True = real token) inverts it.
            ignore = tokens != PAD if self.mask_inverted else tokens == PAD
            scores = scores.masked_fill(ignore, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1)  # (B, T)
        self.weights = weights.detach()
        return (weights.unsqueeze(-1).to(e.dtype) * self.value(e)).sum(1)  # (B, D)


class SequenceClassifier(nn.Module):
    """Embedding → attention pooling → ReLU head → 2 classes."""

    def __init__(self, dim: int, mask_padding: bool, mask_inverted: bool, output: str = "logits"):
        super().__init__()
        self.embed = nn.Embedding(VOCAB + 1, dim)
        self.pool = AttentionPool(dim, mask_padding, mask_inverted)
        self.fc = nn.Linear(dim, dim)
        self.relu = nn.ReLU()
        self.head = nn.Linear(dim, SEQ_CLASSES)
        self.output = output_layer(output)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, 2)
        pooled = self.pool(self.embed(tokens), tokens)
        out = self.head(self.relu(self.fc(pooled)))
        return self.output(out) if self.output is not None else out


def output_layer(output: str) -> nn.Module | None:
    """What the model applies to its logits before they reach the cross-entropy: nothing
    (the healthy "logits"); softmax, which the loss then applies again; or a ReLU, which
    clips every negative logit to 0, so no class can be scored below the others' floor."""
    return {"logits": None, "softmax": nn.Softmax(dim=-1), "relu": nn.ReLU()}[output]


def make_model(recipe) -> nn.Module:
    """Build the recipe's model with PyTorch's default init, then apply the init knobs."""
    if recipe.task == "tabular":
        model = TabularMLP(recipe.hidden, recipe.dropout, recipe.output, recipe.depth,
                           recipe.residual_scale, 1 if recipe.target == "value" else N_CLASSES)
    else:
        model = SequenceClassifier(recipe.hidden, recipe.mask_padding, recipe.mask_inverted,
                                   recipe.output)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.mul_(recipe.init_scale)
        if recipe.task == "tabular":
            model.fc1.weight.mul_(recipe.sigmoid_gain)
            if recipe.relu_bias:
                model.fc2.bias.fill_(recipe.relu_bias)
    return model
