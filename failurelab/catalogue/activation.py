"""Activation faults: units that saturate or die, and initialisation scale."""

from __future__ import annotations

from dataclasses import replace

from ..basics.recipes import Scale, Set
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from .conditions import (
    ALL_CONNECTED,
    DATA_FINITE,
    FINITE,
    INPUTS_SCALED,
    INPUTS_SMALL,
    LEARNS,
    SOFTMAX_LOSS,
    STEPS_SANE,
    STUCK,
)
from .fault import Chinese, Fault

SATURATED_SIGMOID = Fault(
    name="saturated_sigmoid",
    title="Sigmoid inputs saturated by an oversized init",
    family="activation", task="tabular", shape="healthy", phenomenon="B",
    # The loss creeps down and stalls with 73-80% removed: healthy to the shape rules,
    # a plateau to the course (it stalls well above the baseline's loss).
    other_shapes=("plateau",),
    symptom="Most sigmoid outputs sit within 0.01 of 0 or 1, the first layer's "
            "gradient is a small fraction of the next layer's, and the loss creeps "
            "down and stalls well above the baseline's.",
    cause="The weights feeding the sigmoid start 30x too large, so its inputs are "
          "tens of units from zero. The sigmoid's slope there is below 0.01, so "
          "almost no gradient gets back through it: the first layer barely learns "
          "and the later layers must make do with nearly binary features.",
    experiment="The inputs are already standardised, so the scale comes from the "
               "weights: re-initialise only the sigmoid layer at PyTorch's default "
               "scale. The saturated share drops below 5% and the first layer's "
               "gradient recovers.",
    fix="Keep the default (fan-in scaled) initialisation for layers that feed "
        "saturating activations, or use a non-saturating activation.",
    zh=Chinese(
        title="初始化过大，sigmoid 输入饱和",
        symptom="大多数 sigmoid 输出离 0 或 1 不到 0.01，第一层的梯度只有下一层的一小部分，损失缓慢下降后"
                "停在远高于基线 (baseline) 的位置。",
        cause="连接 sigmoid 的权重初始就大了 30 倍，它的输入离零有几十个单位。sigmoid 在那里的斜率不到 "
              "0.01，几乎没有梯度能穿过它传回去：第一层几乎学不到东西，后面的层只能将就使用近乎二值的特征"
              "。",
        experiment="输入已经标准化，所以尺度来自权重：只把 sigmoid 层按 PyTorch 的默认尺度重新初始化。饱"
                   "和比例降到 5% 以下，第一层的梯度恢复。",
        fix="给接在饱和型激活函数前面的层保留默认的（按 fan-in 缩放的）初始化，或者换用不会饱和的激活函数"
            "。"),
    edit=(Set("sigmoid_gain", 30.0),),
    repair=(Set("sigmoid_gain", 1.0),),
    probe=(Set("sigmoid_gain", 1.0),),
    confirm=((O("gain[reinit_defaults]", "better"), O("saturated_units", "present")),),
    refute=(O("saturated_units", "absent"),),
    signature=Signature((
        C("saturation_median", ">=", 0.3, "median saturated share",
          "a third of the sigmoid/tanh outputs pass < 1% of the gradient back; healthy "
          "layers work in their linear range", log=False, unit=0.1,
          label_zh="饱和比例的中位数",
          why_zh="三分之一的 sigmoid/tanh 输出传回的梯度不到 1%；健康的层工作在线性区间"),
        C("first_layer_grad_share", "<=", 0.6, "first over last layer gradient norm",
          "the gradient is attenuated across the saturated layer: a saturated unit "
          "passes < 1% of it back, so the first layer gets a fraction of what the last "
          "one gets (a guard: how much the first layer gets also depends on the "
          "architecture)", role="guard",
          label_zh="第一层与最后一层梯度范数之比",
          why_zh="梯度在饱和层上被衰减：饱和的单元传回的梯度不到 1%，所以第一层得到的只是最后一层的一小部分（"
                 "这是一个前提条件：第一层得到多少也取决于架构）"),
        C("saturation_start", ">=", 0.3, "saturated share at the first step",
          "the units were saturated before any update: the initialisation put them "
          "there (saturation that training builds up later was made by the steps, "
          "whatever the init)", log=False, unit=0.1, role="guard",
          label_zh="第一步的饱和比例",
          why_zh="还没有任何更新时单元就已饱和：是初始化把它们推到了那里（训练过程中后来才积累起来的饱和是"
                 "更新步造成的，与初始化无关）"),
        INPUTS_SCALED,
        INPUTS_SMALL,
        ALL_CONNECTED,
        STEPS_SANE,
        C("nonfinite_losses", "<=", 0.5, "non-finite losses",
          "saturated sigmoids bound their outputs and stall training; they cannot make "
          "the loss overflow, so a run that did has another cause upstream", log=False,
          role="guard",
          label_zh="非有限损失",
          why_zh="饱和的 sigmoid 会限制输出并让训练停滞；它们不会让损失溢出，所以溢出的运行在上游另有原因"),
    ), "sigmoid units are saturated by their own weights, not by the inputs",
       verdict_zh="sigmoid 单元被它们自己的权重推入饱和，而不是被输入"),
    outcome=Signature((
        C("saturation_median", "<=", 0.05, "median saturated share",
          "at the default scale sigmoids work in their linear range", log=False,
          unit=0.05,
          label_zh="饱和比例的中位数",
          why_zh="在默认尺度下 sigmoid 工作在线性区间"),
    ), "at the default init scale the sigmoids leave saturation",
       verdict_zh="用默认的初始化尺度，sigmoid 离开了饱和区"),
)

