"""Data faults: what the model is fed (labels, scales, missing values, order, amount)."""

from __future__ import annotations

from dataclasses import replace

from ..basics.recipes import Scale, Set
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from ..evidence.thresholds import LOSS_ROSE
from .conditions import (
    ALL_CONNECTED,
    ALL_OPTIMIZED,
    CALM,
    FINITE,
    GRADIENTS_FLOW,
    INPUTS_SCALED,
    LEARNS,
    MOSTLY_TRAINABLE,
    MOVING,
    POSITIVE_LOSS,
    STEPS_NEVER_OVERSIZED,
    STUCK,
    WEIGHTS_KEPT,
)
from .fault import Chinese, Fault

# Everything that would stall learning by itself is ruled out (a label problem is what
# remains when the optimizer, the gradients, the inputs and the graph all work).
_LEARNING_WORKS = (POSITIVE_LOSS, CALM, FINITE, MOVING, STEPS_NEVER_OVERSIZED, GRADIENTS_FLOW,
                   INPUTS_SCALED, WEIGHTS_KEPT, ALL_OPTIMIZED, ALL_CONNECTED, MOSTLY_TRAINABLE,
                   C("pad_attention_median", "<=", 0.5, "attention on pads",
                     "the model reads its real tokens (checked for sequences)",
                     log=False, unit=0.05, required=False, role="guard",
                     label_zh="落在填充位上的注意力",
                     why_zh="模型读到了真实的 token（对序列检查）"))

SHUFFLED_LABELS = Fault(
    name="shuffled_labels",
    title="Labels shuffled: they no longer belong to their samples",
    family="data", task="tabular", shape="plateau", phenomenon="B",
    symptom="The loss stays at chance level (about ln 3 for 3 classes) although "
            "gradients flow, the weights move at a healthy rate and the inputs look "
            "normal; validation accuracy stays near chance.",
    cause="A join or a sort broke the pairing of samples and labels, so the labels "
          "carry no information about the inputs. The optimizer works, but the best "
          "it can do is predict the class frequencies.",
    experiment="Small-batch overfit test: train on 64 samples only. The model "
               "memorises them (training loss near 0) yet validation stays at "
               "chance: model and code can learn, the labels cannot be learned.",
    fix="Restore the sample-label pairing (join on a key, never on row order) and "
        "spot-check a few samples against their labels.",
    zh=Chinese(
        title="标签被打乱：不再属于各自的样本",
        symptom="损失一直停在随机猜测的水平（3 类时约为 ln 3），尽管梯度在流动、权重以健康的速率变化、输"
                "入看起来也正常；验证准确率 (validation accuracy) 一直接近随机水平。",
        cause="某次 join 或排序破坏了样本与标签的对应关系，标签不再携带关于输入的任何信息。优化器本身在工"
              "作，但它最多只能学会预测各类别的频率。",
        experiment="小批量过拟合测试 (small-batch overfit test)：只用 64 个样本训练。模型能把它们记住（训"
                   "练损失接近 0），验证却仍停在随机水平：模型和代码都能学习，是标签没法学。",
        fix="恢复样本与标签的对应（按键 join，绝不按行序），并抽查几个样本与其标签是否相符。"),
    edit=(Set("labels", "shuffled"),),
    repair=(Set("labels", "aligned"),),
    probe=(Set("n_train", 64),),
    confirm=((O("gain[overfit_batch]", "better"), O("gain[labels_permuted]", "unchanged")),),
    # Refuted when permuting the labels clearly helps (their order mattered: batches
    # sorted by class) or the model mixes samples (the forward pass scrambles the
    # pairing, the labels may be right).  Not when it clearly hurts: labels partly
    # shuffled still carry some signal, which a full permutation takes away.
    refute=(O("gain[labels_permuted]", "better"), O("samples_mixed", "present")),
    # Its mechanism is the symptom itself (a stuck loss) with every other way to stall
    # ruled out: an elimination.  A reshape that scrambles samples, a loss on the wrong
    # axis or a time-major batch read batch-first break the input-label relation the
    # same way, so the route names shuffled labels at low confidence only.
    signature=Signature((replace(STUCK, role="mechanism"), *_LEARNING_WORKS),
                        "the optimizer moves and gradients flow, yet nothing is "
                        "learned: check that labels belong to their samples",
                        verdict_zh="优化器在动、梯度在流，却什么也学不到：检查标签是否属于各自的样本",
                        by_elimination=True),
    # Where a validation loss is recorded, part of the labels shuffled shows even when
    # the rest is learned: the training loss stays above the clean validation loss.
    also=(Signature((
        C("train_eval_loss_gap", ">=", 0.1, "train minus validation loss",
          "the training batches are harder to fit than validation data the model never "
          "trained on: their labels are noisier (healthy runs stay within 0.08)",
          log=False, unit=0.05,
          label_zh="训练损失减验证损失",
          why_zh="训练批次比模型从未训练过的验证数据更难拟合：它们的标签噪声更大（健康运行保持在 0.08 以内）"),
        C("train_eval_gap_z", ">=", 3, "train minus validation loss over its standard error",
          "the gap stands three standard errors out of the batch-to-batch noise of the "
          "training losses it averages (a batch of 8 makes that noise large enough to "
          "read 0.13 from nothing)", log=False, role="guard", required=False,
          label_zh="训练损失减验证损失与其标准误之比",
          why_zh="这个差距高出它所平均的训练损失的批次间噪声三个标准误（批大小为 8 时，这种噪声大到能凭空读"
                 "出 0.13）"),
        C("loss_end", ">=", 0.0, "final training loss",
          "the training loss ends at or above zero, as a likelihood or a distance does: "
          "one that falls below zero has no floor (a forgotten square, a sign slip), and "
          "its gap to a validation loss says nothing about labels", log=False, unit=0.1,
          role="guard",
          label_zh="最终训练损失",
          why_zh="训练损失最终不低于零，似然或距离都是如此：跌到零以下的损失没有下界（忘了平方、符号写错），"
                 "它与验证损失的差距说明不了标签的任何问题"),
        C("dropout_rate", "<=", 0.3, "dropout rate in training",
          "no strong dropout, whose training-mode loss is higher for its own reason "
          "(checked when recorded)", log=False, unit=0.1, required=False, role="guard",
          label_zh="训练时的 dropout 比率",
          why_zh="没有很强的 dropout（它的训练模式损失会因为自身的原因更高；记录时检查）"),
        C("batchnorm_batch_median", ">=", 16, "samples per BatchNorm batch",
          "BatchNorm layers, where the model has them, normalise over 16 samples or "
          "more: over fewer, their noisy batch statistics alone set the training-mode "
          "loss apart from the evaluation loss (checked when recorded)",
          role="guard", required=False,
          label_zh="每个 BatchNorm 批次的样本数",
          why_zh="模型中若有 BatchNorm 层，它们在 16 个或更多样本上做归一化：样本更少时，仅仅是嘈杂的批次统"
                 "计量就会让训练模式的损失与评估损失拉开（记录时检查）"),
        C("output_scale_start", "<=", 3, "logit std at step 0",
          "a well-scaled start: a loss still falling from an oversized initialisation "
          "also trains above its evaluation loss", role="guard", required=False,
          label_zh="第 0 步的 logit 标准差",
          why_zh="尺度合适的起点：从过大初始化开始仍在下降的损失，训练时也会高于评估损失"),
        C("soft_target_share", "<=", 0.05, "share of output rows trained on soft targets",
          "hard training targets: a label, right or wrong, makes one negative entry in a "
          "softmax row's gradient; mixup, label smoothing and distillation spread the "
          "target over several, and its entropy alone holds the training loss above a "
          "hard-label validation loss (mixup at Beta(0.4, 0.4): 0.26 nats; checked when "
          "recorded)", log=False, unit=0.05, role="guard", required=False,
          label_zh="以软目标训练的输出行比例",
          why_zh="训练目标是硬标签：一个标签（无论对错）只会让 softmax 行的梯度有一个负分量；mixup、标签平滑"
                 "和蒸馏把目标分散到多个类别上，仅目标本身的熵就让训练损失高于硬标签的验证损失（Beta(0.4, "
                 "0.4) 的 mixup：0.26 nats；记录时检查）"),
        *_LEARNING_WORKS), "training loss above the clean validation loss while the "
                           "optimizer works: are some training labels misaligned?",
                           verdict_zh="优化器在工作，训练损失却高于干净的验证损失：是不是有些训练标签错位了？"),),
    outcome=Signature((
        C("loss_end", "<=", 0.1, "final training loss",
          "64 samples are memorised: the loss falls far below chance (1.1)",
          label_zh="最终训练损失",
          why_zh="64 个样本被记住：损失远低于随机水平（1.1）"),
        C("val_acc_best", "<=", 0.5, "best validation accuracy",
          "what was memorised does not generalise", log=False, unit=0.05,
          label_zh="最好的验证准确率",
          why_zh="记住的东西无法泛化"),
    ), "the model memorises a small batch, so the labels are the problem",
       verdict_zh="模型能记住一个小批次，所以问题在标签"),
)

