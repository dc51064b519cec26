"""Optimisation faults: how the weights are stepped (rate, batch, regularisation)."""

from __future__ import annotations

from ..basics.recipes import Scale, Set
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from ..evidence.thresholds import ACCUMULATING_TURN, UPDATE_RATIO_HIGH
from .conditions import (
    ALL_CONNECTED,
    ALL_OPTIMIZED,
    CALM,
    FINITE,
    GRADIENTS_FLOW,
    LEARNS,
    POSITIVE_LOSS,
    ROSE,
    TINY_STEPS,
    UNHEALTHY,
)
from .fault import Chinese, Fault

OVERSIZED_STEPS = C(
    "update_ratio_start", ">=", UPDATE_RATIO_HIGH, "update ratio of the first steps",
    "a step that moves the weights by a tenth of their norm overshoots any curvature the "
    "initialised model has; adaptive optimizers take large first steps too, so calibration "
    "moves the line past every healthy run of every optimizer that a route admits",
    label_zh="最初几步的更新比",
    why_zh="让权重移动其范数十分之一的一步，会越过刚初始化的模型所具有的任何曲率；自适应优化器最初的步子也很"
           "大，所以校准把这条线移到某条路径所接纳的每种优化器的每个健康运行之外")

# Large first steps that keep their direction are travel, not overshoot: a raw-scale
# regression's weights and bias must grow some 70-fold (a linear model on prices around
# 100: its first steps move the weights by 57-72% of their norm while the loss falls 98%,
# consecutive gradients agreeing at cosine 0.58-0.68).  Every overshooting run measured
# turns back: the lab's huge_lr seeds 0-9 at most 0.26, the zoo's huge_lr runs that the
# main route names at most 0.10 (seeds 0-2, every family and optimizer).
TURNS_BACK = C(
    "grad_cosine_start", "<=", 0.5, "cosine of consecutive gradients, first steps",
    "a step too large for the curvature lands past the valley floor, so the next gradient "
    "points back (negative); noise around one direction gives 0-0.3; at 0.5 (60 degrees) "
    "or more each gradient mostly repeats the last one: the steps are still travelling "
    "down one slope, which an overshooting step cannot do", log=False, unit=0.1,
    required=False, role="guard",
    label_zh="最初几步相邻梯度的余弦",
    why_zh="对曲率来说过大的一步会越过谷底，于是下一个梯度指回来（为负）；围绕同一方向的噪声约为 0-0.3；"
           "达到 0.5（60 度）或更高时，每个梯度大体重复上一个：步子仍在沿同一个坡往下走，而越过谷底"
           "的步子做不到这一点")

# The same line on the run's biggest steps, wherever its schedule put them: a warm-up
# (OneCycle, linear warm-up) or a rectified Adam starts small and reaches an oversized
# rate later, where the first steps cannot see it.
OVERSIZED_PEAK = C(
    "update_ratio_peak", ">=", UPDATE_RATIO_HIGH, "largest update ratio",
    "a run of steps that each move the weights by a tenth of their norm overshoots any "
    "curvature the model has, at the start or after a warm-up; calibration moves the line "
    "past every healthy run a route admits",
    label_zh="最大的更新比",
    why_zh="连续几步每步都让权重移动其范数的十分之一，会越过模型所具有的任何曲率，无论是在开始还是预热之后；"
           "校准把这条线移到某条路径所接纳的每个健康运行之外")