DEAD_RELU = Fault(
    name="dead_relu",
    title="ReLU units dead from the start",
    family="activation", task="tabular", shape="plateau", phenomenon="B",
    symptom="Every ReLU unit outputs 0 for every sample from the very first step; "
            "over 99% of gradient entries are exactly 0 and the loss sits at "
            "chance level.",
    cause="The bias feeding the ReLU layer starts at -10, far below what the "
          "weighted inputs can reach, so no unit ever turns on. A ReLU that is off "
          "passes exactly zero gradient, so nothing behind it can learn its way "
          "out: only the output bias moves.",
    experiment="Multiply the learning rate by 10: nothing changes, because exactly "
               "zero gradient times any rate is still zero. A too-small rate would "
               "respond.",
    fix="Initialise ReLU biases at 0 (or slightly positive), or use a leaky "
        "activation, and watch the dead share from step 0.",
    zh=Chinese(
        title="ReLU 单元从一开始就死了",
        symptom="从第一步起，每个 ReLU 单元对每个样本都输出 0；超过 99% 的梯度分量恰好为 0，损失停在随机"
                "水平。",
        cause="送入 ReLU 层的偏置初始为 -10，远低于加权输入所能达到的范围，所以没有任何单元会被激活。处于"
              "关闭状态的 ReLU 传回的梯度恰好是零，它后面的任何参数都没法靠学习走出来：只有输出层的偏置在"
              "动。",
        experiment="把学习率乘以 10：什么都不变，因为恰好为零的梯度乘以任何学习率仍是零。如果是学习率过小"
                   "，这里会有反应。",
        fix="把 ReLU 的偏置初始化为 0（或略大于 0），或者换用 leaky 激活函数，并从第 0 步起观察死单元比例"
            "。"),
    edit=(Set("relu_bias", -10.0),),
    repair=(Set("relu_bias", 0.0),),
    probe=(Scale("lr", 10),),
    confirm=((O("gain[reinit_defaults]", "better"), O("dead_units", "present")),),
    refute=(O("gain[lr*10]", "better"), O("dead_units", "absent")),
    signature=Signature((
        C("dead_start", ">=", 0.9, "dead ReLU share at step 0",
          "nine in ten units off for a whole batch at initialisation; a healthy layer "
          "has a third or fewer off, and units that die later point to large updates "
          "instead. Named even when the loss still falls (a residual or normalised "
          "path routes around the dead layer): the layer is lost capacity either way",
          log=False, unit=0.01,
          label_zh="第 0 步的死 ReLU 比例",
          why_zh="初始化时十分之九的单元对整个批次都关闭；健康的层关闭的单元不超过三分之一，而后来才死掉的单"
                 "元则指向过大的更新。即使损失仍在下降（残差或归一化的路径绕过了死掉的层），也会给出这个原因"
                 "：无论如何这一层都损失了容量"),
    ), "the ReLU layer is dead from initialisation - check its bias and init",
       verdict_zh="ReLU 层从初始化起就是死的：检查它的偏置和初始化"),
    outcome=Signature((STUCK, C("zero_grad_median", ">=", 0.99,
                                "median share of zero gradients",
                                "still exactly zero gradient everywhere",
                                log=False, unit=0.01,
                                label_zh="零梯度比例的中位数",
                                why_zh="各处的梯度仍恰好为零")),
                      "a larger rate changes nothing: the gradient is exactly zero",
                      verdict_zh="更大的学习率什么也不改变：梯度恰好为零"),
)

