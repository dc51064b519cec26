"""Misuse of `record` is named once, never recorded silently as physics."""

import math
import warnings

import numpy as np
import pytest
import torch
from foreign_loops import beside_plain
from torch import nn

import failurelab as fl
from failurelab.telemetry.monitor import MonitorWarning

# each step's arithmetic: every step's forward tensors are read (see conftest)
pytestmark = pytest.mark.usefixtures("every_forward")


def _setup(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _backward(model, seed):
    g = torch.Generator().manual_seed(seed)
    loss = model(torch.randn(8, 4, generator=g)).pow(2).mean()
    loss.backward()
    return loss


def _ours(caught):
    return [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]


def test_gradient_accumulation_recorded_per_micro_batch_is_named_once():
    model, opt = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fl.Monitor(model, opt) as mon:
            for step in range(6):
                opt.zero_grad()
                for micro in range(3):  # three micro-batches per optimizer step
                    loss = _backward(model, 10 * step + micro)
                    if micro == 2:
                        opt.step()
                    mon.record(loss)  # the misuse: once per micro-batch
        h = mon.history
    messages = _ours(caught)
    assert len(messages) == 2  # before any step (step 0), then no step since the last
    assert "before any optimizer.step()" in messages[0]
    assert "gradient accumulation" in messages[1]
    assert h["step_skipped"].tolist() == [1, 1, 0] * 6
    skipped = h["step_skipped"] == 1
    assert h.loc[skipped, ["update_norm", "update_ratio"]].isna().all().all()
    assert h.loc[~skipped, "update_ratio"].map(math.isfinite).all()
    assert (h["nonfinite"] == 0).all()


def test_record_twice_per_step_and_before_any_step_each_warn_once():
    model, opt = _setup(1)
    mon = fl.Monitor(model, opt)
    with pytest.warns(MonitorWarning, match="before any optimizer.step") as caught:
        mon.record(_backward(model, 0))
    assert len(_ours(caught)) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(3):
            opt.zero_grad()
            loss = _backward(model, step + 1)
            opt.step()
            mon.record(loss)
            mon.record(loss)  # the misuse: the same step again
    messages = _ours(caught)
    assert len(messages) == 1 and "twice for one optimizer step" in messages[0]
    h = mon.history
    assert h["step_skipped"].tolist() == [1, 0, 1, 0, 1, 0, 1]
    assert h["update_ratio"].iloc[[0, 2, 4, 6]].isna().all()
    mon.close()


def test_record_after_close_is_ignored_with_one_warning():
    model, opt = _setup(2)
    mon = fl.Monitor(model, opt)
    loss = _backward(model, 0)
    opt.step()
    mon.record(loss)
    mon.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mon.record(loss)
        mon.record(loss)
    messages = _ours(caught)
    assert len(messages) == 1 and "after close() is ignored" in messages[0]
    assert len(mon.history) == 1


def test_a_correct_loop_and_grad_scaler_skips_raise_no_warning():
    torch.manual_seed(3)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127)  # skips the first steps
    with warnings.catch_warnings():
        warnings.simplefilter("error", MonitorWarning)
        with fl.Monitor(model, opt) as mon:
            for step in range(20):
                opt.zero_grad()
                loss = 1e4 * model(torch.randn(8, 4)).pow(2).mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                mon.record(loss)
    h = mon.history
    assert h["step_skipped"].iloc[0] == 1 and h["step_skipped"].iloc[-1] == 0
    assert (h["nonfinite"] == 0).all()


def test_an_unbatched_sample_is_one_sample_not_a_batch():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(5)
    hidden = []
    model[1].register_forward_hook(lambda m, a, out: hidden.append(out.detach().clone()))
    xs = [torch.randn(5, generator=g) for _ in range(6)]  # one sample per step, 1-D
    with fl.Monitor(model, opt) as mon:
        for x in xs:
            opt.zero_grad()
            loss = model(x).pow(2).sum()
            loss.backward()
            opt.step()
            mon.record(loss)
    h = mon.history
    assert (h["batch_size"] == 1).all()
    assert h["input_std_ratio"].isna().all()  # one sample has no per-feature spread
    assert h["input_absmax"].tolist() == pytest.approx([float(x.abs().max()) for x in xs])
    dead = [float((out == 0).double().mean()) for out in hidden]  # of one sample's units
    assert h["dead_frac/1"].tolist() == pytest.approx(dead)
    assert not np.allclose(dead, np.round(dead))  # not 0-or-1 as for a batch of 6 "samples"


def test_alerts_on_rows_without_gradients_leak_no_numpy_warning():
    model, opt = _setup(6)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Mean of empty slice")
        with fl.Monitor(model, opt, preset="economy") as mon:
            for step in range(12):  # economy: gradient columns NaN on 9 of every 10 steps
                opt.zero_grad()
                loss = _backward(model, step)
                opt.step()
                mon.record(loss)
                mon.alerts(window=8)


def test_a_closure_loop_can_hand_over_its_gradients_itself():
    """optimizer.step(closure) computes the gradients inside step, after any pre-hook:
    with hook_optimizer=False the loop calls before_step() once they exist."""
    def run(closure_style):
        model, opt = _setup(7)
        mon = fl.Monitor(model, opt, hook_optimizer=not closure_style)
        for step in range(5):
            opt.zero_grad()
            loss = _backward(model, step)
            if closure_style:
                mon.before_step()
            opt.step()
            mon.record(loss)
        mon.close()
        return mon.history
    hooked, handed = run(False), run(True)
    for column in ("grad_norm", "update_ratio", "grad_cosine", "step_skipped"):
        assert handed[column].tolist() == pytest.approx(hooked[column].tolist(), nan_ok=True)


