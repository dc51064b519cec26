"""Numerics faults: float16's limited range, both ends of it."""

from __future__ import annotations

from dataclasses import replace

from ..basics.recipes import Scale, Set
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from .conditions import (
    CALM,
    DATA_FINITE,
    FINITE,
    FLOAT16,
    LEARNS,
    NOT_SCALED,
    SCALED,
    UNHEALTHY,
    WENT_NONFINITE,
)
from .fault import Chinese, Fault

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
    confirm=(O("gain[float32]", "better"),),
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
        why_several_fields="溢出需要两者同时成立：只有 float16 有 65504 这个上限，也只有未标准化的金额会超过"
                       "它。单独改其中一个字段，要么无害（标准化输入上的 float16），要么是另一种故障（"
                       "float32 下的 no_input_norm）。"),
    edit=(Set("dtype", "float16"), Set("normalize_inputs", False),),
    repair=(Set("normalize_inputs", True), Set("loss_scaling", True),),
    probe=(Set("dtype", "bfloat16"),),
    confirm=(O("gain[float32]", "better"),),
    # inputs beyond float16's range are unstandardised by definition; what made the
    # NaN is the float16 cast, so this ranks ahead of no_input_norm
    explains=("no_input_norm",),
    why_several_fields="Overflow needs both: only float16 has the 65504 ceiling and only "
                   "the unstandardised amounts exceed it. Alone, each field is "
                   "harmless (float16 on standardised inputs) or a different fault "
                   "(no_input_norm in float32).",
    signature=Signature((
        C("input_absmax", True, 65504, "largest input value",
          "float16's largest finite number: anything above becomes inf",
          label_zh="最大输入值",
          why_zh="float16 能表示的最大有限数：超过它的都会变成 inf"),
        WENT_NONFINITE,
        DATA_FINITE,
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

CLIP_BEFORE_UNSCALE = Fault(
    name="clip_before_unscale",
    title="Gradients clipped while still multiplied by the loss scale",
    family="numerics", task="tabular", shape="plateau", phenomenon="B",
    # steps 40000 times too small: lr_too_small's evidence, made by the clip
    explains=("lr_too_small",),
    symptom="Mixed precision with a GradScaler and gradient clipping: no NaN, no "
            "skipped step, yet the loss stays at ln 3 = 1.1 as if nothing trained. The "
            "gradient reaching the optimizer has the same norm at every step, 1.5e-5 = "
            "1/65536, and each update moves the weights by about 1e-6 of their size.",
    cause="Backward through scaler.scale(loss) leaves every gradient multiplied by the "
          "scale, 65536. clip_grad_norm_(max_norm=1) runs on those scaled gradients, whose norm "
          "is about 40000, and cuts it to 1; scaler.step() then divides by 65536. Every "
          "step gets a gradient of norm 1/65536, whatever the loss says: with SGD, a "
          "learning rate 40000 times too small. (Adam would hide it, since it divides by "
          "the gradient's own scale.)",
    experiment="Multiply the clip threshold by 65536, the scaler's scale, changing "
               "nothing else: the clip no longer bites and the run trains like the "
               "baseline. A learning rate that is merely too small would not be cured "
               "by the clip threshold.",
    fix="Call scaler.unscale_(optimizer) before clip_grad_norm_, as PyTorch's AMP recipe "
        "does: the clip then sees the true gradients, and scaler.step() knows they are "
        "already unscaled.",
    zh=Chinese(
        title="梯度在仍乘着损失缩放因子时被裁剪",
        symptom="使用 GradScaler 和梯度裁剪的混合精度训练：没有 NaN，也没有被跳过的步，损失却一直停在 "
                "ln 3 = 1.1，好像什么也没学。到达优化器的梯度每一步的范数都一样，1.5e-5 = 1/65536，每次"
                "更新只让权重变化自身大小的约 1e-6。",
        cause="scaler.scale(loss).backward() 让每个梯度都乘上了缩放因子 65536。clip_grad_norm_(max_norm=1)"
              " 作用在这些放大后的梯度上，它们的范数约为 40000，被裁成 1；随后 scaler.step() 再除以 65536"
              "。不论损失怎样，每一步拿到的梯度范数都是 1/65536：对 SGD 来说，相当于学习率小了 40000 倍"
              "。（Adam 会把它掩盖掉，因为它除以梯度自身的尺度。）",
        experiment="只把裁剪阈值乘以 65536，即缩放因子，其余不变：裁剪不再起作用，运行就像基线一样训练"
                   "。单纯的学习率过小，不会被裁剪阈值治好。",
        fix="在 clip_grad_norm_ 之前调用 scaler.unscale_(optimizer)，正如 PyTorch 的 AMP 示例那样：裁剪"
            "看到的是真实的梯度，scaler.step() 也知道它们已经缩放回来了。",
        why_several_fields="错误只在混合精度循环的一行里：它需要 float16 autocast、GradScaler 和按范数裁剪"
                           "（这三个字段合起来就是健康的 AMP 写法，训练得和基线一样），而漏掉的 "
                           "unscale_() 才是故障本身。"),
    why_several_fields="The mistake lives in one line of a mixed-precision loop: it needs "
                       "float16 autocast, a GradScaler and clipping by norm (three fields "
                       "that together make the healthy AMP recipe, which trains like the "
                       "baseline), and the missing unscale_() is the fault itself.",
    edit=(Set("dtype", "float16"), Set("loss_scaling", True), Set("grad_clip", 1.0),
          Set("unscale_before_clip", False)),
    repair=(Set("unscale_before_clip", True),),
    probe=(Scale("grad_clip", 65536),),
    confirm=(O("gain[float32]", "better"),),
    signature=Signature((
        C("clipped_grad_norm", False, 1e-3, "gradient norm every step was clipped to",
          "every step's gradient reached the optimizer at one and the same norm, as a "
          "clip leaves it, and that norm is under 1e-3: a clip threshold in common use "
          "(0.1-10) divided by a GradScaler's scale (2^14-2^16 at first). A clip of the "
          "true gradients leaves them at the threshold itself; gradients that are not "
          "clipped change norm from step to step",
          label_zh="每一步被裁剪到的梯度范数",
          why_zh="每一步的梯度都以同一个范数到达优化器，正是裁剪留下的样子，而且这个范数低于 1e-3：常用的"
                 "裁剪阈值（0.1-10）除以 GradScaler 的缩放因子（起初为 2^14-2^16）。裁剪真实的梯度会把它"
                 "们留在阈值本身；没有被裁剪的梯度每一步的范数都在变"),
        SCALED,
        UNHEALTHY,
    ), "the gradients were clipped while still scaled by the GradScaler - call "
       "scaler.unscale_(optimizer) before clipping",
       verdict_zh="梯度在仍被 GradScaler 放大时就被裁剪了：裁剪之前先调用 scaler.unscale_(optimizer)"),
    outcome=Signature((LEARNS,), "with the threshold raised by the scale the run "
                      "trains: the clip acted on scaled gradients",
                      verdict_zh="把阈值乘上缩放因子后运行就能训练：裁剪作用在放大后的梯度上"),
)

FLOAT16_INPUTS = C("input_absmax", False, 65504, "largest input value",
                   "every input fits float16 (at most 65504): the data did not overflow on "
                   "the way in (fp16_overflow)", role="guard",
                   label_zh="最大输入值",
                   why_zh="每个输入都在 float16 的范围内（不超过 65504）：数据进入模型时没有溢出"
                          "（fp16_overflow）")

LOG_SOFTMAX_BY_HAND = Fault(
    name="log_softmax_by_hand",
    title="Cross-entropy written by hand as log(softmax(x)) inside float16 autocast",
    family="numerics", task="tabular", shape="nonfinite", phenomenon="C",
    symptom="The loss falls like the float16 baseline's, then turns NaN from one step to "
            "the next while it is small and calm (0.1-0.5, at steps 47-67 on seeds 0-9): "
            "no rise, no spike, finite inputs well inside float16's range. The gradients "
            "were NaN one step before the loss was.",
    cause="The loss is nll_loss(torch.log(torch.softmax(logits))), written inside the "
          "autocast region. On the CPU autocast keeps softmax in float16, so once a logit "
          "trails its row's largest by about 17, that class's probability falls under "
          "float16's smallest number (6e-8) and becomes exactly 0. Its log is -inf; the "
          "loss only reads the target class, so it stays finite, but backward multiplies "
          "log's derivative 1/0 = inf by that class's zero gradient: 0 x inf = NaN, and "
          "the step writes NaN into every weight.",
    experiment="Switch the autocast dtype to bfloat16 (float32's exponent range), changing "
               "nothing else: the same hand-written loss trains without a NaN. The zero "
               "probability came from float16's range, not from the model or the data.",
    fix="Use F.cross_entropy on the logits (or F.log_softmax, then nll_loss): it "
        "computes x - logsumexp(x) and never forms a zero probability. Under autocast, "
        "compute losses on logits.float(), and in float16 add a GradScaler against "
        "underflow (fp16_no_scaling). CUDA's autocast runs softmax and log in float32, "
        "where the same formula holds until a gap of about 104.",
    zh=Chinese(
        title="在 float16 autocast 里把交叉熵手写成 log(softmax(x))",
        symptom="损失像 float16 基线那样下降，然后在它又小又平稳的时候（0.1-0.5，种子 0-9 上在第 47-67 步）"
                "从一步到下一步变成 NaN：没有上升，没有尖峰，输入是有限值，远在 float16 的范围之内。梯度比损失早一"
                "步变成 NaN。",
        cause="损失写成 nll_loss(torch.log(torch.softmax(logits)))，放在 autocast 区域里。在 CPU 上 "
              "autocast 让 softmax 保持 float16，所以一旦某个 logit 比所在行的最大值低约 17，这个类别的概"
              "率就会低于 float16 能表示的最小数（6e-8），变成恰好为 0。它的 log 是 -inf；损失只读取目标类"
              "别，所以仍是有限值，但反向传播把 log 的导数 1/0 = inf 乘以这个类别为零的梯度：0 × inf = "
              "NaN，这一步就把 NaN 写进了每个权重。",
        experiment="只把 autocast 的 dtype 换成 bfloat16（有 float32 的指数范围），其余不变：同样的手写损"
                   "失训练时不再出现 NaN。为零的概率来自 float16 的数值范围，而不是模型或数据。",
        fix="对 logits 使用 F.cross_entropy（或先 F.log_softmax 再 nll_loss）：它计算 x - logsumexp(x)，"
            "从不产生为零的概率。在 autocast 下，用 logits.float() 计算损失；使用 float16 时再加上 "
            "GradScaler 以防下溢（fp16_no_scaling）。CUDA 的 autocast 在 float32 中运行 softmax 和 log，"
            "在那里同样的公式要到差距约 104 时才出问题。",
        why_several_fields="这个故障需要两者同时成立：float16 的数值范围（在 float32 中手写的公式训练得和"
                           "基线一样），以及手写的公式（float16 配 F.cross_entropy 就是 fp16_no_scaling "
                           "那次看起来健康的运行）。"),
    why_several_fields="The failure needs both: float16's range (in float32 the hand-written "
                       "formula trains like the baseline) and the formula written by hand "
                       "(float16 with F.cross_entropy is fp16_no_scaling's healthy-looking "
                       "run).",
    edit=(Set("dtype", "float16"), Set("log_softmax", "by_hand")),
    # with a GradScaler the NaN steps are skipped instead: the scale halves at each, and
    # the zero probability does not care (lab seeds 0-4: 69-76% of the steps skipped;
    # loops outside the lab, whose logits spread less: 6-53%)
    also=(Signature((
        C("backward_skip_share", True, 0.05, "share of steps skipped with a finite loss",
          "once it had found its scale, the scaler kept skipping steps whose loss was "
          "finite: the backward pass put inf/NaN in the gradients at every scale it tried, "
          "which no loss scale cures (a log or a division at 0). A healthy scaler skips a "
          "few steps while it finds its scale, then about one per growth interval (2000 "
          "steps), not one in twenty. Named as a risk even where the curve still looks "
          "healthy: those steps are thrown away", log=False, unit=0.01,
          label_zh="损失有限却被跳过的步数比例",
          why_zh="缩放器找到缩放因子之后，仍在损失有限的情况下不断跳过步：在它尝试的每个缩放因子下，反向传播"
                 "都在梯度里产生 inf/NaN，这不是损失缩放能治的（在 0 处取 log 或做除法）。健康的缩放器只在"
                 "寻找缩放因子时跳过几步，之后大约每个增长间隔（2000 步）跳过一步，而不是每二十步就跳过一步。"
                 "即使曲线看起来仍然健康也作为风险指出：这些步都被丢掉了"),
        CALM,
        FLOAT16,
        FLOAT16_INPUTS,
        DATA_FINITE,
    ), "the GradScaler keeps skipping steps though the loss is finite: the gradients are "
       "NaN at any scale - is a probability taken to log by hand? use log_softmax / "
       "cross_entropy, in float32",
       verdict_zh="损失是有限的，GradScaler 却不断跳过步：不论缩放多少，梯度都是 NaN；是不是手写地对"
                  "概率取 log？改用 log_softmax / cross_entropy，并在 float32 中计算",
       latent=True),),
    repair=(Set("log_softmax", "fused"), Set("loss_scaling", True)),
    probe=(Set("dtype", "bfloat16"),),
    confirm=(O("gain[float32]", "better"),),
    signature=Signature((
        C("nonfinite_from_backward", True, 0.5, "first non-finite values in the gradient "
          "of a finite loss", "the run's first NaN/Inf values were gradients while that "
          "step's loss was finite: the backward pass made them (0 x inf, or 0/0 in the "
          "derivative of log, sqrt or a division at 0), not the data and not the forward "
          "pass", log=False,
          label_zh="首批非有限值出现在有限损失的梯度里",
          why_zh="运行中首批 NaN/Inf 值是梯度，而那一步的损失仍是有限的：它们由反向传播产生（0 × inf，或 "
                 "log、sqrt、除法在 0 处导数里的 0/0），不是数据，也不是前向传播"),
        FLOAT16,
        FLOAT16_INPUTS,
        DATA_FINITE,
        CALM,
        WENT_NONFINITE,
    ), "a finite loss had NaN gradients in float16 - is a probability taken to log (or "
       "sqrt, or a divisor) by hand? use log_softmax / cross_entropy, in float32",
       verdict_zh="有限的损失在 float16 下得到 NaN 梯度：是不是手写地对概率取 log（或 sqrt、做除数）？改用 "
                  "log_softmax / cross_entropy，并在 float32 中计算"),
    outcome=Signature((
        C("nonfinite_losses", False, 0.5, "non-finite losses",
          "bfloat16 keeps every probability above 0", log=False,
          label_zh="非有限损失",
          why_zh="bfloat16 让每个概率都保持在 0 以上"),
    ), "with float32's exponent range there is no NaN: a probability underflowed",
       verdict_zh="有了 float32 的指数范围就没有 NaN：是某个概率下溢了"),
)

FAULTS = (FP16_NO_SCALING, FP16_OVERFLOW, CLIP_BEFORE_UNSCALE, LOG_SOFTMAX_BY_HAND)
