"""The Monitor columns other tools rely on (lr, low precision, output distributions,
unoptimised parameters, skipped steps), each against a value computed by hand."""

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.evidence.quantities import measure
from failurelab.telemetry.monitor import MonitorWarning

# each step's arithmetic: every step's forward tensors are read (see conftest)
pytestmark = pytest.mark.usefixtures("every_forward")


def _train(model, opt, batches, loss_fn, *, scheduler=None, scaler=None, preset="full"):
    with fl.Monitor(model, opt, preset=preset) as mon:
        for x, y in batches:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            mon.record(loss)
            if scheduler is not None:
                scheduler.step()
        return mon.history


def _batches(n, d=4, b=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(b, d, generator=g), torch.randn(b, 3, generator=g)) for _ in range(n)]


def _mse(out, y):
    return ((out.float() - y) ** 2).mean()


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_lr_is_the_first_groups_rate_at_step_time(preset):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD([{"params": [model.weight], "lr": 0.1},
                           {"params": [model.bias], "lr": 7.0}])
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    h = _train(model, opt, _batches(23), _mse, scheduler=sched, preset=preset)
    expected = [0.1 * 0.5 ** (i // 5) for i in range(23)]  # the rate each step used
    assert h["lr"].tolist() == pytest.approx(expected, rel=1e-12)


def test_an_lr_passed_to_record_wins_over_the_measured_one():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = fl.Monitor(model, opt)
    model(torch.ones(3, 2)).sum().backward()
    opt.step()
    mon.record(1.0, lr=0.25)
    assert mon.history["lr"].tolist() == [0.25]


def test_param_lowp_frac_counts_half_and_bfloat16_entries():
    torch.manual_seed(1)

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 6)  # 30 float32 entries
            self.b = nn.Linear(6, 3).to(torch.bfloat16)  # 21 bfloat16 entries

        def forward(self, x):
            return self.b(self.a(x).to(torch.bfloat16))

    model = Mixed()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    h = _train(model, opt, _batches(3), _mse)
    assert h["param_lowp_frac"].tolist() == [21 / 51] * 3
    model32 = nn.Linear(4, 3)
    h32 = _train(model32, torch.optim.SGD(model32.parameters(), lr=0.01), _batches(2), _mse)
    assert h32["param_lowp_frac"].tolist() == [0.0, 0.0]


class _Head(nn.Module):
    """Logits for some rows, softmax or log-softmax for others: a known mixture."""

    def __init__(self, kind_of_row):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.kind_of_row = kind_of_row

    def forward(self, x):
        z = self.fc(x)
        rows = [z[i].softmax(-1) if k == "p" else z[i].log_softmax(-1) if k == "l" else z[i]
                for i, k in enumerate(self.kind_of_row)]
        return torch.stack(rows)


def _reference_fractions(out):
    rows = out.detach().double().numpy()
    prob = [(r.min() >= 0) and (r.max() <= 1) and abs(r.sum() - 1) <= 1e-3 for r in rows]
    logp = [(r.max() <= 0) and abs(np.exp(r).sum() - 1) <= 1e-3 for r in rows]
    return float(np.mean(prob)), float(np.mean(logp))


def test_output_prob_and_logprob_fractions_match_a_row_by_row_reference():
    torch.manual_seed(2)
    model = _Head("ppplllzz")  # 3 probability rows, 3 log-probability rows, 2 logits
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = _batches(5)
    outs = []
    model.register_forward_hook(lambda m, a, out: outs.append(out.detach().clone()))
    h = _train(model, opt, batches, _mse)
    for i, out in enumerate(outs):
        prob, logp = _reference_fractions(out)
        assert h["output_prob_frac"].iloc[i] == prob
        assert h["output_logprob_frac"].iloc[i] == logp
    assert 0 < h["output_prob_frac"].iloc[0] < 1 and 0 < h["output_logprob_frac"].iloc[0] < 1


def test_output_nonfinite_counts_nan_and_inf_in_the_output():
    torch.manual_seed(3)

    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.calls = 0

        def forward(self, x):
            out = self.fc(x)
            self.calls += 1
            if self.calls == 3:  # step 2: two NaN and one Inf entries
                out = out.clone()
                out[0, 0] = out[1, 2] = float("nan")
                out[4, 1] = float("inf")
            return out

    model = Broken()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    h = _train(model, opt, _batches(4), lambda out, y: _mse(out.nan_to_num(), y))
    assert h["output_nonfinite"].tolist() == [0, 0, 3, 0]


def test_unoptimized_params_counts_parameters_with_gradients_outside_the_optimizer():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model[0].parameters(), lr=0.01)  # forgot the second layer
    h = _train(model, opt, _batches(3), _mse)
    # model[2].weight and .bias, from the second look on: the first has nothing to
    # compare with, to tell a parameter left out from one another optimizer trains
    assert h["unoptimized_params"].tolist() == [0, 2, 2]
    full = nn.Linear(4, 3)
    h = _train(full, torch.optim.SGD(full.parameters(), lr=0.01), _batches(2), _mse)
    assert h["unoptimized_params"].tolist() == [0, 0]


class GeneratorAndCritic(nn.Module):
    """A GAN as one module (as a LightningModule holds both networks): the critic is
    trained by an optimizer of its own, and the generator's loss passes through it."""

    def __init__(self):
        super().__init__()
        self.generator, self.critic = nn.Linear(4, 3), nn.Linear(3, 1)

    def forward(self, x):
        return self.generator(x)


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_parameters_another_optimizer_trains_are_not_counted_as_left_out(preset):
    """The critic's parameters get gradients from the generator's loss and sit outside
    the generator's optimizer, but they move at every step: not left out."""
    torch.manual_seed(0)
    model = GeneratorAndCritic()
    opt_g = torch.optim.Adam(model.generator.parameters(), lr=1e-3)
    opt_c = torch.optim.Adam(model.critic.parameters(), lr=1e-3)
    with fl.Monitor(model, opt_g, preset=preset) as mon:
        for x, y in _batches(24):
            opt_c.zero_grad()
            fake, real = model.critic(model(x).detach()), model.critic(y)
            critic_loss = (nn.functional.softplus(fake) + nn.functional.softplus(-real)).mean()
            critic_loss.backward()
            opt_c.step()
            opt_g.zero_grad()
            loss = -model.critic(model(x)).mean()
            loss.backward()  # fills the critic's .grad too
            opt_g.step()
            mon.record(loss)
    h = mon.history
    assert model.critic.weight.grad is not None  # the premise: gradients outside opt_g
    assert h["unoptimized_params"].max() == 0
    assert fl.diagnose(h).top != "params_not_in_optimizer"


def test_a_failing_look_at_the_left_out_parameters_counts_them_as_before(monkeypatch):
    """The sums that tell a moved parameter from a left-out one run inside the user's
    loop: if they fail, every left-out tensor with a gradient is counted, nothing raised."""
    def broken(params):
        raise RuntimeError("simulated: a parameter on a device that cannot be read")
    monkeypatch.setattr("failurelab.telemetry.monitor._sums", broken)
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model[0].parameters(), lr=0.01)
    h = _train(model, opt, _batches(3), _mse)
    assert h["unoptimized_params"].tolist() == [2, 2, 2]