# Both raw-unit routes of no_input_norm start here; each adds the harm it reads.
_RAW_UNITS = C("input_magnitude", ">=", 100, "largest |input|",
               "standardised features stay within a few tens (every healthy run: under 5; "
               "100 would be a 100-sigma value): inputs in the hundreds are in raw units",
               label_zh="输入的最大绝对值",
               why_zh="标准化后的特征不超过几十（所有健康运行都小于 5；100 会是 100 个标准差之外的值）："
                      "上百的输入是原始单位")
_INPUTS_FINITE = C("input_nonfinite_total", "<=", 0.5, "non-finite input values",
                   "the inputs are finite: large, not broken (a loss that overflows from "
                   "them still counts; NaN in the data is nan_in_data)", log=False,
                   role="guard",
                   label_zh="输入中的非有限值",
                   why_zh="输入是有限的：只是很大，并没有坏掉（由它们引起的损失溢出仍然算数；数据里的 NaN "
                          "属于 nan_in_data）")

NO_INPUT_NORM = Fault(
    name="no_input_norm",
    title="Inputs not standardised",
    family="data", task="tabular", shape="plateau", phenomenon="B",
    symptom="Batch inputs span values in the thousands next to values near 1e-3; "
            "the sigmoid layer saturates completely and the loss never leaves "
            "chance level.",
    cause="The amount feature is in cents (thousands) while another is a rate of "
          "order 1e-3. Without standardisation the amount dominates every "
          "pre-activation, drives the sigmoids into saturation, and the features "
          "that matter at small scale are invisible.",
    experiment="Standardise the features with the training mean and std, changing "
               "nothing else: saturation disappears and the loss falls like the "
               "baseline's.",
    fix="Standardise every feature with statistics computed on the training split "
        "only, and apply the same transform to validation data.",
    zh=Chinese(
        title="输入未标准化",
        symptom="同一批输入里既有上千的数值，也有 1e-3 左右的数值；sigmoid 层完全饱和，损失始终没有离开随"
                "机水平。",
        cause="金额特征以分为单位（上千），另一个特征是 1e-3 量级的比率。不做标准化时，金额主导了每个预激"
              "活值，把 sigmoid 推入饱和，而那些在小尺度上起作用的特征完全看不见。",
        experiment="只用训练集的均值和标准差把特征标准化，其余不变：饱和消失，损失像基线一样下降。",
        fix="用只在训练集上计算的统计量标准化每个特征，并对验证数据施加同样的变换。"),
    edit=(Set("normalize_inputs", False),),
    repair=(Set("normalize_inputs", True),),
    probe=(Set("normalize_inputs", True),),
    confirm=((O("gain[inputs_standardised]", "better"), O("inputs_unscaled", "present")),),
    refute=(O("gain[inputs_standardised]", "worse"), O("inputs_unscaled", "absent")),
    signature=Signature((
        C("input_scale_spread", ">=", 100, "input std spread",
          "per-feature spreads 100x apart leave the small-scale features invisible "
          "next to the large one; standardised inputs are within a few times",
          label_zh="输入标准差之比",
          why_zh="各特征离散程度相差 100 倍时，小尺度的特征在大尺度特征旁边完全看不见；标准化后的输入相差不过"
                 "几倍"),
        _INPUTS_FINITE,
    ), "features on wildly different scales - standardise the inputs",
       verdict_zh="特征的尺度相差悬殊：把输入标准化"),
    # Features all in raw units of one large scale (pixels 0-255, years) have no spread
    # between them to read, but a fresh model fed them starts with logits as oversized
    # as a 10x initialisation's (bad_init's evidence, which guards against this).
    also=(Signature((
        _RAW_UNITS,
        C("output_scale_start", ">=", 3, "logit std at step 0",
          "and they made the fresh model's logits oversized before any update (a fresh "
          "classifier's logits are O(1) or smaller): without that, as behind a "
          "normalisation layer, the scale does no harm to read", role="effect",
          label_zh="第 0 步的 logit 标准差",
          why_zh="并且在任何更新之前就让刚初始化模型的 logits 过大（刚初始化的分类器 logits 为 O(1) 或更小）"
                 "：没有这一点（例如输入后面有归一化层），这个尺度就看不出危害"),
        _INPUTS_FINITE,
    ), "inputs in raw units make the fresh model's outputs oversized - standardise the inputs",
       verdict_zh="原始单位的输入让刚初始化模型的输出过大：把输入标准化"),
    # Behind a bounded output (a sigmoid, a tanh) the oversized start shows as units
    # pinned at their bounds before any update, which no logit scale reads: the raw-unit
    # counterpart of saturated_sigmoid, whose own route guards against inputs this size.
    Signature((
        _RAW_UNITS,
        C("saturation_start", ">=", 0.3, "saturated share at the first step",
          "and they pinned a third of the fresh model's sigmoid/tanh units at their bounds "
          "before any update (with standardised inputs a fresh model's units work in "
          "their linear range: every healthy run reads 0)", log=False, unit=0.05,
          role="effect",
          label_zh="第一步的饱和比例",
          why_zh="并且在任何更新之前就把刚初始化模型三分之一的 sigmoid/tanh 单元压到了边界上（输入标准化时，"
                 "刚初始化模型的单元工作在线性区：所有健康运行都是 0）"),
        _INPUTS_FINITE,
    ), "inputs in raw units saturate the fresh model's bounded units - standardise the inputs",
       verdict_zh="原始单位的输入让刚初始化模型的有界单元饱和：把输入标准化"),),
    # inputs in the thousands make gradients and steps in the thousands
    explains=("huge_lr", "exploding_gradients"),
    outcome=Signature((LEARNS, C("saturation_median", "<=", 0.05,
                                 "median saturated share",
                                 "standardised inputs keep sigmoids unsaturated",
                                 log=False, unit=0.05,
                                 label_zh="饱和比例的中位数",
                                 why_zh="标准化的输入让 sigmoid 保持不饱和")),
                      "standardising the inputs alone restores learning",
                      verdict_zh="只把输入标准化就恢复了学习"),
)

