"""Live alerts: the course's warning signs, checked on the recent steps of a history.

Diagnosis explains a finished run; alerts are for a run in progress (`mon.alerts()`
every few dozen steps), so each looks only at a recent window and fires early.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..basics.text import Text

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


MESSAGES = {
    "nonfinite": Text("non-finite values from step {first} ({count} in loss and gradients): "
                      "stop and find where they entered (inputs, loss or gradients)",
                      "从第 {first} 步起出现非有限值（损失和梯度中共 {count} 个）：停下来，找出它们"
                      "从哪里进入（输入、损失还是梯度）"),
    "accumulating": Text("consecutive gradients are parallel (median cosine {cosine:.4f}) "
                         "while the gradient norm went {first:.3g} -> {last:.3g}: gradients "
                         "are adding up across steps - is zero_grad() called before each "
                         "backward?",
                         "相邻梯度互相平行（余弦中位数 {cosine:.4f}），同时梯度范数从 {first:.3g} "
                         "变为 {last:.3g}：梯度在各步之间不断累加。每次 backward 之前都调用了 "
                         "zero_grad() 吗？"),
    "grad_spike": Text("gradient norm {last:.3g} is {ratio:.1f}x its recent median "
                       "{before:.3g}: an explosion may be starting",
                       "梯度范数 (gradient norm) {last:.3g} 是近期中位数 {before:.3g} 的 "
                       "{ratio:.1f} 倍：可能正在开始爆炸"),
    "grad_trend": Text("gradient norm trending up: {ratio:.1f}x between the halves of the "
                       "last {steps} steps",
                       "梯度范数呈上升趋势：最近 {steps} 步的后半段是前半段的 {ratio:.1f} 倍"),
    "ratio_high": Text("median update ratio {ratio:.2g} > {limit:g}: each step rewrites a "
                       "large share of the weights (rate too high?)",
                       "更新比 (update ratio) 中位数 {ratio:.2g} > {limit:g}：每一步都改写了权重的"
                       "很大一部分（学习率过高？）"),
    "ratio_low": Text("median update ratio {ratio:.2g} < {limit:g}: the weights barely move "
                      "(rate too low, or vanishing gradients?)",
                      "更新比中位数 {ratio:.2g} < {limit:g}：权重几乎不动（学习率过低，还是梯度消失？）"),
    "plateau": Text("loss relative spread {spread:.2%} over the last {steps} steps (< 1%): it "
                    "has stopped moving at {level:.3g}",
                    "最近 {steps} 步损失的相对波动为 {spread:.2%}（< 1%）：损失已停在 {level:.3g} "
                    "不再变化"),
}
KINDS = {"ratio_high": "update_ratio", "ratio_low": "update_ratio"}  # message -> Alert.kind
STEP = Text("step {step}: {message}", "第 {step} 步：{message}")


@dataclass(frozen=True)
class Alert:
    step: int  # the last step the alert looked at
    kind: str  # nonfinite | accumulating | grad_spike | grad_trend | update_ratio | plateau
    message: str

    lang: str | None = None  # the language of `message` (None: $FAILURELAB_LANG or en)

    def __str__(self) -> str:
        return STEP.say(self.lang, step=self.step, message=self.message)


def alerts(history: pd.DataFrame, window: int = WINDOW,
           lang: str | None = None) -> list[Alert]:
    """Warning signs in the last `window` steps of `history` (empty when all is well),
    worded in `lang`."""
    if history.empty or "loss" not in history:
        return []
    recent = history.iloc[-window:]
    step = int(recent["step"].iloc[-1]) if "step" in recent else len(history) - 1
    found = [_nonfinite(recent), _accumulating(recent), _grad_spike(history, window),
             _grad_trend(recent), _update_ratio(recent), _plateau(recent, window)]
    return [Alert(step, KINDS.get(key, key),
                  MESSAGES[key].say(lang, **values), lang)
            for key, values in filter(None, found)]


def _nonfinite(recent):
    loss = recent["loss"].to_numpy(dtype=float)
    bad = recent["nonfinite"].fillna(0).to_numpy() if "nonfinite" in recent else 0 * loss
    hits = np.flatnonzero((~np.isfinite(loss)) | (bad > 0))
    if not len(hits):
        return None
    first = int(recent["step"].iloc[hits[0]]) if "step" in recent else int(hits[0])
    return "nonfinite", {"first": first, "count": int(np.nansum(bad[hits]))}


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
    return "accumulating", {"cosine": cosine, "first": g[0], "last": g[-1]}


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
        return "grad_spike", {"last": last, "ratio": last / before, "before": before}
    return None


def _grad_trend(recent):
    if "grad_norm" not in recent or len(recent) < 4:
        return None
    g = recent["grad_norm"].to_numpy(dtype=float)
    early, late = (float(pd.Series(half).mean()) for half in (g[:len(g) // 2], g[len(g) // 2:]))
    if early > 0 and late >= TREND * early:
        return "grad_trend", {"ratio": late / early, "steps": len(g)}
    return None


def _update_ratio(recent):
    if "update_ratio" not in recent or recent["update_ratio"].isna().all():
        return None
    ratio = float(recent["update_ratio"].median())
    if ratio > RATIO_HIGH:
        return "ratio_high", {"ratio": ratio, "limit": RATIO_HIGH}
    if 0 <= ratio < RATIO_LOW:
        return "ratio_low", {"ratio": ratio, "limit": RATIO_LOW}
    return None


def _plateau(recent, window):
    loss = recent["loss"].to_numpy(dtype=float)
    loss = loss[np.isfinite(loss)]
    if len(loss) < window or loss.mean() <= 0:
        return None
    spread = loss.std() / loss.mean()
    if spread < PLATEAU:
        return "plateau", {"spread": spread, "steps": len(loss), "level": loss.mean()}
    return None
