"""Conditions that several faults' signatures share."""

from __future__ import annotations

from ..evidence.alerts import ALL_OPTIMIZED  # noqa: F401 - shared with the live alert
from ..evidence.signatures import Condition as C
from ..evidence.thresholds import LOSS_ROSE, UPDATE_RATIO_LOW

UNHEALTHY = C("unhealthy_curve", ">=", 0.5, "loss curve unhealthy",
              "the generic effect: the loss curve has one of the course's failure shapes "
              "(diverging, plateau, oscillating, ...), decided by the same rules the "
              "diagnosis names the shape with", log=False, unit=0.5, role="effect",
              label_zh="损失曲线不健康",
              why_zh="通用的效应：损失曲线属于课程中的某种失败形状（发散、平台期、振荡……），由诊断判定形状时"
                     "所用的同一套规则决定")
# The loss takes a softmax of the model's output (the routes add why that matters to them)
SOFTMAX_LOSS = C("output_softmax_share", ">=", 0.5, "share of steps whose output gradient "
                 "is a softmax cross-entropy's",
                 "the gradient's rows sum to 0, as softmax's p - y does: the loss takes a "
                 "softmax of that output", log=False, unit=0.1, role="guard",
                 label_zh="输出梯度为 softmax 交叉熵梯度的步数比例",
                 why_zh="梯度的每一行之和为 0，正如 softmax 的 p - y 那样：损失对这个输出取了 softmax")
STUCK = C("loss_progress", "<=", 0.1, "loss progress",
          "a training run that removes less than 10% of its starting loss has not "
          "learned; healthy runs of every family remove most of theirs", log=False,
          unit=0.1, role="effect",
          label_zh="损失下降幅度",
          why_zh="消除不到初始损失 10% 的训练运行没有学到东西；每个家族的健康运行都能消除大部分损失")
LEARNS = C("loss_progress", ">=", 0.5, "loss progress",
           "the loss still falls by half: the model itself can learn", log=False, unit=0.1,
           label_zh="损失下降幅度",
           why_zh="损失仍下降了一半：模型本身能学习")
TINY_STEPS = C("update_ratio_median", "<=", UPDATE_RATIO_LOW, "median update ratio",
               "steps under 0.01% of the weights need > 10^4 steps to move them by "
               "their own size",
               label_zh="更新比的中位数",
               why_zh="步长低于权重的 0.01% 时，要走 > 10^4 步才能让权重移动与自身相当的距离")
MOVING = C("update_ratio_median", ">=", 5e-4, "median update ratio",
           "the optimizer changes the weights by a healthy share each step; 5e-4 is 10x "
           "above a too-small rate", role="guard",
           label_zh="更新比的中位数",
           why_zh="优化器每一步都以健康的比例改变权重；5e-4 比过小的学习率高 10 倍")
GRADIENTS_FLOW = C("zero_grad_median", "<=", 0.9, "median share of zero gradients",
                   "below 90% exactly-zero gradient entries, units are not dead; ReLU "
                   "networks have 20-40% from units that are off for a batch", log=False,
                   unit=0.05, role="guard",
                   label_zh="零梯度比例的中位数",
                   why_zh="恰好为零的梯度分量低于 90% 时，单元并没有死；ReLU 网络因为单元在某个批次上关闭，会"
                          "有 20-40% 的零梯度")
WENT_NONFINITE = C("nonfinite_losses", ">=", 0.5, "non-finite losses", "the loss did become NaN",
                   log=False, role="effect",
                   label_zh="非有限损失",
                   why_zh="损失确实变成了 NaN")
DATA_FINITE = C("input_nonfinite_total", "<=", 0.5, "non-finite input values",
                "the data themselves are finite: the NaN was made inside the model",
                log=False, role="guard",
                label_zh="非有限输入值",
                why_zh="数据本身是有限的：NaN 是在模型内部产生的")
INPUTS_SCALED = C("input_scale_spread", "<=", 100, "input std spread",
                  "features within a factor of 100 of each other in spread: the cause "
                  "is not the inputs' scale", role="guard",
                  label_zh="输入标准差之比",
                  why_zh="各特征的离散程度相差不到 100 倍：原因不在输入的尺度")
INPUTS_SMALL = C("input_magnitude", "<=", 100, "largest |input|",
                 "inputs on the scale of standardised features (every healthy run: under "
                 "5, and 100 would be a 100-sigma value; checked for inputs that are "
                 "numbers): inputs in the hundreds make a fresh model's pre-activations "
                 "and logits large under any initialisation, and the cause is then the "
                 "inputs", role="guard",
                 required=False,
                 label_zh="输入的最大绝对值",
                 why_zh="输入处于标准化特征的尺度上（所有健康运行都小于 5，100 会是 100 个标准差之外的值；只对"
                        "数值输入检查）：数值上百的输入在任何初始化下都会让刚初始化模型的预激活值和 logits 很大，"
                        "这时原因在输入")
CALM = C("loss_peak_ratio", "<=", LOSS_ROSE, "loss peak over start",
         "the loss never rose by half above where it started (a run that jumps there "
         "first is a different failure)", role="guard",
         label_zh="损失峰值与初始值之比",
         why_zh="损失从未比起点高出一半（先跳到那里的运行是另一种失败）")
