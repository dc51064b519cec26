"""The training loop: healthy baselines, determinism, clean stops, parts reuse."""

import json
import math
import subprocess
import sys

import pytest
import torch

import failurelab as fl
from failurelab.lab.train import endless_batches

TIMING = ["t_data", "t_forward", "t_backward", "t_step"]


def _without_timing(history):
    return history.drop(columns=TIMING)


@pytest.mark.parametrize("task", ["tabular", "sequence"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_baseline_reaches_90_percent_validation_accuracy(task, seed):
    run = fl.run(task, seed=seed)
    assert not run.diverged
    assert run.summary["final_val_acc"] >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("task", ["tabular", "sequence"])
@pytest.mark.parametrize("seed", range(5, 10))
def test_baseline_reaches_90_percent_on_the_other_seeds(task, seed):
    assert fl.run(task, seed=seed).summary["final_val_acc"] >= 0.9


@pytest.mark.parametrize("task", ["tabular", "sequence"])
def test_same_seed_gives_a_bitwise_identical_history(task):
    a, b = fl.run(task, seed=3, steps=60), fl.run(task, seed=3, steps=60)
    assert a.fingerprint == b.fingerprint
    assert _without_timing(a.history).equals(_without_timing(b.history))
    assert fl.run(task, seed=4, steps=60).fingerprint != a.fingerprint


def test_history_is_identical_in_another_process():
    code = ("import failurelab as fl, json; r = fl.run('tabular', seed=7, steps=80); "
            "print(json.dumps([r.fingerprint, r.history['grad_norm'].tolist()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    fingerprint, grad_norms = json.loads(out)
    here = fl.run("tabular", seed=7, steps=80)
    assert fingerprint == here.fingerprint
    assert grad_norms == here.history["grad_norm"].tolist()


def test_a_nan_producing_run_stops_cleanly_and_says_where():
    run = fl.run(fl.baseline().replace(nan_rows=5), seed=3)  # seed 3: first NaN batch is step 4
    assert run.diverged
    step = run.first_nonfinite_step
    assert step == len(run.history) - 1 < 300
    assert math.isnan(run.history["loss"].iloc[-1])
    assert run.history["input_nonfinite"].iloc[-1] >= 1  # the NaN came in with the data
    assert run.summary["first_nonfinite_step"] == step
    assert math.isfinite(run.summary["final_loss"])


def test_run_restores_the_callers_threads_and_random_state():
    torch.set_num_threads(2)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    fl.run("tabular", steps=5)
    assert torch.get_num_threads() == 2
    assert torch.equal(torch.rand(3), expected)


def test_parts_in_a_plain_loop_with_a_monitor_give_the_run_history():
    recipe = fl.baseline()
    run = fl.run(recipe, seed=2, steps=40)
    parts = fl.build(recipe, seed=2)
    torch.manual_seed(2)  # dropout draws from the global generator, as in fl.run
    model, opt = parts.model, parts.optimizer
    with fl.Monitor(model, opt) as mon:
        for step, (X, y) in zip(range(40), endless_batches(parts.train_loader), strict=False):
            opt.zero_grad()
            loss = parts.loss_fn(model(X), y)
            loss.backward()
            opt.step()
            mon.record(loss)
    mine = mon.history
    assert mine["loss"].tolist() == run.history["loss"].tolist()
    assert mine["grad_norm"].tolist() == run.history["grad_norm"].tolist()


def test_validation_and_timing_columns_are_recorded():
    run = fl.run("sequence", steps=25)
    h = run.history
    evaluated = h["val_acc"].notna()
    assert h.loc[evaluated, "step"].tolist() == [0, 10, 20, 24]
    assert (h[TIMING] > 0).all().all()
    assert (h["pad_attention"] == 0).all()  # the baseline masks its padding
    assert h.loc[evaluated, "val_jitter"].max() == 0  # eval mode: repeatable


def test_bad_seed_and_unknown_name_are_clear():
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        fl.run("tabular", seed=-1)
    with pytest.raises(KeyError, match="unknown fault"):
        fl.run("no_such_fault")


def test_divided_micro_batches_train_like_the_whole_batch():
    """Eight micro-batches of 8, each loss divided by 8, add up to the mean gradient
    over the 64 samples: the run follows the baseline's up to float rounding (dropout
    draws the same numbers in the same order)."""
    whole = fl.run(fl.baseline(), steps=40)
    parts = fl.run(fl.baseline().replace(accumulate=8), steps=40)
    assert parts.history["output_backwards"].tolist() == [8] * 40
    assert (parts.history["loss"] - whole.history["loss"]).abs().max() < 1e-4


def test_undivided_micro_batches_step_like_a_rate_that_many_times_larger():
    """With plain SGD (no momentum), k undivided micro-batch means are the whole batch's
    mean gradient times k: the first update is k times the baseline's."""
    sgd = fl.baseline().replace(momentum=0.0)
    whole = fl.run(sgd, steps=2).history["update_norm"].iloc[0]
    parts = fl.run(sgd.replace(accumulate=4, divide_accumulated=False), steps=2)
    assert parts.history["update_norm"].iloc[0] == pytest.approx(4 * whole, rel=1e-3)


def test_a_run_on_a_named_device_is_the_same_run():
    """`device` moves the parts the run builds on the CPU; naming the CPU changes
    nothing, so what a GPU run shows differs only by the device."""
    default = fl.run("fp16_no_scaling", steps=30)
    named = fl.run("fp16_no_scaling", steps=30, device=torch.device("cpu"))
    assert named.fingerprint == default.fingerprint
    assert _without_timing(named.history).equals(_without_timing(default.history))


@pytest.mark.parametrize("device", ["gpu0", "meta:x"] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_a_device_that_cannot_be_used_is_a_clear_error(device):
    with pytest.raises(ValueError, match="cannot be used here"):
        fl.run("tabular", steps=2, device=device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_float16_without_scaling_shows_its_signature_under_cuda_autocast():
    """The lab's fault under CUDA autocast, the lab's loop unchanged (see
    benchmarks/cuda_check.py for the whole comparison)."""
    fl.check(fl.run("fp16_no_scaling", device="cuda"), "fp16_no_scaling")
