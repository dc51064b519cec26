"""Live alerts: the course's warning signs, as signatures on the recent steps of a history.

Diagnosis explains a finished run; alerts are for a run in progress (`mon.alerts()`
every few dozen steps), so each looks only at a trailing window and fires early.  An
alert is a `Signature` (conditions on declared quantities, see `quantities`) evaluated
on that window: one rule set with the catalogue, which reads the same conditions
(`PARALLEL_GRADIENTS` is the forgotten zero_grad's mechanism in both).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..basics.text import Text
from .quantities import QUANTITIES
from .signatures import Condition, Signature
from .thresholds import ACCUMULATING_TURN, UPDATE_RATIO_HIGH, UPDATE_RATIO_LOW

WINDOW = 20  # recent steps each alert looks at
SPIKE = 5.0  # a gradient norm 5x its recent median foretells an explosion (course: 5-10x)
TREND = 3.0  # recent half-window mean gradient norm 3x the earlier half: trending up
PLATEAU = 0.01  # relative std of the loss under 1% over the window: a plateau

# Gradients that are never cleared add up (see thresholds.ACCUMULATING_TURN): the
# mechanism of the catalogue's no_zero_grad, and the live alert's, in one condition.
PARALLEL_GRADIENTS = Condition(
    "grad_turn_end", "<=", ACCUMULATING_TURN, "gradient turn (1 - cosine)",
    "a running sum of t gradients changes by one term in t, so consecutive sums are nearly "
    "parallel (turn ~1/t^2); fresh minibatch gradients turn by 0.35 or more in every "
    "healthy run",
    label_zh="梯度转角（1 - 余弦）",
    why_zh="t 个梯度的滑动和每步只变化 t 项中的一项，所以相邻两个和几乎平行（转角 ~1/t^2）；在每个健康"
           "的运行中，新鲜小批次的梯度转角都在 0.35 或以上")

# Guards the catalogue's no_zero_grad shares with the alert: parallel gradients have other
# causes (one-class batches, a model whose input no longer varies, weights the optimizer
# never steps), told apart where the history records them.
MIXED_BATCHES = Condition(
    "label_purity_median", "<=", 0.99, "median share of the batch's main class",
    "unless every batch holds one class: unshuffled data also make consecutive "
    "gradients parallel (checked where the labels, or a cross-entropy's output "
    "gradient that names them, are recorded)",
    log=False, unit=0.05, required=False, role="guard",
    label_zh="批次中主类别比例的中位数",
    why_zh="除非每个批次只有一个类别：未打乱的数据也会让相邻梯度平行（在记录了标签，或记录了能指明标签的交叉熵输出梯度时检查）")
CARRIED = Condition(
    "grad_carried_share", ">=", 0.5, "share of steps whose gradient was never emptied",
    "where the Monitor saw .grad at each backward pass, most steps found it never "
    "emptied: a loop that empties it every step reads 0, and parallel gradients then "
    "have another cause (a model whose input no longer varies, such as one that "
    "attends only to padding)", log=False, unit=0.1, required=False, role="guard",
    label_zh="梯度从未被清空的步数比例",
    why_zh="在 Monitor 能看到每次反向传播时 .grad 的地方，大多数步都发现它从未被清空：每一步都清空它"
           "的循环读数为 0，这时平行的梯度另有原因（模型的输入不再变化，比如只关注填充的模型）")
# The accumulation itself, seen where it happens (under clipping, or with Adam's
# normalised steps, the running sum need not stay parallel or grow): the catalogue's
# second route for no_zero_grad and the alert's.
NEVER_EMPTIED = Condition(
    "grad_carried_share", ">=", 0.5, "share of steps whose gradient was never emptied",
    "a loop that zeroes its gradients finds .grad empty at some backward pass of "
    "every step (0 in every healthy run, with clipping, loss scaling and "
    "micro-batches); a forgotten zero_grad() never does, and one that runs once "
    "per epoch of n steps misses n - 1 of them",
    log=False, unit=0.1,
    label_zh="梯度从未被清空的步数比例",
    why_zh="每一步都清零梯度的循环，在该步的某一次反向传播时会发现 .grad 是空的（所有健康运行中都为 "
           "0，包括梯度裁剪、损失缩放和微批次累加）；忘了 zero_grad() 的循环永远不会；每个 epoch "
           "只清零一次、每个 epoch 有 n 步的循环，有 n - 1 步没有清空")
ALL_OPTIMIZED = Condition(
    "unoptimized_max", "<=", 0.5, "parameters outside the optimizer",
    "every parameter that gets a gradient is in the optimizer (checked when "
    "recorded): otherwise that alone explains weights that do not move",
    log=False, required=False, role="guard",
    label_zh="不在优化器中的参数",
    why_zh="每个得到梯度的参数都在优化器中（记录时检查）：否则单凭这一点就能解释权重为什么不动")

MESSAGES = {
    "nonfinite": Text("non-finite values from step {first_nonfinite_step:.0f} "
                      "({nonfinite_values:.0f} in loss and gradients): stop and find where "
                      "they entered (inputs, loss or gradients)",
                      "从第 {first_nonfinite_step:.0f} 步起出现非有限值（损失和梯度中共 "
                      "{nonfinite_values:.0f} 个）：停下来，找出它们从哪里进入（输入、损失还是梯度）"),
    "accumulating": Text("consecutive gradients are parallel (median cosine "
                         "{grad_cosine_end:.4f}) while the gradient norm went "
                         "{grad_norm_first:.3g} -> {grad_norm_last:.3g}: gradients are adding "
                         "up across steps - is zero_grad() called before each backward?",
                         "相邻梯度互相平行（余弦中位数 {grad_cosine_end:.4f}），同时梯度范数从 "
                         "{grad_norm_first:.3g} 变为 {grad_norm_last:.3g}：梯度在各步之间不断累加。"
                         "每次 backward 之前都调用了 zero_grad() 吗？"),
    "never_emptied": Text("the gradient was never emptied on {grad_carried_share:.0%} of the "
                          "steps: gradients are adding up across steps - is zero_grad() "
                          "called before each backward?",
                          "{grad_carried_share:.0%} 的步里梯度从未被清空：梯度在各步之间不断累加。"
                          "每次 backward 之前都调用了 zero_grad() 吗？"),
    "grad_spike": Text("gradient norm {grad_norm_last:.3g} is {grad_norm_jump:.1f}x its "
                       "recent median {grad_norm_before_last:.3g}: an explosion may be starting",
                       "梯度范数 (gradient norm) {grad_norm_last:.3g} 是近期中位数 "
                       "{grad_norm_before_last:.3g} 的 {grad_norm_jump:.1f} 倍：可能正在开始爆炸"),
    "grad_trend": Text("gradient norm trending up: {grad_norm_trend:.1f}x between the halves "
                       "of the last {steps_seen:.0f} steps",
                       "梯度范数呈上升趋势：最近 {steps_seen:.0f} 步的后半段是前半段的 "
                       "{grad_norm_trend:.1f} 倍"),
    "ratio_high": Text("median update ratio {update_ratio_median:.2g} > {limit:g}: each step "
                       "rewrites a large share of the weights (rate too high?)",
                       "更新比 (update ratio) 中位数 {update_ratio_median:.2g} > {limit:g}：每一步"
                       "都改写了权重的很大一部分（学习率过高？）"),
    "ratio_low": Text("median update ratio {update_ratio_median:.2g} < {limit:g}: the weights "
                      "barely move (rate too low, or vanishing gradients?)",
                      "更新比中位数 {update_ratio_median:.2g} < {limit:g}：权重几乎不动（学习率过低，"
                      "还是梯度消失？）"),
    "plateau": Text("loss relative spread {loss_spread:.2%} over the last {steps_seen:.0f} "
                    "steps (< 1%): it has stopped moving at {loss_level:.3g}",
                    "最近 {steps_seen:.0f} 步损失的相对波动为 {loss_spread:.2%}（< 1%）：损失已停在 "
                    "{loss_level:.3g} 不再变化"),
}
KINDS = {"ratio_high": "update_ratio", "ratio_low": "update_ratio",  # message -> Alert.kind
         "never_emptied": "accumulating"}
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
    read = rows_read(window)
    if read is not None:
        history = history.iloc[-read:]  # the rows any rule reads, whatever the run's length
    step = int(history["step"].iloc[-1]) if "step" in history else len(history) - 1
    found, kinds = [], set()
    for rule in rules(window):
        recent = history.iloc[-(window + rule.lookback):]
        evidence = rule.signature.evaluate(rule.key, recent)
        kind = KINDS.get(rule.key, rule.key)
        if evidence.fired and kind not in kinds:  # one alert per kind: its first route
            kinds.add(kind)
            values = {**evidence.values, **{q: QUANTITIES[q](recent) for q in rule.quotes},
                      "limit": rule.signature.conditions[0].threshold}
            found.append(Alert(step, kind, MESSAGES[rule.key].say(lang, **values), lang))
    return found


def rows_read(window) -> int | None:
    """How many trailing rows the alerts for `window` read (the window and the longest
    lookback): `Monitor.alerts` hands over only those, so a call costs the same at step
    10^6 as at step 100.  None for a window that is not a positive int (all rows)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return None
    return window + max(rule.lookback for rule in rules(window))