def test_accumulated_micro_batches_are_one_step_batch():
    """Two micro-batches per step: a NaN row in the first one counts, and the batch is
    what the optimizer steps on (16 rows), not the last micro-batch (8)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = _batches(6)
    poisoned = batches[2][0].clone()
    poisoned[1, 0] = float("nan")
    with fl.Monitor(model, opt) as mon:
        for step in range(3):
            opt.zero_grad()
            for x, y in batches[2 * step:2 * step + 2]:
                x = poisoned if x is batches[2][0] else x
                (_mse(model(x), y) / 2).backward()
            opt.step()
            mon.record(0.0)
    h = mon.history
    assert h["batch_size"].tolist() == [16, 16, 16]
    assert h["input_nonfinite"].tolist() == [0, 1, 0]


@pytest.mark.parametrize("how", ["scaler", "disabled scaler", "no scaler"])
def test_steps_taken_by_an_enabled_grad_scaler_are_marked(how):
    torch.manual_seed(5)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = None if how == "no scaler" else torch.amp.GradScaler("cpu",
                                                                  enabled=how == "scaler")
    history = _train(model, opt, _batches(4), _mse, scaler=scaler)
    assert history["loss_scaled"].tolist() == [float(how == "scaler")] * 4


@pytest.mark.parametrize("enabled", [True, False])
def test_a_scaler_given_to_the_monitor_answers_without_the_frame_walk(enabled, monkeypatch):
    from failurelab.telemetry import instruments

    def no_frames():
        raise AssertionError("the frame walk ran although the scaler was given")

    monkeypatch.setattr(instruments, "stepped_by_grad_scaler", no_frames)
    torch.manual_seed(5)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=enabled)
    with fl.Monitor(model, opt, scaler=scaler) as mon:
        for x, y in _batches(4):
            opt.zero_grad()
            scaler.scale(_mse(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
            mon.record(0.0)
    assert mon.history["loss_scaled"].tolist() == [float(enabled)] * 4
    assert not mon.stopped


def test_a_scaler_that_is_not_one_is_a_clear_error():
    model = nn.Linear(4, 3)
    with pytest.raises(TypeError, match="GradScaler"):
        fl.Monitor(model, torch.optim.SGD(model.parameters(), lr=0.1), scaler="amp")


def test_grad_scaler_skips_are_marked_and_are_not_faults():
    torch.manual_seed(5)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    # A scale so large that the first scaled gradients overflow float32: GradScaler skips
    # those steps and halves the scale until the gradients are finite.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127)
    scales, batches = [], _batches(30)
    with fl.Monitor(model, opt) as mon:
        for x, y in batches:
            opt.zero_grad()
            loss = 1e4 * _mse(model(x), y)
            scaler.scale(loss).backward()
            before = scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale() < before)  # the scale drops only on a skip
            mon.record(loss)
    h = mon.history
    skipped = np.array(scales)
    assert skipped[:2].all() and not skipped[-3:].any()  # the setting does what it should
    assert h["step_skipped"].tolist() == skipped.astype(float).tolist()
    assert (h["nonfinite"] == 0).all()  # the losses were finite; the skips are not faults
    assert h.loc[skipped, "update_ratio"].isna().all()
    assert h.loc[skipped, "update_norm"].isna().all()
    assert h.loc[skipped, "update_ratio/weight"].isna().all()
    assert h.loc[~skipped, "update_ratio"].map(math.isfinite).all()
    assert not [a for a in mon.alerts() if a.kind == "nonfinite"]
    assert h.loc[skipped, "loss_scaled"].isna().all()  # no step: nothing to say
    assert (h.loc[~skipped, "loss_scaled"] == 1).all()


def test_dropout_rate_is_the_largest_active_drop_probability():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.4), nn.ReLU(), nn.Dropout1d(0.2),
                          nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = _batches(4)
    with fl.Monitor(model, opt) as mon:
        for i, (x, y) in enumerate(batches):
            model.train(i < 2)  # the last two steps in eval mode: no dropout acts
            opt.zero_grad()
            _mse(model(x), y).backward()
            opt.step()
            mon.record(_mse(model(x), y))
    assert mon.history["dropout_rate"].tolist() == pytest.approx([0.4, 0.4, 0.0, 0.0])


def test_a_model_without_dropout_records_zero():
    model = nn.Linear(4, 3)
    h = _train(model, torch.optim.SGD(model.parameters(), lr=0.01), _batches(3), _mse)
    assert (h["dropout_rate"] == 0).all()


def _carried(zero: str, *, steps=12, accum=1, clip=0.0, set_to_none=True, scaler=False,
             preset="full"):
    """grad_carried of a small loop that zeroes its gradients `zero`: "each" step before
    the forward, "after" each step, "epoch" (every 4th step) or "never"."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    amp = torch.amp.GradScaler("cpu", enabled=scaler)
    g = torch.Generator().manual_seed(1)
    with fl.Monitor(model, opt, preset=preset) as mon:
        for step in range(steps):
            if zero == "each" or (zero == "epoch" and step % 4 == 0):
                opt.zero_grad(set_to_none=set_to_none)
            for _ in range(accum):
                x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
                amp.scale(nn.functional.cross_entropy(model(x), y) / accum).backward()
            if clip:
                amp.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            amp.step(opt)
            amp.update()
            if zero == "after":
                opt.zero_grad()
            mon.record(1.0)
        return mon.history["grad_carried"].tolist()


@pytest.mark.parametrize("habits", [{}, {"set_to_none": False}, {"accum": 3}, {"clip": 1e-3},
                                    {"scaler": True}])
@pytest.mark.parametrize("zero", ["each", "after"])
def test_a_loop_that_zeroes_every_step_carries_no_gradient_over(zero, habits):
    assert _carried(zero, **habits) == [0.0] * 12


@pytest.mark.parametrize("zero, observed", [("each", 0.0), ("never", 1.0)])
def test_economy_reads_carried_gradients_on_the_steps_it_observes_only(zero, observed):
    carried = _carried(zero, preset="economy")
    assert carried[10] == observed and carried[0] == 0.0  # step 0 starts from None
    assert all(math.isnan(v) for i, v in enumerate(carried) if i % 10)


@pytest.mark.parametrize("habits", [{}, {"accum": 2}, {"clip": 1e-3}, {"set_to_none": False}])
def test_a_forgotten_zero_grad_carries_every_steps_gradient_into_the_next(habits):
    assert _carried("never", **habits) == [0.0] + [1.0] * 11  # step 0 starts from None


def test_zeroing_once_per_epoch_carries_into_the_other_steps_of_the_epoch():
    assert _carried("epoch") == [0.0, 1.0, 1.0, 1.0] * 3