HUGE_LR = Fault(
    name="huge_lr",
    title="Learning rate 30x too large",
    family="optimization", task="tabular", shape="diverging", phenomenon="A",
    symptom="The very first updates change the weights by more than a tenth of "
            "their size; the loss jumps far above its starting value and the ReLU "
            "units die, leaving the loss stuck high.",
    cause="Each step moves the weights by lr x gradient. At 30x the tuned rate a "
          "step jumps across the valley the gradient points into, landing where the "
          "loss is higher; large jumps also push ReLU units into the region where "
          "they never fire again.",
    experiment="Divide the learning rate by 10: the loss goes down again and the "
               "update ratio falls back toward 1e-2. Labels or data problems would "
               "not respond to the rate.",
    fix="Use a rate about 30x smaller, e.g. the one the LR range test suggests.",
    zh=Chinese(
        title="学习率大了 30 倍",
        symptom="最初几次更新就让权重变化超过自身大小的十分之一；损失跳到远高于初始值的位置，ReLU 单元随"
                "之死亡，损失卡在高位。",
        cause="每一步权重移动 lr × 梯度。学习率是调好值的 30 倍时，一步会跨过梯度所指的谷底，落到损失更高"
              "的地方；大幅跳跃还会把 ReLU 单元推到再也不会激活的区域。",
        experiment="把学习率除以 10：损失重新下降，更新比 (update ratio) 回落到 1e-2 附近。标签或数据的问"
                   "题不会对学习率有反应。",
        fix="把学习率调小约 30 倍，例如用 LR 范围测试 (LR range test) 建议的值。"),
    edit=(Scale("lr", 30),), repair=(Scale("lr", 1 / 30),), probe=(Scale("lr", 0.1),),
    confirm=(O("gain[lr/10]", "better"),),
    refute=(O("gain[lr/10]", "worse"),),
    # The loss jumps above its start, then flattens near ln 3 once the ReLUs have died:
    # the shape rules call a curve that peaked >= 1.3x its start and ended above it
    # "diverging"; a seed whose jump stays near 1.3x is borderline "plateau", and some
    # seeds keep swinging ("oscillating").
    other_shapes=("plateau", "oscillating"),
    # steps that overshoot feed back (a bigger loss, a bigger gradient, a bigger step)
    # until the loss overflows: where oversized steps came before the rise, they are the
    # cause of that explosion
    explains=("exploding_gradients",),
    signature=Signature((
        OVERSIZED_STEPS,
        TURNS_BACK,
    ), "steps are far too large for the loss surface - divide the rate by 10",
       verdict_zh="步子相对于损失曲面太大了：把学习率除以 10"),
    # Adaptive optimizers' healthy first steps reach a tenth of the weights' norm, so
    # the route above must sit past them and misses a rate that overshoots by less.
    # The overshoot's effect tells those apart: a loss that rose by half (no healthy
    # run does) in a run whose biggest steps were of that size (OVERSIZED_PEAK: the
    # first ones, or those after a warm-up).  No healthy run passes this route's guard,
    # so it keeps the physical line.
    also=(Signature((
        OVERSIZED_PEAK,
        ROSE,
    ), "steps this large made the loss climb above its start - divide the rate by 10",
       verdict_zh="这么大的步子让损失爬到了起点之上：把学习率除以 10"),),
    outcome=Signature((
        C("loss_progress", ">=", 0.3, "loss progress",
          "at a tenth of the rate the loss falls again", log=False, unit=0.1,
          label_zh="损失下降幅度",
          why_zh="学习率降到十分之一时损失又开始下降"),
    ), "a smaller rate restores descent",
       verdict_zh="更小的学习率让损失重新下降"),
)