NAN_IN_DATA = Fault(
    name="nan_in_data",
    title="Missing values in the raw data",
    family="data", task="tabular", shape="nonfinite", phenomenon="C",
    symptom="Training runs normally, then the loss turns NaN at an unpredictable "
            "early step; the input batch of that very step contains a NaN.",
    cause="Five rows have an empty amount field, parsed as NaN. Standardising with "
          "NaN-skipping statistics lets them through untouched; any batch that "
          "contains one produces a NaN output, loss and gradient, and one update "
          "with NaN gradients poisons every weight.",
    experiment="Impute the missing amounts with the training median before "
               "standardising, changing nothing else: the run finishes with a "
               "finite loss. NaN from a too-large rate or an fp16 overflow would "
               "not care about imputation.",
    fix="Validate inputs at load time: count NaN/Inf per column, then drop or impute "
        "(with training statistics) before training.",
    zh=Chinese(
        title="原始数据中有缺失值",
        symptom="训练起初正常，随后在早期某个无法预测的步骤，损失变成 NaN；正是那一步的输入批次里含有 NaN"
                "。",
        cause="有五行的金额字段为空，被解析为 NaN。用跳过 NaN 的统计量做标准化会让它们原样通过；任何包含"
              "其中一行的批次都会产生 NaN 的输出、损失和梯度，而一次带 NaN 梯度的更新就会污染所有权重。",
        experiment="标准化之前先用训练集的中位数填补缺失的金额，其余不变：运行结束时损失仍是有限值。由学"
                   "习率过大或 fp16 溢出导致的 NaN 不会因为填补而改变。",
        fix="在加载时校验输入：按列统计 NaN/Inf 的个数，然后在训练前删除或（用训练集统计量）填补。"),
    edit=(Set("nan_rows", 5),),
    repair=(Set("impute_missing", True),),
    probe=(Set("impute_missing", True),),
    confirm=(O("nonfinite_inputs", "present"),),
    refute=(O("nonfinite_inputs", "absent"),),
    signature=Signature((
        C("input_nonfinite_total", ">=", 0.5, "non-finite input values",
          "one NaN input is enough to make its batch's loss NaN; clean data have 0",
          log=False,
          label_zh="非有限输入值",
          why_zh="一个 NaN 输入就足以让它所在批次的损失变成 NaN；干净的数据为 0"),
        C("nonfinite_losses", ">=", 0.5, "non-finite losses",
          "and the loss did become NaN", log=False, role="effect",
          label_zh="非有限损失",
          why_zh="而且损失确实变成了 NaN"),
    ), "NaN arrived with the input batch - check the data for missing values",
       verdict_zh="NaN 是随输入批次进来的：检查数据中的缺失值"),
    outcome=Signature((
        C("nonfinite_losses", "<=", 0.5, "non-finite losses",
          "after imputation the loss stays finite to the end", log=False,
          label_zh="非有限损失",
          why_zh="填补之后，损失直到结束都保持有限"),
    ), "with the missing values imputed the loss stays finite",
       verdict_zh="填补缺失值后，损失保持有限"),
)

