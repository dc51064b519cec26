"""A Keras MLP separating all-ones from all-zeros vectors keeps a test loss near 8 (ported from Keras).

Source: https://stackoverflow.com/questions/31880720 (2015); code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/031 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark/Benchmark-with-patches.xlsx row
10, ground truth "(1) Activation (2) Epoch").
Root cause (as the patch establishes it): the single output unit is followed by
Activation('softmax').  A softmax over one value is exp(z)/exp(z) = 1 whatever the
input, so every sample is predicted True, binary cross-entropy gets no gradient back
through the output, and the weights never change; the half of the samples labelled False
keep the clipped loss -log(1e-7).  The patch uses Activation('sigmoid') (and trains 40
epochs).  The post's "Test accuracy: 1.0" comes from old Keras' default categorical
accuracy, an argmax over one column, which is 1 for any model; the test loss is the
number that shows the failure.
Re-created, ported line by line to PyTorch: the post's data as written, 10^4 all-ones and
10^4 all-zeros 128-vectors labelled True/False for training, 100 + 100 for testing;
Dense(128 -> 50) -> ReLU -> Dropout 0.2 -> Dense(50 -> 50) -> ReLU -> Dropout 0.2 ->
Dense(50 -> 1) -> softmax, glorot-uniform weights and zero biases; binary cross-entropy
on the probability clipped to [1e-7, 1 - 1e-7]; RMSprop with old Keras' defaults
(lr 1e-3, rho 0.9, epsilon 1e-6); batch 128 (Keras' default then; the post does not
give its batch_size), samples shuffled every epoch;
differs from the original: 200 steps (about 1.3 epochs) instead of nb_epoch epochs (not
given in the post; the patch uses 40).
Fix: Activation('sigmoid').  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
BATCH = 128
HARM_METRIC = "val_loss"
EPSILON = 1e-7


def labelled_vectors(n: int):
    """n all-ones vectors (True) followed by n all-zeros vectors (False), as the post."""
    x = torch.cat([torch.ones(n, 128), torch.zeros(n, 128)])
    y = torch.cat([torch.ones(n), torch.zeros(n)])
    return x, y


class Net(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(128, 50), nn.ReLU(), nn.Dropout(0.2),
                                    nn.Linear(50, 50), nn.ReLU(), nn.Dropout(0.2),
                                    nn.Linear(50, 1))
        for m in self.layers:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        self.fixed = fixed

    def forward(self, x):
        z = self.layers(x)
        if self.fixed:
            return torch.sigmoid(z)  # FIX: model.add(Activation('sigmoid'))
        return torch.softmax(z, dim=-1)  # BUG: model.add(Activation('softmax')) on one unit


def binary_crossentropy(prob, y):
    p = prob.squeeze(1).clamp(EPSILON, 1 - EPSILON)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x_train, y_train = labelled_vectors(10 ** 4)
    x_test, y_test = labelled_vectors(10 ** 2)
    g = generator(seed)
    batches = []  # model.fit shuffles the samples every epoch
    while len(batches) < STEPS:
        order = torch.randperm(len(x_train), generator=g)
        batches += batched(x_train[order], y_train[order], BATCH)

    def step(model, optimizer, batch):
        inputs, labels = batch
        loss = binary_crossentropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Net(fixed),
                optimizer=lambda m: torch.optim.RMSprop(m.parameters(), lr=1e-3,
                                                        alpha=0.9, eps=1e-6),
                batches=batches[:STEPS], step=step, loss=binary_crossentropy,
                val_batches=batched(x_test, y_test, BATCH), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """model.evaluate(X_test, Y_test): score[0], the test loss (the post's "Test score")."""
    model.eval()
    with torch.no_grad():
        total = sum(float(binary_crossentropy(model(x), y)) * len(y) for x, y in val_batches)
    model.train()
    return {"val_loss": total / sum(len(y) for _, y in val_batches)}