LR_TOO_SMALL = Fault(
    name="lr_too_small",
    title="Learning rate 1000x too small",
    family="optimization", task="tabular", shape="plateau", phenomenon="B",
    symptom="The loss hardly moves, but it is not stuck: gradients are normal and "
            "flow everywhere, only each update changes the weights by about 1e-5 of "
            "their size.",
    cause="The update is lr x gradient; at 1e-4 it is so small that the weights "
          "would need tens of thousands of steps to move by their own size. The "
          "model is still slowly going, not stuck.",
    experiment="Multiply the learning rate by 100 (still 10x below the tuned "
               "rate): the loss now falls by more than half. Stuck causes such as "
               "dead units or random labels would not respond to the rate.",
    fix="Raise the rate, e.g. to the one the LR range test suggests.",
    zh=Chinese(
        title="学习率小了 1000 倍",
        symptom="损失几乎不动，但并没有卡死：梯度正常，并且流到每一层，只是每次更新只让权重变化自身大小的"
                "约 1e-5。",
        cause="更新量是 lr × 梯度；学习率为 1e-4 时更新小到权重要走上几万步才能移动与自身相当的距离。模型"
              "仍在缓慢前进，而不是卡住了。",
        experiment="把学习率乘以 100（仍比调好的值低 10 倍）：损失现在下降超过一半。死单元或随机标签这类“"
                   "卡住”的原因不会对学习率有反应。",
        fix="提高学习率，例如用 LR 范围测试建议的值。"),
    edit=(Scale("lr", 1e-3),), repair=(Scale("lr", 1e3),), probe=(Scale("lr", 100),),
    confirm=((O("gain[lr*10]", "better"), O("no_grad_at_step", "absent")),
             (O("gain[lr*100]", "better"), O("no_grad_at_step", "absent"))),
    signature=Signature((
        TINY_STEPS,
        GRADIENTS_FLOW,
        C("grad_growth", ">=", 1e-3, "gradient norm",
          "the gradient kept its size: steps made tiny by a gradient that fell a "
          "thousandfold below its first value (saturated or clipped outputs pass none "
          "back, or it was erased before the step) are a vanished gradient, not a small "
          "rate; healthy runs keep 0.15x or more", suffix="x its step-0 value",
          required=False, role="guard",
          label_zh="梯度范数", suffix_zh="倍于第 0 步",
          why_zh="梯度保持了大小：梯度跌到第一步的千分之一以下（饱和或被截断的输出不再回传梯度，或在 "
                 "step 之前被清掉）使步长变小，这是梯度消失，不是学习率太小；健康运行保持在 0.15 倍以上"),
        UNHEALTHY,
        ALL_OPTIMIZED,
        ALL_CONNECTED,
    ), "gradients are there but the steps are tiny - raise the learning rate",
       verdict_zh="梯度都在，但步子极小：提高学习率"),
    outcome=Signature((LEARNS,), "a larger rate trains: it was slow, not stuck",
                                 verdict_zh="更大的学习率能训练：它只是慢，而不是卡住了"),
)

