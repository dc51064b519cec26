"""The learning-rate range test: a sweep that restores what it touched and suggests a
rate that trains."""

import matplotlib
import pytest
import torch

import failurelab as fl

matplotlib.use("Agg")


@pytest.mark.parametrize("task", ["tabular", "sequence"])
def test_the_suggested_rate_trains_the_baseline_healthily(task):
    result = fl.lr_range_test(task)
    assert list(result.table.columns) == ["lr", "loss", "smoothed_loss"]
    assert result.table["lr"].is_monotonic_increasing
    assert 1e-5 <= result.suggested_lr <= result.steepest_lr
    run = fl.run(fl.baseline(task).replace(lr=result.suggested_lr), seed=0)
    d = fl.diagnose(run)
    assert d.shape == "healthy" and d.top is None
    assert run.summary["final_val_acc"] >= 0.9


def test_the_sweep_restores_the_model_and_optimizer_it_was_given():
    parts = fl.build(fl.baseline("sequence"), seed=1)
    before = {k: v.clone() for k, v in parts.model.state_dict().items()}
    result = fl.lr_range_test(parts, steps=40)
    assert result.diverged_lr is None or result.diverged_lr > result.suggested_lr
    after = parts.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert parts.optimizer.state_dict()["state"] == {}  # Adam's moments were never kept
    assert parts.optimizer.param_groups[0]["lr"] == 0.01


def test_the_sweep_stops_where_the_loss_blows_up_and_plots():
    result = fl.lr_range_test("sequence", end=100.0)
    assert result.diverged_lr is not None
    assert result.suggested_lr <= result.diverged_lr / 10
    ax = result.plot()
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "learning rate"


def test_bad_ranges_are_refused():
    with pytest.raises(ValueError, match="start < end"):
        fl.lr_range_test("tabular", start=1.0, end=0.1)
