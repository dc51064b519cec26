"""Control: a fine-tuned cellularity regressor's validation loss is computed on integer targets.

Source: https://github.com/srinidhiPY/SSL_CR_Histo/issues/5 (2022-07-18), on
eval_BreastPathQ_SSL.py line 123 (commit adc301e); the author: "it's an unintentional
bug ... It should have been the target.float() (as in Line 55)".
What the thread established: training is untouched -- the training loop converts the
targets with `.float()`; only validate() converts them with `.long()`, so the tumour
cellularity scores in [0, 1] become 0 (1.0 stays 1) and the printed validation MSE is
measured against the wrong targets.  A reporting bug: the model and its updates are
healthy.
Healthy training: the fix changes only the validation metric.
Re-created: the fine-tuning recipe -- MSELoss on a single regression output, Adam lr
1e-4 (betas 0.9, 0.999) with weight decay 1e-4, batch 4, 10% of the labelled training
patches, validation on 20% -- with the validation targets converted as validate() did;
differs from the original: the self-supervised ResNet-18 replaced by fixed seeded 512-d
patch features (a 16-d latent spread over 512 channels, as pretrained features carry
the patch's content in few directions) and the FinetuneResNet head by a 512-64-1 MLP (the bug is in the
validation targets); cellularity scores generated in [0, 1] from the features; 300 steps.
Fix (to the metric only): target.float() in validate().  Run: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_loss"


def patches(seed: int, n: int):
    """Pretrained-like features: a 16-d latent description of the patch spread over
    512 channels with a little noise; the score depends on the latent."""
    g = generator(seed)
    z = torch.randn(n, 16, generator=g)
    basis = torch.randn(16, 512, generator=g) / 4
    X = z @ basis + 0.1 * torch.randn(n, 512, generator=g)
    w = torch.randn(16, generator=g) / 4
    y = torch.sigmoid(2 * (z @ w) + 0.2 * torch.randn(n, generator=g))
    return X, y


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = patches(seed, 3000)
    n_val = 600
    Xt, yt = X[n_val:n_val + 240], y[n_val:n_val + 240]  # labeled_train 0.1 of the rest
    Xv, yv = X[:n_val], y[:n_val]
    criterion = nn.MSELoss()
    # validate(): input1, target = input1.float(), target.long()
    yv_seen = yv.float() if fixed else yv.long()  # the reporting bug / its fix
    val = [(xb, tb.view(-1, 1)) for xb, tb in batched(Xv, yv_seen, 4)]

    def step(model, optimizer, batch):
        input1, target = batch
        input1, target = input1.float(), target.float()
        output = model(input1).view(-1, 1).reshape(-1, )
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 1)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-4,
                                                     betas=(0.9, 0.999), weight_decay=1e-4),
                batches=batched(Xt, yt, 4), step=step, loss=criterion,
                val_batches=val, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The validation loss as validate() prints it (wrong targets unless fixed)."""
    return {"val_loss": mean_loss(model, val_batches, lambda out, t: nn.functional.mse_loss(out, t))}
