"""skorch's MNIST tutorial goes to NaN as soon as the optimizer is switched to RMSprop.

Source: https://github.com/Jacob-yen/GRIST scripts/study_case/ID_12 (GRIST subject ID_12,
Skorch, a "known" bug: skorch/classifier.py, NeuralNetClassifier.get_loss); the bug
is https://github.com/skorch-dev/skorch/issues/481 (2019-05-29, reported by a maintainer
while testing notebooks/MNIST.ipynb), fixed by PR #491 (merged 2019-07-08, "BUG Adds
eps to loss to prevent nans").
Root cause (as the issue and the fix established it): NeuralNetClassifier expects a
softmax module and feeds `torch.log(y_pred)` to NLLLoss.  With RMSprop or Adam, or a
changed learning rate, some predicted probabilities round to exactly 0 in float32;
their log is -inf, the loss is inf and the backward pass turns every weight NaN.  The
fix adds the float eps inside the log.
Re-created: the tutorial's ClassifierModule (784 -> 98 ReLU -> Dropout 0.5 -> 10 ->
softmax), NLLLoss on log(y_pred) as get_loss computed it, the optimizer switched to
torch.optim.RMSprop as in the report, at lr 0.01 (RMSprop's default and skorch's default
lr), batch 128, a held-out fifth for validation, pixels scaled to [0, 1];
differs from the original: MNIST replaced by seeded 28x28 stroke images (5000 training,
1250 validation; each keeps half of its class's strokes and picks up some of another
class's); 300 steps instead of 20 epochs.  The report does not say which rate went with
the new optimizer; the tutorial's lr 0.1 was not kept because with RMSprop or Adam at 0.1
the fixed program does not learn either (measured: chance accuracy), whereas the report
has the eps alone curing the run.
Fix: y_pred = torch.log(y_pred + torch.finfo(y_pred.dtype).eps).  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import skorch_mnist as tutorial  # noqa: E402
from common import fixed_from_env  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"


def make_get_loss(fixed: bool):
    def get_loss(y_pred, y_true):  # NeuralNetClassifier.get_loss with criterion NLLLoss
        if fixed:
            y_pred = torch.log(y_pred + torch.finfo(y_pred.dtype).eps)  # FIX: eps in the log
        else:
            y_pred = torch.log(y_pred)  # BUG: log(0) = -inf once a probability rounds to 0
        return F.nll_loss(y_pred, y_true)
    return get_loss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    return tutorial.parts(make_get_loss(fixed),
                          lambda m: torch.optim.RMSprop(m.parameters(), lr=0.01), STEPS, seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The validation yardstick is the same for buggy and fixed runs (log of p + eps)."""
    return tutorial.measure(model, val_batches)
