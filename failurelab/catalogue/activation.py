"""Activation faults: units that saturate or die, and initialisation scale."""

from __future__ import annotations

from ..basics.recipes import Scale, Set
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from .conditions import ALL_CONNECTED, FINITE, INPUTS_SCALED, INPUTS_SMALL, STEPS_SANE, STUCK
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

FAULTS = (SATURATED_SIGMOID, DEAD_RELU, BAD_INIT, INIT_TOO_SMALL)