NO_SHUFFLE = Fault(
    name="no_shuffle",
    title="Data not shuffled (stored sorted by class)",
    family="data", task="tabular", shape="stepwise", phenomenon="A",
    symptom="Every batch holds a single class; each time the stream moves on to "
            "the next class the loss jumps to several times its starting value, then "
            "falls again within the block, and the run ends worse than it started.",
    cause="The records are stored class by class and the loader walks them in "
          "order. Each block of batches teaches 'always predict this class', which "
          "the next block punishes: the model chases the current class instead of "
          "learning to separate them.",
    experiment="Divide the learning rate by 10: the swings shrink but the run still "
               "learns nothing useful, because every batch still holds one class. A "
               "rate problem would be cured.",
    fix="Shuffle every epoch (DataLoader(shuffle=True) or a RandomSampler), and "
        "check the label mix of a few batches.",
    zh=Chinese(
        title="数据没有打乱（按类别排序存储）",
        symptom="每个批次只含一个类别；数据流每进入下一个类别，损失就跳到初始值的好几倍，然后在该段内又降"
                "下来，最终结果比开始时还差。",
        cause="记录按类别依次存储，加载器又按顺序读取。每一段批次都在教模型“永远预测这个类”，下一段又惩罚"
              "它：模型一直在追赶当前的类别，而没有学会区分它们。",
        experiment="把学习率除以 10：波动变小了，但运行仍然学不到有用的东西，因为每个批次仍只有一个类别。"
                   "如果是学习率问题，这样就治好了。",
        fix="每个 epoch 都打乱数据（DataLoader(shuffle=True) 或 RandomSampler），并检查几个批次的标签构成"
            "。"),
    edit=(Set("shuffle", False),),
    repair=(Set("shuffle", True),),
    probe=(Scale("lr", 0.1),),
    # On a user's loop the batches show it: one class (or a few) per batch where the
    # same labels dealt at random would mix (the mechanism itself, as NaN in the inputs is
    # nan_in_data's). Re-dealing the samples at random is the fix as an experiment; the
    # training loss need not show it (a batch of one class is easy to fit: the harm is
    # what the model learns), so it is a route, not the only one.
    confirm=((O("gain[reshuffled]", "better"), O("batches_unmixed", "present")),
             O("batches_unmixed", "present")),
    refute=(O("batches_unmixed", "absent"),),
    signature=Signature((
        C("label_purity_median", ">=", 0.99, "median share of the batch's main class",
          "a shuffled batch of 64 from 3 balanced classes is ~40% one class; 99% "
          "means batches hold one class", log=False, unit=0.05,
          label_zh="批次中主类别比例的中位数",
          why_zh="从 3 个平衡类别中打乱抽出的 64 个样本，约有 40% 属于同一类；99% 意味着每个批次只有一个类别"),
        C("loss_peak_ratio", ">=", LOSS_ROSE, "loss peak over start",
          "and the loss swings well above where it started", role="effect",
          label_zh="损失峰值与初始值之比",
          why_zh="而且损失的摆动远高于它的起点"),
    ), "each batch holds one class - is the data shuffled?",
       verdict_zh="每个批次只有一个类别：数据打乱了吗？"),
    # Over many classes a batch cut from class-ordered data straddles a few of them (a
    # batch of 32 from 100 classes of 32 samples: two), too mixed for the route above,
    # yet it holds almost none of the run's spread of labels.  The mechanism alone names
    # it: a model that sees the classes one band at a time forgets the others, whatever
    # its training loss shows (a loss that stays high beside it reads as labels that do
    # not match their inputs: that reading is this fault's consequence).
    also=(Signature((
        C("label_mixing", "<=", 0.5, "share of the run's label spread a batch holds",
          "a batch drawn at random holds about sqrt((n-1)/n) of it whatever the class "
          "balance (every healthy run of the population: 0.92 or more); under half, the batches come "
          "from a narrow band of the classes, one band after another", log=False,
          unit=0.05,
          label_zh="一个批次覆盖的、整个运行中标签分布的比例",
          why_zh="随机抽取的批次无论类别是否平衡，都大约覆盖 sqrt((n-1)/n)（健康总体中的每次运行：0.92 或"
                 "更高）；不到一半，说明批次来自类别中很窄的一段，一段接一段"),
    ), "each batch comes from a narrow band of the classes - is the data shuffled?",
       verdict_zh="每个批次都来自类别中很窄的一段：数据打乱了吗？"),),
    explains=("shuffled_labels",),
    outcome=Signature((
        C("label_purity_median", ">=", 0.99, "median share of the batch's main class",
          "still one class per batch", log=False, unit=0.05,
          label_zh="批次中主类别比例的中位数",
          why_zh="每个批次仍只有一个类别"),
        C("val_acc_best", "<=", 0.6, "best validation accuracy",
          "and still nothing useful learned", log=False, unit=0.05,
          label_zh="最好的验证准确率",
          why_zh="而且仍没有学到任何有用的东西"),
    ), "a smaller rate does not help: the batches are the problem",
       verdict_zh="更小的学习率没有帮助：问题在批次"),
)

