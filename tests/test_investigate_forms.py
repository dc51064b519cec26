"""`fl.investigate` on the shapes real loops take: batches as dicts with Hugging Face
keys and as (inputs, lengths, labels), models that return tuples; an arm that cannot
take a batch apart is skipped, never ends the investigation.  (Found by
benchmarks/wild_forms.py's calibration half.)"""

import math

import torch
from torch import nn
from torch.nn import functional as F

import failurelab as fl
from failurelab.investigation import arms, checks, runner
from failurelab.investigation.parts import make_parts

STEPS = 40


def _signals(n=256, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(classes, 4, generator=g)[y] + 0.5 * torch.randn(n, 4, generator=g)
    return x, y


def _mlp():
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05)


def _triple_step(model, optimizer, batch):
    x, _, y = batch
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def test_a_three_tuple_batch_has_its_labels_last():
    """(inputs, lengths, labels): the lengths are no targets.  Read as the second
    element, permuting 'the labels' moved the lengths and the reference step fed them
    to the loss (an index past the classes: the arm crashed)."""
    x, y = _signals()
    lengths = torch.full((len(x),), 20)  # class-index-like integers, out of the classes' range
    batches = [(x[i:i + 32], lengths[i:i + 32], y[i:i + 32]) for i in range(0, len(x), 32)]
    parts = make_parts(_mlp, _sgd, batches, _triple_step, loss=F.cross_entropy, steps=STEPS)
    assert parts.targets(batches[0]) is batches[0][2]
    permuted = arms.ARMS["labels_permuted"].apply(parts)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(parts.batches, permuted.batches,
                                                        strict=True))  # lengths untouched
    run = runner.run_arm(parts, "reference_step")
    assert run.error is None and len(run.history) == STEPS


def test_hugging_face_dict_keys_are_read():
    batch = {"input_ids": torch.zeros(4, 3, dtype=torch.long), "labels": torch.zeros(4)}
    parts = make_parts(_mlp, _sgd, [batch], lambda m, o, b: torch.tensor(0.0), steps=2)
    assert parts.inputs(batch) is batch["input_ids"]


def _dict_step(model, optimizer, batch):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(batch["feats"]), batch["labels"])
    loss.backward()
    optimizer.step()
    return loss


def test_an_arm_that_cannot_read_the_batch_is_skipped_not_raised():
    """A dict batch whose inputs sit under a key no default knows: the arms that must
    rewrite the inputs cannot, and say so; the investigation goes on (it used to end
    with a PartsError raised out of the arm)."""
    x, y = _signals()
    batches = [{"feats": x[i:i + 32], "labels": y[i:i + 32]} for i in range(0, len(x), 32)]
    parts = make_parts(_mlp, _sgd, batches, _dict_step, loss=F.cross_entropy, steps=STEPS)
    run = runner.run_arm(parts, "inputs_standardised")
    assert run.skipped and "not applicable" in run.error
    inv = fl.investigate(_mlp, lambda m: torch.optim.SGD(m.parameters(), lr=100.0), batches,
                         _dict_step, loss=F.cross_entropy, steps=STEPS, workers=1,
                         progress=False)  # lr 100 on unit-scale inputs: the loss blows up
    assert inv.shape != "healthy" and inv.top == "huge_lr"
    assert any(n.startswith("reference_step: not applicable: PartsError") for n in inv.notes)


class _ScoresAndAttention(nn.Module):
    """A classifier ending in nn.Softmax that returns (probabilities, attention)."""

    def __init__(self):
        super().__init__()
        self.net, self.softmax = _mlp(), nn.Softmax(dim=-1)

    def forward(self, x):
        scores = self.softmax(self.net(x))
        return scores, torch.ones(len(x), 2, 2)


def _first(out, y):
    return F.cross_entropy(out[0], y)


def test_a_tuple_output_is_read_by_its_first_element():
    """The output checks read the prediction of a tuple (its first element) and hand
    your loss the output as the model returns it: softmax into cross-entropy is seen
    (it was NaN for any output that is not one tensor)."""
    x, y = _signals()
    batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, len(x), 32)]
    parts = make_parts(_ScoresAndAttention, _sgd, batches, lambda m, o, b: 0.0, loss=_first,
                       steps=STEPS)
    assert checks.output_kind(parts) == (0.0, 1.0)
    assert checks.loss_takes_logits(parts) == 1.0
    assert checks.output_shape(parts) == (32, 3)
    assert arms.ARMS["output_identity"].apply(parts) is not None


def test_a_dict_output_is_read_by_its_logits():
    class DictModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.head = nn.Sequential(nn.Linear(4, 16), nn.ReLU()), nn.Linear(16, 3)

        def forward(self, x):
            h = self.body(x)
            return {"features": h, "logits": self.head(h)}
    x, y = _signals()
    parts = make_parts(DictModel, _sgd, [(x[:32], y[:32])], lambda m, o, b: 0.0,
                       loss=lambda out, t: F.cross_entropy(out["logits"], t), steps=2)
    assert checks.output_kind(parts) == (0.0, 0.0)  # the features' ReLU makes no prediction
    assert checks.loss_takes_logits(parts) == 1.0
    assert checks.prediction({"features": torch.ones(1)}) is not None
    assert math.isnan(checks.loss_takes_logits(make_parts(DictModel, _sgd, [(x[:32], y[:32])],
                                                          lambda m, o, b: 0.0, steps=2)))
