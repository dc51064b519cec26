"""Control: "validation loss is lower than training loss in the MNIST tutorial" -- expected.

Source: https://github.com/skorch-dev/skorch/issues/722 (2020-11-19; answered and closed by
the maintainer 2020-11-19 / 2020-12-29), on notebooks/MNIST.ipynb.
What the thread established: nothing is wrong.  The reporter saw valid_loss below
train_loss at every epoch of the tutorial and thought that impossible with properly
shuffled data.  The maintainer's answer: skorch's train_loss is the mean of the batch
losses taken *while* the net trains through the epoch, and valid_loss is computed after
the epoch, on a net that has already improved (or the gap is chance).  The tutorial's
module also drops half of its hidden units (dropout 0.5) in the training forward only.
Healthy training: there is no fix.
Re-created: the tutorial's ClassifierModule (784 -> 98 ReLU -> Dropout 0.5 -> 10 -> softmax),
skorch's NeuralNetClassifier loss for a softmax module (NLLLoss on log(p + eps), the form
skorch used since 2019), its default optimizer SGD at the tutorial's lr 0.1, batch 128,
a held-out fifth of the data for validation, pixels scaled to [0, 1];
differs from the original: MNIST replaced by seeded 28x28 stroke images (5000 training,
1250 validation; each keeps half of its class's strokes and picks up some of another
class's, so that the net, like the tutorial's, stays a few per cent short of perfect),
300 steps (under 8 epochs) instead of 20 epochs; the epoch averages skorch prints are
not re-created (the step returns each batch's loss).
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import skorch_mnist as tutorial  # noqa: E402
from common import fixed_from_env  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    return tutorial.parts(tutorial.nll_of_probabilities,
                          lambda m: torch.optim.SGD(m.parameters(), lr=0.1), STEPS, seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return tutorial.measure(model, val_batches)
