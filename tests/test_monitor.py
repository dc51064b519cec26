"""Monitor: every column against a reference computed by hand, and robustness."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.telemetry import instruments
from failurelab.telemetry.monitor import CHUNK_STEPS, GLOBAL_COLUMNS, INPUT_COLUMNS

# each step's arithmetic: every step's forward tensors are read (see conftest)
pytestmark = pytest.mark.usefixtures("every_forward")


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.sig = nn.Sigmoid()
        self.fc2 = nn.Linear(4, 5)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc2(self.sig(self.fc1(x))))


def _flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors]).double()


def _reference_rows(model, batches, lr):
    """Train step by step and compute every expected column directly."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    rows, prev = [], None
    for x, y in batches:
        opt.zero_grad()
        pre = model.fc1(x)
        sig = torch.sigmoid(pre)
        out = torch.relu(model.fc2(sig))
        loss = ((out - y) ** 2).mean()
        loss.backward()
        params = list(model.parameters())
        g = _flat([p.grad for p in params])
        before = _flat([p.detach() for p in params])
        opt.step()
        after = _flat([p.detach() for p in params])
        std = x.double().std(0)
        rows.append({
            "loss": loss.item(),
            "grad_norm": g.norm().item(),
            "weight_norm": after.norm().item(),
            "update_norm": (after - before).norm().item(),
            "update_ratio": ((after - before).norm() / before.norm()).item(),
            "grad_cosine": math.nan if prev is None else (g @ prev / (g.norm() * prev.norm())).item(),
            "zero_grad_frac": (g == 0).double().mean().item(),
            "grad_norm/fc2.weight": model.fc2.weight.grad.double().norm().item(),
            "weight_norm/fc1.bias": model.fc1.bias.detach().double().norm().item(),
            "input_absmax": x.abs().max().item(),
            "input_std_ratio": (std.max() / std.min()).item(),
            "act_mean/sig": sig.double().mean().item(),
            "act_std/sig": sig.double().std(unbiased=False).item(),
            "saturated_frac/sig": ((sig < 0.01) | (sig > 0.99)).double().mean().item(),
            "dead_frac/relu": (out.detach().amax(0) == 0).double().mean().item(),
        })
        prev = g
    return rows


