"""Numerics faults: float16's limited range, both ends of it."""

from __future__ import annotations

from dataclasses import replace

from ..fault import Chinese, Fault
from ..recipes import Set
from ..signatures import Condition as C
from ..signatures import Signature
from .conditions import FINITE, FLOAT16, NOT_SCALED

FP16_NO_SCALING = Fault(
    name="fp16_no_scaling",
    title="FP16 autocast without loss scaling",
    family="numerics", task="tabular", shape="healthy", phenomenon=None,
    symptom="The loss curve matches float32, but a fifth or more of the gradient "
            "entries arriving at the logits are exactly zero, against ~2% in float32: "
            "small gradients underflowed.",
    cause="Under autocast the logits are float16, so the gradient flowing back into "
          "them is float16 too, and float16 cannot hold magnitudes below 6e-8. A "
          "sample's logit gradient (p - y)/64 drops under that once the sample is "
          "fitted to about 4e-6 and flushes to 0. Here that only silences samples "
          "already learned; in a loss averaged over millions of tokens the same "
          "flush erases real signal.",
    experiment="Switch the autocast dtype to bfloat16 (same 16 bits, float32's "
               "exponent range): the zero share falls back to float32's level. The "
               "zeros came from float16's range, not from the model.",
    fix="Use dynamic loss scaling: torch.amp.GradScaler multiplies the loss (by "
        "65536 at first) before backward and unscales before the step; or train "
        "in bfloat16.",
    zh=Chinese(
        title="FP16 autocast 未做损失缩放 (loss scaling)",
        symptom="损失曲线与 float32 一致，但到达 logits 的梯度分量中有五分之一或更多恰好为零，而 float32 "
                "下约为 2%：小梯度发生了下溢 (underflow)。",
        cause="autocast 下 logits 是 float16，回传给它们的梯度也是 float16，而 float16 表示不了小于 6e-8 "
              "的数。一个样本的 logit 梯度 (p - y)/64 在该样本拟合到约 4e-6 时就会低于这个值，被冲刷为 0"
              "。在这里它只是让已经学会的样本不再发声；在一个对数百万 token 求平均的损失里，同样的下溢会"
              "抹掉真实的信号。",
        experiment="把 autocast 的 dtype 换成 bfloat16（同样是 16 位，但有 float32 的指数范围）：零的比例"
                   "回落到 float32 的水平。这些零来自 float16 的数值范围，而不是模型。",
        fix="使用动态损失缩放：torch.amp.GradScaler 在 backward 之前把损失放大（起初放大 65536 倍），在 "
            "step 之前再缩回；或者改用 bfloat16 训练。"),
    edit=(Set("dtype", "float16"),),
    repair=(Set("loss_scaling", True),),
    probe=(Set("dtype", "bfloat16"),),
    signature=Signature((
        FLOAT16,
        C("output_grad_zero_median", True, 0.1, "median zero share of the logit "
          "gradient", "the baseline has 3% or less; loss scaling keeps float16 at 5% "
          "or less", log=False, unit=0.05,
          label_zh="logit 梯度中零所占比例的中位数",
          why_zh="基线不超过 3%；做了损失缩放的 float16 不超过 5%"),
        C("output_grad_floor", True, 3e-8, "smallest non-zero logit gradient",
          "float16's smallest subnormal is 6e-8 and anything under half of it "
          "rounds to 0: nothing smaller ever arrived (float32 runs reach 1e-13)",
          role="guard",
          label_zh="最小的非零 logit 梯度",
          why_zh="float16 最小的次正规数是 6e-8，小于它一半的值会舍入为 0：从未出现过更小的值（float32 的运行"
                 "能达到 1e-13）"),
        C("output_grad_floor", False, 6.1e-5, "smallest non-zero logit gradient",
          "float16's smallest normal number: only gradients that reach the subnormal "
          "range below it can underflow (a loss whose gradients are all large, such as "
          "a margin loss, has exact zeros for another reason)", role="guard",
          label_zh="最小的非零 logit 梯度",
          why_zh="float16 最小的正规数：只有落入它下方次正规范围的梯度才可能下溢（一个所有梯度都很大的损失，"
                 "比如间隔损失，会因为别的原因出现恰好为零的值）"),
        NOT_SCALED,
        FINITE,
    ), "gradients are underflowing to zero in float16 - use loss scaling",
       verdict_zh="梯度在 float16 中下溢为零：使用损失缩放"),
    also=(Signature((
        FLOAT16,
        C("output_grad_floor", False, 6.1e-5, "smallest non-zero logit gradient",
          "float16's smallest normal number: below it a gradient keeps fewer than 10 "
          "bits, and under 3e-8 it is 0; unscaled float16 gradients that come down here "
          "lose the small end of their range as training converges",
          label_zh="最小的非零 logit 梯度",
          why_zh="float16 最小的正规数：低于它，梯度保留不到 10 位有效数字，低于 3e-8 就是 0；没有缩放的 "
                 "float16 梯度一旦落到这里，随着训练收敛，就会丢掉其范围的小端"),
        C("output_grad_floor", True, 3e-8, "smallest non-zero logit gradient",
          "float16's grid: nothing under half its smallest subnormal survives", role="guard",
          label_zh="最小的非零 logit 梯度",
          why_zh="float16 的网格：小于最小次正规数一半的值都留不下来"),
        NOT_SCALED,
        FINITE,
    ), "float16 gradients reach the subnormal range without loss scaling - the "
       "smallest will be rounded away as the model fits; use a GradScaler (a risk the "
       "curve does not show yet)",
       verdict_zh="float16 梯度在没有损失缩放的情况下落入次正规范围：随着模型拟合，最小的梯度会被舍入掉；"
                  "请使用 GradScaler（曲线上还看不出的风险）",
       latent=True),),
    outcome=Signature((
        C("output_grad_zero_median", False, 0.08, "median zero share of the logit "
          "gradient", "bfloat16's range keeps them representable", log=False,
          unit=0.05,
          label_zh="logit 梯度中零所占比例的中位数",
          why_zh="bfloat16 的范围让它们保持可表示"),
    ), "with float32's exponent range the zeros disappear",
       verdict_zh="有了 float32 的指数范围，这些零就消失了"),
)