LABEL_OFFSET = Fault(
    name="label_offset",
    title="Class labels off by one between training and validation",
    family="data", task="tabular", shape="degrading", phenomenon=None,
    symptom="Training loss and batch accuracy look perfect, while validation "
            "accuracy is far below chance and validation loss climbs the whole run.",
    cause="The training pipeline encodes classes one position further than the "
          "evaluation pipeline (a 1-based vs 0-based mapping), so the model learns a "
          "consistent but permuted mapping. Shifting rows of i.i.d. samples would "
          "look just like shuffled labels; a shifted encoding is a different, "
          "recognisable failure.",
    experiment="Map the training labels back by one class: validation accuracy "
               "jumps above 90%. Far-below-chance accuracy means a systematic "
               "permutation, not noise; random labels would sit at chance.",
    fix="Build the label encoding once and use the same mapping for training, "
        "validation and serving; assert it on a few known samples.",
    zh=Chinese(
        title="训练与验证之间类别标签错开了一位",
        symptom="训练损失和批次准确率看起来完美，而验证准确率远低于随机水平，验证损失在整个运行中不断上升"
                "。",
        cause="训练流水线对类别的编码比评估流水线多移了一位（从 1 开始与从 0 开始的映射），所以模型学到的"
              "是一个一致但被置换了的映射。如果只是把独立同分布 (i.i.d.) 样本的行错开，看起来会和打乱的标"
              "签一模一样；编码错位则是另一种可以辨认的失败。",
        experiment="把训练标签往回映射一个类别：验证准确率跃升到 90% 以上。远低于随机的准确率意味着系统性"
                   "的置换而不是噪声；随机标签会停在随机水平。",
        fix="只构建一次标签编码，训练、验证和线上服务都用同一个映射；并在几个已知样本上断言它。"),
    edit=(Set("train_label_shift", 1),),
    repair=(Set("train_label_shift", 0),),
    probe=(Set("train_label_shift", 0),),
    signature=Signature((
        C("val_acc_end", "<=", 0.2, "final validation accuracy",
          "below chance for up to 5 classes: a model that learned nothing sits at "
          "chance, one that learned a permutation sits below it", log=False,
          unit=0.05,
          label_zh="最终验证准确率",
          why_zh="对至多 5 个类别而言低于随机水平：什么也没学到的模型停在随机水平，学到了一个置换的模型则低于"
                 "它"),
        C("train_val_acc_gap", ">=", 0.5, "training minus validation accuracy",
          "while training batches are fitted; healthy runs differ by < 0.03",
          log=False, unit=0.1,
          label_zh="训练准确率减验证准确率",
          why_zh="而训练批次被拟合得很好；健康运行相差 < 0.03"),
    ), "validation is systematically wrong while training is right - do the "
       "label encodings of training and validation agree?",
       verdict_zh="训练是对的，验证却系统性地错：训练和验证的标签编码一致吗？"),
    outcome=Signature((
        C("val_acc_end", ">=", 0.9, "final validation accuracy",
          "with the encodings aligned the model is accurate", log=False, unit=0.05,
          label_zh="最终验证准确率",
          why_zh="编码对齐后，模型是准确的"),
    ), "remapping the labels restores accuracy: it was a permutation",
       verdict_zh="重新映射标签恢复了准确率：这是一个置换"),
)