DROPOUT_TOO_STRONG = Fault(
    name="dropout_too_strong",
    title="Dropout p = 0.75 on a 64-unit layer",
    family="optimization", task="tabular", shape="plateau", phenomenon="B",
    other_shapes=("healthy",),  # 34-57% of the loss removed: either side of the 35% line
    symptom="The training loss (measured with dropout on) stalls far above the "
            "validation loss (dropout off): the model is better than its training "
            "loss says, but it learns slowly and stops early.",
    cause="Dropping three of every four units makes every training forward pass a "
          "different, much smaller network; the gradient is that of a heavily "
          "damaged model, so learning is slow and the training loss overstates "
          "the error of the full model.",
    experiment="Set dropout to 0, changing nothing else: the training loss falls to "
               "the level of the validation loss.",
    fix="Use a moderate rate (0.1-0.3 for a small MLP), or none when the model "
        "does not overfit.",
    zh=Chinese(
        title="64 个单元的层上 dropout p = 0.75",
        symptom="训练损失（开着 dropout 测得）停在远高于验证损失（关掉 dropout）的位置：模型比它的训练损"
                "失显示的要好，但学得慢，而且早早停滞。",
        cause="每四个单元丢掉三个，使每次训练的前向传播都是一个不同的、小得多的网络；梯度来自一个严重受损"
              "的模型，因此学习缓慢，训练损失也高估了完整模型的误差。",
        experiment="把 dropout 设为 0，其余不变：训练损失降到验证损失的水平。",
        fix="使用适中的比率（小型 MLP 用 0.1-0.3），模型不过拟合时干脆不用。"),
    edit=(Set("dropout", 0.75),),
    repair=(Set("dropout", 0.1),),
    probe=(Set("dropout", 0.0),),
    signature=Signature((
        C("train_eval_loss_gap", ">=", 0.1, "train minus eval loss",
          "the model evaluated without dropout is clearly better than its training "
          "loss says; healthy runs stay within 0.05", log=False, unit=0.05,
          label_zh="训练损失减评估损失",
          why_zh="不带 dropout 评估的模型明显好于它的训练损失；健康运行保持在 0.05 以内"),
        C("dropout_rate", ">=", 0.6, "dropout rate in training",
          "the model drops more than half of a layer in training (checked when "
          "recorded), past the 0.5 that is the largest rate in common use (0.1-0.5): "
          "within that range a gap between training and evaluation losses is what a "
          "working regulariser does, or has another cause, such as training labels "
          "noisier than the validation labels", log=False, unit=0.1, required=False,
          role="guard",
          label_zh="训练时的 dropout 比率",
          why_zh="模型在训练时丢弃一层中一半以上的单元（记录时检查），超过了常用范围（0.1-0.5）的上限 0.5："
                 "在这个范围内，训练与评估损失之间的差距正是正常工作的正则化该有的，或者另有原因，例如训练标"
                 "签比验证标签噪声更大"),
        POSITIVE_LOSS,
        CALM,
        FINITE,
        C("output_scale_start", "<=", 3, "logit std at step 0",
          "a well-scaled start: a loss still falling from an oversized initialisation "
          "also trains above its evaluation loss", role="guard", required=False,
          label_zh="第 0 步的 logit 标准差",
          why_zh="尺度合适的起点：从过大初始化开始仍在下降的损失，训练时也会高于评估损失"),
        C("batch_size_median", ">=", 16, "samples per batch",
          "a training loss averaged over fewer samples is too noisy to compare",
          required=False, role="guard",
          label_zh="每批样本数",
          why_zh="在更少样本上平均的训练损失噪声太大，无法比较"),
    ), "training-mode loss far above evaluation loss - dropout is too strong",
       verdict_zh="训练模式下的损失远高于评估损失：dropout 太强了"),
    outcome=Signature((
        C("train_eval_loss_gap", "<=", 0.1, "train minus eval loss",
          "without dropout the two losses agree", log=False, unit=0.05,
          label_zh="训练损失减评估损失",
          why_zh="没有 dropout 时两个损失一致"),
    ), "without dropout train and eval losses agree",
       verdict_zh="没有 dropout 时，训练损失与评估损失一致"),
    # On a user's loop: a dropout module drops 60% of its units or more (the mechanism,
    # seen in the model), and the same run with dropout off reaches a lower loss.  The
    # arm alone proves nothing (dropout off lowers any training-mode loss), so a model
    # whose dropout stays within the common 0.1-0.5 is not this fault.
    confirm=((O("gain[dropout_off]", "better"), O("dropout_strong", "present")),),
    refute=(O("dropout_strong", "absent"),),
)