FP16_OVERFLOW = Fault(
    name="fp16_overflow",
    title="FP16 overflow: raw amounts in cents exceed float16's range",
    family="numerics", task="tabular", shape="nonfinite", phenomenon="C",
    symptom="The loss turns NaN right after the first update. The input batch is "
            "finite, but it holds values in the hundreds of thousands, beyond "
            "float16's largest number, 65504.",
    cause="Autocast casts the raw amounts (~200000 cents) to float16, where they "
          "become inf. The sigmoid squashes inf to 0 or 1 so the first loss is "
          "finite, but backward computes 0 x inf = NaN for the first layer's "
          "weights, and the first update writes NaN into them.",
    experiment="Switch the autocast dtype to bfloat16 (same 16 bits, float32's "
               "exponent range): no NaN appears. The values were out of float16's "
               "range, not corrupt.",
    fix="Standardise the inputs and keep anything that can exceed 65504 in float32 "
        "(or train in bfloat16); with float16, also use loss scaling against the "
        "opposite problem, underflow.",
    zh=Chinese(
        title="FP16 溢出：以分为单位的原始金额超出 float16 的范围",
        symptom="第一次更新后损失立刻变成 NaN。输入批次本身是有限值，但其中有几十万的数值，超过了 float16"
                " 能表示的最大数 65504。",
        cause="autocast 把原始金额（约 200000 分）转成 float16，在那里它们变成 inf。sigmoid 把 inf 压到 0"
              " 或 1，所以第一个损失是有限的，但 backward 为第一层权重计算 0 × inf = NaN，第一次更新就把 "
              "NaN 写进了这些权重。",
        experiment="把 autocast 的 dtype 换成 bfloat16（同样是 16 位，但有 float32 的指数范围）：不再出现"
                   " NaN。这些数值只是超出了 float16 的范围，并没有损坏。",
        fix="把输入标准化，并把可能超过 65504 的量留在 float32 中（或用 bfloat16 训练）；使用 float16 时"
            "还要加上损失缩放，以防相反的问题：下溢。",
        why_two_fields="溢出需要两者同时成立：只有 float16 有 65504 这个上限，也只有未标准化的金额会超过"
                       "它。单独改其中一个字段，要么无害（标准化输入上的 float16），要么是另一种故障（"
                       "float32 下的 no_input_norm）。"),
    edit=(Set("dtype", "float16"), Set("normalize_inputs", False),),
    repair=(Set("normalize_inputs", True), Set("loss_scaling", True),),
    probe=(Set("dtype", "bfloat16"),),
    # inputs beyond float16's range are unstandardised by definition; what made the
    # NaN is the float16 cast, so this ranks ahead of no_input_norm
    explains=("no_input_norm",),
    why_two_fields="Overflow needs both: only float16 has the 65504 ceiling and only "
                   "the unstandardised amounts exceed it. Alone, each field is "
                   "harmless (float16 on standardised inputs) or a different fault "
                   "(no_input_norm in float32).",
    signature=Signature((
        C("input_absmax", True, 65504, "largest input value",
          "float16's largest finite number: anything above becomes inf",
          label_zh="最大输入值",
          why_zh="float16 能表示的最大有限数：超过它的都会变成 inf"),
        C("nonfinite_losses", True, 0.5, "non-finite losses", "the loss did become NaN",
          log=False, role="effect",
          label_zh="非有限损失",
          why_zh="损失确实变成了 NaN"),
        C("input_nonfinite_total", False, 0.5, "non-finite input values",
          "the data themselves are finite: the NaN was made inside the model",
          log=False, role="guard",
          label_zh="非有限输入值",
          why_zh="数据本身是有限的：NaN 是在模型内部产生的"),
        replace(FLOAT16, required=False),
    ), "finite inputs beyond float16's range turned into inf - standardise them or "
       "keep them in float32",
       verdict_zh="超出 float16 范围的有限输入变成了 inf：把它们标准化，或留在 float32 中"),
    outcome=Signature((
        C("nonfinite_losses", False, 0.5, "non-finite losses",
          "bfloat16 holds 2e5 without overflow", log=False,
          label_zh="非有限损失",
          why_zh="bfloat16 能容纳 2e5 而不溢出"),
    ), "with float32's exponent range there is no NaN: it was an overflow",
       verdict_zh="有了 float32 的指数范围就没有 NaN：这是一次溢出"),
)

FAULTS = (FP16_NO_SCALING, FP16_OVERFLOW)
