"""The course's loss-curve taxonomy, decided from named quantities (see `quantities`).

`classify` is pure: it reads a dict of measured values, so the diagnosis, the
signatures' generic effect ("the curve is not healthy") and every readout name the
same shape from the same numbers.
"""

from __future__ import annotations

from ..basics.text import Text, language
from .thresholds import LOSS_DIVERGED

SHAPES = ("diverging", "oscillating", "plateau", "stepwise", "degrading", "nonfinite",
          "healthy")  # "healthy": the loss looks fine; only a dedicated measurement shows it

# The quantities the rules read (each a name in quantities.QUANTITIES).
INPUTS = ("nonfinite_losses", "first_nonfinite", "loss_progress", "loss_peak_ratio",
          "loss_swing", "loss_end_spread", "val_loss_rise", "loss_start", "loss_end",
          "negative_loss_growth", "loss_late_fall", "val_loss_start", "val_loss_progress")

# --- thresholds, checked in the order of `classify` ------------------------------------
BLOWUP = LOSS_DIVERGED  # a final loss 10x the initial one has blown up, NaN or not
SWING = 0.3  # smoothed swings (interquartile) of 30% of the loss scale: healthy runs of
#             every zoo family and optimizer stay under 0.2, the lab's baselines under 0.1
STEP_PEAK = 3.0  # swings that reach 3x the initial loss are jumps, not noise
RISE = 1.3  # a loss that peaked 30% above its start and never came back below it diverged
STUCK = 0.2  # removing under 20% of the initial loss: the curve never left its level
DEGRADING = 0.15  # validation loss 0.15 nats above its smoothed minimum (healthy <= 0.07)
DEGRADING_SHARE = 0.06  # ...and that rise is 6% of the first validation loss or more:
#                         0.15 nats is 6.5% of a chance-level cross-entropy over 10 classes
#                         (2.3 nats); on a loss of another scale (an MSE on raw targets in
#                         the tens) nats mean nothing and the share decides.  The faults
#                         that degrade give back 13% or more, FARM's healthy head 0.3%.
TRAINS = 0.5  # ...while training removed half of its initial loss
CONVERGED = 0.35  # a loss that stopped with under 35% removed has stalled: healthy runs
#                   of every zoo family remove 47% or more (binary cross-entropy on noisy
#                   labels the least; the lab's baselines 88%), so the line sits one
#                   tenth of the initial loss below the healthy population's edge
QUIET = 0.35  # a stalled loss is quiet: end-window std under 35% of its level (healthy
#               runs near zero loss fluctuate by 40% or more)
STILL_FALLING = 0.25  # a stall has stopped: a loss whose second half still brought a
#                       quarter of its whole fall (a linear decline brings 0.44, one that
#                       slows like the square root of time 0.25, a settled one under 0.1)
#                       was still going when the run stopped - slow, not stalled
LEARNED = 0.75  # a validation loss that lost three quarters of its first value says the
#                 model learned: a training loss stuck high beside it has a floor of its
#                 own (a distillation or regularisation term, a training-only penalty);
#                 the stalled faults of the zoo remove 59% of their validation loss at most
BORDERLINE = 0.15  # within 15% of a deciding threshold, the other side is named too


# Each shape's name and a one-line explanation, in both languages.
NAMES = {
    "diverging": Text("diverging", "发散"),
    "oscillating": Text("oscillating", "振荡"),
    "plateau": Text("plateau", "平台期"),
    "stepwise": Text("stepwise", "阶跃"),
    "degrading": Text("degrading", "退化"),
    "nonfinite": Text("nonfinite", "非有限值"),
    "healthy": Text("healthy", "健康"),
}
EXPLANATIONS = {
    "diverging": Text("the loss rises and may end in Inf/NaN",
                      "损失不断上升，最后可能变成 Inf/NaN"),
    "oscillating": Text("the loss swings widely and irregularly",
                        "损失大幅、无规律地来回摆动"),
    "plateau": Text("the loss drops, then sticks high (or never leaves its start)",
                    "损失下降后停在高位（或者从一开始就没动）"),
    "stepwise": Text("the loss jumps suddenly, then recovers", "损失突然跳高，随后又回落"),
    "degrading": Text("the training loss is fine while validation gets worse",
                      "训练损失正常，验证集上的表现却越来越差"),
    "nonfinite": Text("the loss turns NaN/Inf without rising first",
                      "损失没有先上升，就直接变成 NaN/Inf"),
    "healthy": Text("the loss falls and settles", "损失下降并趋于稳定"),
}

