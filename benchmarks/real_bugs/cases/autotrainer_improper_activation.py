"""A 3-class blob classifier with a ReLU output layer under categorical cross-entropy (ported from Keras).

Source: https://github.com/shiningrain/AUTOTRAINER, AutoTrainer/demo_case/
Improper_Activation_case/demo_activation.py and data/simplednn.py (commit 03a463e): the
AUTOTRAINER authors' demonstration of an improper output activation (a Keras program
built to show the problem, not a user's report).
Root cause (as the demo sets it up and AUTOTRAINER repairs it): the last Dense(3) has
activation='relu' while the loss is categorical cross-entropy on probabilities; ReLU
outputs are not a distribution and every class score clipped at 0 has no gradient, so
training stalls far from the attainable loss.  The repair uses softmax on the output.
Re-created, ported line by line to PyTorch: Dense(50, relu, he_uniform) x4 -> Dense(3,
relu); Keras' categorical_crossentropy on probabilities (scores divided by their sum,
clipped to [1e-7, 1 - 1e-7]); Adam lr 1e-4, batch 256; 1000 blobs, 3 centres, 2 features,
cluster std 2, 700 train / 300 validation, as simplednn's 'blob' data;
differs from the original: sklearn's make_blobs replaced by the same recipe drawn from a
seeded torch.Generator (centres uniform in [-10, 10]); 300 steps (~110 epochs) instead
of 300 epochs.
Fix: activation softmax on the output layer.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
EPSILON = 1e-7  # Keras' backend epsilon


def blobs(seed: int, n: int = 1000, centres: int = 3, std: float = 2.0):
    """make_blobs' recipe: centres uniform in [-10, 10], Gaussian clusters of `std`."""
    g = generator(seed)
    c = torch.rand(centres, 2, generator=g) * 20 - 10
    y = torch.randint(centres, (n,), generator=g)
    return c[y] + std * torch.randn(n, 2, generator=g), y


def keras_categorical_crossentropy(output, target_onehot):
    """Keras' categorical_crossentropy(from_logits=False): renormalise, clip, -sum y log p."""
    output = output / output.sum(dim=-1, keepdim=True)
    output = output.clamp(EPSILON, 1 - EPSILON)
    return -(target_onehot * output.log()).sum(dim=-1).mean()


def he_uniform(layer: nn.Linear) -> nn.Linear:
    nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
    nn.init.zeros_(layer.bias)
    return layer


def glorot_uniform(layer: nn.Linear) -> nn.Linear:
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def make_model(fixed: bool) -> nn.Module:
    layers, width = [], 2
    for _ in range(4):
        layers += [he_uniform(nn.Linear(width, 50)), nn.ReLU()]
        width = 50
    layers.append(glorot_uniform(nn.Linear(50, 3)))
    layers.append(nn.Softmax(dim=-1) if fixed  # FIX: Dense(3, activation='softmax')
                  else nn.ReLU())  # BUG: Dense(3, activation='relu')
    return nn.Sequential(*layers)


def loss_fn(output, labels):
    return keras_categorical_crossentropy(output, nn.functional.one_hot(labels, 3).float())


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed)

    def step(model, optimizer, batch):
        x, labels = batch
        loss = loss_fn(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-4),
                batches=batched(X[:700], y[:700], 256), step=step, loss=loss_fn,
                val_batches=batched(X[700:], y[700:], 300), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
