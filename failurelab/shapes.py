"""The course's loss-curve taxonomy, decided from named quantities (see `quantities`).

`classify` is pure: it reads a dict of measured values, so the diagnosis, the
signatures' generic effect ("the curve is not healthy") and every readout name the
same shape from the same numbers.
"""

from __future__ import annotations

SHAPES = ("diverging", "oscillating", "plateau", "stepwise", "degrading", "nonfinite",
          "healthy")  # "healthy": the loss looks fine; only a dedicated measurement shows it

# The quantities the rules read (each a name in quantities.QUANTITIES).
INPUTS = ("nonfinite_losses", "first_nonfinite", "loss_progress", "loss_peak_ratio",
          "loss_swing", "loss_end_spread", "val_loss_rise")

# --- thresholds, checked in the order of `classify` ------------------------------------
BLOWUP = 10.0  # a final loss 10x the initial one has blown up, NaN or not
SWING = 0.3  # smoothed swings (interquartile) of 30% of the loss scale: healthy runs of
#             every zoo family and optimizer stay under 0.2, the lab's baselines under 0.1
STEP_PEAK = 3.0  # swings that reach 3x the initial loss are jumps, not noise
RISE = 1.3  # a loss that peaked 30% above its start and never came back below it diverged
STUCK = 0.2  # removing under 20% of the initial loss: the curve never left its level
DEGRADING = 0.15  # validation loss 0.15 nats above its smoothed minimum (healthy <= 0.07)
TRAINS = 0.5  # ...while training removed half of its initial loss
CONVERGED = 0.35  # a loss that stopped with under 35% removed has stalled: healthy runs
#                   of every zoo family remove 47% or more (binary cross-entropy on noisy
#                   labels the least; the lab's baselines 88%), so the line sits one
#                   tenth of the initial loss below the healthy population's edge
QUIET = 0.35  # a stalled loss is quiet: end-window std under 35% of its level (healthy
#               runs near zero loss fluctuate by 40% or more)
BORDERLINE = 0.15  # within 15% of a deciding threshold, the other side is named too


def classify(q: dict[str, float]) -> tuple[str, str, str | None]:
    """(shape, the measurements that decided it, the other side when borderline)."""
    progress, peak = q["loss_progress"], q["loss_peak_ratio"]
    progress = 0.0 if abs(progress) < 0.005 else progress  # no "-0%" in the evidence
    swing, spread, rise = q["loss_swing"], q["loss_end_spread"], q["val_loss_rise"]
    if q["nonfinite_losses"] > 0:
        if peak >= STEP_PEAK:
            return "diverging", f"the loss rose to {peak:.3g}x its start, then turned " \
                                f"non-finite", None
        return "nonfinite", f"the loss turned non-finite at step " \
                            f"{q['first_nonfinite']:.0f} without rising first", None
    if progress <= 1 - BLOWUP:
        return "diverging", f"the loss ended {1 - progress:.3g}x its start", None
    if swing >= SWING:
        kind = "stepwise" if peak >= STEP_PEAK else "oscillating"
        other = "oscillating" if kind == "stepwise" else "stepwise"
        return kind, f"smoothed swings of {swing:.2f} of the loss scale, peaking at " \
                     f"{peak:.3g}x the start", _near(peak, STEP_PEAK, other)
    if peak >= RISE and progress <= 0:
        return "diverging", f"the loss peaked at {peak:.3g}x its start and ended " \
                            f"{-progress:.0%} above it", _near(peak, RISE, "plateau")
    if progress <= STUCK:
        return "plateau", f"the loss stayed at its initial level (progress " \
                          f"{progress:.0%})", None
    if rise >= DEGRADING and progress >= TRAINS:
        return "degrading", f"training removed {progress:.0%} of the loss while validation " \
                            f"loss rose {rise:.2f} above its minimum", \
            _near(rise, DEGRADING, "healthy")
    if progress < CONVERGED and spread < QUIET:
        return "plateau", f"the loss stalled at {1 - progress:.0%} of its start with little " \
                          f"noise (relative std {spread:.2f})", _near(progress, CONVERGED,
                                                                      "healthy")
    alternative = _near(rise, DEGRADING, "degrading") if rise == rise else None
    return "healthy", f"training removed {progress:.0%} of the initial loss", alternative


def _near(value: float, threshold: float, other: str) -> str | None:
    """Name the other shape when the deciding value sits close to its threshold."""
    if value != value or threshold == 0:
        return None
    return other if abs(value - threshold) <= BORDERLINE * abs(threshold) else None