WEIGHT_DECAY_TOO_LARGE = Fault(
    name="weight_decay_too_large",
    title="Weight decay 0.1 with plain SGD (an AdamW value in the wrong place)",
    family="optimization", task="tabular", shape="plateau", phenomenon="B",
    symptom="The weight norm shrinks to a few percent of its initial value while "
            "the loss stays at chance; the update ratio is large only because the "
            "weights have almost vanished.",
    cause="SGD's weight_decay is a coupled L2 penalty: every step shrinks each "
          "weight by lr x decay = 1%, compounding to a factor of 20 within 300 steps, "
          "faster than the data gradient can push back; the network collapses toward "
          "the all-zero function. 0.1 is a common decoupled (AdamW) value.",
    experiment="Divide the weight decay by 100, changing nothing else: the weights "
               "stop shrinking and the loss falls like the baseline's.",
    fix="Use a decay around 1e-4 to 1e-3 for SGD's coupled L2 penalty (AdamW's "
        "decoupled decay uses different magnitudes - do not copy values across).",
    zh=Chinese(
        title="普通 SGD 配 0.1 的权重衰减（把 AdamW 的取值用错了地方）",
        symptom="权重范数缩小到初始值的百分之几，而损失停在随机水平；更新比很大只是因为权重几乎消失了。",
        cause="SGD 的 weight_decay 是耦合的 L2 惩罚：每一步把每个权重缩小 lr × decay = 1%，在 300 步内累"
              "积成 20 倍的缩小，比数据梯度推回来的速度更快；网络朝全零函数坍缩。0.1 是解耦式 (AdamW) 衰"
              "减的常见取值。",
        experiment="把权重衰减除以 100，其余不变：权重不再缩小，损失像基线一样下降。",
        fix="SGD 的耦合 L2 惩罚使用 1e-4 到 1e-3 左右的衰减（AdamW 的解耦衰减数量级不同，不要互相照搬取值"
            "）。"),
    edit=(Set("weight_decay", 0.1),),
    repair=(Set("weight_decay", 5e-4),),
    probe=(Scale("weight_decay", 1 / 100),),
    # The decay removed from the user's optimizer, beside the premise that it is strong
    # enough to halve the weights within the run by itself: any decay raises the
    # training loss a little, so the arm alone is no evidence (weight_decay_off is no
    # remedy by itself).  A decay too weak to halve them is not this fault.
    confirm=((O("gain[weight_decay_off]", "better"), O("decay_strong", "present")),),
    refute=(O("decay_strong", "absent"),),
    signature=Signature((
        C("weight_norm_change", "<=", 0.5, "final over initial weight norm",
          "the network lost half of its size or more; healthy training of every "
          "family and optimizer grows the weights (1.0x or more), so this is named "
          "even while the loss still falls",
          label_zh="最终与初始权重范数之比",
          why_zh="网络丢掉了一半或更多的大小；每个家族、每种优化器的健康训练都会让权重增长（1.0x 或更多），所"
                 "以即使损失仍在下降也会给出这个原因"),
        ALL_OPTIMIZED,
        C("loss_progress", "<=", 0.99, "loss progress",
          "the collapse toward the all-zero function costs the loss that function's "
          "error; a loss that lost 99% of its start while the weights shrank had targets "
          "near zero, which the shrinking fits (no decay needed)", log=False,
          role="guard",
          label_zh="损失下降幅度",
          why_zh="朝全零函数坍缩的代价是该函数的误差；权重缩小的同时损失消除了初始值的 99%，说明目标接近零，"
                 "权重缩小正是在拟合它们（不需要衰减）"),
    ), "the weights are decaying away - check the weight decay",
       verdict_zh="权重在不断衰减消失：检查权重衰减"),
    # coupled decay of 10% per step is itself an update of 10% of the weights
    explains=("huge_lr",),
    outcome=Signature((LEARNS,), "with a hundredth of the decay the model learns",
                                 verdict_zh="衰减降到百分之一，模型就能学习"),
)