@dataclass(frozen=True)
class Rule:
    """One warning sign: a signature evaluated on the trailing window (plus `lookback`
    steps before it), and the quantities its message quotes besides the conditions'."""

    key: str  # a key of MESSAGES
    signature: Signature
    quotes: tuple[str, ...] = ()
    lookback: int = 0


def _at_least(quantity: str, threshold: float, label: str, log: bool = True,
              role: str = "mechanism") -> Condition:
    return Condition(quantity, ">=", threshold, label, "a live warning sign", log=log, role=role)


def _at_most(quantity: str, threshold: float, label: str, log: bool = True,
             role: str = "mechanism") -> Condition:
    return Condition(quantity, "<=", threshold, label, "a live warning sign", log=log, role=role)


def rules(window: int = WINDOW) -> tuple[Rule, ...]:
    """The warning signs, in the order they are reported, for a window of `window` steps."""
    def seen(n):  # the window holds at least n steps
        return _at_least("steps_seen", n, "steps in the window", log=False, role="guard")

    def sign(*conditions):
        return Signature(conditions, "a warning sign")

    return (
        Rule("nonfinite", sign(_at_least("nonfinite_steps", 0.5, "steps with non-finite "
                                         "values", log=False)),
             ("first_nonfinite_step", "nonfinite_values")),
        Rule("accumulating", sign(PARALLEL_GRADIENTS, MIXED_BATCHES, CARRIED, ALL_OPTIMIZED,
                                  seen(4),
                                  _at_least("grad_or_loss_rose", 0.5, "gradient or loss "
                                            "rose", log=False, role="guard")),
             ("grad_cosine_end", "grad_norm_first", "grad_norm_last")),
        Rule("never_emptied", sign(NEVER_EMPTIED, ALL_OPTIMIZED)),
        Rule("grad_spike", sign(_at_least("grad_norm_jump", SPIKE, "gradient norm over its "
                                          "recent median"), seen(window + 1)),
             ("grad_norm_last", "grad_norm_before_last"), lookback=1),
        Rule("grad_trend", sign(_at_least("grad_norm_trend", TREND, "gradient norm trend"),
                                seen(4))),
        Rule("ratio_high", sign(_at_least("update_ratio_median", UPDATE_RATIO_HIGH,
                                          "median update ratio"))),
        Rule("ratio_low", sign(_at_most("update_ratio_median", UPDATE_RATIO_LOW,
                                        "median update ratio"))),
        Rule("plateau", sign(_at_most("loss_spread", PLATEAU, "loss relative spread"),
                             seen(window),
                             _at_most("nonfinite_losses", 0.5, "non-finite losses", log=False,
                                      role="guard")),
             ("loss_level",)),
    )
