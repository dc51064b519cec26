"""The zoo's architecture families: data, model, loss and the healthy learning rate of
each optimizer.  The rates were tuned once so that every family x optimizer x seed
learns clearly within its steps: that tuning is what "healthy" means here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import data, models
from .knobs import Knobs

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop")


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    make_data: Callable[[torch.Generator], data.Split]
    make_model: Callable[[Knobs], models.Net]
    target: str  # "classes" (cross-entropy) | "binary" (BCE with logits) | "value" (MSE)
    lrs: dict  # optimizer -> healthy learning rate
    traits: frozenset  # what the family has, for which faults apply (see zoo/faults.py)
    steps: int = 150
    batch: int = 32


def _lrs(sgd, momentum, adam, adamw, rmsprop) -> dict:
    return dict(zip(OPTIMIZERS, (sgd, momentum, adam, adamw, rmsprop), strict=True))


FLOAT = "float_inputs"  # standardised float features (raw units / NaN can be planted)
PAIRED = "paired_labels"  # targets are separate from inputs (labels can be misaligned)
SATURATING = "saturating"  # a sigmoid/tanh module after the first layer
RELU = "relu"  # a ReLU module fed by a biased layer
DROPOUT = "dropout"  # a dropout layer
LOGITS = "logits"  # the loss expects logits
RESIDUAL = "residual"  # a residual stack whose depth and normalisation can change
HALF = "half"  # runs in float16 on CPU (MultiheadAttention's padding mask breaks in half)

FAMILIES_BY_NAME = {f.name: f for f in (
    Family("cnn_bn", "conv net with BatchNorm on 8x8 images, 4 classes",
           data.images, models.cnn, "classes", _lrs(0.4, 0.06, 1.2e-2, 1.2e-2, 4e-3),
           frozenset({FLOAT, PAIRED, RELU, LOGITS, HALF})),
    Family("gru", "GRU over 8-step sequences of 3 channels, 2 classes",
           data.sequences, models.gru, "classes", _lrs(0.5, 0.1, 1e-2, 1e-2, 3e-3),
           frozenset({FLOAT, PAIRED, LOGITS, HALF})),
    Family("attention", "self-attention encoder with LayerNorm on padded tokens, 3 classes",
           lambda g: data.tokens(g, vocab=16, padded=True), models.attention, "classes",
           _lrs(0.4, 0.12, 1e-2, 1e-2, 3e-3), frozenset({PAIRED, RELU, LOGITS})),
    Family("regressor", "tanh/ReLU MLP regressor with MSE",
           lambda g: data.features(g, kind="value"), models.regressor, "value",
           _lrs(0.05, 0.01, 3e-3, 3e-3, 1e-3),
           frozenset({FLOAT, PAIRED, SATURATING, RELU, DROPOUT})),
    Family("resmlp", "4-block pre-LayerNorm residual MLP, 4 classes",
           lambda g: data.features(g, d=12, out=4), models.residual, "classes",
           _lrs(0.1, 0.03, 3e-3, 3e-3, 1e-3),
           frozenset({FLOAT, PAIRED, RELU, LOGITS, RESIDUAL, HALF})),
    Family("binary", "sigmoid MLP binary classifier with BCE",
           lambda g: data.features(g, kind="binary", hidden=2), models.binary, "binary",
           _lrs(0.5, 0.1, 1e-2, 1e-2, 3e-3),
           frozenset({FLOAT, PAIRED, SATURATING, RELU, DROPOUT, LOGITS})),
    Family("bag", "embedding-bag model on token ids, 3 classes",
           data.tokens, models.bag, "classes", _lrs(2.0, 0.2, 2e-2, 2e-2, 6e-3),
           frozenset({PAIRED, RELU, DROPOUT, LOGITS, HALF})),
    Family("autoencoder", "tanh autoencoder of rank-4 data with MSE",
           data.low_rank, models.autoencoder, "value", _lrs(0.1, 0.03, 1e-2, 1e-2, 3e-3),
           frozenset({FLOAT, SATURATING})),
)}
FAMILIES = tuple(FAMILIES_BY_NAME)