BAD_INIT = Fault(
    name="bad_init",
    title="Weights initialised 10x too large",
    family="activation", task="tabular", shape="healthy", phenomenon=None,
    symptom="The very first loss is 7 to 20 instead of ln 3 = 1.1: the fresh model "
            "makes confident, random predictions (logit std above 3) and saturates "
            "two-fifths of its sigmoids; training recovers but ends less accurate.",
    cause="Every weight matrix starts 10x larger than its fan-in scaled default "
          "(similar to using std-1 normal init), so pre-activations and logits are "
          "10x too large from the start. A well-scaled classifier starts near "
          "uniform predictions with loss near ln K.",
    experiment="Divide the learning rate by 10: the first loss is just as high, "
               "because it is measured before any update. It is the init, not the "
               "rate.",
    fix="Keep fan-in scaled (Kaiming/Xavier) initialisation, and check the loss at "
        "step 0 against ln K before training.",
    zh=Chinese(
        title="权重初始化大了 10 倍",
        symptom="第一个损失是 7 到 20，而不是 ln 3 = 1.1：刚初始化的模型做出自信却随机的预测（logit 标准"
                "差高于 3），五分之二的 sigmoid 饱和；训练能恢复过来，但最终准确率更低。",
        cause="每个权重矩阵初始都比按 fan-in 缩放的默认值大 10 倍（相当于用标准差为 1 的正态分布初始化）"
              "，所以预激活值和 logits 从一开始就大了 10 倍。尺度合适的分类器开始时预测接近均匀分布，损失"
              "接近 ln K。",
        experiment="把学习率除以 10：第一个损失一样高，因为它是在任何更新之前测得的。问题在初始化，不在学"
                   "习率。",
        fix="保持按 fan-in 缩放的（Kaiming/Xavier）初始化，训练前先把第 0 步的损失与 ln K 对照。"),
    edit=(Set("init_scale", 10.0),),
    repair=(Set("init_scale", 1.0),),
    probe=(Scale("lr", 0.1),),
    confirm=((O("gain[reinit_defaults]", "better"), O("weights_above_default", "present")),),
    refute=(O("weights_above_default", "absent"),),
    # oversized weights make oversized pre-activations (saturated sigmoids), oversized
    # gradients (huge first steps) and, in a deep net, steps that feed back until the
    # loss overflows: their evidence is its consequence, measured later than its own
    # (the logits of step 0, before any update)
    explains=("saturated_sigmoid", "huge_lr", "exploding_gradients"),
    signature=Signature((
        C("output_scale_start", ">=", 3, "logit std at step 0",
          "a fresh classifier's logits should be O(1) or smaller (baseline 0.05): "
          "std 3 means some classes start e^3 = 20x likelier for no reason",
          label_zh="第 0 步的 logit 标准差",
          why_zh="刚初始化的分类器，logits 应为 O(1) 或更小（基线为 0.05）：标准差为 3 意味着某些类别毫无理由"
                 "地一开始就可能性高出 e^3 = 20x"),
        INPUTS_SCALED,
        INPUTS_SMALL,
        C("output_gain_start", ">=", 0.5, "logit std at step 0 over the largest |input|",
          "the weights amplified the inputs: PyTorch's default init gives a layer's "
          "output 0.58 of its input's rms (1/sqrt 3), less after each ReLU layer, and "
          "the rms is at most the largest |input| (the lab's baseline: 0.02; its 10x "
          "init: 3); oversized outputs below that were carried in by inputs in raw "
          "units, which are then the cause (checked for inputs that are numbers)",
          required=False,
          label_zh="第 0 步 logit 标准差与最大输入绝对值之比",
          why_zh="是权重放大了输入：PyTorch 的默认初始化让一层的输出为其输入均方根的 0.58（1/sqrt 3），每经过一个"
                 " ReLU 层还会更小，而均方根至多等于最大的输入绝对值（实验室基线：0.02；初始化大 10 倍时：3）；"
                 "低于这个比例的过大输出是原始单位的输入带进来的，那时原因在输入（只对数值输入检查）"),
    ), "the model starts out confidently wrong - check the initialisation scale",
       verdict_zh="模型一开始就自信地犯错：检查初始化尺度"),
    outcome=Signature((
        C("output_scale_start", ">=", 3, "logit std at step 0",
          "unchanged: step 0 comes before any update",
          label_zh="第 0 步的 logit 标准差",
          why_zh="不变：第 0 步在任何更新之前"),
    ), "the rate changes nothing at step 0: it is the initialisation",
       verdict_zh="学习率改变不了第 0 步：问题在初始化"),
)