BATCH_TOO_SMALL = Fault(
    name="batch_too_small",
    title="Batch of 2 with a learning rate tuned for 64",
    family="optimization", task="sequence", shape="oscillating", phenomenon=None,
    symptom="The loss swings by about half its size from step to step and keeps "
            "swinging instead of settling; accuracy ends lower and varies between "
            "seeds.",
    cause="Each step's loss and gradient come from 2 samples, so both are very "
          "noisy estimates; Adam normalises the step size, so every noisy gradient "
          "still moves the weights a full step, largely in a random direction.",
    experiment="Divide the learning rate by 10: the swings stay. A too-large rate "
               "would calm down; the noise of two-sample batches does not.",
    fix="Use a larger batch (or accumulate gradients over several small ones) and "
        "scale the learning rate with the batch size.",
    zh=Chinese(
        title="批大小为 2，学习率却是按 64 调的",
        symptom="损失每一步都要摆动自身大小的一半左右，而且一直摆动、不收敛；最终准确率更低，并且随种子 "
                "(seed) 变化。",
        cause="每一步的损失和梯度只来自 2 个样本，两者都是噪声很大的估计；Adam 会把步长归一化，所以每个带"
              "噪的梯度仍让权重走满一整步，方向大半是随机的。",
        experiment="把学习率除以 10：摆动依旧。学习率过大的话会平静下来；两个样本的批次带来的噪声不会。",
        fix="使用更大的批次（或在几个小批次上累积梯度），并随批大小缩放学习率。"),
    edit=(Set("batch_size", 2),),
    repair=(Set("batch_size", 64),),
    probe=(Scale("lr", 0.1),),
    # On a user's loop: the same steps on batches merged to 64 samples reach a lower
    # loss, and the batches are this small (the mechanism, seen); a loop whose batches
    # hold more is not this fault, however noisy its curve.  A tenth of the rate that
    # helps too is the course's own experiment turned against it: the rate, not the
    # batch's noise, is too large (a batch of 2 at an 8-GPU rate diverges either way).
    confirm=((O("gain[batches_merged]", "better"), O("batch_small", "present")),),
    refute=(O("batch_small", "absent"), O("gain[lr/10]", "better")),
    other_shapes=("stepwise",),  # a seed whose swings reach 3x the start reads as jumps
    signature=Signature((
        C("loss_swing", ">=", 0.25, "swing of the smoothed loss",
          "minibatch noise around a settled loss stays under 0.11 of its scale once "
          "smoothed over 3 steps", log=False, unit=0.05, role="effect",
          label_zh="平滑损失的摆动幅度",
          why_zh="在 3 步上平滑后，围绕已稳定损失的小批次噪声保持在其尺度的 0.11 以下"),
        C("batch_size_median", "<=", 8, "samples per batch",
          "a handful of samples per step: every estimate is noise-dominated",
          label_zh="每批样本数",
          why_zh="每步只有寥寥几个样本：每个估计都被噪声主导"),
    ), "tiny batches make every step noisy - use a larger batch or a smaller rate",
       verdict_zh="极小的批次让每一步都充满噪声：使用更大的批次或更小的学习率"),
    outcome=Signature((
        C("loss_swing", ">=", 0.25, "swing of the smoothed loss",
          "still swinging at a tenth of the rate", log=False, unit=0.05,
          label_zh="平滑损失的摆动幅度",
          why_zh="学习率降到十分之一仍在摆动"),
    ), "a smaller rate does not calm it: the batches are too small",
       verdict_zh="更小的学习率也平息不了：批次太小了"),
)