def test_a_second_loss_before_zeroing_does_not_count_as_carried():
    """A GAN-style loop: a first backward reaches the parameter before the loop zeroes
    its gradients for the loss it steps on; the step still starts from empty."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        for _ in range(6):
            model(torch.randn(4, 3)).pow(2).mean().backward()  # e.g. a critic's loss
            opt.zero_grad()
            loss = model(torch.randn(4, 3)).sum()
            loss.backward()
            opt.step()
            mon.record(loss)
        assert mon.history["grad_carried"].tolist() == [0.0] * 6


@pytest.mark.parametrize("zero, carried", [(True, 0.0), (False, 1.0)])
@pytest.mark.parametrize("why", ["unused pooler", "backward(inputs=...)"])
def test_a_last_parameter_no_backward_reaches_hands_the_watch_to_one_it_does(why, zero, carried):
    """The watched parameter is the last trainable one; when it never gets a gradient
    (an unused pooler, a `backward(inputs=...)` that leaves it out) the first step reads
    NaN and the watch moves to the last parameter holding a gradient."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Linear(3, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    with fl.Monitor(model, opt) as mon:
        for step in range(8):
            if zero or step == 0:
                opt.zero_grad()
            x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
            if why == "unused pooler":  # the last layer is never called
                nn.functional.cross_entropy(model[:3](x), y).backward()
            else:
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward(inputs=list(model[:3].parameters()))
            opt.step()
            mon.record(1.0)
        h = mon.history
    assert math.isnan(h["grad_carried"].iloc[0])
    assert h["grad_carried"].iloc[1:].tolist() == [carried] * 7


def test_a_step_without_backward_reaching_the_watched_parameter_is_nan():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        opt.step()  # no backward at all
        mon.record(0.0)
        assert math.isnan(mon.history["grad_carried"].iloc[0])


def test_recording_each_micro_batch_still_reads_one_value_per_step():
    """A misuse (record after every micro-batch) must not make the later micro-batches
    look like a forgotten zero_grad: the finding belongs to the optimizer step."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(fl.MonitorWarning), fl.Monitor(model, opt) as mon:
        for _ in range(4):
            opt.zero_grad()
            for micro in range(3):
                loss = model(torch.randn(4, 3)).sum()
                loss.backward()
                if micro == 2:
                    opt.step()
                mon.record(loss)
        carried = mon.history["grad_carried"].tolist()
    assert carried[2::3] == [0.0] * 4  # the stepped rows
    assert all(math.isnan(v) for i, v in enumerate(carried) if i % 3 != 2)


def _weighed(accum=1, *, divide=True, steps=6, scaler=False, **loss_args):
    """(loss_weight, output_backwards, step_loss_weight) of a small classifier loop that
    accumulates `accum` micro-batches of 8 per step, dividing each loss by `accum` or
    not; `loss_args` go to cross_entropy (reduction, label_smoothing, weight, ...)."""
    from failurelab.evidence import quantities as q

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    amp = torch.amp.GradScaler("cpu", enabled=scaler)
    g = torch.Generator().manual_seed(1)
    with fl.Monitor(model, opt) as mon:
        for _ in range(steps):
            opt.zero_grad()
            for _ in range(accum):
                x, y = torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)
                loss = nn.functional.cross_entropy(model(x), y, **loss_args)
                amp.scale(loss / accum if divide else loss).backward()
            amp.step(opt)
            amp.update()
            mon.record(loss)
    h = mon.history
    return h["loss_weight"].to_numpy(), h["output_backwards"].to_numpy(), q.step_loss_weight(h)


@pytest.mark.parametrize("accum", [1, 2, 4])
def test_a_loss_averaged_over_the_step_weighs_its_samples_one_in_total(accum):
    """Each of k divided micro-batch means weighs its rows 1/k: the step weighs 1."""
    weight, backwards, step = _weighed(accum)
    np.testing.assert_allclose(weight, 1 / accum, rtol=1e-5)
    assert backwards.tolist() == [accum] * 6
    assert step == pytest.approx(1, rel=1e-5)


def test_micro_batch_means_never_divided_weigh_the_step_their_number():
    weight, backwards, step = _weighed(4, divide=False)
    np.testing.assert_allclose(weight, 1, rtol=1e-5)
    assert step == pytest.approx(4, rel=1e-5)


def test_a_loss_summed_over_the_batch_weighs_its_batch_size():
    weight, backwards, step = _weighed(reduction="sum")
    np.testing.assert_allclose(weight, 8, rtol=1e-5)
    assert backwards.tolist() == [1] * 6


@pytest.mark.parametrize("loss_args", [{"weight": torch.tensor([1.0, 5.0, 0.2])},
                                       {"ignore_index": 2}])
def test_class_weights_and_ignored_rows_keep_a_mean_at_one(loss_args):
    """A weighted mean divides by the batch's total weight; ignored rows get no
    gradient and no share of the mean: either way the rows weigh 1 in total."""
    weight, _, _ = _weighed(**loss_args)
    np.testing.assert_allclose(weight, 1, rtol=1e-5)


def test_soft_targets_never_raise_the_loss_weight():
    """Label smoothing's rows are read only where they look like a hard target's, and
    then low; distillation's T^2-scaled KL at temperature T (gradient T (p_T - q_T) per
    mean row) is not read at all, where divided by the plain softmax it read as T."""
    from failurelab.telemetry.probes import loss_weights

    weight, _, _ = _weighed(label_smoothing=0.1)
    assert not (weight > 1).any()
    torch.manual_seed(0)
    logits, teacher, T = torch.randn(1, 32, 5), torch.randn(32, 5) * 8, 2.0  # read 1.97
    z = logits.clone().requires_grad_()
    loss = nn.functional.kl_div(nn.functional.log_softmax(z[0] / T, -1),
                                nn.functional.softmax(teacher / T, -1),
                                reduction="batchmean") * T * T
    (g,) = torch.autograd.grad(loss, z)
    assert math.isnan(loss_weights(logits, g).item())


def test_the_loss_weight_is_not_measured_where_the_gradient_is_not_a_softmax_ce():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with fl.Monitor(model, opt) as mon:
        for _ in range(3):
            opt.zero_grad()
            loss = (model(torch.randn(8, 4)) - torch.randn(8, 3)).pow(2).mean()  # regression
            loss.backward()
            opt.step()
            mon.record(loss)
    assert mon.history["loss_weight"].isna().all()
    assert mon.history["output_backwards"].tolist() == [1] * 3


def test_a_gradient_penalty_is_not_counted_as_a_backward_pass():
    """autograd.grad of the loss with respect to the inputs (an input-gradient penalty)
    passes a gradient through the output but adds nothing to `.grad`: one backward a
    step, not two, or the step looks like undivided gradient accumulation."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        for _ in range(4):
            x = torch.randn(10, 8).requires_grad_()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), torch.randint(0, 3, (10,)))
            gx, = torch.autograd.grad(loss, x, create_graph=True)
            (loss + 0.1 * gx.pow(2).sum()).backward()
            opt.step()
            mon.record(loss)
    h = mon.history
    assert h["output_backwards"].tolist() == [1] * 4
    assert np.allclose(h["loss_weight"], 1.0, atol=0.01)  # the backward's gradient kept


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_around_the_model_reads_each_batch_once(reentrant):
    """checkpoint(model, x) recomputes the model's forward inside the backward pass (and
    the reentrant form runs the first one without a graph): the same batch, not a second
    micro-batch nor an evaluation.  Every column matches the plain loop's."""
    from torch.utils.checkpoint import checkpoint

    def run(checkpointed):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Sigmoid(), nn.Linear(16, 16), nn.ReLU(),
                              nn.Linear(16, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        with fl.Monitor(model, opt) as mon:
            for _ in range(12):
                x = torch.randn(10, 8, generator=g).requires_grad_(reentrant)
                y = torch.randint(0, 3, (10,), generator=g)
                opt.zero_grad()
                out = checkpoint(model, x, use_reentrant=reentrant) if checkpointed else model(x)
                loss = nn.functional.cross_entropy(out, y)
                loss.backward()
                opt.step()
                mon.record(loss)
        return mon.history

    plain, checkpointed = run(False), run(True)
    assert (checkpointed["batch_size"] == 10).all()
    assert checkpointed["eval_input_shift"].isna().all()
    pd.testing.assert_frame_equal(checkpointed, plain, rtol=1e-5)


class _MaskFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 3)

    def forward(self, batch):
        return self.net(batch["x"] * batch["mask"][:, None])