# The measurements that decided a shape, as `classify` words them.
EVIDENCE = {
    "rose_nonfinite": Text("the loss rose to {peak:.3g}x its start, then turned non-finite",
                           "损失升到初始值的 {peak:.3g} 倍，随后变成非有限值"),
    "nonfinite": Text("the loss turned non-finite at step {step:.0f} without rising first",
                      "损失在第 {step:.0f} 步没有先上升就变成了非有限值"),
    "blowup": Text("the loss ended {ratio:.3g}x its start", "损失最终是初始值的 {ratio:.3g} 倍"),
    "no_floor": Text("the loss started below zero ({start:.3g}) and ended {ratio:.3g}x as far "
                     "below it ({end:.3g}): it has no floor",
                     "损失从零以下（{start:.3g}）开始，最终离零远了 {ratio:.3g} 倍（{end:.3g}）：它没有下界"),
    "negative": Text("the loss started below zero ({start:.3g}) and ended at {end:.3g}",
                     "损失从零以下（{start:.3g}）开始，最终为 {end:.3g}"),
    "swings": Text("smoothed swings of {swing:.2f} of the loss scale, peaking at {peak:.3g}x "
                   "the start", "平滑后的摆动幅度为损失尺度的 {swing:.2f}，峰值达到初始值的 "
                   "{peak:.3g} 倍"),
    "rose": Text("the loss peaked at {peak:.3g}x its start and ended {above:.0%} above it",
                 "损失峰值为初始值的 {peak:.3g} 倍，最终比初始值高 {above:.0%}"),
    "rose_level": Text("the loss peaked at {peak:.3g}x its start and ended back at its start, "
                       "no lower", "损失峰值为初始值的 {peak:.3g} 倍，最终回到初始值，没有更低"),
    "stuck": Text("the loss stayed at its initial level (progress {progress:.0%})",
                  "损失停在初始水平（下降幅度 {progress:.0%}）"),
    "stuck_above": Text("the loss stayed at its initial level (it ended {above:.0%} above it)",
                        "损失停在初始水平（最终比初始值高 {above:.0%}）"),
    "degrading": Text("training removed {progress:.0%} of the loss while validation loss "
                      "rose {rise:.2f} above its minimum",
                      "训练消除了 {progress:.0%} 的损失，而验证损失比其最低点高出 {rise:.2f}"),
    "stalled": Text("the loss stalled at {left:.0%} of its start with little noise "
                    "(relative std {spread:.2f})",
                    "损失停滞在初始值的 {left:.0%}，噪声很小（相对标准差 {spread:.2f}）"),
    "healthy": Text("training removed {progress:.0%} of the initial loss",
                    "训练消除了初始损失的 {progress:.0%}"),
    "still_falling": Text("training removed {progress:.0%} of the initial loss and was still "
                          "removing it when the run stopped ({late:.0%} of the fall came in "
                          "the second half): slow, not stalled",
                          "训练消除了初始损失的 {progress:.0%}，运行停止时损失仍在下降（{late:.0%} "
                          "的降幅出现在后半程）：是慢，而不是停滞"),
    "learned": Text("the training loss kept {left:.0%} of its start, but the validation loss "
                    "lost {val:.0%} of its own: the model learned, and the training loss has a "
                    "floor of its own",
                    "训练损失保留了初始值的 {left:.0%}，而验证损失消除了自身的 {val:.0%}：模型学到了"
                    "东西，训练损失有它自己的下限"),
}


