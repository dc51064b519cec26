"""Activations written as functions (`F.relu(x)`, `torch.sigmoid(x)`, `x.tanh()`) are
read at the inputs of the next Linear/Conv layer, with the same values the module form
(`nn.ReLU()`, ...) gets on the same weights and batches."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import failurelab as fl

# each step's arithmetic: every step's forward tensors are read (see conftest)
pytestmark = pytest.mark.usefixtures("every_forward")

ACTIVATIONS = (nn.ReLU, nn.Sigmoid, nn.Tanh)
FUNCTIONS = (F.relu, torch.sigmoid, lambda x: x.tanh())


class Functional(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:], strict=False))

    def forward(self, x):
        for layer, act in zip(self.layers, (*FUNCTIONS, None), strict=False):
            x = layer(x)
            x = act(x) if act is not None else x
        return x


def _history(model, seed=0, steps=12):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(seed)
    with fl.Monitor(model, opt) as mon:
        for _ in range(steps):
            x = 3 * torch.randn(32, 8, generator=g)
            y = torch.randint(0, 3, (32,), generator=g)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            mon.record(loss)
    return mon.history


def test_functional_activations_read_the_same_as_their_modules():
    widths = (8, 32, 32, 16, 3)
    torch.manual_seed(0)
    h_fun = _history(Functional(widths))
    torch.manual_seed(0)
    h_mod = _history(sequential_like(widths))
    assert h_fun["loss"].tolist() == h_mod["loss"].tolist()  # the same weights and batches
    pairs = {"dead_frac/1": "dead_frac/layers.1.input",
             "saturated_frac/3": "saturated_frac/layers.2.input",
             "saturated_frac/5": "saturated_frac/layers.3.input",
             "act_mean/1": "act_mean/layers.1.input", "act_std/3": "act_std/layers.2.input"}
    for module_column, functional_column in pairs.items():
        assert h_fun[functional_column].tolist() == h_mod[module_column].tolist()
    assert h_fun["saturated_frac/layers.1.input"].isna().all()  # a ReLU saturates nothing
    assert h_fun["dead_frac/layers.2.input"].isna().all()
    assert "act_mean/layers.0.input" not in h_fun or h_fun["act_mean/layers.0.input"].isna().all()


def sequential_like(widths):
    """The module form of `Functional`, built in the same order under the same seed, so
    its Linear layers get the same initial weights."""
    layers = [nn.Linear(a, b) for a, b in zip(widths, widths[1:], strict=False)]
    return nn.Sequential(*[m for layer, act in zip(layers, (*ACTIVATIONS, None), strict=False)
                           for m in ((layer,) if act is None else (layer, act()))])


@pytest.mark.parametrize("activation", [F.gelu, lambda x: x], ids=["gelu", "none"])
def test_other_activations_are_not_guessed_and_the_diagnosis_says_what_is_missing(activation):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 32), nn.Linear(32, 3)

        def forward(self, x):
            return self.b(activation(self.a(x)))

    torch.manual_seed(0)
    h = _history(Net())
    assert h.filter(like="dead_frac/").isna().all().all()
    assert h.filter(like="saturated_frac/").isna().all().all()
    assert "activations" in fl.diagnose(h).missing


def test_softmax_probabilities_are_not_read_as_sigmoids():
    from failurelab.telemetry.instruments import kind_of_values

    probs = torch.randn(16, 5).softmax(-1)
    assert kind_of_values(probs) is None
    assert kind_of_values(torch.sigmoid(torch.randn(16, 5))) == "sigmoid"
    assert kind_of_values(F.relu(torch.randn(16, 5))) == "relu"
    assert kind_of_values(torch.tanh(torch.randn(16, 5))) == "tanh"