def test_an_lbfgs_closure_is_read_at_its_first_evaluation_and_once_per_step():
    """optimizer.step(closure) computes the gradients after the step pre-hook: they are
    taken after the closure's first evaluation (not the previous step's), and LBFGS's
    further evaluations of the same batch are not more batches or micro-batches."""
    def run(monitored):
        model, _ = _setup(3)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
        mon = fl.Monitor(model, opt) if monitored else None
        g = torch.Generator().manual_seed(5)
        ref = []
        for _ in range(6):
            x = torch.randn(8, 4, generator=g)
            first = []

            def closure():
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()
                if not first:
                    first.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
                return loss
            before = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            loss = opt.step(closure)
            after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            ref.append({"loss": loss.item(), "grad_norm": first[0].double().norm().item(),
                        "update_norm": (after - before).double().norm().item()})
            if mon is not None:
                mon.record(loss)
        return ref, mon
    ref, mon, h = beside_plain(run)
    for column in ("grad_norm", "update_norm"):
        assert h[column].tolist() == pytest.approx([r[column] for r in ref], rel=1e-5)
    assert (h["batch_size"] == 8).all() and (h["output_backwards"] == 1).all()
    assert (h["grad_carried"] == 0).all() and (h["step_skipped"] == 0).all()


def test_an_extra_that_is_not_a_number_is_named_once_and_never_raised():
    """A string passed to `record` used to raise at the chunk's flush, many steps later,
    inside the user's loop, and lose the chunk's rows."""
    model, opt = _setup()
    with pytest.warns(MonitorWarning, match="phase=...\\) got a str") as told:
        with fl.Monitor(model, opt) as mon:
            for step in range(40):
                loss = _backward(model, step)
                opt.step()
                mon.record(loss, phase="train" if step >= 20 else 1.0, t_data=np.float32(0.5),
                           val_loss=torch.tensor(0.25) if step == 3 else None)
    h = mon.history
    assert len(h) == 40 and len([w for w in told if "phase" in str(w.message)]) == 1
    assert h["phase"].iloc[:20].eq(1.0).all() and h["phase"].iloc[20:].isna().all()
    assert h["t_data"].eq(0.5).all() and h["val_loss"].iloc[3] == 0.25
    assert h["val_loss"].drop(index=3).isna().all()


def test_an_extra_cannot_overwrite_a_measured_column():
    model, opt = _setup()
    with warnings.catch_warnings(record=True) as caught, fl.Monitor(model, opt) as mon:
        warnings.simplefilter("always")
        for step in range(3):
            loss = _backward(model, step)
            measured = float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]))
            opt.step()
            mon.record(loss, grad_norm=-1.0, step=1000)
    told = _ours(caught)
    assert len(told) == 2 and all("names a column the monitor measures" in m for m in told)
    h = mon.history
    assert h["step"].tolist() == [0, 1, 2]
    assert h["grad_norm"].iloc[-1] == pytest.approx(measured, rel=1e-6)


@pytest.mark.parametrize("change", ["unfreeze", "replace"])
def test_trainable_parameters_changed_after_the_monitor_was_made_are_named_once(change):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    if change == "unfreeze":
        model[0].requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    with warnings.catch_warnings(record=True) as caught, fl.Monitor(model, opt) as mon:
        warnings.simplefilter("always")
        for step in range(70):
            if step == 10 and change == "unfreeze":
                model[0].requires_grad_(True)
                opt.add_param_group({"params": list(model[0].parameters())})
            if step == 10 and change == "replace":
                model[2] = nn.Linear(8, 2)
                opt.param_groups[0]["params"] = list(model.parameters())
            opt.zero_grad()
            loss = _backward(model, step)
            opt.step()
            mon.record(loss)
    told = _ours(caught)
    assert len(told) == 1 and "trainable parameters changed" in told[0]
    assert ("2 new or unfrozen, 0 no longer" if change == "unfreeze"
            else "2 new or unfrozen, 2 no longer") in told[0]


def test_freezing_part_of_the_model_later_is_not_a_change_to_name():
    """Progressive freezing is a technique: the frozen tensors' gradients are simply
    absent, and the monitor's columns still cover every tensor it watches."""
    model, opt = _setup()
    with warnings.catch_warnings(record=True) as caught, fl.Monitor(model, opt) as mon:
        warnings.simplefilter("always")
        for step in range(40):
            if step == 10:
                model[0].requires_grad_(False)
            opt.zero_grad()
            loss = _backward(model, step)
            opt.step()
            mon.record(loss)
    assert _ours(caught) == [] and len(mon.history) == 40


def test_a_second_monitor_on_a_model_whose_first_is_open_is_named():
    model, opt = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = fl.Monitor(model, opt)
        second = fl.Monitor(model, opt)  # a notebook cell run twice
        second.close()
        first.close()
        fl.Monitor(model, opt).close()  # after close(): nothing to say
    told = _ours(caught)
    assert len(told) == 1 and "already has a Monitor that was not closed" in told[0]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_torchscript_model_gets_a_clear_error_under_full_and_works_under_economy():
    model, opt = _setup()
    scripted = torch.jit.script(model)
    with pytest.raises(TypeError, match="TorchScript module takes no forward hooks"):
        fl.Monitor(scripted, opt)
    with fl.Monitor(scripted, opt, preset="economy") as mon:
        for step in range(11):
            opt.zero_grad()
            loss = _backward(scripted, step)
            opt.step()
            mon.record(loss)
    assert mon.history["grad_norm"].notna().sum() == 2  # steps 0 and 10
