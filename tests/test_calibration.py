"""Calibration on the healthy runs a signature could fire on, and the ranking rule
that puts a fault ahead of the faults its mechanism explains."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd

import failurelab as fl
from failurelab.catalogue.calibration import calibrate, route_ranges
from failurelab.catalogue.diagnosis import _explained_last
from failurelab.evidence.signatures import Condition, Evidence, Signature


def _signature(guarded: bool) -> Signature:
    conditions = [Condition("grad_growth", ">=", 2.0, "gradient norm", "a toy mechanism")]
    if guarded:
        conditions.append(Condition("float16_share", ">=", 0.5, "float16 outputs",
                                    "only float16 runs can fire", role="guard"))
    return Signature(tuple(conditions), "toy")


def test_a_route_is_calibrated_past_the_healthy_runs_its_guards_admit_only():
    healthy = [{"grad_growth": 4.0, "float16_share": 0.0},  # float32, growth 4
               {"grad_growth": 1.2, "float16_share": 1.0}]  # float16, growth 1.2
    fault = fl.FAULTS["no_zero_grad"]
    for guarded, low, edge in ((False, 1.2, 4.0), (True, 1.2, 1.2)):
        toy = {"toy": replace(fault, name="toy", signature=_signature(guarded), also=())}
        ranges = route_ranges(toy, healthy)["toy"][0]
        assert ranges["grad_growth"] == (low, edge)
        calibrated = calibrate(toy, route_ranges(toy, healthy))["toy"].signature
        assert calibrated.conditions[0].threshold == max(2.0, 2 * edge)  # LOG_MARGIN


def test_a_route_no_healthy_run_passes_keeps_its_physical_threshold():
    fault = fl.FAULTS["no_zero_grad"]
    toy = {"toy": replace(fault, name="toy", signature=_signature(True), also=())}
    healthy = [{"grad_growth": 40.0, "float16_share": 0.0}]
    assert calibrate(toy, route_ranges(toy, healthy))["toy"].signature.conditions[0] \
        .threshold == 2.0


def test_a_fault_ranks_ahead_of_the_faults_its_mechanism_explains():
    def ev(name, score):
        return Evidence(name, True, score, {}, "")

    fired = [ev("huge_lr", 2.1), ev("dead_relu", 1.5), ev("summed_loss", 2.0)]
    order = [e.fault for e in _explained_last(fired, fl.FAULTS)]
    assert order == ["summed_loss", "huge_lr", "dead_relu"]  # summed_loss explains huge_lr


def test_every_fault_of_the_catalogue_uses_every_route_when_diagnosing():
    """The validation route of shuffled_labels fires where the loss still falls."""
    steps = np.arange(200)
    loss = 1.1 - 0.4 * (1 - np.exp(-steps / 30))  # learns the clean half only
    h = pd.DataFrame({"step": steps, "loss": loss, "grad_norm": 1.0,
                      "update_ratio": 5e-3, "weight_norm": 10.0, "zero_grad_frac": 0.0,
                      "val_loss": np.where(steps % 10 == 0, 0.45, math.nan),
                      "dropout_rate": 0.0, "input_std_ratio": 1.0})
    main, route = fl.FAULTS["shuffled_labels"].signatures
    assert not main.evaluate("shuffled_labels", h).fired  # the loss fell by 36%
    assert route.evaluate("shuffled_labels", h).fired
    assert fl.FAULTS["shuffled_labels"].evidence(h).fired