EXPLODING_GRADIENTS = Fault(
    name="exploding_gradients",
    title="Deep residual stack (32 blocks, no normalisation) at a shallow model's rate",
    family="optimization", task="tabular", shape="diverging", phenomenon="C",
    symptom="The loss wobbles, then climbs by orders of magnitude within a few "
            "steps and turns NaN; gradient norms start several times above the "
            "baseline's and blow up in the last blocks and the head first.",
    cause="Each residual block adds its output to the running activation with "
          "nothing to rescale it, so 32 of them multiply the size of activations "
          "and gradients. A rate tuned for the 3-layer model now makes steps that "
          "enlarge the next gradient, which enlarges the next step: a feedback loop "
          "that ends in overflow.",
    experiment="Clip the gradient norm at 10: the NaN disappears, but the loss "
               "still explodes (to 1e11 and beyond) and nothing is learned. Clipping "
               "treats the symptom; the cause is depth x rate.",
    fix="Scale each residual branch by 1/sqrt(2 x depth) (here 0.125), as deep "
        "Transformers do, or add normalisation; a lower rate also helps. Use clipping "
        "only as a guard rail.",
    zh=Chinese(
        title="深层残差堆叠（32 个块，无归一化）沿用浅层模型的学习率",
        symptom="损失先是晃动，然后在几步之内上升几个数量级并变成 NaN；梯度范数一开始就比基线高好几倍，并"
                "且最先在最后几个块和输出头处爆炸。",
        cause="每个残差块都把自己的输出加到累积的激活上，没有任何东西去重新缩放它，于是 32 个块会把激活和"
              "梯度的大小成倍放大。为 3 层模型调好的学习率现在迈出的步子会放大下一个梯度，而它又放大下一"
              "步：一个以溢出告终的正反馈回路。",
        experiment="把梯度范数裁剪到 10：NaN 消失了，但损失仍然爆炸（到 1e11 以上），什么也没学到。梯度裁"
                   "剪 (gradient clipping) 治的是症状；原因是深度 × 学习率。",
        fix="把每个残差分支乘以 1/sqrt(2 × depth)（这里是 0.125），就像深层 Transformer 所做的那样，或者"
            "加入归一化；降低学习率也有帮助。裁剪只当作护栏使用。"),
    edit=(Set("depth", 32),),
    instrument="gradients",
    repair=(Set("residual_scale", 0.125),),  # 1 / sqrt(2 x depth) at depth 32
    probe=(Set("grad_clip", 10.0),),
    confirm=(O("gain[lr/10]", "better"),),
    refute=(O("gain[lr/10]", "worse"),),
    signature=Signature((
        C("nonfinite_losses", ">=", 0.5, "non-finite losses",
          "the loss overflowed: clean training never produces one", log=False,
          role="effect",
          label_zh="非有限损失",
          why_zh="损失溢出了：干净的训练从不会产生溢出"),
        C("loss_peak_ratio", ">=", 3, "loss peak over start",
          "after rising to several times its start: the NaN ended a climb, so it "
          "came from the updates feeding back, not from one bad value",
          label_zh="损失峰值与初始值之比",
          why_zh="在上升到初始值的数倍之后：NaN 结束了一次攀升，所以它来自不断自我放大的更新，而不是某个坏值"),
        C("input_nonfinite_total", "<=", 0.5, "non-finite input values",
          "the data are finite: the overflow was made by training", log=False,
          role="guard",
          label_zh="非有限输入值",
          why_zh="数据是有限的：溢出是训练造成的"),
        C("update_ratio_start", "<=", UPDATE_RATIO_HIGH, "update ratio of the first steps",
          "the first steps were of ordinary size: the blow-up built up over steps "
          "(a rate that overshoots at once is huge_lr)", role="guard",
          label_zh="最初几步的更新比",
          why_zh="最初几步的大小普通：爆炸是在多步之中积累起来的（一上来就越过头的学习率是 huge_lr）"),
        C("grad_cosine_end", "<=", 1 - ACCUMULATING_TURN, "gradient cosine",
          "consecutive gradients were not one running sum (that is no_zero_grad)",
          log=False, unit=0.01, required=False, role="guard",
          label_zh="相邻梯度余弦",
          why_zh="相邻梯度不是一个滑动和（那是 no_zero_grad）"),
    ), "the loss climbed and overflowed - exploding updates; lower the rate or "
       "normalise, and treat clipping as a guard rail",
       verdict_zh="损失上升并溢出：更新在爆炸；降低学习率或加入归一化，并把裁剪当作护栏"),
    outcome=Signature((
        FINITE,
        C("loss_peak_ratio", ">=", 100, "loss peak over start",
          "clipped, the loss still explodes by orders of magnitude",
          label_zh="损失峰值与初始值之比",
          why_zh="裁剪之后，损失仍然爆炸了几个数量级"),
    ), "clipping removes the NaN, not the explosion",
       verdict_zh="裁剪消除了 NaN，却没有消除爆炸"),
)

