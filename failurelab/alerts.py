"""Live alerts: the course's warning signs, checked on the recent steps of a history.

Diagnosis explains a finished run; alerts are for a run in progress (`mon.alerts()`
every few dozen steps), so each looks only at a recent window and fires early.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

WINDOW = 20  # recent steps each alert looks at
SPIKE = 5.0  # a gradient norm 5x its recent median foretells an explosion (course: 5-10x)
TREND = 3.0  # recent half-window mean gradient norm 3x the earlier half: trending up
RATIO_LOW, RATIO_HIGH = 1e-4, 1e-1  # median update ratio outside: too timid / too violent
PLATEAU = 0.01  # relative std of the loss under 1% over the window: a plateau
# Gradients that are never cleared add up: after t steps the stored gradient is a sum
# of t terms and one more changes its direction by ~1/t, so consecutive gradients have
# cosine ~1 - 1/(2 t^2) (0.995 from step 10 on).  Fresh minibatch gradients are never
# that parallel: healthy lab and foreign runs stay at or below a window median of 0.86.
PARALLEL = 0.99


@dataclass(frozen=True)
class Alert:
    step: int  # the last step the alert looked at
    kind: str  # nonfinite | accumulating | grad_spike | grad_trend | update_ratio | plateau
    message: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.message}"


def alerts(history: pd.DataFrame, window: int = WINDOW) -> list[Alert]:
    """Warning signs in the last `window` steps of `history` (empty when all is well)."""
    if history.empty or "loss" not in history:
        return []
    recent = history.iloc[-window:]
    step = int(recent["step"].iloc[-1]) if "step" in recent else len(history) - 1
    found = [_nonfinite(recent), _accumulating(recent), _grad_spike(history, window),
             _grad_trend(recent), _update_ratio(recent), _plateau(recent, window)]
    return [Alert(step, kind, message) for kind, message in filter(None, found)]


def _nonfinite(recent):
    loss = recent["loss"].to_numpy(dtype=float)
    bad = recent["nonfinite"].fillna(0).to_numpy() if "nonfinite" in recent else 0 * loss
    hits = np.flatnonzero((~np.isfinite(loss)) | (bad > 0))
    if not len(hits):
        return None
    first = int(recent["step"].iloc[hits[0]]) if "step" in recent else int(hits[0])
    return "nonfinite", (f"non-finite values from step {first} "
                         f"({int(np.nansum(bad[hits]))} in loss and gradients): stop and "
                         f"find where they entered (inputs, loss or gradients)")


def _accumulating(recent):
    """Consecutive gradients stay parallel while the gradient or the loss grows: the
    gradients are being summed, not replaced (a forgotten or misplaced zero_grad).  A
    healthy full-batch run can be parallel too, but its gradient and loss shrink."""
    if "grad_cosine" not in recent or "grad_norm" not in recent or len(recent) < 4:
        return None
    cosine = recent["grad_cosine"].median()
    g = recent["grad_norm"].to_numpy(dtype=float)
    loss = recent["loss"].to_numpy(dtype=float)
    if not cosine >= PARALLEL or not (g[-1] > g[0] or loss[-1] > loss[0]):
        return None
    return "accumulating", (f"consecutive gradients are parallel (median cosine "
                            f"{cosine:.4f}) while the gradient norm went {g[0]:.3g} -> "
                            f"{g[-1]:.3g}: gradients are adding up across steps - is "
                            f"zero_grad() called before each backward?")


def _grad_spike(history, window):
    if "grad_norm" not in history or len(history) < window + 1:
        return None
    g = history["grad_norm"].to_numpy(dtype=float)
    earlier = g[-window - 1:-1]
    earlier = earlier[np.isfinite(earlier)]  # economy rows and skipped steps have none
    if not len(earlier):
        return None
    last, before = g[-1], float(np.median(earlier))
    if math.isfinite(last) and before > 0 and last >= SPIKE * before:
        return "grad_spike", (f"gradient norm {last:.3g} is {last / before:.1f}x its recent "
                              f"median {before:.3g}: an explosion may be starting")
    return None


def _grad_trend(recent):
    if "grad_norm" not in recent or len(recent) < 4:
        return None
    g = recent["grad_norm"].to_numpy(dtype=float)
    early, late = (float(pd.Series(half).mean()) for half in (g[:len(g) // 2], g[len(g) // 2:]))
    if early > 0 and late >= TREND * early:
        return "grad_trend", (f"gradient norm trending up: {late / early:.1f}x between the "
                              f"halves of the last {len(g)} steps")
    return None


def _update_ratio(recent):
    if "update_ratio" not in recent or recent["update_ratio"].isna().all():
        return None
    ratio = float(recent["update_ratio"].median())
    if ratio > RATIO_HIGH:
        return "update_ratio", (f"median update ratio {ratio:.2g} > {RATIO_HIGH:g}: each step "
                                f"rewrites a large share of the weights (rate too high?)")
    if 0 <= ratio < RATIO_LOW:
        return "update_ratio", (f"median update ratio {ratio:.2g} < {RATIO_LOW:g}: the weights "
                                f"barely move (rate too low, or vanishing gradients?)")
    return None


def _plateau(recent, window):
    loss = recent["loss"].to_numpy(dtype=float)
    loss = loss[np.isfinite(loss)]
    if len(loss) < window or loss.mean() <= 0:
        return None
    spread = loss.std() / loss.mean()
    if spread < PLATEAU:
        return "plateau", (f"loss relative spread {spread:.2%} over the last {len(loss)} "
                           f"steps (< 1%): it has stopped moving at {loss.mean():.3g}")
    return None
