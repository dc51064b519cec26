"""Containment: a fault inside any hook or probe never reaches the user's loop.

Each case makes one instrument fail from some step on (a patched method, as a bug or
an unforeseen model would), and checks that the loop trains bit-identically to an
unmonitored one, that one warning names the instrument, and that the history says
which columns stopped when while the others kept recording."""

import math
import sys
import warnings

import numpy as np
import pytest
import torch
from foreign_loops import beside_plain
from torch import nn

import failurelab as fl
from failurelab.telemetry import buffers, instruments, probes, shift
from failurelab.telemetry.monitor import CHUNK_STEPS, MonitorWarning

# each step's arithmetic: every step's forward tensors are read (see conftest)
pytestmark = pytest.mark.usefixtures("every_forward")

FAIL_AT = CHUNK_STEPS + 8  # hooks fail from here on, in the second chunk
STEPS = CHUNK_STEPS + 38


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.sig = nn.Linear(3, 6), nn.Sigmoid()
        self.fc2, self.relu = nn.Linear(6, 6), nn.ReLU()
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(self.relu(self.fc2(self.sig(self.fc1(x)))))


def _loop(mon_factory=None):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    mon = mon_factory(model, opt) if mon_factory else None
    losses = []
    for _ in range(STEPS):
        x, y = torch.randn(16, 3, generator=g), torch.randint(0, 2, (16,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
        with torch.no_grad():  # a validation pass each step: eval_input_shift every row
            model(torch.randn(16, 3, generator=g))
        if mon is not None:
            mon.record(loss)
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return torch.stack(losses), weights, mon


def _failing(original, after_calls, only=None):
    """`original`, but raising from its `after_calls`-th call on (for `only` instances)."""
    calls = {"n": 0}

    def patched(self, *args, **kwargs):
        if only is None or only(self):
            calls["n"] += 1
            if calls["n"] > after_calls:
                raise RuntimeError("injected fault")
        return original(self, *args, **kwargs)
    return patched


def _failing_function(original, after_calls):
    calls = {"n": 0}

    def patched(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise RuntimeError("injected fault")
        return original(*args, **kwargs)
    return patched


def _sig_only(instrument):
    return instrument.name == "activations/sig"


def _model_input_only(instrument):  # not the first-layer instrument built on the same class
    return type(instrument) is instruments.Inputs


# (what fails, how, which instrument must stop, a column of it, the step its NaN starts)
CASES = {  # hooks fail from FAIL_AT on: they lose the pending chunk (from CHUNK_STEPS)
    "optimizer pre-hook copy": (buffers.ChainBuffers, "before_step", FAIL_AT, None,
                                "gradients and weights", "grad_norm", CHUNK_STEPS),
    "gradient copy at record": (instruments.Parameters, "take", FAIL_AT, None,
                                "gradients and weights", "update_ratio", CHUNK_STEPS),
    "gradient statistics": (instruments.Parameters, "compute", 1, None,
                            "gradients and weights", "grad_norm/out.weight", CHUNK_STEPS),
    "model forward hook": (instruments.Inputs, "see", FAIL_AT, _model_input_only, "inputs",
                           "input_absmax", CHUNK_STEPS),
    "input copy at record": (instruments.Inputs, "take", FAIL_AT, _model_input_only, "inputs",
                             "batch_size", CHUNK_STEPS),
    "input statistics": (instruments.Inputs, "compute", 1, _model_input_only, "inputs",
                         "input_std_ratio", CHUNK_STEPS),
    "output gradient hook (in backward)": (instruments.Outputs, "keep_grad", FAIL_AT, None,
                                           "outputs", "output_grad_min", CHUNK_STEPS),
    "output statistics": (instruments.Outputs, "compute", 0, None, "outputs",
                          "output_std", 0),
    "parameter gradient hook (in backward)": (instruments.Carried, "see", FAIL_AT, None,
                                              "gradients carried over", "grad_carried", CHUNK_STEPS),
    "carried statistics": (instruments.Carried, "compute", 1, None, "gradients carried over",
                           "grad_carried", CHUNK_STEPS),
    # the input hook hands every pass to it, a training and a validation one per step
    "evaluation-input part of the input hook": (shift.EvalInputs, "see", 2 * FAIL_AT, None,
                                                "evaluation inputs", "eval_input_shift", CHUNK_STEPS),
    "evaluation-input statistics": (shift.EvalInputs, "compute", 1, None,
                                    "evaluation inputs", "eval_input_shift", CHUNK_STEPS),
    "activation forward hook": (instruments.Activations, "see", FAIL_AT, _sig_only,
                                "activations/sig", "act_mean/sig", CHUNK_STEPS),
    "activation statistics": (instruments.Activations, "compute", 1, _sig_only,
                              "activations/sig", "saturated_frac/sig", CHUNK_STEPS),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failing_instrument_is_switched_off_and_the_loop_is_untouched(case, monkeypatch):
    owner, method, after, only, name, column, nan_from = CASES[case]
    plain_losses, plain_weights, _ = _loop()
    monkeypatch.setattr(owner, method, _failing(getattr(owner, method), after, only))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, weights, mon = _loop(fl.Monitor)
        h = mon.history
        mon.close()
    assert torch.equal(losses, plain_losses) and torch.equal(weights, plain_weights)
    ours = [w for w in caught if issubclass(w.category, MonitorWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert repr(name) in str(ours[0].message) and "injected fault" in str(ours[0].message)
    assert set(mon.stopped) == {name}
    assert mon.stopped[name]["nan_from"] == nan_from
    assert mon.stopped[name]["step"] >= nan_from
    assert column in mon.stopped[name]["columns"]
    assert h.attrs["stopped"] == mon.stopped
    assert h[column].iloc[nan_from:].isna().all()
    assert h[column].iloc[:nan_from].notna().all()
    assert len(h) == STEPS and h["loss"].tolist() == losses.tolist()
    others = [c for c in ("grad_norm", "input_absmax", "output_std", "act_mean/sig",
                          "dead_frac/relu") if c not in mon.stopped[name]["columns"]]
    assert h[others].iloc[1:].notna().all().all()  # the rest kept recording


class Standardised(Net):
    """Net behind a standardisation of its own input: its first layer reads other data."""

    def forward(self, x):
        return super().forward((x - 1.0) / 2.0)


@pytest.mark.parametrize("method, after", [("see", FAIL_AT), ("compute", 1)])
def test_a_failing_first_layer_input_stops_only_itself(method, after, monkeypatch):
    owner = instruments.FirstLayerInputs
    monkeypatch.setattr(owner, method, _failing(getattr(owner, method), after))
    monkeypatch.setattr(sys.modules[__name__], "Net", Standardised)
    plain_losses, plain_weights, _ = _loop()
    with pytest.warns(MonitorWarning, match="'first layer input'"):
        losses, weights, mon = _loop(fl.Monitor)
        h = mon.history
    assert torch.equal(losses, plain_losses) and torch.equal(weights, plain_weights)
    assert list(mon.stopped) == ["first layer input"]
    assert h["first_layer_std_ratio"].iloc[CHUNK_STEPS:].isna().all()
    assert h["first_layer_std_ratio"].iloc[:CHUNK_STEPS].notna().all()
    assert h[["input_std_ratio", "output_std"]].notna().all().all()


def test_a_failing_probe_function_stops_only_its_instrument(monkeypatch):
    monkeypatch.setattr(probes, "distribution_rows",
                        _failing_function(probes.distribution_rows, 1))
    with pytest.warns(MonitorWarning, match="'outputs'"):
        _, _, mon = _loop(fl.Monitor)
        h = mon.history
    assert list(mon.stopped) == ["outputs"]
    assert h["output_prob_frac"].iloc[CHUNK_STEPS:].isna().all()
    assert h["input_absmax"].notna().all()


def _run_sizes(sizes):
    """The containment loop with the batch size of each step given (0: an empty batch)."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    with fl.Monitor(model, opt) as mon:
        for n in sizes:
            x, y = torch.randn(n, 3, generator=g), torch.randint(0, 2, (n,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y, reduction="sum") / max(n, 1)
            loss.backward()
            opt.step()
            mon.record(loss)
            losses.append(float(loss))
    return mon, losses


def test_an_empty_batch_leaves_its_own_row_nan_and_every_instrument_on():
    sizes = [16] * 40
    sizes[5] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mon, losses = _run_sizes(sizes)
    assert not [w for w in caught if issubclass(w.category, MonitorWarning)]
    h = mon.history
    assert mon.stopped == {} and h["loss"].tolist() == losses
    for column in ("batch_size", "output_std", "act_mean/sig"):
        assert h.index[h[column].isna()].tolist() == [5], column


def test_an_instrument_failing_on_a_later_shape_group_leaves_its_chunk_nan(monkeypatch):
    """Steps of two batch sizes compute in two groups; the second fails: the first
    group's values are dropped too, so the column is NaN from `nan_from` on, as the
    warning says."""
    monkeypatch.setattr(instruments.Inputs, "compute",
                        _failing(instruments.Inputs.compute, 1))
    with pytest.warns(MonitorWarning, match="NaN from step 0 on"):
        mon, _ = _run_sizes([16, 12] * 10)
        h = mon.history
    assert mon.stopped["inputs"]["nan_from"] == 0
    assert h["batch_size"].isna().all() and h["grad_norm"].notna().all()


class Bag(nn.Module):
    """Sparse embedding bag: each sample is a few token ids, summed."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 4, sparse=True)

    def forward(self, ids):
        return self.emb(ids).sum(1)


def test_sparse_embeddings_with_sparse_adam_record_correct_norms():
    def run(monitored):
        torch.manual_seed(3)
        model = Bag()
        opt = torch.optim.SparseAdam(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(4)
        mon = fl.Monitor(model, opt) if monitored else None
        ref = []
        for _ in range(12):
            ids = torch.randint(0, 50, (8, 3), generator=g)
            opt.zero_grad()
            loss = model(ids).pow(2).mean()
            loss.backward()
            grad = model.emb.weight.grad.coalesce()
            before = model.emb.weight.detach().clone()
            opt.step()
            after = model.emb.weight.detach()
            ref.append({"grad_norm": grad.values().double().norm().item(),
                        "zero_grad_frac": (grad.values() == 0).double().mean().item(),
                        "update_norm": (after - before).double().norm().item(),
                        "weight_norm": after.double().norm().item(),
                        "loss": loss.item()})
            if mon is not None:
                mon.record(loss)
        return ref, mon
    ref, mon, h = beside_plain(run)
    assert not mon.stopped
    for column in ("grad_norm", "update_norm", "weight_norm", "zero_grad_frac"):
        want = np.array([r[column] for r in ref])
        assert h[column].to_numpy() == pytest.approx(want, rel=1e-5, abs=1e-9), column
    # Rows of the table no sample used are absent, not "exactly zero" entries: dense
    # zeros would be ~80% here (at most 24 of 50 rows are touched per step).
    assert (h["zero_grad_frac"] < 0.5).all()
    assert h["grad_cosine"].iloc[1:].map(math.isfinite).all()


def test_a_failed_merge_of_the_ranks_leaves_close_working(monkeypatch):
    """Under torch.distributed, `close()` merges the ranks' columns after its one
    collective; should the merge fail, one warning says so and rank 0 keeps its own
    rows: the user's run does not end in a traceback from inside close()."""
    from failurelab.telemetry import distributed

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = fl.Monitor(model, opt)
    for _ in range(3):
        opt.zero_grad()
        loss = model(torch.randn(4, 3)).square().mean()
        loss.backward()
        opt.step()
        mon.record(loss)
    mon._world = 2  # as if under torch.distributed, rank 0 of two
    monkeypatch.setattr(distributed, "gather", lambda rows: [rows, rows])

    def broken(by_rank):
        raise ValueError("operands could not be broadcast together")
    monkeypatch.setattr(distributed, "merge", broken)
    with pytest.warns(MonitorWarning, match="could not be merged.*ValueError"):
        mon.close()
    assert len(mon.history) == 3 and mon.history["grad_norm"].map(math.isfinite).all()
