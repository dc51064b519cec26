"""How `investigate` turns measured effects into a verdict: high confidence only for an
effect specific to its cause, a premise check beside arms that help many broken runs,
and a confident passive cause kept unless an experiment refuted it.  Fast: synthetic
effects and tiny models, no training."""

import math
from dataclasses import replace
from types import SimpleNamespace

import torch
from torch import nn

from failurelab import catalogue
from failurelab.evidence import experiments as ex
from failurelab.investigation import checks, verdict
from failurelab.investigation.parts import make_parts
from failurelab.investigation.verdict import Hypothesis, decide, judge

FAULTS = catalogue.FAULTS
BETTER, UNMOVED = 3 * ex.CLEAR, 0.0  # a clear effect (past STRONG) and none


def _judge(name, effects, source="diagnosis"):
    return judge(Hypothesis(name, source), FAULTS[name], effects)


def _passive(top=None, confidence="low", shape="plateau"):
    causes = [(top, 1.0, "")] if top else []
    return SimpleNamespace(top=top, confidence=confidence, shape=shape, causes=causes,
                           lookalikes=[])


def test_one_cause_confirmed_and_nothing_else_helping_is_named_with_high_confidence():
    effects = {"gain[lr/10]": BETTER}
    js = [_judge("huge_lr", effects)]
    top, confidence, _, why = decide(js, _passive(), True, {"lr/10"})
    assert (top, confidence, why) == ("huge_lr", "high", verdict.SPECIFIC)
    # the same effect on a loop that does not reproduce itself: medium
    assert decide(js, _passive(), False, {"lr/10"})[1] == "medium"


def test_a_cause_only_the_shape_suggested_and_only_an_effect_confirms_stays_low():
    """A higher rate helps a model whose layers are frozen too: the effect is real and
    the rate still not the cause.  Proposed by a fired signature instead, the same
    effect names it with high confidence."""
    effects = {"gain[lr*10]": BETTER, "no_grad_at_step": 0.0}
    shape_only = [_judge("lr_too_small", effects, source="shape")]
    top, confidence, _, why = decide(shape_only, _passive(), True, {"lr*10"})
    assert (top, confidence, why) == ("lr_too_small", "low", verdict.SUGGESTED)
    signed = [_judge("lr_too_small", effects)]
    assert decide(signed, _passive(), True, {"lr*10"})[1] == "high"


def test_look_alikes_confirmed_by_the_same_arm_are_not_told_apart():
    """lr/10 confirms huge_lr and exploding_gradients alike: a second, telling arm is
    needed before high confidence."""
    effects = {"gain[lr/10]": BETTER}
    js = [_judge("huge_lr", effects), _judge("exploding_gradients", effects)]
    top, confidence, _, why = decide(js, _passive(), True, {"lr/10"})
    assert (top, confidence, why) == ("huge_lr", "medium", verdict.TWINS)


def test_a_cause_is_low_when_another_factor_helps_as_well():
    """lr*10 helps, and so do standardised inputs (whose premise is absent): "something
    here helps" is not a cause."""
    effects = {"gain[lr*10]": BETTER, "gain[inputs_standardised]": BETTER,
               "no_grad_at_step": 0.0, "inputs_unscaled": 0.0}
    js = [_judge("lr_too_small", effects), _judge("no_input_norm", effects)]
    assert js[1].status == "refuted"  # its premise (unscaled inputs) is absent
    top, confidence, _, why = decide(js, _passive(), True, {"lr*10", "inputs_standardised"})
    assert (top, confidence, why) == ("lr_too_small", "low", verdict.RIVALS)


