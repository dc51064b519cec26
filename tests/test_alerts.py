"""Live alerts: the course's warning signs on the recent window of a running loop."""

import numpy as np
import pandas as pd
import torch
from runs_cache import cached_run
from torch import nn

import failurelab as fl


def history(**columns):
    n = len(next(iter(columns.values())))
    return pd.DataFrame({"step": np.arange(n), **columns})


def kinds(h):
    return {a.kind for a in fl.alerts(h)}


def test_a_healthy_window_raises_nothing():
    rng = np.random.default_rng(0)
    h = history(loss=0.5 + 0.2 * rng.random(40), grad_norm=1 + 0.3 * rng.random(40),
                update_ratio=np.full(40, 1e-3), nonfinite=np.zeros(40))
    assert fl.alerts(h) == []


def test_each_warning_sign_of_the_course_is_flagged():
    calm = np.ones(40)
    spike = np.r_[calm[:-1], 8.0]
    assert "grad_spike" in kinds(history(loss=1 + 0.1 * np.arange(40) % 3, grad_norm=spike))
    assert "grad_trend" in kinds(history(loss=calm + np.arange(40) % 3,
                                         grad_norm=np.r_[calm[:30], 4 * calm[:10]]))
    assert "update_ratio" in kinds(history(loss=calm + np.arange(40) % 3,
                                           update_ratio=np.full(40, 0.5)))
    assert "update_ratio" in kinds(history(loss=calm + np.arange(40) % 3,
                                           update_ratio=np.full(40, 1e-6)))
    assert "plateau" in kinds(history(loss=1.1 + 0.001 * np.sin(np.arange(40))))
    assert "nonfinite" in kinds(history(loss=np.r_[calm[:-1], np.nan]))


def test_monitor_alerts_during_a_loop_that_goes_nan():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    with fl.Monitor(model, opt) as mon:
        for step in range(30):
            x = torch.randn(16, 4)
            if step == 25:
                x[0, 0] = float("nan")
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            mon.record(loss)
            seen += mon.alerts()
    nonfinite = [a for a in seen if a.kind == "nonfinite"]
    assert nonfinite and "step 25" in nonfinite[0].message
    assert all(a.step <= 29 for a in seen)


def test_gradients_that_add_up_are_flagged_within_the_first_windows():
    h = cached_run(fl.inject(fl.baseline(), "no_zero_grad"), 0).history
    first = next(end for end in range(20, len(h)) if "accumulating" in kinds(h.iloc[:end]))
    # A sum of t gradients turns by ~1/t^2 per step: under ACCUMULATING_TURN (0.05)
    # within the first steps, so the window's last fifth passes as soon as it is full.
    assert first <= 30


def test_healthy_runs_never_look_accumulating():
    for task in ("tabular", "sequence"):
        h = cached_run(fl.baseline(task), 0).history
        assert not any("accumulating" in kinds(h.iloc[:end]) for end in range(20, len(h), 5))