CLASS_IMBALANCE = Fault(
    name="class_imbalance",
    title="Rare classes cut to 2% of their samples",
    family="data", task="tabular", shape="healthy", phenomenon=None,
    symptom="The training loss looks even better than the baseline's, yet one "
            "validation class is mostly missed (worst-class recall under 0.65) and "
            "about 95% of every training batch is a single class.",
    cause="Classes 1 and 2 keep only 2% of their samples (about 13 each), so the "
          "average loss is dominated by class 0: leaning towards it is a cheap way "
          "to a low loss, and the rare classes are learned from a handful of "
          "examples.",
    experiment="Draw class-balanced batches (oversampling the rare classes): each "
               "class fills a third of a batch and worst-class recall rises above "
               "0.5. Averaged metrics were hiding a class the model neglects.",
    fix="Rebalance batches (or weight the loss), regularise because rare samples now "
        "repeat ~50 times an epoch, report per-class recall, and collect more "
        "rare-class data: 13 examples cap what any fix reaches.",
    zh=Chinese(
        title="少数类被削减到原样本的 2%",
        symptom="训练损失看起来比基线还好，但有一个验证类别大多被漏掉（最差类别的召回率 (recall) 低于 "
                "0.65），而且每个训练批次约 95% 是同一类。",
        cause="类别 1 和 2 只保留了 2% 的样本（各约 13 个），平均损失由类别 0 主导：偏向它是拿到低损失的"
              "捷径，而少数类只能从寥寥几个例子中学习。",
        experiment="按类别均衡地抽取批次（对少数类过采样）：每个类别各占一个批次的三分之一，最差类别的召"
                   "回率升到 0.5 以上。平均指标掩盖了一个被模型忽视的类别。",
        fix="重新平衡批次（或给损失加权）；由于少数类样本现在每个 epoch 要重复约 50 次，还要加正则化；报"
            "告每个类别的召回率，并收集更多少数类数据：13 个例子限制了任何修复所能达到的上限。"),
    edit=(Set("minority_fraction", 0.02),),
    repair=(Set("balanced_sampling", True), Set("weight_decay", 0.01),),
    probe=(Set("balanced_sampling", True),),
    fixed_accuracy=0.75,
    other_shapes=("degrading",),  # in some seeds validation loss climbs as it neglects
    signature=Signature((
        C("label_purity_median", ">=", 0.8, "median share of the batch's main class",
          "one class fills 80% of a batch; shuffled balanced data give ~40%",
          log=False, unit=0.05,
          label_zh="批次中主类别比例的中位数",
          why_zh="一个类别占批次的 80%；打乱且平衡的数据约为 40%"),
        C("val_min_recall_end", "<=", 0.65, "worst-class validation recall",
          "one class is mostly missed; the baseline's worst class is above 0.83",
          log=False, unit=0.05,
          label_zh="最差类别的验证召回率",
          why_zh="一个类别大多被漏掉；基线最差类别的召回率高于 0.83"),
        CALM,
    ), "batches are dominated by one class and another class is neglected - "
       "rebalance and check per-class recall",
       verdict_zh="批次被一个类别主导，另一个类别被忽视：重新平衡，并检查每个类别的召回率"),
    outcome=Signature((
        C("label_purity_median", "<=", 0.5, "median share of the batch's main class",
          "balanced batches", log=False, unit=0.05,
          label_zh="批次中主类别比例的中位数",
          why_zh="均衡的批次"),
        C("val_min_recall_end", ">=", 0.5, "worst-class validation recall",
          "the neglected class is now found half the time or more", log=False,
          unit=0.05,
          label_zh="最差类别的验证召回率",
          why_zh="被忽视的类别现在有一半或更多的时候能被找到"),
    ), "balanced batches bring the neglected class back",
       verdict_zh="均衡的批次让被忽视的类别回来了"),
)

OVERFITTING = Fault(
    name="overfitting",
    title="Too little training data: 64 samples",
    family="data", task="tabular", shape="degrading", phenomenon=None,
    symptom="The training loss falls to almost zero while the validation loss "
            "bottoms out early and then climbs for the rest of the run.",
    cause="With 64 samples and about 5,400 weights the network can memorise the "
          "training set. After learning what generalises it keeps sharpening its "
          "confidence on those 64 points, and its confident mistakes on new data "
          "cost more and more validation loss.",
    experiment="Add weight decay 0.03, changing nothing else: the validation loss "
               "stops climbing. The rise came from fitting 64 points ever more "
               "tightly, not from broken labels or a broken model.",
    fix="Get more data (here: all 2000 samples); failing that, regularise (weight "
        "decay) and stop at the validation-loss minimum.",
    zh=Chinese(
        title="训练数据太少：64 个样本",
        symptom="训练损失几乎降到零，而验证损失很早就见底，之后在剩下的运行中一路上升。",
        cause="只有 64 个样本却有约 5,400 个权重，网络能把训练集背下来。学完能泛化的东西之后，它继续在这 "
              "64 个点上磨尖自己的置信度，它在新数据上那些自信的错误让验证损失越来越高。",
        experiment="加上 0.03 的权重衰减 (weight decay)，其余不变：验证损失不再上升。上升来自把 64 个点拟"
                   "合得越来越紧，而不是标签或模型坏了。",
        fix="获取更多数据（这里：全部 2000 个样本）；做不到的话就正则化（权重衰减），并在验证损失最低点停"
            "止训练。"),
    edit=(Set("n_train", 64),),
    repair=(Set("n_train", 2000),),
    probe=(Set("weight_decay", 0.03),),
    refute=(O("val_inputs_shifted", "present"),),  # validation unlike training says
    #   nothing about generalisation: a rising validation loss there is not overfitting
    signature=Signature((
        C("val_loss_rise", ">=", 0.15, "validation loss rise from its minimum",
          "smoothed over 3 evaluations a healthy run's validation loss ends within "
          "0.07 of its minimum", log=False, unit=0.05,
          label_zh="验证损失比其最低点的升幅",
          why_zh="在 3 次评估上平滑后，健康运行的验证损失最终与其最低点相差不超过 0.07"),
        C("loss_end", "<=", 0.03, "final training loss",
          "while the training set is memorised (baseline ends near 0.1)",
          label_zh="最终训练损失",
          why_zh="而训练集被记住了（基线最终在 0.1 附近）"),
        C("loss_start", ">=", 0.0, "loss at step 0",
          "a loss that memorises is a non-negative error; a negative one has the wrong "
          "sign, and an ever lower value then means nothing", log=False, role="guard",
          label_zh="第 0 步的损失",
          why_zh="一个能把数据记住的损失是非负的误差；负的损失符号错了，越来越低的值也就毫无意义"),
    ), "validation gets worse while the training set is memorised - overfitting",
       verdict_zh="训练集被记住的同时验证越来越差：过拟合"),
    outcome=Signature((
        C("val_loss_rise", "<=", 0.05, "validation loss rise from its minimum",
          "regularised, the validation loss no longer climbs", log=False, unit=0.05,
          label_zh="验证损失比其最低点的升幅",
          why_zh="加上正则化后，验证损失不再上升"),
    ), "regularisation stops the climb: it was overfitting",
       verdict_zh="正则化阻止了上升：这是过拟合"),
)