def test_an_arm_that_helps_many_runs_confirms_only_with_its_premise():
    helped = {"gain[inputs_standardised]": BETTER, "gain[reinit_defaults]": BETTER}
    assert _judge("no_input_norm", {**helped, "inputs_unscaled": 1.0}).status == "confirmed"
    assert _judge("no_input_norm", {**helped, "inputs_unscaled": 0.0}).status == "refuted"
    assert _judge("bad_init", {**helped, "weights_above_default": 0.5}).status == "confirmed"
    assert _judge("bad_init", {**helped, "weights_above_default": 0.0}).status == "refuted"
    assert _judge("init_too_small", {**helped, "weights_below_default": 0.0}).status == "refuted"


def test_a_premise_backed_cause_outranks_one_confirmed_by_an_effect_alone():
    """Gradients never emptied explain why a smaller rate helps too: the reference step
    with grads carried names no_zero_grad, ahead of huge_lr in the passive order."""
    effects = {"gain[lr/10]": BETTER, "gain[reference_step]": BETTER, "grads_carried": 1.0}
    js = [_judge("huge_lr", effects), _judge("no_zero_grad", effects)]
    top, _, j, _ = decide(js, _passive(), True, {"reference_step"})
    assert top == "no_zero_grad" and j.premise


def test_labels_that_help_when_permuted_refute_shuffled_labels():
    """Labels that carry no signal are not improved by permuting them again; a clear
    improvement says their order mattered (batches sorted by class, say)."""
    base = {"gain[overfit_batch]": BETTER}
    assert _judge("shuffled_labels", {**base, "gain[labels_permuted]": UNMOVED}).status == "confirmed"
    assert _judge("shuffled_labels", {**base, "gain[labels_permuted]": BETTER}).status == "refuted"
    # clearly worse: labels partly shuffled still carry signal - not confirmed, not refuted
    assert _judge("shuffled_labels", {**base, "gain[labels_permuted]": -BETTER}).status == "not supported"


def test_a_confident_passive_cause_is_kept_unless_refuted():
    passive = _passive("lr_decayed_too_early", "high", "healthy")
    # its experiment was not measured: kept, but high needs an effect specific to it
    kept = [_judge("lr_decayed_too_early", {"lr_decayed": 1.0})]
    assert decide(kept, passive, True)[:2] == ("lr_decayed_too_early", "medium")
    # its experiment singled it out: high
    shown = [_judge("lr_decayed_too_early", {"lr_decayed": 1.0, "gain[lr*10]": BETTER})]
    assert decide(shown, passive, True, {"lr*10"})[:2] == ("lr_decayed_too_early", "high")
    # another cause confirmed: the passive cause is still not dropped
    other = kept + [_judge("huge_lr", {"gain[lr/10]": BETTER})]
    assert decide(other, passive, True, {"lr/10"})[0] == "lr_decayed_too_early"
    # its own experiment ran and did not show it: kept, at low confidence
    unsupported = [_judge("lr_decayed_too_early", {"lr_decayed": 1.0, "gain[lr*10]": UNMOVED,
                                                   "gain[lr*100]": UNMOVED})]
    assert unsupported[0].status == "not supported"
    assert decide(unsupported, passive, True)[:2] == ("lr_decayed_too_early", "low")
    # refuted: dropped
    refuted = [_judge("lr_decayed_too_early", {"lr_decayed": 0.0})]
    assert decide(refuted, passive, True)[0] is None


def test_validation_inputs_unlike_training_confirm_val_not_normalized_and_refute_overfitting():
    effects = {"val_inputs_shifted": 1.0}
    assert _judge("val_not_normalized", effects).status == "confirmed"
    assert _judge("overfitting", effects).status == "refuted"
    assert _judge("overfitting", {"val_inputs_shifted": 0.0}).status == "not tested"


def test_a_premise_proposes_its_cause_on_a_healthy_looking_curve():
    hyps = verdict.hypotheses(_passive(shape="healthy"), FAULTS, {"inputs_unscaled": 1.0})
    assert [h.fault for h in hyps] == ["no_input_norm"] and hyps[0].source == "premise"
    assert verdict.hypotheses(_passive(shape="healthy"), FAULTS, {"inputs_unscaled": 0.0}) == []


