"""The Monitor's schedule: which steps each preset reads (docs/engineers.md, "What each
preset sees").  Full reads forward tensors on steps 0, k, 2k, ... (k = forward_every) and
the same numbers there as a monitor reading every step; the other rows hold NaN, and
`forward_observed` says which are which."""

import math

import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.telemetry import monitor
from failurelab.telemetry.monitor import FORWARD_EVERY

STEPS = 2 * monitor.CHUNK_STEPS + 5  # two whole chunks and a part
FORWARD = ("input_absmax", "input_std_ratio", "batch_size", "output_std", "output_grad_min",
           "loss_weight", "output_backwards", "output_ce", "act_mean/sig", "act_std/sig",
           "saturated_frac/sig", "act_mean/relu", "dead_frac/relu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.sig = nn.Linear(5, 8), nn.Sigmoid()
        self.fc2, self.relu = nn.Linear(8, 8), nn.ReLU()
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(self.relu(self.fc2(self.sig(self.fc1(x)))))


def _run(steps=STEPS, accumulate=1, evaluate_at=(), seed=0, model=None, **kwargs):
    torch.manual_seed(seed)
    model = model or Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(seed + 1)
    hooked = []  # forward hooks on the model's modules after each record
    with fl.Monitor(model, opt, **kwargs) as mon:
        for step in range(steps):
            opt.zero_grad()
            for _ in range(accumulate):
                x = torch.randn(8, 5, generator=g) * 3
                y = torch.randint(0, 3, (8,), generator=g)
                loss = nn.functional.cross_entropy(model(x), y) / accumulate
                loss.backward()
            opt.step()
            mon.record(loss)
            if step in evaluate_at:
                with torch.no_grad():
                    model(torch.randn(64, 5, generator=g) * 3 + 10)  # shifted: reads ~3
            hooked.append(sum(len(m._forward_hooks) for m in model.modules()))
        return mon.history, hooked


def test_forward_columns_are_read_on_the_schedule_and_equal_every_step_readings():
    every, _ = _run(forward_every=1)
    sampled, hooked = _run()
    assert every["loss"].equals(sampled["loss"])  # the hooks only read
    read = sampled["step"] % FORWARD_EVERY == 0
    assert sampled["forward_observed"].tolist() == read.astype(float).tolist()
    assert every["forward_observed"].eq(1).all()
    for column in FORWARD:
        assert sampled.loc[~read, column].isna().all(), column
        assert sampled.loc[read, column].tolist() == pytest.approx(
            every.loc[read, column].tolist(), rel=1e-6, abs=1e-9), column
    parameters = [c for c in every.columns if c.startswith(("grad_norm", "update_ratio"))]
    assert sampled[parameters].equals(every[parameters])  # read every step either way
    # the forward hooks are on the modules only for the steps the schedule reads
    assert hooked == [int(not (s + 1) % FORWARD_EVERY) * 3 for s in range(STEPS)]


def test_an_accumulated_step_reads_its_own_micro_batches_only():
    """The passes of unread steps never join a read step's batch."""
    h, _ = _run(accumulate=2)
    read = h[h["forward_observed"] == 1]
    assert read["batch_size"].eq(16).all() and read["output_backwards"].eq(2).all()


def test_evaluations_between_unread_steps_are_still_compared():
    at = (3, 8, 13)
    h, _ = _run(evaluate_at=at)
    shifted = h["eval_input_shift"]
    # an evaluation after step s is read at the next record
    assert shifted.notna().tolist() == [s - 1 in at for s in range(STEPS)]
    assert shifted.dropna().gt(2).all()  # inputs moved by ~3 training std


def test_a_large_model_reads_its_gradients_on_the_forward_schedule(monkeypatch):
    every, _ = _run(forward_every=1)
    monkeypatch.setattr(monitor, "PARAMETERS_EVERY_STEP", 100)  # the Net has 195 entries
    large, _ = _run()
    read = large["step"] % FORWARD_EVERY == 0
    for column in ("grad_norm", "weight_norm", "update_ratio", "grad_cosine", "grad_carried",
                   "output_std"):
        assert large.loc[~read, column].isna().all(), column
        values = large.loc[read & (large["step"] > 0), column]
        assert values.tolist() == pytest.approx(
            every.loc[values.index, column].tolist(), rel=1e-5), column


def test_economy_reads_a_forgotten_zero_grad_with_its_hook_attached_only_when_read():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    param = list(model.parameters())[-1]
    hooks = []
    with fl.Monitor(model, opt, preset="economy") as mon:
        for _ in range(40):
            nn.functional.cross_entropy(model(torch.randn(8, 5)), torch.zeros(8).long()).backward()
            opt.step()  # no zero_grad: every gradient carries the last one
            mon.record(0.0)
            hooks.append(len(param._backward_hooks or {}))
        h = mon.history
    assert h["grad_carried"].dropna().tolist() == [0.0, 1.0, 1.0, 1.0]  # steps 0, 10, 20, 30
    assert hooks == [int(not (s + 1) % 10) for s in range(40)]


def test_the_lab_reads_every_step():
    run = fl.run("dead_relu", steps=12)
    assert run.history["forward_observed"].eq(1).all()
    assert run.history["dead_frac/relu"].notna().all()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_forward_every_must_be_a_whole_number(bad):
    model = Net()
    with pytest.raises(ValueError, match="forward_every"):
        fl.Monitor(model, torch.optim.SGD(model.parameters(), lr=0.1), forward_every=bad)


def test_the_forward_quantities_read_the_observed_rows():
    """The diagnosis's forward quantities read the observed rows: the start is step 0's."""
    from failurelab.evidence import quantities as q

    every, _ = _run(forward_every=1)
    sampled, _ = _run()
    for name in ("saturation_start", "dead_start", "output_scale_start"):
        assert getattr(q, name)(sampled) == getattr(q, name)(every), name
    assert math.isfinite(q.dead_end(sampled)) and math.isfinite(q.saturation_median(sampled))


def test_a_step_whose_loss_is_not_finite_has_its_input_read():
    """NaN rows in the data are the first cause to rule out: a step the schedule does
    not read still has its input batch read when its loss comes out NaN."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        for step in range(6):
            x = torch.randn(8, 5)
            if step == 3:
                x[2, 1] = float("nan")
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), torch.zeros(8).long())
            loss.backward()
            opt.step()
            mon.record(loss)
        h = mon.history
    assert h["input_nonfinite"].iloc[0] == 0 and h["input_nonfinite"].iloc[3] == 1
    assert h["input_nonfinite"].iloc[1:3].isna().all()  # finite losses: not read
    assert h["forward_observed"].iloc[3] == 0 and math.isnan(h["output_std"].iloc[3])


def test_economy_short_record_path_keeps_what_the_long_path_keeps():
    """A CPU tensor loss on a step economy does not observe takes `record`'s short path;
    a float loss the long one.  Their rows must be the same, bit for bit, with a learning
    rate that changes and a model switched between modes."""
    def history(as_float: bool):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.2), nn.ReLU(), nn.Linear(8, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, 3, 0.5)
        g = torch.Generator().manual_seed(1)
        with fl.Monitor(model, opt, preset="economy") as mon:
            for step in range(45):
                model.train(step % 7 != 3)
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(torch.randn(8, 5, generator=g)),
                                                   torch.randint(0, 3, (8,), generator=g))
                loss.backward()
                opt.step()
                sched.step()
                mon.record(loss.item() if as_float else loss)
            return mon.history

    short, long = history(False), history(True)
    pd.testing.assert_frame_equal(short, long, check_exact=True)
    assert short["lr"].nunique() > 3 and short["train_mode"].nunique() == 2


def test_a_history_read_at_an_unobserved_economy_step_does_not_change_the_next_row():
    """Reading `history` computes the pending chunk; the next step (one economy does not
    observe) starts a new chunk.  Its row must be what it is without the read: NaN in
    the columns economy leaves out, not values the observed steps' path measures."""
    def history(read_at: set):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.2), nn.BatchNorm1d(8),
                              nn.ReLU(), nn.Linear(8, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        with fl.Monitor(model, opt, preset="economy") as mon:
            for step in range(35):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(torch.randn(8, 5, generator=g)),
                                                   torch.randint(0, 3, (8,), generator=g))
                loss.backward()
                opt.step()
                mon.record(loss)
                if step in read_at:
                    mon.history  # noqa: B018 - the read is the point
            return mon.history

    plain, read = history(set()), history({4, 12, 13})
    pd.testing.assert_frame_equal(plain, read, check_exact=True)
    # the rows after the reads are unobserved ones: the left-out columns stay NaN
    assert read.loc[[5, 13, 14], ["dropout_rate", "loss_scaled", "batchnorm_train"]].isna().all().all()