class _TimeFirst(nn.Module):
    """An ODE right-hand side, f(t, y): t is a 0-d time, y the batch."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 3)

    def forward(self, t, y):
        return self.net(y) * (1 + t)


@pytest.mark.parametrize("model, call", [
    (_MaskFirst, lambda m, x: m({"mask": torch.ones(len(x), dtype=torch.bool), "x": x})),
    (_TimeFirst, lambda m, x: m(torch.tensor(0.5), x)),
])
def test_the_input_batch_is_not_a_mask_or_a_scalar_given_first(model, call):
    torch.manual_seed(0)
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    xs = [torch.randn(10, 4) * 3 for _ in range(3)]
    with fl.Monitor(m, opt) as mon:
        for x in xs:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(call(m, x), torch.zeros(10, dtype=torch.long))
            loss.backward()
            opt.step()
            mon.record(loss)
    h = mon.history
    assert (h["batch_size"] == 10).all()
    assert h["input_absmax"].tolist() == pytest.approx([float(x.abs().max()) for x in xs])


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_complex_parameters_are_measured_whole(preset):
    """A complex tensor's norm counts both parts (its real view), and copying it raises
    no warning inside `optimizer.step()`."""
    torch.manual_seed(0)
    model = nn.Module()
    model.w = nn.Parameter(torch.randn(8, 4, dtype=torch.cfloat) * 0.3)
    model.b = nn.Parameter(torch.zeros(4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    grads, weights = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fl.Monitor(model, opt, preset=preset) as mon:
            for _ in range(3):
                x = torch.randn(10, 8, dtype=torch.cfloat, generator=g)
                opt.zero_grad()
                loss = (x @ model.w + model.b).abs().pow(2).mean()
                loss.backward()
                grads.append(float(torch.nn.utils.get_total_norm([model.w.grad, model.b.grad])))
                opt.step()
                mon.record(loss)
                weights.append(float(torch.cat([model.w.detach().abs().reshape(-1),
                                                model.b.detach()]).norm()))
    h = mon.history.dropna(subset=["grad_norm"])
    assert h["grad_norm"].tolist() == pytest.approx([grads[i] for i in h.index], rel=1e-5)
    assert h["weight_norm"].tolist() == pytest.approx([weights[i] for i in h.index], rel=1e-5)


def test_steps_taken_by_a_grad_scaler_are_left_out_of_the_step_loss_weight():
    """The scaler multiplies every gradient by its scale (2**16 at first)."""
    weight, _, step = _weighed(2, scaler=True)
    assert (weight > 1000).all() and math.isnan(step)


def test_steps_a_grad_scaler_skipped_are_left_out_of_the_loss_weight_too():
    """A skipped step (loss_scaled NaN) still holds the scaled gradient's weight."""
    import pandas as pd

    from failurelab.evidence import quantities as q

    h = pd.DataFrame({"step": [0, 1, 2], "loss_scaled": [math.nan, 1.0, 0.0],
                      "loss_weight": [65536.0, 65536.0, 1.0], "output_backwards": [
                          math.nan, 1.0, 1.0]})
    assert q.loss_weight_median(h) == 1.0 and q.step_loss_weight(h) == 1.0


def test_batchnorm_train_says_whether_a_batchnorm_layer_is_training_at_record():
    from failurelab.evidence import quantities as q

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with fl.Monitor(model, opt) as mon:
        for step in range(4):
            model.train(step < 3)  # the last row is recorded in eval mode
            opt.zero_grad()
            for _ in range(2):  # two micro-batches of 6: BatchNorm normalises over 6
                loss = nn.functional.cross_entropy(model(torch.randn(6, 4)),
                                                   torch.randint(0, 3, (6,))) / 2
                loss.backward()
            opt.step()
            mon.record(loss)
    h = mon.history
    assert h["batchnorm_train"].tolist() == [1, 1, 1, 0]
    assert q.batchnorm_batch_median(h) == 6
    assert math.isnan(q.batchnorm_batch_median(h.assign(batchnorm_train=0.0)))  # none training