# --- the premise checks, measured on tiny parts ----------------------------------------

def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def _scaled_mlp(factor):
    def make():
        model = _mlp()
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(factor)
        return model
    return make


def _tiny_parts(model=_mlp, val_factor=1.0):
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(96, 8, generator=g), torch.randint(3, (96,), generator=g)
    batches = [(X[i:i + 32], y[i:i + 32]) for i in range(0, 64, 32)]
    val = [(X[64:] * val_factor, y[64:])]

    def step(m, opt, batch):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(batch[0]), batch[1])
        loss.backward()
        opt.step()
        return loss
    return make_parts(model, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), batches, step,
                      val_batches=val, steps=4)


def test_init_scale_sees_weights_far_from_the_framework_default_only():
    assert checks.init_scale(_tiny_parts()) == (0.0, 0.0)
    # Kaiming normal with the ReLU gain: within 2.5x of the default, not "off"
    assert checks.init_scale(_tiny_parts(_scaled_mlp(2.4))) == (0.0, 0.0)
    assert checks.init_scale(_tiny_parts(_scaled_mlp(10.0))) == (1.0, 0.0)
    assert checks.init_scale(_tiny_parts(_scaled_mlp(0.1))) == (0.0, 1.0)


def test_val_inputs_shifted_tells_another_preparation_from_sampling_noise():
    limit = 2.0
    assert checks.val_inputs_shifted(_tiny_parts(), limit) == 0.0  # one population, n=32
    assert checks.val_inputs_shifted(_tiny_parts(val_factor=255.0), limit) == 1.0
    no_val = _tiny_parts()
    no_val = replace(no_val, val_batches=())
    assert math.isnan(checks.val_inputs_shifted(no_val, limit))


class _MixesSamples(nn.Module):
    """A wrong reshape: (B, 8) read as (8, B) and back, so each output row mixes samples."""

    def __init__(self):
        super().__init__()
        self.net = _mlp()

    def forward(self, x):
        return self.net(x.t().reshape(x.shape))


def test_samples_mixed_sees_a_reshape_that_mixes_samples_not_batch_norm():
    assert checks.samples_mixed(_tiny_parts()) == 0.0
    assert checks.samples_mixed(_tiny_parts(_MixesSamples)) == 1.0
    bn = _tiny_parts(lambda: nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 3)))
    assert checks.samples_mixed(bn) == 0.0  # eval mode: running statistics, no coupling
    # a sample-independent model whose loss reads the outputs against other samples' targets
    wrong_pairing = replace(_tiny_parts(), loss=lambda out, y: nn.functional.cross_entropy(out, y.roll(1)))
    assert checks.samples_mixed(wrong_pairing) == 1.0
    assert checks.samples_mixed(replace(_tiny_parts(), loss=nn.functional.cross_entropy)) == 0.0
    assert _judge("shuffled_labels", {"gain[overfit_batch]": BETTER, "gain[labels_permuted]": UNMOVED,
                                      "samples_mixed": 1.0}).status == "refuted"


def test_lr_decayed_sees_a_schedule_that_decays_early_not_one_that_decays():
    """The check behind lr_decayed_too_early: schedules written for the run (cosine, a
    /10 step at a third, the zoo's x0.3 every third) are not early; a per-epoch
    schedule stepped every batch (/10 every 10 or 30 of 300 steps) is."""
    import numpy as np
    import pandas as pd

    t = np.arange(300)
    def early(lr):
        return ex.lr_decayed(pd.DataFrame({"lr": lr}))
    assert early(0.5 * (1 + np.cos(np.pi * t / 300))) == 0
    assert early(0.1 ** (t // 100)) == 0 == early(0.3 ** (t // 100)) == early(np.ones(300))
    assert early(0.1 ** (t // 10)) == 1 == early(0.1 ** (t // 30))
