"""A 2-2-2 softmax network on a separable 2-D toy set stays at 50 % accuracy (ported from Keras).

Source: https://stackoverflow.com/questions/50306988 (2018); code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/023 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark/Benchmark-with-patches.xlsx row 4,
ground truth "(1) Learning rate (2) Epoch").
Root cause (as the patch establishes it, and as the poster's own edits found: accuracy
leaves 0.5 only after ~70 epochs): the learning rate is too small for the few updates
the run makes: at Adam's (Keras default) 1e-3 the network still predicts one class for
everything after the epochs it is given (our reading of why: the two sigmoid hidden
units, fed inputs that all lie in [0.2, 0.7], barely separate the classes until the
weights have moved far from their glorot start).  The patch raises the rate to
Adam(lr=0.01) (and the epochs from 5 to 10).
Re-created, ported line by line to PyTorch: 200 points, class 1 with both coordinates
uniform in [0.2, 0.4], class 2 uniform in [0.5, 0.7], rows alternating between the
classes as the post builds them; labels label-encoded and one-hot; Dense(2, sigmoid) ->
Dense(2, softmax) with Keras' glorot-uniform weights and zero biases; Keras categorical
cross-entropy; Adam (betas 0.9/0.999, epsilon 1e-7); batch 32 (7 batches an epoch),
shuffled every epoch;
differs from the original: coordinates drawn from a seeded generator; 10 epochs (70
steps, the patch's count) for both versions; accuracy measured on 200 further points
drawn the same way instead of on the training points (the classes are separable, so the
two agree).
Fix: Adam(lr=0.01).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
EPOCHS, BATCH, DATASET_SIZE = 10, 32, 200
STEPS = EPOCHS * -(-DATASET_SIZE // BATCH)  # 7 batches an epoch, the last one short
HARM_METRIC = "val_acc"
EPSILON = 1e-7


def toy_set(g: torch.Generator):
    """The post's data: pairs of consecutive draws, alternating class 1 and class 2."""
    class_1 = 0.2 + 0.2 * torch.rand(DATASET_SIZE, generator=g)
    class_2 = 0.5 + 0.2 * torch.rand(DATASET_SIZE, generator=g)
    rows, labels = [], []
    for i in range(0, DATASET_SIZE, 2):
        rows += [[class_1[i], class_1[i + 1]], [class_2[i], class_2[i + 1]]]
        labels += [0, 1]  # LabelEncoder maps the classes 1, 2 to 0, 1
    y = torch.nn.functional.one_hot(torch.tensor(labels), 2).float()
    return torch.tensor(rows), y


def make_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 2), nn.Sigmoid(), nn.Linear(2, 2), nn.Softmax(dim=1))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def categorical_crossentropy(prob, y):
    return -(y * prob.clamp(EPSILON, 1 - EPSILON).log()).sum(1).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    x_train, y_train = toy_set(g)
    x_val, y_val = toy_set(g)
    batches = []  # model.fit(..., shuffle=True): a fresh order every epoch
    for _ in range(EPOCHS):
        order = torch.randperm(DATASET_SIZE, generator=g)
        batches += batched(x_train[order], y_train[order], BATCH)

    def step(model, optimizer, batch):
        x, y = batch
        loss = categorical_crossentropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    if fixed:
        lr = 0.01  # FIX: optimizer=Adam(lr=0.01)
    else:
        lr = 0.001  # BUG: optimizer='adam', Keras' default rate 1e-3, for 10 epochs

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=lr, eps=1e-7),
                batches=batches, step=step, loss=categorical_crossentropy,
                val_batches=batched(x_val, y_val, DATASET_SIZE), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """accuracy_score of the predicted classes, as the post computes it."""
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y.argmax(1)).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