def name(shape: str, lang: str | None = None) -> str:
    """A shape as a student reads it: "plateau", or "平台期 (plateau)" in Chinese."""
    text = NAMES.get(shape)
    if text is None or language(lang) == "en":
        return shape
    return f"{text.zh} ({shape})"


def classify(q: dict[str, float], lang: str | None = None) -> tuple[str, str, str | None]:
    """(shape, the measurements that decided it in `lang`, the other side when
    borderline)."""
    shape, key, values, other = _decide(q)
    return shape, EVIDENCE[key].say(lang, **values), other


def _decide(q: dict[str, float]) -> tuple[str, str, dict, str | None]:
    """(shape, the EVIDENCE key, its values, the borderline alternative)."""
    progress, peak = q["loss_progress"], q["loss_peak_ratio"]
    progress = 0.0 if abs(progress) < 0.005 else progress  # no "-0%" in the evidence
    swing, spread, rise = q["loss_swing"], q["loss_end_spread"], q["val_loss_rise"]
    if q["nonfinite_losses"] > 0:
        if peak >= STEP_PEAK:
            return "diverging", "rose_nonfinite", {"peak": peak}, None
        return "nonfinite", "nonfinite", {"step": q["first_nonfinite"]}, None
    if progress <= 1 - BLOWUP:
        return "diverging", "blowup", {"ratio": 1 - progress}, None
    if q["loss_start"] < 0:  # progress is not defined: no share of a negative loss is removed
        values = {"start": q["loss_start"], "end": q["loss_end"]}
        if q["negative_loss_growth"] >= BLOWUP:  # minimised without a floor
            return "diverging", "no_floor", {**values, "ratio": q["negative_loss_growth"]}, None
        return "healthy", "negative", values, None
    if swing >= SWING:
        kind = "stepwise" if peak >= STEP_PEAK else "oscillating"
        other = "oscillating" if kind == "stepwise" else "stepwise"
        return kind, "swings", {"swing": swing, "peak": peak}, _near(peak, STEP_PEAK, other)
    if peak >= RISE and progress <= 0:  # progress 0 is snapped above: never "-0% above"
        key, values = ("rose", {"peak": peak, "above": -progress}) if progress < 0 else \
            ("rose_level", {"peak": peak})
        return "diverging", key, values, _near(peak, RISE, "plateau")
    learned = q["val_loss_progress"] >= LEARNED  # False when there is no validation
    if progress <= STUCK and not learned:  # a loss that ended above its start says so
        if progress < 0:
            return "plateau", "stuck_above", {"above": -progress}, None
        return "plateau", "stuck", {"progress": progress}, None
    if rise >= DEGRADING and rise >= DEGRADING_SHARE * q["val_loss_start"] \
            and progress >= TRAINS:
        return "degrading", "degrading", {"progress": progress, "rise": rise}, \
            _near(rise, DEGRADING, "healthy")
    if progress < CONVERGED and learned:
        return "healthy", "learned", {"left": 1 - progress, "val": q["val_loss_progress"]}, \
            "plateau"
    late = q["loss_late_fall"]
    if progress < CONVERGED and spread < QUIET:
        if late >= STILL_FALLING:
            return "healthy", "still_falling", {"progress": progress, "late": late}, \
                _near(late, STILL_FALLING, "plateau")
        return "plateau", "stalled", {"left": 1 - progress, "spread": spread}, \
            _near(progress, CONVERGED, "healthy") or _near(late, STILL_FALLING, "healthy")
    alternative = _near(rise, DEGRADING, "degrading") if rise == rise else None
    return "healthy", "healthy", {"progress": progress}, alternative


def _near(value: float, threshold: float, other: str) -> str | None:
    """Name the other shape when the deciding value sits close to its threshold."""
    if value != value or threshold == 0:
        return None
    return other if abs(value - threshold) <= BORDERLINE * abs(threshold) else None