def _mode_run(model, preset="full", steps=4, evaluate_after=1):
    """Train `model`; after step `evaluate_after` it is validated with model.eval()
    and never put back in training mode."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with fl.Monitor(model, opt, preset=preset) as mon:
        for step in range(steps):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(torch.randn(6, 4)),
                                               torch.randint(0, 3, (6,)))
            loss.backward()
            opt.step()
            mon.record(loss)
            if step == evaluate_after:
                model.eval()  # validation; model.train() forgotten
    return mon.history


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_train_mode_is_read_when_the_optimizer_steps(preset):
    from failurelab.evidence import quantities as q

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))
    h = _mode_run(model, preset, steps=12, evaluate_after=2)
    assert h["train_mode"].tolist() == [1, 1, 1] + [0] * 9  # every row: a cheap attribute
    assert q.eval_mode_share(h) == 9 / 12


@pytest.mark.parametrize("layer", [nn.BatchNorm1d(8), nn.GRU(8, 8, 2, dropout=0.1)])
def test_train_mode_counts_batchnorm_and_recurrent_dropout(layer):
    assert fl.Monitor(nn.Sequential(nn.Linear(4, 8), layer),
                      torch.optim.SGD(nn.Linear(1, 1).parameters(), 0.1))._moded


@pytest.mark.parametrize("layer", [nn.Dropout(0.0), nn.BatchNorm1d(8, track_running_stats=False),
                                   nn.LayerNorm(8)])
def test_train_mode_is_nan_for_a_model_the_mode_does_not_change(layer):
    """Dropout that drops nothing, BatchNorm without running statistics: eval mode
    computes the same thing, so the column has nothing to say."""
    from failurelab.evidence import quantities as q

    torch.manual_seed(0)
    h = _mode_run(nn.Sequential(nn.Linear(4, 8), layer, nn.Linear(8, 3)))
    assert h["train_mode"].isna().all() and q.eval_mode_share(h) == 0  # none that matters


def test_confident_rows_do_not_hide_the_loss_weight():
    """A row predicted with p = 1 to float precision has only ulps of gradient, whose
    rounding is a large share of their size; the weight is read from the other rows
    and still counts every row."""
    from failurelab.telemetry.probes import loss_weights

    logits = torch.randn(1, 32, 3)
    logits[0, :8] = torch.tensor([20.0, -5.0, -5.0])  # eight confident, correct rows
    y = torch.randint(0, 3, (32,))
    y[:8] = 0
    z = logits.clone().requires_grad_()
    (g,) = torch.autograd.grad(nn.functional.cross_entropy(z[0], y), z)
    assert loss_weights(logits, g).item() == pytest.approx(1, rel=1e-4)


def _evaluated(val_x, *, eval_mode=True, every=5, steps=20, features=4):
    """The `eval_input_shift` column of a small classifier loop trained on standard
    normal inputs that evaluates `val_x` under no_grad every `every` steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(features, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    with fl.Monitor(model, opt) as mon:
        for step in range(steps):
            x, y = torch.randn(64, features, generator=g), torch.randint(0, 3, (64,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if step % every == every - 1:
                if eval_mode:
                    model.eval()
                with torch.no_grad():
                    model(val_x)
                model.train()
            mon.record(loss)
    return mon.history["eval_input_shift"]


def _val(n=500, shift=0.0, features=4, seed=2):
    x = torch.randn(n, features, generator=torch.Generator().manual_seed(seed))
    x[:, 0] += shift
    return x


def test_evaluation_inputs_of_the_training_population_read_sampling_noise():
    """Training means over 20 x 64 samples, evaluation over 500: the largest of 4
    standardised mean differences stays within a few sqrt(1/500 + 1/1280) = 0.053."""
    shift = _evaluated(_val())
    assert shift.notna().tolist() == [step % 5 == 4 for step in range(20)]
    assert (shift.dropna() < 0.2).all()


@pytest.mark.parametrize("eval_mode", [True, False])
def test_a_feature_shifted_by_three_std_reads_three_in_train_or_eval_mode(eval_mode):
    """Under no_grad the pass is evaluation whether or not model.eval() was called."""
    shift = _evaluated(_val(shift=3.0), eval_mode=eval_mode).dropna()
    assert ((shift > 2.8) & (shift < 3.2)).all()


def test_raw_units_against_standardised_training_read_their_offset():
    """Validation that skipped the training scaler: amounts near 200000 against
    training inputs of mean 0 and std 1."""
    raw = _val() * 80_000 + 200_000
    assert (_evaluated(raw).dropna() > 1e5).all()


def test_evaluation_inputs_of_another_shape_are_not_compared():
    """A probe with more features than training (e.g. appended pads) says nothing about
    the training distribution: NaN, not a shift."""
    from failurelab.telemetry.shift import EvalInputs

    seen, model = EvalInputs(), nn.Linear(4, 1).train()
    seen.see(model, ((torch.randn(64, 4),), {}))
    with torch.no_grad():
        seen.see(model, ((torch.randn(16, 6),), {}))
        assert seen.take(False) is None
        seen.see(model, ((torch.randn(16, 4),), {}))
    assert seen.take(False) is not None


class _Wrapping(nn.Module):
    """One classifier; `kind` says how its output, or its input, is packaged."""

    def __init__(self, kind):
        super().__init__()
        self.kind, self.fc, self.head = kind, nn.Linear(4, 6), nn.Linear(6, 3)

    def forward(self, x, y=None):
        if self.kind == "dict input":
            x = x["features"]
        logits = self.head(torch.tanh(self.fc(x)))
        loss = nn.functional.cross_entropy(logits, y)
        if self.kind == "model output":  # HuggingFace: a dict subclass, its 0-d loss first
            return _ModelOutput(loss=loss, logits=logits)
        if self.kind == "tuple":
            return logits, torch.tanh(self.fc(x))
        if self.kind == "dataclass":
            return _Output(logits)
        return logits  # "tensor", "dict input"


class _ModelOutput(dict):
    pass


@dataclasses.dataclass
class _Output:
    logits: torch.Tensor


def _wrapped_history(kind):
    torch.manual_seed(6)
    model = _Wrapping(kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    g = torch.Generator().manual_seed(7)
    with fl.Monitor(model, opt) as mon:
        for _ in range(6):
            x, y = torch.randn(8, 4, generator=g) * 3, torch.randint(0, 3, (8,), generator=g)
            opt.zero_grad()
            out = model({"features": x} if kind == "dict input" else x, y=y)
            logits = (out if isinstance(out, torch.Tensor) else out[0] if isinstance(out, tuple)
                      else out["logits"] if isinstance(out, dict) else out.logits)
            loss = nn.functional.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            mon.record(loss)
    return mon.history


@pytest.mark.parametrize("kind", ["model output", "tuple", "dataclass", "dict input"])
def test_outputs_and_inputs_packaged_in_containers_read_like_plain_tensors(kind):
    """A model returning a dict, a tuple or a dataclass is read by its first tensor with a
    batch dimension (the logits, not a ModelOutput's 0-d loss); a batch dict is read by
    its first tensor: the same columns as the plain tensors give."""
    plain, packaged = _wrapped_history("tensor"), _wrapped_history(kind)
    columns = ["output_std", "output_grad_min", "loss_weight", "output_backwards",
               "input_absmax", "input_std_ratio", "batch_size"]
    assert plain[columns].notna().all().all()
    assert np.allclose(plain["loss_weight"], 1.0) and (plain["batch_size"] == 8).all()
    pd.testing.assert_frame_equal(packaged[columns], plain[columns])


def test_a_packed_sequence_input_is_read_as_its_padded_batch():
    """A GRU given a PackedSequence: its packed rows are time steps, so it is read padded
    (batch, time, features), as the same loop passing the padded batch reads."""
    from torch.nn.utils.rnn import pack_padded_sequence

    class Reader(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru, self.fc = nn.GRU(3, 5, batch_first=True), nn.Linear(5, 2)

        def forward(self, x, lengths=None):
            if lengths is not None:
                x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            return self.fc(self.gru(x)[1][-1])

    def run(packed):
        torch.manual_seed(8)
        model = Reader()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(9)
        with fl.Monitor(model, opt) as mon:
            for _ in range(5):
                x, y = torch.randn(6, 4, 3, generator=g) * 2, torch.randint(0, 2, (6,), generator=g)
                lengths = torch.tensor([4, 4, 3, 2, 4, 1])
                x = x * (torch.arange(4)[None, :, None] < lengths[:, None, None])  # zero padding
                opt.zero_grad()
                args = ((pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False),)
                        if packed else (x, lengths))
                loss = nn.functional.cross_entropy(model(*args), y)
                loss.backward()
                opt.step()
                mon.record(loss)
        return mon.history

    padded, packed = run(False), run(True)
    columns = ["input_absmax", "input_std_ratio", "input_nonfinite", "batch_size"]
    assert (packed["batch_size"] == 6).all()
    pd.testing.assert_frame_equal(packed[columns], padded[columns])


def test_two_passes_of_different_sizes_before_one_backward_pair_each_output_with_its_gradient():
    """A batch of negatives, then the batch itself, through the model before one
    backward: the output columns are the latest pass's, read with its own gradient
    (the negatives' gradient, of another shape, used to switch the instrument off)."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(5)
    stds = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", MonitorWarning)
        with fl.Monitor(model, opt) as mon:
            for _ in range(5):
                x, y = torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)
                opt.zero_grad()
                negatives = model(torch.randn(5, 4, generator=g))
                out = model(x)
                loss = nn.functional.cross_entropy(out, y) + 0.1 * negatives.logsumexp(1).mean()
                loss.backward()
                opt.step()
                stds.append(out.detach().double().std(unbiased=False).item())
                mon.record(loss)
        h = mon.history
    assert not mon.stopped
    assert h["output_std"].tolist() == pytest.approx(stds, rel=1e-5)
    assert np.allclose(h["loss_weight"], 1.0) and (h["output_backwards"] == 1).all()


def test_heads_concatenated_on_one_axis_are_not_read_as_a_heavy_loss():
    """Two heads' logits side by side, each a mean cross-entropy: every row has two
    negative gradient entries, one per head's target.  Divided by one softmax over all
    seven they would read as a weight of 2 or more (a summed loss); they are not read.
    One head alone is a softmax cross-entropy and weighs its rows 1 in total."""
    from failurelab.telemetry.probes import loss_weights

    torch.manual_seed(0)
    logits = torch.randn(1, 16, 7) * 3
    ya, yb = torch.randint(0, 3, (16,)), torch.randint(0, 4, (16,))
    z = logits.clone().requires_grad_()
    loss = (nn.functional.cross_entropy(z[0, :, :3], ya)
            + nn.functional.cross_entropy(z[0, :, 3:], yb))
    (g,) = torch.autograd.grad(loss, z)
    assert math.isnan(loss_weights(logits, g).item())
    assert loss_weights(logits[..., :3], g[..., :3]).item() == pytest.approx(1, rel=1e-5)
    # the second head fits every row exactly (no gradient): one negative entry per row,
    # but the first head's gradient covers only its own share of the joint softmax
    logits[0, :, 3:] = -100
    logits[0, torch.arange(16), 3 + yb] = 100
    z = logits.clone().requires_grad_()
    loss = (nn.functional.cross_entropy(z[0, :, :3], ya)
            + nn.functional.cross_entropy(z[0, :, 3:], yb))
    (g,) = torch.autograd.grad(loss, z)
    assert (g[0, :, 3:] == 0).all() and ((g < 0).sum(-1) == 1).all()
    assert math.isnan(loss_weights(logits, g).item())
    # most rows fit both heads to float precision: no negative entry at all, and the
    # second head's ulps of gradient divided by a joint softmax that holds ~1e-26 there
    # (read, they gave this step a weight of 1.6e15)
    rows = torch.arange(5, 16)
    logits[0, 5:, :3], logits[0, rows, ya[5:]] = -60, 60
    logits[0, 5:, 3:], logits[0, rows, 3 + yb[5:]] = 0, 25
    z = logits.clone().requires_grad_()
    loss = (nn.functional.cross_entropy(z[0, :, :3], ya)
            + nn.functional.cross_entropy(z[0, :, 3:], yb))
    (g,) = torch.autograd.grad(loss, z)
    assert ((g[0, 5:] < 0).sum(-1) == 0).all() and (g[0, 5:] > 0).any(-1).all()
    assert math.isnan(loss_weights(logits, g).item())


class _TinyLM(nn.Module):
    """Token ids (B, T) → logits (B, T, V): an output too large to read whole."""

    def __init__(self, vocab):
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, 8), nn.Linear(8, vocab)

    def forward(self, tokens):
        return self.head(self.emb(tokens))


@pytest.mark.parametrize("reduction, padded", [("mean", False), ("mean", True),
                                               ("sum", False)])
def test_a_large_output_is_read_on_sampled_rows_and_weighed_as_a_whole(reduction, padded):
    """Logits (16, 64, 500) are 512000 entries, more than `KEEP_ENTRIES`: the columns come
    from a sample of rows, and the loss weight is scaled back to all of them: 1 for a
    mean (also when half the tokens are padding that the loss ignores), the number of
    tokens for a sum."""
    from failurelab.telemetry.instruments import KEEP_ENTRIES

    vocab, B, T = 500, 16, 64
    assert B * T * vocab > 4 * KEEP_ENTRIES
    torch.manual_seed(0)
    model = _TinyLM(vocab)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab, (B, T), generator=g)
    targets = torch.randint(0, vocab, (B, T), generator=g)
    if padded:
        targets[:, T // 2:] = -100  # the loss's ignore_index
    ce = nn.CrossEntropyLoss(reduction=reduction)

    def loss_fn(out, y):
        return ce(out.reshape(-1, vocab), y.reshape(-1))

    with torch.no_grad():
        first_std = model(tokens).std(unbiased=False).item()
    h = _train(model, opt, [(tokens, targets)] * 3, loss_fn)
    expected = 1.0 if reduction == "mean" else B * T
    # the sampled rows stand for all.  With padding, the share of tokens with a gradient
    # is read on the sample too, one row from each stretch of 7.8: only the stretches
    # across the 16 padding edges can go either way, a spread of about
    # sqrt(16 / 4) / 131 = 1.5%, so 5% is three times that
    assert h["loss_weight"].tolist() == pytest.approx([expected] * 3,
                                                      rel=0.05 if padded else 1e-4)
    assert h["output_std"].iloc[0] == pytest.approx(first_std, rel=0.05)  # of 65500 entries


def test_sampled_rows_pair_an_output_with_its_gradient_and_spare_the_loops_random_state():
    """The rows read depend only on the shape: the gradient's are the output's, the
    loop's random stream is untouched, and no stride falls in step with a sequence
    length (64 positions: a sample of every k-th token of 1024 would read 1 or 2)."""
    from failurelab.telemetry.instruments import sample_rows

    out = torch.randn(16, 64, 500)
    grad = out * 2
    state = torch.random.get_rng_state()
    (rows, scale), (grad_rows, _) = sample_rows(out), sample_rows(grad)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(grad_rows, rows * 2)
    assert rows.shape == (131, 500) and scale == pytest.approx(1024 / 131)
    flat = out.reshape(-1, 500)
    index = [next(i for i in range(1024) if torch.equal(flat[i], r)) for r in rows]
    assert index == sorted(index) and len({i % 64 for i in index}) > 50
    small = torch.randn(8, 3)
    assert sample_rows(small) == (small, 1.0)


def test_soft_targets_are_told_from_hard_labels_by_the_output_gradient():
    """One negative entry per row for a hard label (class weights and ignored rows
    included); more for mixed or smoothed targets; nothing read from a regression."""
    from failurelab.telemetry.probes import soft_target_shares

    torch.manual_seed(0)
    logits, y = torch.randn(64, 5), torch.randint(0, 5, (64,))
    y[:8] = -100  # ignored rows: no gradient, not counted

    def share(loss_of):
        z = logits.clone().requires_grad_()
        (g,) = torch.autograd.grad(loss_of(z), z)
        return soft_target_shares(g[None]).item()
    ce = nn.functional.cross_entropy
    assert share(lambda z: ce(z, y)) == 0
    assert share(lambda z: ce(z, y, weight=torch.rand(5) + 0.1, reduction="sum")) == 0
    kept = y.clamp(min=0)
    # smoothing 0.2 over 5 classes aims 0.04 at each other class: negative wherever the
    # model puts less there, in some rows at first (random logits), most once it is sure
    assert 0 < share(lambda z: ce(z, kept, label_smoothing=0.2)) < share(
        lambda z: ce(4 * z, kept, label_smoothing=0.2))
    other = kept.roll(1)
    mixed = share(lambda z: 0.6 * ce(z, kept) + 0.4 * ce(z, other))
    assert 0.5 < mixed <= (kept != other).float().mean().item()  # two labels, where they differ
    assert math.isnan(share(lambda z: (z - 1).square().mean()))  # rows do not sum to 0


def test_the_labels_a_cross_entropy_gradient_names_give_the_batch_label_mix():
    """The share of the batch's main class, read from the gradient alone, equals the
    one counted from the labels, with or without class weights and ignored rows; NaN
    for a regression, for token outputs and for too few labelled rows."""
    from failurelab.evidence.thresholds import LABEL_MIX_MIN_SAMPLES
    from failurelab.telemetry.probes import label_mixes, label_purities

    torch.manual_seed(0)
    logits = torch.randn(64, 5)
    y = torch.cat([torch.zeros(40, dtype=torch.long), torch.randint(1, 5, (24,))])
    y[-4:] = -100  # ignored: no gradient, not counted
    kept = y[y >= 0]
    truth = kept.bincount().max().item() / len(kept)

    def purity(loss_of, z0=logits):
        z = z0.clone().requires_grad_()
        (g,) = torch.autograd.grad(loss_of(z), z)
        return label_purities(label_mixes(g[None]), 1).item()
    ce = nn.functional.cross_entropy
    assert purity(lambda z: ce(z, y)) == pytest.approx(truth)
    assert purity(lambda z: ce(z, y, weight=torch.rand(5) + 0.1, reduction="sum")) == (
        pytest.approx(truth))
    assert math.isnan(purity(lambda z: (z - 1).square().mean()))
    few = torch.full((64,), -100)
    few[:LABEL_MIX_MIN_SAMPLES - 1] = 0
    assert math.isnan(purity(lambda z: ce(z, few)))
    tokens = torch.randn(4, 16, 5)
    assert math.isnan(purity(lambda z: ce(z.transpose(1, 2), torch.zeros(4, 16, dtype=torch.long)),
                             tokens))


def test_a_binary_cross_entropy_on_one_logit_gives_the_batch_label_mix():
    """One logit per sample under BCEWithLogitsLoss (mean or sum): the gradient is
    w (sigmoid(z) - y), negative exactly at the positives, so the main class's share
    equals the counted one.  An MSE on the same outputs, a BCE with a pos_weight (the
    two classes weighed differently) and too few rows read NaN: a miss, never a wrong
    mix."""
    from failurelab.evidence.thresholds import LABEL_MIX_MIN_SAMPLES
    from failurelab.telemetry.probes import binary_label_mixes, label_purities

    torch.manual_seed(0)
    logits = torch.randn(64, 1)
    y = (torch.rand(64, 1) < 0.3).float()
    truth = max(y.mean().item(), 1 - y.mean().item())
    bce = nn.functional.binary_cross_entropy_with_logits

    def purity(loss_of, z0=logits):
        z = z0.clone().requires_grad_()
        (g,) = torch.autograd.grad(loss_of(z), z)
        return label_purities(binary_label_mixes(z.detach()[None], g[None]), 1).item()
    assert purity(lambda z: bce(z, y)) == pytest.approx(truth)
    assert purity(lambda z: bce(z, y, reduction="sum")) == pytest.approx(truth)
    assert purity(lambda z: bce(z, y[:, 0]), logits[:, 0]) == pytest.approx(truth)
    assert math.isnan(purity(lambda z: (z - y).square().mean()))
    assert math.isnan(purity(lambda z: bce(z, y, pos_weight=torch.tensor([3.0]))))
    few = LABEL_MIX_MIN_SAMPLES - 1
    assert math.isnan(purity(lambda z: bce(z, y[:few]), logits[:few]))


def test_values_a_bce_on_logits_was_given_are_read_as_squashed_only_inside_0_1():
    """`sigmoid_logit_shares`: 1 where every value of a step lies strictly inside
    (0, 1), 0 where one leaves it (a logit below 0, a ReLU's exact zero), NaN where the
    gradient is no BCE on logits."""
    from failurelab.telemetry.probes import binary_label_mixes, sigmoid_logit_shares

    torch.manual_seed(0)
    y = (torch.rand(32, 1) < 0.5).float()
    bce = nn.functional.binary_cross_entropy_with_logits

    def share(values, loss_of=bce):
        z = values.clone().requires_grad_()
        (g,) = torch.autograd.grad(loss_of(z, y), z)
        mixes = binary_label_mixes(z.detach()[None], g[None])
        return sigmoid_logit_shares(z.detach()[None], mixes).item()
    assert share(torch.sigmoid(3 * torch.randn(32, 1))) == 1.0
    assert share(torch.randn(32, 1)) == 0.0
    assert share(torch.relu(torch.randn(32, 1)).clamp(max=0.9)) == 0.0
    assert math.isnan(share(torch.rand(32, 1), lambda z, t: (z - t).square().mean()))


def test_a_binary_classifier_over_sorted_data_shows_one_class_batches():
    """The unshuffled loader again, for a one-logit binary classifier: a plain Monitor
    reads each sorted batch as one class and the same samples dealt at random as
    mixed."""
    torch.manual_seed(0)
    X = torch.randn(640, 8)
    y = (X[:, 0] > 0).float()
    order = y.argsort()

    def label_mix(X, y):
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        h = _classifier_history(model, X, y, steps=20, lr=0.1, loss=lambda out, t: (
            nn.functional.binary_cross_entropy_with_logits(out[:, 0], t)))
        return measure(h, ["label_purity_median"])["label_purity_median"]
    assert label_mix(X[order], y[order]) == 1.0
    assert label_mix(X, y) < 0.75  # 32 of two balanced classes dealt at random: ~0.56


def _classifier_history(model, X, y, steps: int, lr: float, batch: int = 32,
                        loss=nn.functional.cross_entropy):
    """A plain classifier loop (cross-entropy unless `loss` says otherwise) over X, y in
    order, batch by batch, under a full Monitor that records only the loss: its history."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with fl.Monitor(model, opt, preset="full") as monitor:
        for i in range(steps):
            xb, yb = X[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
            opt.zero_grad()
            value = loss(model(xb), yb)
            value.backward()
            opt.step()
            monitor.record(value)
    return monitor.history


def test_a_loop_over_class_sorted_data_shows_one_class_batches_without_recording_labels():
    """The classic unshuffled loader: a plain Monitor (no labels recorded) reads each
    batch as one class, and the same samples dealt at random as mixed."""
    torch.manual_seed(0)
    X, y = torch.randn(960, 8), torch.randint(0, 3, (960,))
    order = y.argsort()

    def label_mix(X, y):
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        h = _classifier_history(model, X, y, steps=30, lr=0.1)
        assert "label_purity" not in h
        return measure(h, ["label_purity_median", "label_mixing"])
    ordered, dealt = label_mix(X[order], y[order]), label_mix(X, y)
    assert ordered["label_purity_median"] == 1.0
    assert dealt["label_purity_median"] < 0.6  # 32 of 3 balanced classes at random: ~0.4
    assert ordered["label_mixing"] < 0.3  # one class a batch, but where a class ends
    assert dealt["label_mixing"] > 0.9  # about sqrt(31/32)


def test_batches_of_class_ordered_data_over_many_classes_hold_little_of_the_label_spread():
    """100 classes of 24 samples stored in order: each batch of 32 straddles two
    classes, so its main class is only ~0.7 of it (too mixed for a purity test) while it
    holds a few per cent of the run's spread of class indices; dealt at random, nearly
    all of it.  The within-batch spread is read from the gradient's labels alone."""
    torch.manual_seed(0)
    y = torch.arange(100).repeat_interleave(24)
    X = torch.randn(100, 16)[y] + 0.5 * torch.randn(len(y), 16)
    shuffled = torch.randperm(len(y))

    def mix(X, y):
        model = nn.Linear(16, 100)
        h = _classifier_history(model, X, y, steps=60, lr=0.05)
        return measure(h, ["label_mixing", "label_purity_median"])
    ordered, dealt = mix(X, y), mix(X[shuffled], y[shuffled])
    assert 0.5 < ordered["label_purity_median"] < 0.99
    assert ordered["label_mixing"] < 0.1 < 0.9 < dealt["label_mixing"]


class _Standardise(nn.Module):
    """x -> (x - mean) / std with statistics fixed at construction (Keras' Normalization)."""

    def __init__(self, data):
        super().__init__()
        self.register_buffer("mean", data.mean(0))
        self.register_buffer("std", data.std(0))

    def forward(self, x):
        return (x - self.mean) / self.std


def test_the_input_spread_is_the_one_the_first_weight_layer_sees():
    """Features in their own units (1e-3 next to 1e3) standardised by the model itself
    reach its first Linear layer within a few times of each other: the spread read is
    that one.  Fed to the layer as given (or through a view of the same memory), the
    layer's input is the model's: nothing more is recorded and the model's spread
    stands."""
    torch.manual_seed(0)
    X = torch.randn(512, 4) * torch.tensor([1e-3, 1.0, 10.0, 1e3])
    y = torch.randint(0, 3, (512,))

    def spreads(model):
        h = _classifier_history(model, X, y, steps=16, lr=1e-3)
        return h, measure(h, ["input_scale_spread"])["input_scale_spread"]

    def mlp():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    inside, seen = spreads(nn.Sequential(_Standardise(X), mlp()))
    assert inside["input_std_ratio"].min() > 1e5  # the model's input: raw units
    assert seen == pytest.approx(inside["first_layer_std_ratio"].median()) and seen < 3
    raw, spread = spreads(mlp())
    assert raw["first_layer_std_ratio"].isna().all() and spread > 1e5
    flat, spread = spreads(nn.Sequential(nn.Flatten(), mlp()))  # a view: the same data
    assert flat["first_layer_std_ratio"].isna().all() and spread > 1e5
    # a BatchNorm in front is a normalisation, not the first layer with weights
    _, spread = spreads(nn.Sequential(nn.BatchNorm1d(4), mlp()))
    assert spread < 10
    # a recurrent layer first reads the data as given: its Linear head, which runs
    # first among the Linear layers, is not where the features enter
    recurrent, spread = spreads(_Recurrent())
    assert recurrent["first_layer_std_ratio"].isna().all() and spread > 1e5


def test_only_the_first_weighted_layer_keeps_its_input_hook():
    """Every layer with weights is hooked until a training forward shows which runs
    first; then only that one's hook stays, also on a schedule that reads every step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt, preset="full", forward_every=1) as monitor:
        for _ in range(4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(torch.randn(32, 4)),
                                               torch.randint(0, 3, (32,)))
            loss.backward()
            opt.step()
            monitor.record(loss)
            assert [len(m._forward_pre_hooks) for m in model] == [0, 1, 0, 0]
    assert monitor.history["first_layer_std_ratio"].notna().all()


class _Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru, self.head = nn.GRU(4, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.gru(x.unsqueeze(1))[0][:, -1])


def test_the_losses_an_output_implies_match_a_plain_and_a_doubled_softmax():
    """At the labels the gradient shows, the output's own cross-entropy is a plain mean
    cross-entropy's loss, and the cross-entropy of softmax(softmax(output)) is the loss
    of a loop that applies softmax before CrossEntropyLoss, to float rounding; ignored
    rows (no gradient) are left out of both, and a regression has neither."""
    from failurelab.telemetry.probes import gradient_rows, implied_losses

    torch.manual_seed(0)
    y = torch.randint(0, 5, (2, 48))
    logits = torch.randn(2, 48, 5) + 5 * nn.functional.one_hot(y, 5)  # a model that learned
    y[:, :6] = -100  # ignored rows: no gradient
    ce = nn.functional.cross_entropy

    def implied(loss_of):
        z = logits.clone().requires_grad_()
        losses = torch.stack([loss_of(z[i], y[i]) for i in range(2)])
        (g,) = torch.autograd.grad(losses.sum(), z)
        return losses.detach(), implied_losses(logits, gradient_rows(g))
    plain, got = implied(ce)
    np.testing.assert_allclose(got[:, 0], plain, rtol=1e-6)
    assert (got[:, 1] > plain + 0.3).all()
    doubled, got = implied(lambda z, t: ce(z.softmax(-1), t))
    np.testing.assert_allclose(got[:, 1], doubled, rtol=1e-6)
    assert (got[:, 0] < doubled - 0.3).all()
    assert (doubled > math.log(1 + 4 / math.e)).all()  # the floor of a doubled softmax
    z = logits.clone().requires_grad_()
    (g,) = torch.autograd.grad((z.sum(-1) - 1).pow(2).mean(), z)  # no softmax rows
    assert implied_losses(logits, gradient_rows(g)).isnan().all()
    assert implied_losses(logits[..., :1], gradient_rows(g[..., :1])).isnan().all()