LABEL_LEAKAGE = Fault(
    name="label_leakage",
    title="A feature recorded after the outcome (label leakage)",
    family="data", task="tabular", shape="healthy", phenomenon=None,
    symptom="The curve is too good to be true: validation accuracy is near perfect "
            "after a few dozen steps, on a task where the baseline climbs for hundreds "
            "of steps and never passes 0.98; the training loss falls almost to zero.",
    cause="One column is filled in only once the outcome is known (a case status, a "
          "chargeback flag), so it encodes the label. The validation split comes from "
          "the same table and carries it too, so validation cannot see the problem: "
          "the model reads the answer instead of learning the task, and will fail in "
          "use, where that column does not exist yet at decision time.",
    experiment="Drop the suspect column and train again, changing nothing else: "
               "validation accuracy falls back to the baseline's slow climb and stays "
               "below 0.98. The perfect score came from that one feature.",
    fix="For every feature ask 'is it known at decision time?'; drop those filled in "
        "after the outcome, and split validation by time so leaks cannot hide.",
    zh=Chinese(
        title="一个在结果出来之后才记录的特征（标签泄漏 (label leakage)）",
        symptom="曲线好得令人难以置信：几十步之后验证准确率就接近完美，而在这个任务上基线要爬升几百步，且"
                "从不超过 0.98；训练损失几乎降到零。",
        cause="有一列只在结果已知之后才会填写（案件状态、拒付标记），所以它编码了标签。验证集来自同一张表"
              "，也带着这一列，因此验证看不出问题：模型是在读答案而不是在学习任务，上线后会失败，因为在决"
              "策时刻这一列还不存在。",
        experiment="去掉可疑的那一列重新训练，其余不变：验证准确率回到基线那种缓慢的爬升，并保持在 0.98 "
                   "以下。完美的分数来自这一个特征。",
        fix="对每个特征都问一句“决策时刻它已知吗？”；去掉那些在结果之后才填写的特征，并按时间切分验证集，"
            "让泄漏无处藏身。"),
    edit=(Set("leak_label", True),),
    repair=(Set("leak_label", False),),
    probe=(Set("leak_label", False),),
    instrument="accuracy",
    signature=Signature((
        C("val_acc_early", ">=", 0.99, "best validation accuracy in the first 20% of steps",
          "near perfect within 60 steps: the baseline needs all 300 steps to reach "
          "0.96-0.97 and never passes 0.98; a shortcut, not learning", log=False,
          unit=0.005,
          label_zh="前 20% 步数内最好的验证准确率",
          why_zh="60 步之内接近完美：基线需要全部 300 步才达到 0.96-0.97，而且从不超过 0.98；这是捷径，而不是"
                 "学习"),
        C("loss_end", "<=", 0.03, "final training loss",
          "and the training set is fitted almost exactly (baseline ends near 0.1)",
          role="effect",
          label_zh="最终训练损失",
          why_zh="而且训练集几乎被完全拟合（基线最终在 0.1 附近）"),
        FINITE,
    ), "too good to be true: near-perfect validation within a few steps - is a "
       "feature known only after the outcome (label leakage)?",
       verdict_zh="好得令人难以置信：几步之内验证就接近完美：是不是有一个特征只在结果出来之后才知道（标签泄漏"
                  "）？"),
    outcome=Signature((
        C("val_acc_early", "<=", 0.98, "best validation accuracy in the first 20% of "
          "steps", "without the column the model must learn the task, slowly",
          log=False, unit=0.005,
          label_zh="前 20% 步数内最好的验证准确率",
          why_zh="没有这一列，模型就必须慢慢学习这个任务"),
    ), "without the suspect column the shortcut is gone",
       verdict_zh="去掉可疑的那一列，捷径就消失了"),
)