LR_DECAYED_TOO_EARLY = Fault(
    name="lr_decayed_too_early",
    title="A per-epoch step schedule stepped every batch (rate /10 every 30 steps)",
    family="optimization", task="tabular", shape="plateau", phenomenon="B",
    other_shapes=("healthy",),  # it keeps ~40% of its loss: the shape rules' healthy side
    symptom="The loss falls normally for the first few dozen steps, then flattens "
            "far above the baseline's and stays there; the steps shrink by orders of "
            "magnitude while the gradients keep their size.",
    cause="StepLR(step_size=30, gamma=0.1) is the classic 'divide by 10 every 30 "
          "epochs' schedule, but scheduler.step() is called after every batch, so the "
          "rate is divided by 10 every 30 steps: after 100 steps it is 1000x smaller "
          "and training freezes before the model has learned.",
    experiment="Train three times as long: the loss ends where it was, because every "
               "extra step is a billion times too small. A rate that was merely too "
               "small from the start would keep improving, and it never was large.",
    fix="Step an epoch-based scheduler once per epoch (here: decay every 930 steps), "
        "and plot the learning rate next to the loss.",
    zh=Chinese(
        title="按 epoch 设计的阶梯调度被每个批次调用（每 30 步学习率 /10）",
        symptom="损失在最初几十步正常下降，然后在远高于基线的位置变平并停在那里；步长缩小了几个数量级，而"
                "梯度的大小不变。",
        cause="StepLR(step_size=30, gamma=0.1) 是经典的“每 30 个 epoch 除以 10”的调度，但 "
              "scheduler.step() 在每个批次之后都被调用，于是学习率每 30 步就除以 10：100 步之后它小了 "
              "1000 倍，模型还没学会，训练就冻结了。",
        experiment="训练时间延长到三倍：损失停在原处，因为每多走的一步都小了十亿倍。如果学习率只是从一开"
                   "始就偏小（它从来没有大过），损失会继续改善。",
        fix="基于 epoch 的调度器每个 epoch 只调用一次（这里：每 930 步衰减一次），并把学习率和损失画在一"
            "起。"),
    edit=(Set("lr_decay_every", 30),),
    repair=(Set("lr_decay_every", 930),),  # 30 epochs of 31 batches
    probe=(Scale("steps", 3),),
    confirm=((O("gain[lr*10]", "better"), O("lr_decayed", "present")),
             (O("gain[lr*100]", "better"), O("lr_decayed", "present"))),
    refute=(O("lr_decayed", "absent"),),
    instrument="update_ratio",
    # a rate decayed by orders of magnitude leaves the rest of the run with tiny steps,
    # lr_too_small's evidence; where the steps were normal at first, the decay caused it
    explains=("lr_too_small",),
    signature=Signature((
        C("step_size_change_early", "<=", 0.01,
          "step per unit of gradient at 30-40% of the run, over its start",
          "the effective rate fell 100x before 40% of the run: a constant rate stays "
          "within a few x (momentum, noise), a cosine schedule is still at 0.73 there, "
          "so this is a schedule that decays far too early",
          label_zh="运行 30-40% 处每单位梯度的步长与初始值之比",
          why_zh="有效学习率在运行的 40% 之前就下降了 100x：恒定的学习率变化不超过几 x（动量、噪声），余弦调"
                 "度在那里仍为 0.73，所以这是一个衰减得太早的调度"),
        C("lr_change_early", "<=", 0.01, "learning rate at 30-40% of the run, over its start",
          "the rate the optimizer is set to fell as well (checked when recorded): an "
          "adaptive optimizer shrinks its step per unit of gradient by itself when the "
          "gradients grow, at a constant rate", required=False, role="guard",
          label_zh="运行 30-40% 处的学习率与起点之比",
          why_zh="优化器被设定的学习率也下降了（记录时检查）：梯度变大时，自适应优化器会自己缩小每单位梯度的"
                 "步长，而学习率并没有变"),
    ), "the steps shrank by orders of magnitude early in the run - is the learning "
       "rate decayed too early (a scheduler stepped every batch instead of every "
       "epoch)?",
       verdict_zh="步长在运行早期缩小了几个数量级：学习率是不是衰减得太早了（调度器每个批次调用一次，而不是每"
                  "个 epoch 一次）？"),
    outcome=Signature((
        C("step_size_change", "<=", 0.01, "change of the step per unit of gradient",
          "the schedule keeps shrinking the steps",
          label_zh="每单位梯度步长的变化",
          why_zh="调度一直在缩小步长"),
        C("loss_progress", "<=", 0.8, "loss progress",
          "three times the steps, still stalled", log=False, unit=0.05,
          label_zh="损失下降幅度",
          why_zh="步数增加到三倍，仍然停滞"),
    ), "more steps do not help: the decayed rate froze training",
       verdict_zh="更多的步数没有帮助：衰减后的学习率冻结了训练"),
)

FAULTS = (HUGE_LR, LR_TOO_SMALL, DROPOUT_TOO_STRONG, WEIGHT_DECAY_TOO_LARGE, BATCH_TOO_SMALL,
          EXPLODING_GRADIENTS, LR_DECAYED_TOO_EARLY)

