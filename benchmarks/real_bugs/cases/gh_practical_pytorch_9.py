"""A character-level RNN name classifier: with optimizer.step() the loss "does not diminish".

Source: https://github.com/spro/practical-pytorch/issues/9 (2017-04-05), fixed by the
author in commit 67ac021.
Root cause (as the author found it): the notebook instantiates the RNN twice -- once
right after the class, once again before the training loop -- and the user's
`optimizer = torch.optim.SGD(rnn.parameters(), lr)` was built between the two, over the
first instance.  The loop trains the second instance; its parameters get gradients but
the optimizer steps the first one, so the trained model never changes.  Moving the
optimizer below the second instantiation fixes it.
Re-created: the tutorial's RNN (i2h and i2o Linear layers on [input, hidden], 128 hidden
units, LogSoftmax), one-hot letters (57), 18 categories, NLLLoss, SGD lr 0.005, one name
per step, zero_grad via rnn.zero_grad() as the tutorial does;
differs from the original: the names are seeded 6-letter strings whose letters are drawn
from a per-category letter distribution (no name files are read); 1500 steps instead of
100,000; the model is rebuilt by the step's owner once, as the notebook's second cell does.
Fix: build the optimizer over the model that is trained.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 1500
HARM_METRIC = "val_acc"
N_LETTERS, N_CATEGORIES, N_HIDDEN, NAME_LENGTH = 57, 18, 128, 6


class RNN(nn.Module):
    def __init__(self, input_size=N_LETTERS, hidden_size=N_HIDDEN, output_size=N_CATEGORIES):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def step_letter(self, letter, hidden):
        combined = torch.cat((letter, hidden), 1)
        return self.softmax(self.i2o(combined)), self.i2h(combined)

    def forward(self, line_tensor):  # (letters, 1, N_LETTERS) -> (1, N_CATEGORIES)
        hidden = torch.zeros(1, self.hidden_size)
        for i in range(line_tensor.size(0)):
            output, hidden = self.step_letter(line_tensor[i], hidden)
        return output


def names(seed: int, n: int):
    """(line tensors (n, NAME_LENGTH, 1, N_LETTERS), categories (n,))."""
    g = generator(seed)
    letter_logits = 2.0 * torch.randn(N_CATEGORIES, N_LETTERS, generator=g)
    cats = torch.randint(N_CATEGORIES, (n,), generator=g)
    probs = letter_logits[cats].softmax(1)
    letters = torch.multinomial(probs, NAME_LENGTH, replacement=True, generator=g)
    one_hot = nn.functional.one_hot(letters, N_LETTERS).float()
    return one_hot.unsqueeze(2), cats


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    lines, cats = names(seed, 2000)
    criterion = nn.NLLLoss()
    trained = {}

    def make_model():
        first = RNN()  # the notebook's first cell: rnn = RNN(n_letters, n_hidden, n_categories)
        trained["first"] = first
        return first if fixed else RNN()  # the second cell builds rnn again before the loop

    def make_optimizer(model):
        if fixed:
            return torch.optim.SGD(model.parameters(), lr=0.005)  # FIX: optimizer over the trained rnn
        return torch.optim.SGD(trained["first"].parameters(), lr=0.005)  # BUG: over the first instance

    def step(rnn, optimizer, batch):
        line_tensor, category_tensor = batch
        rnn.zero_grad()
        output = rnn(line_tensor)
        loss = criterion(output, category_tensor)
        loss.backward()
        optimizer.step()
        return loss

    train = [(lines[i], cats[i:i + 1]) for i in range(1600)]
    val = [(lines[i], cats[i:i + 1]) for i in range(1600, 2000)]
    return dict(model=make_model, optimizer=make_optimizer, batches=train, step=step,
                loss=criterion, val_batches=val, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    with torch.no_grad():
        right = sum(int(model(x).argmax(1).item() == int(y)) for x, y in val_batches)
    return {"val_acc": right / len(val_batches)}