INIT_TOO_SMALL = Fault(
    name="init_too_small",
    title="Weights initialised 10x too small",
    family="activation", task="tabular", shape="plateau", phenomenon="B",
    symptom="The loss sits at chance level (ln 3) from the first step to the last, "
            "the first layer receives 1-2% of the gradient the output layer gets "
            "(baseline: 20-30%), and the ReLU units go quiet one after another until none is left.",
    cause="Every weight matrix starts 10x smaller than its fan-in scaled default "
          "(about what a fixed N(0, 0.01) init gives here). Each layer shrinks the "
          "signal on the way forward and the gradient on the way back, so every "
          "sample looks alike to the later layers: they learn only the class "
          "frequencies, the output bias absorbs them, and the ReLU units drift off "
          "for good. Near zero weights the network sits at a saddle point.",
    experiment="Multiply the learning rate by 10: the loss still does not move and "
               "the first layer's share of the gradient stays under a fifth. A "
               "too-small rate would respond; a gradient that vanishes in the "
               "weights does not.",
    fix="Keep fan-in scaled (Kaiming/Xavier) initialisation instead of a fixed "
        "small std, and compare each layer's gradient norm at step 0.",
    zh=Chinese(
        title="权重初始化小了 10 倍",
        symptom="损失从第一步到最后一步都停在随机水平（ln 3），第一层得到的梯度只有输出层的 1-2%（基线："
                "20-30%），ReLU 单元一个接一个沉寂，直到一个不剩。",
        cause="每个权重矩阵初始都比按 fan-in 缩放的默认值小 10 倍（大约相当于这里固定用 N(0, 0.01) 初始化"
              "）。每一层在前向时缩小信号、在反向时缩小梯度，于是在后面的层看来每个样本都差不多：它们只学"
              "到类别频率，由输出偏置吸收，而 ReLU 单元则永久地沉寂下去。权重接近零时，网络正处在一个鞍点"
              " (saddle point) 上。",
        experiment="把学习率乘以 10：损失仍然不动，第一层在梯度中所占的份额仍低于五分之一。学习率过小的话"
                   "会有反应；在权重中消失的梯度则不会。",
        fix="保持按 fan-in 缩放的（Kaiming/Xavier）初始化，而不是固定的小标准差，并比较第 0 步每一层的梯"
            "度范数。"),
    edit=(Set("init_scale", 0.1),),
    repair=(Set("init_scale", 1.0),),
    probe=(Scale("lr", 10),),
    confirm=((O("gain[reinit_defaults]", "better"), O("weights_below_default", "present")),),
    refute=(O("weights_below_default", "absent"),),
    instrument="gradients",
    signature=Signature((
        C("first_layer_grad_share_start", "<=", 0.06,
          "first-layer over last-layer gradient, first steps",
          "backward through weights 10x too small shrinks the gradient by 10x per layer "
          "crossed, from the very first step; the baseline's first layer starts with "
          "a fifth to a third of the last layer's gradient, 3x above this threshold",
          label_zh="最初几步第一层与最后一层梯度之比",
          why_zh="穿过小了 10x 的权重做反向传播，从第一步起每穿过一层就让梯度缩小 10x；基线第一层开始时得到的"
                 "梯度是最后一层的五分之一到三分之一，比这个阈值高 3x"),
        STUCK,
        ALL_CONNECTED,
        C("dead_start", "<=", 0.9, "dead ReLU share at step 0",
          "the units are alive at initialisation: a layer dead from step 0 is a bias "
          "problem, with no gradient at all", log=False, unit=0.05, role="guard",
          label_zh="第 0 步的死 ReLU 比例",
          why_zh="初始化时单元是活的：从第 0 步起就死掉的层是偏置问题，根本没有梯度"),
        FINITE,
        INPUTS_SCALED,
        C("input_is_tokens", "<=", 0.5, "token-id inputs",
          "dense inputs: an embedding's gradient is sparse per token, so its ratio to "
          "the last layer's says nothing about init scale", log=False, required=False,
          role="guard",
          label_zh="输入为 token 编号",
          why_zh="稠密的输入：嵌入层的梯度按 token 是稀疏的，所以它与最后一层之比说明不了初始化尺度"),
    ), "the gradient fades on its way back to the first layer - is the "
       "initialisation too small?",
       verdict_zh="梯度在传回第一层的途中逐渐消失：初始化是不是太小了？"),
    outcome=Signature((
        STUCK,
        C("first_layer_grad_share", "<=", 0.2, "first-layer over last-layer gradient",
          "still vanishing at ten times the rate",
          label_zh="第一层与最后一层梯度之比",
          why_zh="学习率提高到十倍梯度仍在消失"),
    ), "a larger rate changes nothing: the gradient vanishes in the weights",
       verdict_zh="更大的学习率什么也不改变：梯度消失在权重之中"),
)