VAL_NOT_NORMALIZED = Fault(
    name="val_not_normalized",
    title="Validation inputs not standardised (training preprocessing skipped)",
    family="data", task="tabular", shape="degrading", phenomenon=None,
    symptom="Training looks like the baseline's (loss near 0.1, batches fitted), yet "
            "validation accuracy sits near a third from the first evaluation to the "
            "last (one class for every row) and validation loss climbs from 1.1 to over "
            "10: trains well, validates badly.",
    cause="The features are standardised with the training set's mean and std before "
          "training, but the validation set goes to the model in raw units (amounts in "
          "cents near 200000): the scaler was fit and applied on training data only. "
          "The model is evaluated on inputs from another distribution than the one it "
          "learned: the amount's validation mean sits about 200000 training standard "
          "deviations away, the age's 40.",
    experiment="Change nothing in training (the run is bitwise the same: validation "
               "never feeds back) and put the validation rows through the training "
               "scaler: validation accuracy is the baseline's. The model was fine; "
               "overfitting or wrong labels would still fail there.",
    fix="Fit the preprocessing once, on training data, keep it with the model, and "
        "apply that same transform (never refit it) to validation, test and serving "
        "inputs; check that a validation batch's feature means are near 0 in training "
        "units.",
    zh=Chinese(
        title="验证输入没有标准化（跳过了训练时的预处理）",
        symptom="训练看起来和基线一样（损失在 0.1 附近，批次被拟合），可验证准确率从第一次评估到最后一次都"
                "停在三分之一左右（每一行都判为同一类），验证损失从 1.1 一路升到 10 以上：训练得好，验证得"
                "差。",
        cause="训练之前，特征用训练集的均值和标准差做了标准化，但验证集以原始单位送进模型（以分计的金额在 "
              "200000 附近）：缩放器 (scaler) 只在训练数据上拟合并应用。模型在一个与它学习时不同的分布上"
              "被评估：金额的验证均值偏离了约 200000 个训练标准差，年龄的偏离了 40 个。",
        experiment="训练什么都不改（运行逐位相同：验证从不反过来影响训练），只让验证行经过训练时的缩放器："
                   "验证准确率就是基线的水平。模型本身没有问题；过拟合或错误的标签在那里仍然会失败。",
        fix="预处理只拟合一次、只在训练数据上拟合，和模型保存在一起，并把同一个变换（绝不重新拟合）应用到"
            "验证、测试和线上的输入上；检查一个验证批次的特征均值以训练单位计是否接近 0。"),
    edit=(Set("normalize_val", False),),
    repair=(Set("normalize_val", True),),
    probe=(Set("normalize_val", True),),
    confirm=(O("val_inputs_shifted", "present"),),
    refute=(O("val_inputs_shifted", "absent"),),
    instrument="eval_inputs",
    # inputs whole training stds away are extrapolated, and the extrapolation grows with
    # the weights as training fits its own set: the validation loss climbs while the
    # training loss falls for that reason alone, which is overfitting's evidence
    explains=("overfitting",),
    signature=Signature((
        C("eval_input_shift", ">=", 2.0, "evaluation-input shift, in training std",
          "a feature's mean over the evaluation inputs sits two training standard "
          "deviations from its mean over the training inputs: sampling noise is "
          "~sqrt(2 ln F / n), 0.1 for the lab's 16 features and 628 rows and under 1 "
          "for 16 samples, and a changed class mix moves a mean only between its class "
          "means (0.4-0.9 with the lab's rare classes cut to 2%)",
          label_zh="评估输入的偏移（以训练标准差计）",
          why_zh="某个特征在评估输入上的均值，离它在训练输入上的均值有两个训练标准差：抽样噪声约为 "
                 "sqrt(2 ln F / n)，对实验室的 16 个特征和 628 行约为 0.1，对 16 个样本也低于 1；类别比例的"
                 "改变只会让均值在各类别的均值之间移动（实验室把少数类削减到 2% 时为 0.4-0.9）"),
        C("train_eval_loss_gap", "<=", -0.5, "training minus validation loss",
          "and, where a validation loss is recorded, it sits half a nat or more above "
          "the training loss: the shift costs the model its accuracy there",
          log=False, unit=0.1, required=False, role="effect",
          label_zh="训练损失减验证损失",
          why_zh="并且在记录了验证损失时，它比训练损失高出至少半个 nat：偏移让模型在验证上失去了准确率"),
    ), "the model is evaluated on inputs unlike its training inputs - is validation "
       "preprocessed with the training statistics, and drawn from the same population?",
       verdict_zh="模型被评估时的输入与它的训练输入不一样：验证数据是否用训练统计量做了预处理，是否来自同一个"
                  "总体？"),
    outcome=Signature((
        C("val_acc_end", ">=", 0.9, "final validation accuracy",
          "through the training scaler, the same model is accurate", log=False,
          unit=0.05, label_zh="最终验证准确率",
          why_zh="经过训练时的缩放器，同一个模型是准确的"),
        C("eval_input_shift", "<=", 1.0, "evaluation-input shift, in training std",
          "and the validation inputs are back within sampling noise of the training "
          "inputs", label_zh="评估输入的偏移（以训练标准差计）",
          why_zh="并且验证输入回到了训练输入的抽样噪声范围之内"),
    ), "through the training preprocessing, validation agrees with training: the "
       "inputs were shifted, not the model wrong",
       verdict_zh="经过训练时的预处理，验证与训练一致：是输入偏移了，而不是模型错了"),
)

FAULTS = (SHUFFLED_LABELS, NO_INPUT_NORM, NAN_IN_DATA, NO_SHUFFLE, LABEL_OFFSET,
          CLASS_IMBALANCE, OVERFITTING, LABEL_LEAKAGE, VAL_NOT_NORMALIZED)