def _batches(n, sizes=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    sizes = sizes or [16] * n
    scale = torch.tensor([1.0, 30.0, 0.1])
    return [(torch.randn(b, 3, generator=gen) * scale * 3, torch.rand(b, 5, generator=gen))
            for b in sizes]


def _monitored_rows(model, batches, lr, preset="full", read_after=()):
    """The history of a plain SGD loop; `read_after`: steps after which the loop reads
    `mon.history` (each read computes the pending chunk early)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with fl.Monitor(model, opt, preset=preset) as mon:
        for step, (x, y) in enumerate(batches):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            mon.record(loss)
            if step in read_after:
                mon.history  # noqa: B018
        return mon.history


@pytest.mark.parametrize("sizes", [None, [16] * 40 + [7] + [16] * 30, [16, 12, 9, 16, 5, 14] * 12],
                         ids=["equal-batches", "a-short-batch-mid-chunk", "sizes-vary-every-step"])
def test_every_column_matches_a_hand_computed_reference(sizes):
    torch.manual_seed(0)
    model = TwoLayer()
    with torch.no_grad():
        model.fc1.weight.mul_(4)  # some saturation
        model.fc2.bias.fill_(-0.3)  # some dead units
    reference_model = TwoLayer()
    reference_model.load_state_dict(model.state_dict())
    batches = _batches(71, sizes)
    history = _monitored_rows(model, batches, lr=0.5)
    expected = _reference_rows(reference_model, batches, lr=0.5)
    assert len(history) == len(expected)
    for i, row in enumerate(expected):
        for column, value in row.items():
            got = history[column].iloc[i]
            if math.isnan(value):
                assert math.isnan(got), (i, column)
            else:
                assert got == pytest.approx(value, rel=2e-5, abs=1e-7), (i, column, got, value)
    assert history["step"].tolist() == list(range(len(expected)))
    assert (history["nonfinite"] == 0).all() and (history["input_nonfinite"] == 0).all()


def test_a_model_it_never_saw_gets_every_column_and_keeps_no_hook():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    mon = fl.Monitor(model, opt)
    for _ in range(5):
        x = torch.randn(10, 6)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        mon.record(loss.item())
    history = mon.history
    mon.close()
    mon.close()  # closing twice is harmless
    names = [n for n, _ in model.named_parameters()]
    expected = list(GLOBAL_COLUMNS) + list(INPUT_COLUMNS) + [
        f"{kind}/{n}" for kind in ("grad_norm", "weight_norm", "update_ratio") for n in names
    ] + ["act_mean/1", "act_std/1", "saturated_frac/1", "act_mean/3", "act_std/3",
         "dead_frac/3"]
    assert set(expected) <= set(history.columns)
    # a regression loss: its output gradient tells neither the loss's weight, nor its
    # targets' softness, nor their labels, which a softmax cross-entropy's does (NaN);
    # a model with no dropout or BatchNorm computes the same in either mode
    unread = ["loss_weight", "output_soft_target_frac", "output_ce", "output_ce_twice",
              "output_label_purity", "output_sigmoid_logits", "output_label_mean",
              "output_label_std", "train_mode"]
    assert history[unread].isna().all().all()
    measured = [c for c in expected if c not in unread]
    assert history[measured].iloc[1:].notna().all().all()
    assert not opt._optimizer_step_pre_hooks
    assert not model._forward_pre_hooks and not model[1]._forward_hooks
    assert not model[3]._forward_hooks


def test_forgotten_zero_grad_shows_accumulating_gradients():
    torch.manual_seed(2)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    with fl.Monitor(model, opt) as mon:
        for _ in range(20):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()  # never zeroed: gradients add up
            opt.step()
            mon.record(loss)
    h = mon.history
    # Same batch, tiny steps: each gradient is nearly the previous one plus itself.
    assert h["grad_norm"].iloc[-1] > 15 * h["grad_norm"].iloc[0]
    assert h["grad_cosine"].iloc[1:].min() > 0.99


def test_float16_model_nan_and_unused_parameters_are_reported_not_raised():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).half()
    unused = nn.Parameter(torch.ones(3, dtype=torch.float16))
    model.register_parameter("unused", unused)
    frozen = model[0].bias
    frozen.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    with fl.Monitor(model, opt) as mon:
        for step in range(4):
            x = torch.randn(8, 4).half()
            if step == 2:
                x[0, 0] = float("nan")
            opt.zero_grad()
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            mon.record(loss)
    h = mon.history
    assert "grad_norm/0.bias" not in h.columns  # frozen: not trainable, not monitored
    assert (h["grad_norm/unused"].iloc[:2] == 0).all()  # no gradient reaches it
    assert h["input_nonfinite"].tolist()[:3] == [0, 0, 1]
    assert h["nonfinite"].iloc[2] >= 1 and math.isnan(h["loss"].iloc[2])
    assert h["grad_norm"].iloc[:2].map(math.isfinite).all()


def test_gradients_zeroed_right_after_step_are_still_seen():
    torch.manual_seed(4)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        for _ in range(3):
            loss = model(torch.randn(5, 3)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)  # before record: the monitor kept a copy
            mon.record(loss)
    h = mon.history
    assert (h["grad_norm"] > 0).all()
    assert h["update_norm"].tolist() == pytest.approx((0.1 * h["grad_norm"]).tolist())


def test_economy_preset_measures_every_tenth_step_and_agrees_with_full():
    torch.manual_seed(5)
    batches = _batches(35)
    model = TwoLayer()
    twin = TwoLayer()
    twin.load_state_dict(model.state_dict())
    full = _monitored_rows(model, batches, lr=0.5)
    economy = _monitored_rows(twin, batches, lr=0.5, preset="economy")
    assert list(economy.columns) == list(GLOBAL_COLUMNS)
    observed = economy["step"] % 10 == 0
    assert economy.loc[~observed, "grad_norm"].isna().all()
    assert economy["loss"].tolist() == full["loss"].tolist()
    for column in ("grad_norm", "weight_norm", "update_ratio", "grad_cosine", "zero_grad_frac"):
        got = economy.loc[observed, column].iloc[1:].to_numpy()
        want = full.loc[observed, column].iloc[1:].to_numpy()
        assert got == pytest.approx(want, rel=1e-5), column


def test_batches_of_varying_shapes_compute_the_gradients_once_per_chunk(monkeypatch):
    """A loop that pads each batch to its own longest sequence changes the forward
    tensors' shapes at every step.  Each forward instrument computes the steps that
    stack together; the gradient and weight buffers, whose shape never changes, are
    computed once per chunk (before, every shape change computed a chunk of one step,
    the whole cost of a chunk for every step)."""
    calls = []
    compute = instruments.Parameters.compute
    monkeypatch.setattr(instruments.Parameters, "compute",
                        lambda self, slots: calls.append(len(slots)) or compute(self, slots))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(20, 8), nn.Tanh(), nn.Linear(8, 20))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    lengths = ([5, 9, 7, 5, 12, 9] * 30)[:2 * CHUNK_STEPS + 2]
    with fl.Monitor(model, opt) as mon:
        for length in lengths:
            tokens = torch.randint(0, 20, (4, length), generator=gen)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(tokens).transpose(1, 2), tokens)
            loss.backward()
            opt.step()
            mon.record(loss)
        history = mon.history
    assert calls == [CHUNK_STEPS, CHUNK_STEPS, 2]
    assert history["batch_size"].eq(4).all() and history["grad_norm"].notna().all()
    assert history["act_mean/1"].notna().all() and history["output_std"].notna().all()


def test_economy_cosine_compares_with_the_previous_step_across_a_chunk_end():
    """Economy keeps step 19's gradient for step 20's cosine; a chunk computed in
    between (here: the history read after step 19) must not lose it."""
    torch.manual_seed(5)
    batches = _batches(25)
    model, twin = TwoLayer(), TwoLayer()
    twin.load_state_dict(model.state_dict())
    full = _monitored_rows(model, batches, lr=0.5)
    economy = _monitored_rows(twin, batches, lr=0.5, preset="economy", read_after=(19,))
    assert economy["grad_cosine"][20] == pytest.approx(full["grad_cosine"][20], rel=1e-5)


def test_record_takes_floats_and_extra_columns_and_rejects_nonsense():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = fl.Monitor(model, opt)
    for loss in (1.5, torch.tensor(0.5)):
        opt.step()
        mon.record(loss, **({"val_loss": 0.7} if loss == 1.5 else {}))
    h = mon.history
    assert h["loss"].tolist() == [1.5, 0.5]
    assert h["val_loss"].iloc[0] == 0.7 and math.isnan(h["val_loss"].iloc[1])
    with pytest.raises(TypeError, match="tensor or a number"):
        mon.record("low")
    with pytest.raises(ValueError, match="scalar"):
        mon.record(torch.ones(3))
    with pytest.raises(ValueError, match="preset"):
        fl.Monitor(model, opt, preset="deluxe")
    with pytest.raises(TypeError, match="optimizer"):
        fl.Monitor(model, "sgd")


class _Affine(nn.Module):
    """x * weight + bias, unit by unit: a wide layer without a width x width matrix."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width))
        self.bias = nn.Parameter(torch.randn(width) - 1)  # some units never fire

    def forward(self, x):
        return x * self.weight + self.bias


def test_large_activations_are_read_on_sampled_units_that_match_a_reference():
    """Outputs with more than `UNITS_WHOLE` units per sample are read on a sample of
    their units: the columns match a float64 reference on exactly those units, step by
    step, and stay within sampling error of the reference on the whole output."""
    torch.manual_seed(0)
    width = 4 * instruments.UNITS_WHOLE  # 16384 units of each sample: sampled
    model = nn.Sequential(nn.Linear(3, width), nn.Sigmoid(), _Affine(width), nn.ReLU(),
                          nn.Linear(width, 1))
    with torch.no_grad():
        model[0].weight.mul_(4)  # some saturation
    units = instruments.sample_units(torch.arange(40 * width).reshape(40, width))[0]
    assert len(units) == instruments.UNITS_READ
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon, sampled, whole, sig_units, out_units = fl.Monitor(model, opt), [], [], [], []
    for x, y in _batches(5, [40] * 5):
        opt.zero_grad()
        sig = torch.sigmoid(model[0](x)).detach().double()
        out = torch.relu(model[2](sig.float())).detach().double()
        sig_units.append(sig.mean(0))
        out_units.append(out.mean(0))
        for expected, s, o in ((sampled, sig[:, units], out[:, units]), (whole, sig, out)):
            expected.append({
                "act_mean/1": s.mean().item(),
                "act_std/1": s.std(unbiased=False).item(),
                "saturated_frac/1": ((s < 0.01) | (s > 0.99)).double().mean().item(),
                "act_mean/3": o.mean().item(),
                "dead_frac/3": (o.amax(0) == 0).double().mean().item()})
        loss = ((model(x) - y[:, :1]) ** 2).mean()
        loss.backward()
        opt.step()
        mon.record(loss)
    history = mon.history
    mon.close()
    assert 0 < history["dead_frac/3"].iloc[0] < 1 and history["saturated_frac/1"].iloc[0] > 0
    for i, (on_sample, on_all) in enumerate(zip(sampled, whole, strict=True)):
        for column, value in on_sample.items():
            assert history[column].iloc[i] == pytest.approx(value, rel=1e-5, abs=1e-7), column
        # 1024 of 16384 units, read without replacement: a mean over them is off the
        # whole output's by its standard error, std(unit means) * sqrt((1 - f) / 1024)
        # with f = 1/16, and a share's is below sqrt(0.25 * (1 - f) / 1024) = 0.015; 4
        # of each
        for column, per_unit in (("act_mean/1", sig_units), ("act_mean/3", out_units),
                                 ("saturated_frac/1", None), ("dead_frac/3", None)):
            error = (per_unit[i].std().item() if per_unit else 0.5) * math.sqrt(
                (1 - len(units) / width) / len(units))
            assert abs(history[column].iloc[i] - on_all[column]) <= 4 * error, column


def test_sampled_units_are_runs_spread_over_every_channel():
    """A convolution's output (64, 32, 32, 32): the same units of every sample, in runs
    of neighbours, from every channel, chosen by a sample's shape alone (a short batch
    reads the same ones: the ranks of a distributed run merge them unit by unit)."""
    y = torch.arange(64 * 32 * 32 * 32, dtype=torch.float32).reshape(64, 32, 32, 32)
    state = torch.random.get_rng_state()
    sample = instruments.sample_units(y)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert sample.shape == (64, instruments.UNITS_READ)
    units = sample[0].long()
    assert torch.equal(sample - units, (torch.arange(64.0)[:, None] * 32**3).expand_as(sample))
    runs = units.reshape(-1, instruments.UNIT_RUN)
    assert torch.equal(runs - runs[:, :1], torch.arange(instruments.UNIT_RUN).expand_as(runs))
    assert len(set((units // (32 * 32)).tolist())) == 32  # every channel
    assert torch.equal(instruments.sample_units(y), sample)
    assert torch.equal(instruments.sample_units(y[:7]), sample[:7])  # a short last batch
    wide = torch.randn(64, instruments.UNITS_WHOLE)  # 2^18 entries, but units enough
    assert instruments.sample_units(wide) is wide


@pytest.mark.parametrize("kind", ["sigmoid", "tanh", "relu"])
def test_reducing_in_the_hook_gives_the_columns_of_keeping_the_output(kind):
    """The two ways an Activations instrument handles an output agree, the sums a
    distributed merge needs included."""
    gen = torch.Generator().manual_seed(0)
    outputs = [torch.randn(8, 4, 5, generator=gen) * 3 for _ in range(3)]
    outputs = [{"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}[kind](y - 1)
               for y in outputs]
    results = []
    for keep in (10**9, 0):
        instrument = instruments.Activations("a", kind, keep_entries=keep)
        instrument.partials = True
        payloads = []
        for y in outputs:
            instrument.see(y, False)
            payloads.append(instrument.take(False))
        results.append(instrument.compute(payloads))
    kept, reduced = results
    assert kept.keys() == reduced.keys()
    for column in kept:
        assert np.allclose(np.array(reduced[column], dtype=float),
                           np.array(kept[column], dtype=float), rtol=1e-6), column


def _input_columns_of_a_loop(monkeypatch, keep_entries):
    """The input columns of a loop with micro-batches, a constant feature, evaluations
    and finally a NaN entry, with inputs above `keep_entries` reduced in their hook."""
    monkeypatch.setattr(instruments, "KEEP_ENTRIES", keep_entries)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    scale = torch.tensor([[1.0, 20.0, 0.5], [3.0, 1.0, 0.0]])  # the last feature constant
    with fl.Monitor(model, opt) as mon:
        for step in range(40):
            opt.zero_grad()
            parts = 2 if step % 5 == 0 else 1  # some steps in two micro-batches
            for _ in range(parts):
                x = torch.randn(16, 2, 3, generator=gen) * scale + 4
                if step == 39:
                    x[3, 0, 1] = float("nan")
                (model(x).square().mean() / parts).backward()
            opt.step()
            if step % 7 == 0:
                with torch.no_grad():
                    model(torch.randn(32, 2, 3, generator=gen) * scale + 4 + step / 10)
            mon.record(0.0)
        return mon.history[list(INPUT_COLUMNS[:4]) + ["eval_input_shift"]]


def test_large_inputs_reduced_in_their_hook_give_the_columns_of_keeping_them(monkeypatch):
    """A CPU batch above `KEEP_ENTRIES` is reduced in the forward pre-hook instead of
    copied: every input column, micro-batches, a constant feature, evaluations and NaN
    entries included, reads what keeping the copies reads."""
    kept = _input_columns_of_a_loop(monkeypatch, 10**9)
    reduced = _input_columns_of_a_loop(monkeypatch, 0)
    assert kept["batch_size"].iloc[0] == 32 and kept["input_nonfinite"].iloc[-1] == 1
    assert kept["eval_input_shift"].notna().sum() == 6
    pd_testing = pytest.importorskip("pandas").testing
    pd_testing.assert_frame_equal(reduced, kept, check_exact=False, rtol=1e-6)


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_a_history_read_between_step_and_record_changes_no_gradient_column(preset):
    """A loop may read `history` after `optimizer.step()` and before `record`: the chunk
    computed then must not take the step whose weights and gradients were just copied
    (full used to overwrite its weights-before with the weights after it, and economy
    copies each observed step straight into its chunk row).  Reads at observed steps,
    at the step before one (economy's previous gradient) and at a chunk's start."""
    torch.manual_seed(0)
    model, twin = TwoLayer(), TwoLayer()
    twin.load_state_dict(model.state_dict())
    batches = _batches(90)

    def rows(model, read_at):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        with fl.Monitor(model, opt, preset=preset) as mon:
            for step, (x, y) in enumerate(batches):
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                if step in read_at:
                    mon.history  # noqa: B018
                mon.record(loss)
            return mon.history

    read = rows(model, (0, 9, 10, 30, 49, 64, 65, 70))
    unread = rows(twin, ())
    gradient = [c for c in unread.columns if c.split("/")[0] in (
        "grad_norm", "weight_norm", "update_norm", "update_ratio", "grad_cosine", "zero_grad_frac")]
    assert unread["grad_norm"].notna().sum() >= 9
    pd.testing.assert_frame_equal(read[gradient], unread[gradient], check_exact=True)


def test_a_loss_read_later_gives_the_same_history(monkeypatch):
    """On an accelerator `record` keeps the loss as a tensor and reads a whole chunk at
    once (one device synchronisation per chunk, not per step); the history is the
    same as reading each loss at once.  Simulated on the CPU, mid-chunk reads included."""
    torch.manual_seed(0)
    model = TwoLayer()
    twin = TwoLayer()
    twin.load_state_dict(model.state_dict())
    batches = _batches(45)
    now = _monitored_rows(model, batches, lr=0.5, read_after=(3,))
    from failurelab.telemetry import misuse
    monkeypatch.setattr(misuse, "read_later", lambda loss: True)
    later = _monitored_rows(twin, batches, lr=0.5, read_after=(3,))
    assert later["loss"].tolist() == now["loss"].tolist()
    assert later.drop(columns="loss").equals(now.drop(columns="loss"))


def test_a_copy_of_the_monitored_model_trains_without_the_monitor():
    """An EMA or teacher made with `copy.deepcopy(model)`, or a pickled model, gets
    hooks that do nothing: copying works, and the copy's passes do not reach the history."""
    import copy
    import io
    import pickle

    torch.manual_seed(0)
    model = TwoLayer()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    mon = fl.Monitor(model, opt)
    ema = None
    for step, (x, y) in enumerate(_batches(8)):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if step == 3:
            ema = copy.deepcopy(model)
            torch.save(model, io.BytesIO())
            unpickled = pickle.loads(pickle.dumps(model))
        if ema is not None:  # the copy's pass, with a graph, between step and record
            ema(torch.full((5, 3), 1e4)).sum().backward()
        mon.record(loss)
    h = mon.history
    mon.close()
    assert not mon.stopped
    assert (h["batch_size"] == 16).all() and (h["input_absmax"] < 1e3).all()
    assert torch.equal(unpickled(x), model.__class__.forward(unpickled, x))
    assert all(p.grad is not None for p in ema.parameters())


def test_ranks_with_uneven_batches_merge_a_sampled_activation_unit_by_unit():
    """Two ranks whose batches differ (12 and 9 samples, a short last batch) read the
    same units of a wide ReLU output, so the merge finds a unit dead only where no
    sample of either rank fires it: the dead share of the concatenated batch."""
    from failurelab.telemetry import distributed

    gen = torch.Generator().manual_seed(0)
    width = 2 * instruments.UNITS_WHOLE
    bias = torch.randn(width, generator=gen) - 1.5  # units that rarely fire
    halves = [torch.relu(torch.randn(n, width, generator=gen) + bias) for n in (12, 9)]
    parts = []
    for y in halves:
        instrument = instruments.Activations("r", "relu")
        instrument.partials = True
        instrument.see(y, False)
        values = instrument.compute([instrument.take(False)])
        parts.append({"loss": 1.0, "nonfinite": 0.0, "_loss_nonfinite": 0.0,
                      "batch_size": float(len(y)), **{k: v[0] for k, v in values.items()}})
    merged = distributed.merge([[parts[0]], [parts[1]]])[0]
    units = instruments.sample_units(torch.cat(halves))
    assert units.shape[1] == instruments.UNITS_READ
    expected = (units.amax(0) == 0).double().mean().item()
    assert 0 < expected < 1
    assert merged["dead_frac/r"] == pytest.approx(expected, abs=1e-12)