OUTPUT_ACTIVATION_MISMATCH = Fault(
    name="output_activation_mismatch",
    title="The output activation cannot express the targets (ReLU on the logits)",
    family="activation", task="tabular", shape="healthy", phenomenon=None,
    # A class whose output unit the ReLU shuts for every sample is never predicted: the
    # loss then stops high (seeds 0-9: a plateau on 3, oscillating on 1, healthy on 6;
    # a class lost on 5); where none dies only the output's range shows the bug.
    other_shapes=("plateau", "oscillating"),
    symptom="The model's output is a ReLU's output: no logit is ever below 0. On half "
            "the seeds one or two classes get a logit of 0 for every sample within a "
            "few steps; they are never predicted (worst-class recall 0) and accuracy "
            "ends between 0.27 and 0.73. On the others training looks healthy.",
    cause="A ReLU after the last Linear layer clips every negative logit to 0, but "
          "CrossEntropyLoss needs negative logits to say \"unlikely\". A wrong class "
          "cannot be pushed below 0, and a logit stuck below 0 passes no gradient, so "
          "a class whose unit goes negative for every input stays dead.",
    experiment="Remove only the final ReLU and keep everything else: the loss falls "
               "like the baseline's and no class is lost. The hidden ReLU layers are "
               "untouched, so it was the output's range, not dead hidden units.",
    fix="End the model in a Linear layer and let the loss apply softmax; choose an "
        "output activation only when its range is the targets' range.",
    zh=Chinese(
        title="输出激活函数表达不了目标（logits 上加了 ReLU）",
        symptom="模型的输出就是一个 ReLU 的输出：没有任何 logit 小于 0。在一半的种子上，一两个类别在几步之"
                "内就对每个样本都得到 0 的 logit；它们永远不会被预测（最差类别召回率为 0），准确率最终在 0.27"
                " 到 0.73 之间。在其余种子上训练看起来是健康的。",
        cause="最后一个 Linear 层之后的 ReLU 把每个负的 logit 截成 0，但 CrossEntropyLoss 需要负的 logit"
              " 来表达“不太可能”。错误的类别无法被压到 0 以下，而卡在 0 以下的 logit 传不回梯度，所以一个"
              "对每个输入都变成负值的类别单元就一直死着。",
        experiment="只去掉最后的 ReLU，其他一切不变：损失像基线一样下降，也不会丢掉任何类别。隐藏层的 ReLU"
                   " 没有动，所以问题在输出的取值范围，而不是死掉的隐藏单元。",
        fix="让模型以一个 Linear 层结尾，由损失函数去做 softmax；只有当输出激活函数的取值范围就是目标的取"
            "值范围时才使用它。"),
    edit=(Set("output", "relu"),),
    repair=(Set("output", "logits"),),
    probe=(Set("output", "logits"),),
    # The arm that passes the output's activation module by (the model ends in its
    # last Linear layer) confirms it where that module is a rectifier or squashing one;
    # a probability (softmax, sigmoid) there is wrong_loss's; a run that needed the
    # activation (a loss that takes probabilities) refutes it.
    # A softmax over one unit outputs exactly 1, a row that is also a probability
    # distribution: wrong_loss's evidence, made by this mechanism; and where the ReLU
    # shuts every class unit for every sample, no gradient is left at all (seed 9 of the
    # lab), zero_grad_misplaced's evidence.
    # A model whose output cannot reach its targets learns nothing, which shuffled
    # labels' route reads too (so_48221692: the training loss above the validation loss
    # by the two splits' target spread alone).
    confirm=((O("gain[output_identity]", "better"), O("output_activation", "present")),
             # probabilities compared by a loss that reads them as they are (an MSE on a
             # sigmoid's or a softmax's output): their range, not a second squashing
             (O("gain[output_identity]", "better"), O("output_probabilities", "present"),
              O("loss_takes_logits", "absent"))),
    refute=(O("gain[output_identity]", "worse"),),
    explains=("wrong_loss", "zero_grad_misplaced", "shuffled_labels"),
    signature=Signature((
        C("output_relu_share", ">=", 0.3, "share of steps whose output is a ReLU's output",
          "the output's std equals a ReLU module's own to float rounding (1e-3): one "
          "tensor read by two instruments, which holds at every step; two different "
          "tensors agreed on at most 2 steps in 300 of a healthy run. Its entries are "
          "then >= 0", log=False, unit=0.05,
          label_zh="输出就是某个 ReLU 输出的步数比例",
          why_zh="输出的标准差与某个 ReLU 模块自己的标准差在浮点舍入 (1e-3) 内相等：这是两个探针读到的同一个张"
                 "量，每一步都成立；在健康运行中，两个不同的张量在 300 步里至多有 2 步这样吻合。于是它的元素都"
                 " >= 0"),
        replace(SOFTMAX_LOSS, why=SOFTMAX_LOSS.why + ", and needs negative logits for the "
                "classes it rules out (a regression loss on a ReLU output may have targets "
                ">= 0 that the ReLU reaches)",
                why_zh=SOFTMAX_LOSS.why_zh + "，需要用负的 logit 来排除类别（ReLU 输出上的回归损失，"
                "目标可能 >= 0，ReLU 够得着）"),
    ), "the logits pass through a ReLU, so none can go below 0 - is there an activation "
       "after the last layer?",
       verdict_zh="logits 经过了一个 ReLU，所以没有一个能低于 0：最后一层之后是不是还有一个激活函数？"),
    also=(Signature((
        C("output_saturated_end", ">=", 0.9, "saturated share of the output at the end",
          "the output is a sigmoid/tanh module's own output and nine in ten of its "
          "entries sit within 1% of a bound of its range", log=False, unit=0.05,
          label_zh="结束时输出的饱和比例",
          why_zh="输出就是一个 sigmoid/tanh 模块自己的输出，而且它十个元素中有九个离取值范围的边界不到 1%"),
        C("output_std_end", "<=", 0.01, "std of the output at the end",
          "every row is at the same bound: rows split between the two bounds (a "
          "confident classifier) have a std of 0.1 or more once one in a hundred is at "
          "the other", role="guard",
          label_zh="结束时输出的标准差",
          why_zh="每一行都在同一个边界上：分布在两个边界上的行（一个自信的分类器）只要有百分之一在另一端，标"
                 "准差就有 0.1 或更大"),
        STUCK,
    ), "every output sits at the same bound of its activation's range and the loss does "
       "not fall: the targets lie beyond that bound - is the output activation's range "
       "the targets' range?",
       verdict_zh="每个输出都停在其激活函数取值范围的同一个边界上，而损失不下降：目标在那个边界之外。输出激活"
                  "函数的取值范围是目标的取值范围吗？"),
          Signature((
        C("output_std_end", "<=", 1e-6, "std of the output at the end",
          "every entry of every row is the same number: the output ignores the input "
          "and the weights (a softmax over a single unit is exp(z)/exp(z) = 1)",
          label_zh="结束时输出的标准差",
          why_zh="每一行的每个元素都是同一个数：输出与输入和权重都无关（单个单元上的 softmax 是 exp(z)/exp(z) "
                 "= 1）"),
        C("output_prob_share", ">=", 0.9, "median share of output rows that are "
          "probabilities", "the rows are probability distributions: a softmax made "
          "them, and with every entry equal each row is uniform (1 for one unit)",
          log=False, unit=0.05, role="guard",
          label_zh="输出行为概率分布的比例的中位数",
          why_zh="这些行是概率分布：是 softmax 造出来的；所有元素都相等时，每一行都是均匀分布（只有一个单元时"
                 "就是 1）"),
    ), "every output row is the same constant distribution - is softmax taken over a "
       "single output unit?",
       verdict_zh="每一行输出都是同一个常数分布：是不是在单个输出单元上做了 softmax？"),
          Signature((
        C("output_relu_share", ">=", 0.3, "share of steps whose output is a ReLU's output",
          "as above: the output is a ReLU's, so whole rows of it can be exactly 0",
          log=False, unit=0.05,
          label_zh="输出就是某个 ReLU 输出的步数比例",
          why_zh="同上：输出是一个 ReLU 的输出，所以整行都可能恰好为 0"),
        C("first_nonfinite", "<=", 0, "first non-finite loss at step",
          "the loss is NaN/Inf at the very first step, before any update: a loss that "
          "reads the output as probabilities (its log, or each entry over its row's sum) "
          "meets a row clipped to 0 (log 0, 0/0)", log=False, role="effect",
          label_zh="第一个非有限损失出现在第几步",
          why_zh="损失在第一步、任何更新之前就是 NaN/Inf：一个把输出当作概率来读的损失（取对数，或每个元素除以"
                 "它所在行的和）碰上了被截成 0 的一行（log 0、0/0）"),
        DATA_FINITE,
    ), "the output is a ReLU's and the loss is non-finite from the first step - is the "
       "output read as probabilities without a softmax?",
       verdict_zh="输出是一个 ReLU 的输出，而损失从第一步起就是非有限的：是不是没有经过 softmax 就把输出当作概"
                  "率来读？"),
          # The clip written as a function (F.relu, torch.clamp on the logits) has no
          # module to compare the output with: its exact zeros show it, under any loss
          # that reads logits (a softmax's or one logit's binary cross-entropy).
          Signature((
        C("output_zero_share", ">=", 0.1, "median share of output entries exactly 0",
          "a value computed by the last layer is exactly 0 only where something clipped "
          "it (a ReLU or a clamp, a module or a function): healthy runs of every family "
          "read 0, a ReLU on fresh logits about one half", log=False, unit=0.05,
          label_zh="输出中恰好为 0 的元素比例的中位数",
          why_zh="最后一层算出的值只有在被截断时（ReLU 或 clamp，模块或函数）才恰好为 0：每个家族的健康运行都"
                 "读到 0，新初始化的 logits 经过 ReLU 约为一半"),
        C("logit_loss_share", ">=", 0.1, "share of steps whose output gradient is a loss "
          "on logits", "the gradient is a softmax's p - y or one logit's sigmoid(z) - y: "
          "the loss needs logits below 0 for what it rules out (a regression loss on a "
          "clipped output may have targets >= 0 that the clip reaches). A regression's "
          "2 (z - t) / B matches neither form (healthy regressors and autoencoders read "
          "0); one logit's BCE is read only on steps with 16 rows still unfitted "
          "(healthy binary runs: 0.32 .. 1)", log=False, unit=0.05, role="guard",
          label_zh="输出梯度为 logits 上的损失之梯度的步数比例",
          why_zh="梯度是 softmax 的 p - y，或单个 logit 的 sigmoid(z) - y：这个损失需要低于 0 的 logit 来排除"
                 "（截断输出上的回归损失，目标可能 >= 0，截断够得着）。回归的 2 (z - t) / B 两种形式都不符合"
                 "（健康的回归器和自编码器读到 0）；单个 logit 的 BCE 只在仍有 16 行未拟合的步上读得出（健康的"
                 "二分类运行：0.32 .. 1）"),
    ), "a share of the output is exactly 0 and the loss reads it as logits: something "
       "clips the logits at 0 - is there a ReLU (a module or F.relu) or a clamp after the "
       "last layer?",
       verdict_zh="输出中有一部分恰好为 0，而损失把它当作 logits 来读：有东西把 logits 截在 0：最后一层之后"
                  "是不是有一个 ReLU（模块或 F.relu）或 clamp？"),),
    outcome=Signature((
        C("output_relu_share", "<=", 0.1, "share of steps whose output is a ReLU's output",
          "the logits are the last Linear layer's, free to go below 0", log=False,
          unit=0.05,
          label_zh="输出就是某个 ReLU 输出的步数比例",
          why_zh="logits 来自最后一个 Linear 层，可以低于 0"),
        LEARNS,
    ), "without the final ReLU the loss falls like the baseline's",
       verdict_zh="去掉最后的 ReLU，损失像基线一样下降"),
)

FAULTS = (SATURATED_SIGMOID, DEAD_RELU, BAD_INIT, INIT_TOO_SMALL, OUTPUT_ACTIVATION_MISMATCH)