ROSE = C("loss_peak_ratio", ">=", LOSS_ROSE, "loss peak over start",
        "the loss rose by half above where it started; no healthy run of any family or "
        "optimizer peaks past 1.3 times its start", role="guard",
        label_zh="损失峰值与初始值之比",
        why_zh="损失比起点高出了一半；任何家族、任何优化器的健康运行，峰值都不超过起点的 1.3 倍")
FINITE = C("nonfinite_losses", "<=", 0.5, "non-finite losses", "the loss stayed finite",
           log=False, role="guard",
           label_zh="非有限损失",
           why_zh="损失保持有限")
TOKENS = C("input_is_tokens", ">=", 0.5, "token-id inputs",
           "padding exists only in token sequences (checked when inputs were recorded)",
           log=False, required=False, role="guard",
           label_zh="输入为 token 编号",
           why_zh="填充只存在于 token 序列中（记录输入时检查）")
WEIGHTS_KEPT = C("weight_norm_change", ">=", 0.5, "final over initial weight norm",
                 "the weights keep their size: nothing is pulling them to zero",
                 role="guard",
                 label_zh="最终与初始权重范数之比",
                 why_zh="权重保持原有大小：没有什么在把它们拉向零")
FLOAT16 = C("float16_share", ">=", 0.5, "share of steps with float16 logit gradients",
            "the output and its gradient live in float16 (its numbers have 10 mantissa "
            "bits and nothing under 2^-24; float32 values almost never fit that grid)",
            log=False, role="guard",
            label_zh="logit 梯度为 float16 的步数比例",
            why_zh="输出及其梯度是 float16（它的数只有 10 位尾数，小于 2^-24 的无法表示；float32 的值几乎从不"
                   "落在这个网格上）")
NOT_SCALED = C("loss_scaled_share", "<=", 0.5, "share of steps taken by a GradScaler",
               "no loss scaling: an enabled GradScaler multiplies the loss (by 65536 at "
               "first), which lifts small float16 gradients clear of the underflow "
               "(checked when recorded)", log=False, required=False, role="guard",
               label_zh="由 GradScaler 执行的步数比例",
               why_zh="没有损失缩放：启用的 GradScaler 会把损失放大（起初放大 65536 倍），让小的 float16 "
                      "梯度远离下溢（记录时检查）")
SCALED = C("loss_scaled_share", ">=", 0.5, "share of steps taken by a GradScaler",
           "a GradScaler took the steps (checked when recorded): until unscale_() its "
           "scale (65536 at first) multiplies every gradient", log=False, role="guard",
           label_zh="由 GradScaler 执行的步数比例",
           why_zh="步子由 GradScaler 执行（记录时检查）：在 unscale_() 之前，它的缩放因子（起初为 65536）"
                  "乘在每个梯度上")
ALL_CONNECTED = C("param_no_grad_share", "<=", 0.05, "share of parameters never given "
                  "a gradient", "every parameter tensor gets some gradient: none is cut "
                  "off from the loss (a .detach() or an unused branch would explain a "
                  "stall by itself)", log=False, required=False, role="guard",
                  label_zh="从未得到梯度的参数比例",
                  why_zh="每个参数张量都得到了一些梯度：没有哪个与损失断开（一个 .detach() 或一个没用到的分支"
                         "本身就能解释停滞）")
STEPS_SANE = C("update_ratio_start", "<=", 0.3, "update ratio of the first steps",
               "the first steps moved the weights by under 30% of their norm (healthy "
               "runs of every optimizer stay under 14%): what follows was not made by "
               "oversized updates", role="guard",
               label_zh="最初几步的更新比",
               why_zh="最初几步让权重移动不到其范数的 30%（每种优化器的健康运行都低于 14%）：后面发生的事不是"
                      "过大的更新造成的")
POSITIVE_LOSS = C("loss_start", ">=", 0.0, "loss at step 0",
                  "the loss starts positive, as a cross-entropy does: a negative one has "
                  "the wrong sign (negated_loss), and its gradient is then minus a "
                  "cross-entropy's, which no loss-weight reading can be taken from",
                  log=False, unit=0.1, role="guard",
                  label_zh="第 0 步的损失",
                  why_zh="损失从正值开始，交叉熵就是这样：负的损失符号错了（negated_loss），它的梯度是交叉熵梯度"
                         "的相反数，从中读不出损失权重")
STEPS_NEVER_OVERSIZED = C("update_ratio_peak", "<=", 0.3, "largest update ratio",
                          "no run of steps moved the weights by 30% of their norm, at the "
                          "start or after a warm-up (healthy runs of every optimizer stay "
                          "under 14%): steps that large stall learning by themselves",
                          role="guard",
                          label_zh="最大的更新比",
                          why_zh="没有哪一段连续的更新让权重移动其范数的 30%，无论在开始还是预热之后（每种优化器的"
                                 "健康运行都低于 14%）：这么大的步子本身就会让学习停滞")
MOSTLY_TRAINABLE = C("frozen_share", "<=", 0.5, "share of the model's weights frozen",
                     "most of the model trains (checked when recorded): a model whose body "
                     "is frozen (requires_grad=False) can stall for that reason alone",
                     log=False, unit=0.1, required=False, role="guard",
                     label_zh="模型中被冻结的权重比例",
                     why_zh="模型的大部分在训练（记录时检查）：主体被冻结（requires_grad=False）的模型，仅凭这一点"
                            "就可能停滞")
