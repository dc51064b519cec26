"""Implementation faults: code that runs without error and is wrong."""

from __future__ import annotations

from dataclasses import replace

from ..basics.recipes import Scale, Set
from ..evidence.alerts import CARRIED, MIXED_BATCHES, NEVER_EMPTIED, PARALLEL_GRADIENTS
from ..evidence.experiments import Outcome as O
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from ..evidence.thresholds import ACCUMULATING_TURN
from .conditions import ALL_OPTIMIZED, GRADIENTS_FLOW, LEARNS, POSITIVE_LOSS, SOFTMAX_LOSS, TOKENS, UNHEALTHY
from .fault import Chinese, Fault

NO_ZERO_GRAD = Fault(
    name="no_zero_grad",
    title="Gradients are never zeroed",
    family="implementation", task="tabular", shape="diverging", phenomenon="A",
    symptom="The gradient norm climbs steadily and consecutive gradients point the "
            "same way (cosine near 1); the weights and then the loss blow up, often "
            "only after tens of steps rather than at step 1.",
    cause="PyTorch adds each backward pass into .grad; without zero_grad() step t "
          "applies the sum of all t gradients, so the effective step grows with t "
          "until it overshoots. Early on the sum is small, which is why it does not "
          "explode immediately.",
    experiment="Divide the learning rate by 10, the cheapest test for a too-large "
               "rate: the gradient still piles up (norm up 10x or more, consecutive "
               "gradients still parallel), because the sum grows whatever the rate. A "
               "rate problem would have calmed down.",
    fix="Call optimizer.zero_grad() once per step, before loss.backward().",
    zh=Chinese(
        title="梯度从不清零",
        symptom="梯度范数 (gradient norm) 稳步上升，相邻两步的梯度方向几乎一致（余弦接近 1）；随后权重和"
                "损失相继爆炸，而且往往要过几十步才出现，并不在第 1 步。",
        cause="PyTorch 会把每次反向传播的结果累加进 .grad；不调用 zero_grad() 时，第 t 步用的是前 t 个梯"
              "度之和，等效步长随 t 增大，直到越过最优点。起初这个和还很小，所以不会立刻爆炸。",
        experiment="把学习率 (learning rate) 除以 10，这是检验学习率过大最便宜的办法：梯度照样越积越大（"
                   "范数上升 10 倍以上，相邻梯度仍然平行），因为不论学习率多大，这个和都在增长。如果是学习率"
                   "的问题，曲线本该平稳下来。",
        fix="每一步调用一次 optimizer.zero_grad()，放在 loss.backward() 之前。"),
    # a sum of parallel gradients under momentum ends as an exploding gradient
    explains=("exploding_gradients",),
    edit=(Set("zero_grad", False),),
    repair=(Set("zero_grad", True),),
    probe=(Scale("lr", 0.1),),
    confirm=((O("gain[reference_step]", "better"), O("grads_carried", "present")),),
    refute=(O("grads_carried", "absent"),),
    signature=Signature((
        PARALLEL_GRADIENTS,  # the live alert reads the same condition
        C("grad_growth", ">=", 1.5, "gradient norm",
          "parallel terms add up: a sum of a hundred gradients that agree in direction "
          "ends well above its first term. Gradients that stay parallel and do not "
          "grow are a different failure (the same gradient every step from a model "
          "that ignores its input; decay pulling every weight to 0; a dead layer). "
          "Healthy gradients grow too, so this is a precondition, not evidence",
          suffix="x its step-0 value", role="guard",
          label_zh="梯度范数",
          why_zh="平行的项会累加：一百个方向一致的梯度之和，最终远大于第一项。保持平行却不增长的梯度是另一种"
                 "失败（一个忽略输入的模型每一步都给出同样的梯度；衰减把每个权重拉向 0；一个死掉的层）。健康"
                 "的梯度也会增长，所以这是前提条件，而不是证据",
          suffix_zh="x（相对第 0 步的值）"),
        GRADIENTS_FLOW,  # a dead layer leaves one bias's gradient: parallel, not summed
        ALL_OPTIMIZED,
        MIXED_BATCHES,
        CARRIED,
    ), "the gradients are accumulating - is zero_grad() called every step?",
       verdict_zh="梯度在不断累加：每一步都调用了 zero_grad() 吗？"),
    # The accumulation itself, seen where it happens: under clipping, or with Adam's
    # normalised steps, the running sum need not stay parallel or grow.
    also=(Signature((
        NEVER_EMPTIED,
        ALL_OPTIMIZED,  # an optimizer holding other tensors zeroes those, not these
    ), "every step's gradient was added to the last one's - is zero_grad() called every "
       "step?",
       verdict_zh="每一步的梯度都加在上一步的梯度上：每一步都调用了 zero_grad() 吗？"),),
    outcome=Signature((
        C("grad_cosine_end", ">=", 1 - ACCUMULATING_TURN, "gradient cosine",
          "still a running sum at a tenth of the rate", log=False, unit=0.01,
          label_zh="相邻梯度余弦",
          why_zh="学习率降到十分之一时仍是一个滑动和"),
        C("grad_growth", ">=", 10, "gradient norm",
          "the sum still grows with the number of steps", suffix="x its step-0 value",
          label_zh="梯度范数",
          why_zh="这个和仍随步数增长",
          suffix_zh="x（相对第 0 步的值）"),
    ), "the gradient still piles up at a tenth of the rate: not a rate problem",
       verdict_zh="学习率降到十分之一，梯度照样堆积：不是学习率的问题"),
)

ZERO_GRAD_MISPLACED = Fault(
    name="zero_grad_misplaced",
    title="Gradients zeroed between backward() and step()",
    family="implementation", task="tabular", shape="plateau", phenomenon="B",
    symptom="The loss does not move at all: every gradient the optimizer sees is "
            "exactly 0 at every step, and the weights never change, although the "
            "forward pass and the loss are perfectly normal.",
    cause="The call to zero_grad() belongs before backward(). Placed after it, it erases the "
          "gradients backward just computed, so step() always applies nothing: the "
          "model stays at its initialisation. Dead units or a frozen layer would "
          "still leave some parameter (an output bias) with a gradient.",
    experiment="Read the gradient norm right before optimizer.step(): it is exactly "
               "0. Move zero_grad() before backward() and it is non-zero at once, "
               "and the loss falls like the baseline's.",
    fix="Call optimizer.zero_grad() at the start of each step, before "
        "loss.backward(), never between backward() and step().",
    zh=Chinese(
        title="在 backward() 和 step() 之间清零了梯度",
        symptom="损失完全不动：优化器每一步看到的梯度都恰好为 0，权重从未改变，尽管前向传播和损失都完全正"
                "常。",
        cause="zero_grad() 应该放在 backward() 之前。放在它之后，就会抹掉 backward 刚算出的梯度，于是 "
              "step() 永远什么也不做：模型停在初始状态。死单元或冻结的层仍会给某个参数（输出偏置）留下梯"
              "度。",
        experiment="在 optimizer.step() 之前读取梯度范数：它恰好是 0。把 zero_grad() 移到 backward() 之前"
                   "，它立刻变成非零，损失像基线一样下降。",
        fix="在每一步开始、loss.backward() 之前调用 optimizer.zero_grad()，绝不要放在 backward() 和 "
            "step() 之间。"),
    edit=(Set("zero_grad_at", "before_step"),),
    repair=(Set("zero_grad_at", "before_backward"),),
    probe=(Set("zero_grad_at", "before_backward"),),
    confirm=((O("gain[reference_step]", "better"), O("no_grad_at_step", "all")),),
    refute=(O("gain[reference_step]", "unchanged"),),
    signature=Signature((
        C("grad_zero_steps", ">=", 0.9, "share of steps whose gradient is exactly 0",
          "backward always leaves some parameter a non-zero gradient (the output "
          "bias gets (p - y) summed over the batch), so a gradient that is 0 "
          "everywhere at the step was erased; healthy runs have none", log=False,
          unit=0.05,
          label_zh="梯度恰好为 0 的步数比例",
          why_zh="反向传播总会给某个参数留下非零梯度（输出偏置得到在批次上求和的 (p - y)），所以在迈步时处处"
                 "为 0 的梯度是被抹掉了；健康运行一次也没有"),
        UNHEALTHY,
    ), "every gradient is exactly 0 when the optimizer steps - is zero_grad() called "
       "between backward() and step()?",
       verdict_zh="优化器迈步时每个梯度都恰好为 0：是不是在 backward() 和 step() 之间调用了 zero_grad()？"),
    outcome=Signature((LEARNS,), "with zero_grad() before backward() the model learns",
                                 verdict_zh="把 zero_grad() 放在 backward() 之前，模型就能学习"),
)

# A model ending in softmax: the mechanism of both probability routes of wrong_loss,
# which differ in the loss the probabilities are given
_PROBABILITIES = C(
    "output_prob_share", ">=", 0.9, "median share of output rows that are probabilities",
    "logits are unconstrained: rows of raw scores in [0, 1] that sum to 1 within 1e-3 do "
    "not happen by chance; a softmax layer makes every row one", log=False, unit=0.05,
    label_zh="输出行为概率分布的比例的中位数",
    why_zh="logits 不受约束：取值在 [0, 1] 内、各行之和在 1e-3 以内等于 1 的原始分数不会偶然出现；softmax 层"
           "会让每一行都这样")

WRONG_LOSS = Fault(
    name="wrong_loss",
    title="Softmax applied twice (softmax output fed to cross-entropy)",
    family="implementation", task="tabular", shape="healthy", phenomenon="B",
    # The loss stops on its floor with 45% of it removed: the shape rules call that
    # healthy (healthy binary cross-entropy runs remove as little as 47%), the eye and
    # the course call it a plateau.
    other_shapes=("plateau",),
    symptom="Every output row is a probability distribution (the model ends in "
            "softmax); accuracy is fine, but the training and validation losses both "
            "stop at a floor near 0.55 and stay there with almost no noise.",
    cause="The model ends in softmax and CrossEntropyLoss applies log-softmax "
          "again. Probabilities in [0, 1] used as logits can never make a confident "
          "prediction: the loss cannot go below log(1 + (K-1)/e) = 0.55 for K = 3, "
          "and the gradient shrinks as the outputs saturate.",
    experiment="Train three times as long: a slow model would keep improving, but "
               "the loss stays on the same floor. The floor itself is the clue.",
    fix="Return raw logits from the model; let the loss apply (log-)softmax.",
    zh=Chinese(
        title="softmax 用了两次（softmax 输出再送入交叉熵）",
        symptom="每一行输出都是一个概率分布（模型以 softmax 结尾）；准确率没问题，但训练损失和验证损失都"
                "停在 0.55 附近的下限，几乎没有噪声。",
        cause="模型以 softmax 结尾，而 CrossEntropyLoss 又做了一次 log-softmax。把 [0, 1] 内的概率当作 "
              "logits，永远做不出自信的预测：K = 3 时损失不可能低于 log(1 + (K-1)/e) = 0.55，而且随着输出"
              "饱和，梯度越来越小。",
        experiment="训练时间延长到三倍：如果只是模型学得慢，它会继续变好，但损失仍停在同一个下限。这个下"
                   "限本身就是线索。",
        fix="让模型返回原始 logits，由损失函数去做 (log-)softmax。"),
    edit=(Set("output", "softmax"),),
    repair=(Set("output", "logits"),),
    probe=(Scale("steps", 3),),
    # Passing the output's softmax (sigmoid) module by gives the loss the logits it
    # expects: the loss falls below the floor. Written into the loss instead, the arm
    # does not apply and the passive reading stands.
    confirm=((O("gain[output_identity]", "better"), O("output_probabilities", "present"),
              O("loss_takes_logits", "present")),),
    # probabilities into a loss that does not squash again (an MSE on a sigmoid's
    # output) are output_activation_mismatch's: the bypass helps for the range's sake
    refute=(O("gain[output_identity]", "worse"), O("loss_takes_logits", "absent")),
    # probabilities used as logits hold the loss above log(1 + (K-1)/e): half of ln K for
    # K = 3, but 84% of it over a vocabulary of 512, where the loss barely moves and
    # reads as "nothing is learned", shuffled labels' route: that reading is this
    # fault's consequence (a fresh LM over 512 tokens was named shuffled_labels)
    explains=("shuffled_labels",),
    signature=Signature((
        _PROBABILITIES,
        replace(SOFTMAX_LOSS, why=SOFTMAX_LOSS.why + " again. A model that returns "
                "probabilities and takes their log itself (NLLLoss of log p) is trained "
                "correctly, and its loss passes back -y/p, whose rows do not sum to 0",
                why_zh=SOFTMAX_LOSS.why_zh + "，又做了一次。一个返回概率、再自己取对数的模型（对 log p 用 "
                "NLLLoss）训练是正确的，它的损失传回 -y/p，各行之和不为 0"),
    ), "the outputs are probabilities and the loss sits on a floor the predictions cannot explain - is softmax "
       "applied before a loss that applies it again?",
       verdict_zh="输出是概率，而损失停在一个预测解释不了的下限上：是不是在一个自己也会做 softmax 的损失之前"
                  "又做了一次 softmax？"),
    # The same probabilities given to NLLLoss, which expects log-probabilities: its
    # gradient (-y/N) shows no softmax, its value (-p of the target) is negative.
    also=(Signature((
        _PROBABILITIES,
        C("loss_start", "<=", 0.0, "loss at step 0",
          "NLLLoss given probabilities where it expects log-probabilities returns minus "
          "the target class's probability, a loss between -1 and 0, where a "
          "cross-entropy (of logits, or NLLLoss of log p) is never below 0",
          log=False, unit=0.1, role="guard",
          label_zh="第 0 步的损失",
          why_zh="NLLLoss 拿到的是概率而不是它期望的对数概率时，返回目标类概率的相反数，损失介于 -1 和 0 之间；"
                 "而交叉熵（基于 logits，或对 log p 用 NLLLoss）从不低于 0"),
    ), "the outputs are probabilities and the loss is minus one of them - is NLLLoss given "
       "probabilities where it expects log-probabilities (log_softmax)?",
       verdict_zh="输出是概率，而损失是其中一个概率的相反数：是不是把概率交给了期望对数概率（log_softmax）的 "
                  "NLLLoss？"),
        # Softmax written into the loop (`cross_entropy(out.softmax(-1), y)`) leaves the
        # model's outputs logits, which the routes above cannot see; the loss itself
        # tells: it is the cross-entropy of softmax(softmax(output)), computed from the
        # output and the labels its gradient shows, to float rounding.
        Signature((
        C("loss_vs_softmax_twice", "<=", 0.01, "relative distance of the loss from the "
          "cross-entropy of softmax(softmax(output))",
          "a loss computed that way equals it to float rounding (1e-7 in float32); one "
          "per cent admits float16 and an output read on a sample of its rows, while a "
          "plain cross-entropy that has learned anything sits far below that loss's "
          "floor of log(1 + (C-1)/e)",
          label_zh="损失与 softmax(softmax(输出)) 的交叉熵之间的相对距离",
          why_zh="这样算出的损失与之在浮点舍入内相等（float32 下为 1e-7）；百分之一容纳 float16 以及只读取部分"
                 "行的输出，而一个学到了任何东西的普通交叉熵远低于那种损失的下限 log(1 + (C-1)/e)"),
        C("softmax_twice_fit", ">=", 10.0, "how many times closer the loss is to that "
          "cross-entropy than to the output's own",
          "the loss equals one of the two to float rounding, even before anything is "
          "learned and both are near ln C: a plain cross-entropy is closer to its own "
          "(at most ~1), noise common to both (rows read on a sample) leaves ~1, and "
          "softmax applied twice puts it thousands of times closer; 10 is a decade "
          "clear of both",
          label_zh="损失离那种交叉熵比离输出本身的交叉熵近多少倍",
          why_zh="损失与两者之一在浮点舍入内相等，即使还什么都没学到、两者都接近 ln C：普通交叉熵离它自己的更近"
                 "（至多约 1 倍），两者共有的噪声（只读取部分行）使比值约为 1，而 softmax 做两次会让它近上几千倍；"
                 "10 与两边都隔开一个数量级"),
    ), "the loss is the cross-entropy of softmax applied twice - is softmax applied to the "
       "output before a loss that applies it again?",
       verdict_zh="损失是 softmax 做了两次之后的交叉熵：是不是在一个自己也会做 softmax 的损失之前又对输出做了一次"
                  " softmax？"),
        # The one-logit form: a sigmoid's output given to BCEWithLogitsLoss, which
        # applies a sigmoid again.  Its gradient shows the loss (see
        # probes.binary_label_mixes); the values it was given show the sigmoid.
        Signature((
            C("sigmoid_twice_share", ">=", 0.5, "share of the steps with every logit "
              "strictly inside the unit interval",
              "logits are unconstrained and a learning classifier pushes its negatives "
              "below 0: 16 or more of them inside (0, 1) on most steps are a sigmoid's "
              "outputs, which lie there on every step unless they round to exactly 0 or "
              "1 (healthy binary runs of the zoo: at most 0.17)", log=False,
              unit=0.05,
              label_zh="每个 logit 都严格落在单位区间之内的步数比例",
              why_zh="logits 不受约束，学习中的分类器会把负例推到 0 以下：大多数步里 16 个或更多 logits 都在 "
                     "(0, 1) 之内，就是 sigmoid 的输出，除非舍入成恰好 0 或 1，它每一步都在那里（动物园中健康的"
                     "二分类运行最多 0.17）"),
            C("output_std_end", ">=", 0.2, "std of the outputs at the end",
              "confined to (0, 1) and spread over it, as a sigmoid's outputs are once "
              "the model learns (0.41-0.48 in the zoo); logits that only sit inside "
              "(0, 1) because they never moved from their start (a stuck or dead "
              "model) keep a std of 0.07 or less", log=False, unit=0.05, role="guard",
              label_zh="结束时输出的标准差",
              why_zh="限制在 (0, 1) 之内又铺开在整个区间上，正是模型学起来之后 sigmoid 输出的样子（动物园中为 "
                     "0.41-0.48）；只因从未离开初始值才待在 (0, 1) 之内的 logits（卡住或死掉的模型）标准差不超过 "
                     "0.07"),
        ), "the loss takes logits but is given values that all lie between 0 and 1 - is a "
           "sigmoid applied before BCEWithLogitsLoss, which applies it again?",
           verdict_zh="损失需要 logits，拿到的却全是 0 到 1 之间的值：是不是在本身就会做 sigmoid 的 "
                      "BCEWithLogitsLoss 之前又做了一次 sigmoid？"),),
    outcome=Signature((
        C("loss_end", ">=", 0.5, "final training loss",
          "three times the steps, the same floor above log(1 + 2/e) = 0.55",
          label_zh="最终训练损失",
          why_zh="步数增加到三倍，下限仍在 log(1 + 2/e) = 0.55 之上"),
    ), "more training does not lower the floor",
       verdict_zh="更多的训练也降不低这个下限"),
)

BAD_PADDING_MASK = Fault(
    name="bad_padding_mask",
    title="Padding not masked in attention",
    family="implementation", task="sequence", shape="healthy", phenomenon=None,
    symptom="Loss and accuracy look healthy, but a tenth or more of the attention "
            "goes to pad positions and predictions change when extra padding is "
            "appended to the same sequences.",
    cause="Without a key padding mask the pads are attended like real tokens, so "
          "the pooled representation depends on how much padding a sequence "
          "happens to have. The model learns to live with it on the training "
          "length, and breaks when padding changes.",
    experiment="Append 10 extra pads to the validation sequences and compare "
               "predictions: with the mask on they are unchanged to float rounding, "
               "and no attention reaches the pads.",
    fix="Pass key_padding_mask (True = ignore) built from the pad token to every "
        "attention, and test that extra padding leaves outputs unchanged.",
    zh=Chinese(
        title="注意力没有屏蔽填充位 (padding)",
        symptom="损失和准确率看起来都健康，但有十分之一或更多的注意力落在填充位上，给同样的序列多追加一些"
                "填充，预测就会改变。",
        cause="没有 key padding mask 时，填充位像真实 token 一样被关注，于是池化后的表示取决于一个序列碰"
              "巧有多少填充。模型在训练长度上学会了与之共存，填充一变就失效。",
        experiment="给验证序列追加 10 个填充位再比较预测：打开掩码时预测不变（只差浮点舍入），也没有注意"
                   "力落到填充位上。",
        fix="给每个注意力层传入由填充 token 构造的 key_padding_mask（True = 忽略），并测试额外的填充不改"
            "变输出。"),
    edit=(Set("mask_padding", False),),
    repair=(Set("mask_padding", True),),
    probe=(Set("mask_padding", True),),
    signature=Signature((
        C("pad_attention_median", ">=", 0.01, "median attention on pads",
          "a masked pad gets exactly 0 attention",
          label_zh="落在填充位上的注意力的中位数",
          why_zh="被屏蔽的填充位得到的注意力恰好为 0"),
        C("pad_sensitivity_max", ">=", 1e-3, "prediction change from extra pads",
          "masked padding changes predictions only by float rounding (~1e-7)",
          label_zh="额外填充引起的预测变化",
          why_zh="屏蔽了的填充只会因浮点舍入（~1e-7）改变预测"),
        TOKENS,
    ), "attention reaches the padding - is the key padding mask applied?",
       verdict_zh="注意力落到了填充位上：用上 key padding mask 了吗？"),
    outcome=Signature((
        C("pad_sensitivity_max", "<=", 1e-5, "prediction change from extra pads",
          "with the mask extra padding changes nothing beyond rounding",
          log=False, unit=1e-5,
          label_zh="额外填充引起的预测变化",
          why_zh="有了掩码，额外的填充除了舍入误差外什么也不改变"),
    ), "with the mask extra padding changes nothing",
       verdict_zh="有了掩码，额外的填充什么也不改变"),
)

INVERTED_PADDING_MASK = Fault(
    name="inverted_padding_mask",
    title="Padding mask inverted (hides the real tokens)",
    family="implementation", task="sequence", shape="plateau", phenomenon="B",
    symptom="All attention lands on pad positions and the loss stays at chance "
            "(ln 2) for the whole run.",
    cause="PyTorch's key_padding_mask marks positions to IGNORE with True; passing "
          "a 'keep' mask (True = real token, the convention of other libraries) "
          "hides every real token, so the model only ever sees padding.",
    experiment="Drop the mask entirely: the model learns (accuracy above 90%) "
               "although pads leak in. The model is fine; the mask selects the "
               "wrong positions.",
    fix="Build the mask as tokens == PAD for PyTorch (or invert a keep-mask) and "
        "assert that attention on pads is 0.",
    zh=Chinese(
        title="填充掩码取反了（遮住的是真实 token）",
        symptom="所有注意力都落在填充位上，损失在整个运行中都停在随机水平（ln 2）。",
        cause="PyTorch 的 key_padding_mask 用 True 标记要忽略的位置；传入一个“保留”掩码（True = 真实 "
              "token，其他库的约定）会遮住每个真实 token，于是模型只看得到填充。",
        experiment="干脆去掉掩码：尽管填充会漏进来，模型仍能学习（准确率高于 90%）。模型没问题；是掩码选"
                   "错了位置。",
        fix="对 PyTorch 把掩码构造为 tokens == PAD（或把保留掩码取反），并断言落在填充位上的注意力为 0。"),
    edit=(Set("mask_inverted", True),),
    repair=(Set("mask_inverted", False),),
    probe=(Set("mask_padding", False),),
    # the mask hides varied tokens and lets one repeated token through (the mechanism,
    # seen on the loop's own first batch); inverting it then hides the padding, and the
    # loss falls
    confirm=((O("gain[mask_inverted]", "better"), O("padding_hides_tokens", "present")),),
    refute=(O("padding_hides_tokens", "absent"),),
    instrument="padding",
    signature=Signature((
        C("pad_attention_median", ">=", 0.9, "median attention on pads",
          "nearly all attention on pads: only the real tokens are masked",
          log=False, unit=0.05,
          label_zh="落在填充位上的注意力的中位数",
          why_zh="几乎所有注意力都落在填充位上：被屏蔽的只有真实 token"),
        C("val_acc_best", "<=", 0.7, "best validation accuracy",
          "no better than guessing from the sequence length (the baseline reaches "
          "0.99)", log=False, unit=0.05,
          label_zh="最好的验证准确率",
          why_zh="并不比根据序列长度猜测更好（基线达到 0.99）"),
        TOKENS,
    ), "the model attends only to padding - is the mask inverted?",
       verdict_zh="模型只关注填充：掩码是不是反了？"),
    outcome=Signature((
        C("val_acc_best", ">=", 0.9, "best validation accuracy",
          "without any mask the model can read the tokens", log=False, unit=0.05,
          label_zh="最好的验证准确率",
          why_zh="没有任何掩码时，模型能读到 token"),
    ), "without the mask the model learns: the mask hid the tokens",
       verdict_zh="去掉掩码模型就能学习：是掩码遮住了 token"),
)

SUMMED_LOSS = Fault(
    name="summed_loss",
    title="Loss summed over the batch instead of averaged",
    family="implementation", task="tabular", shape="diverging", phenomenon="A",
    other_shapes=("stepwise",),  # the loss jumps, then the dead units hold it flat
    explains=("huge_lr",),  # the gradient is B times a mean's: so is every step
    symptom="The very first loss is about 70 instead of ln 3 = 1.1, although the "
            "fresh model's predictions are nearly uniform; the first steps are huge, "
            "the loss climbs and the ReLU units die.",
    cause="CrossEntropyLoss(reduction='sum') adds the 64 per-sample losses, so the "
          "loss and its gradient are 64x those of the mean. With SGD that is a "
          "learning rate 64x too large, and it changes whenever the batch size does.",
    experiment="Halve the batch size: the first loss halves too (about 35 = 32 x "
               "ln 3). A mean loss does not depend on the batch size; a sum grows "
               "with it. A too-large rate would leave the first loss at 1.1.",
    fix="Average the loss over the batch (reduction='mean'), or divide the summed "
        "loss by the number of samples (or tokens) it adds up.",
    zh=Chinese(
        title="损失在批次上求和而不是求平均",
        symptom="第一个损失约为 70，而不是 ln 3 = 1.1，尽管刚初始化的模型预测几乎是均匀的；最初几步极大，"
                "损失上升，ReLU 单元死亡。",
        cause="CrossEntropyLoss(reduction='sum') 把 64 个样本的损失加在一起，所以损失及其梯度都是平均值的"
              " 64 倍。对 SGD 来说，这相当于学习率大了 64 倍，而且批大小一变它就跟着变。",
        experiment="把批大小减半：第一个损失也减半（约 35 = 32 × ln 3）。平均损失不依赖于批大小；求和则随"
                   "批大小增长。学习率过大的话，第一个损失会停在 1.1。",
        fix="在批次上对损失求平均（reduction='mean'），或者把求和后的损失除以它所累加的样本（或 token）数"
            "。"),
    edit=(Set("loss_reduction", "sum"),),
    repair=(Set("loss_reduction", "mean"),),
    probe=(Scale("batch_size", 0.5),),
    confirm=(O("gain[lr/10]", "better"), O("gain[reference_step]", "better")),
    signature=Signature((
        C("loss_start", ">=", 5, "loss at step 0",
          "a mean cross-entropy of near-neutral predictions is about ln K (1.1 here; "
          "under 5 for up to 20 classes even with logit std 1); 5 or more is a sum",
          label_zh="第 0 步的损失",
          why_zh="近乎中性的预测，其平均交叉熵约为 ln K（这里是 1.1；即使 logit 标准差为 1，至多 20 个类别时"
                 "也低于 5）；5 或更大就是求和"),
        C("output_scale_start", "<=", 3, "logit std at step 0",
          "the predictions are near neutral, so a large first loss is not confident "
          "mistakes (baseline 0.05-0.09; an oversized init starts at 3 or more)",
          role="guard",
          label_zh="第 0 步的 logit 标准差",
          why_zh="预测接近中性，所以很大的第一个损失不是自信的错误造成的（基线 0.05-0.09；过大的初始化从 3 或"
                 "更大开始）"),
        C("val_acc_best", ">=", 0.0, "validation accuracy recorded (a classifier)",
          "a first loss far above ln K means a sum only for a classifier's "
          "cross-entropy; a regression's MSE starts wherever its targets' scale puts it",
          log=False, role="guard",
          label_zh="记录了验证准确率（分类器）",
          why_zh="第一个损失远高于 ln K，只有对分类器的交叉熵才意味着求和；回归的 MSE 从其目标尺度所决定的地"
                 "方开始"),
        C("first_nonfinite", ">=", 10, "first non-finite loss at step",
          "a sum of finite per-sample losses is finite: a loss that is NaN or inf within "
          "the first 10 steps was computed unsafely (an exp that overflows), which "
          "summing does not do", log=False, role="guard",
          label_zh="第一个非有限损失所在的步",
          why_zh="有限的逐样本损失之和也是有限的：前 10 步内就成为 NaN 或 inf 的损失是用不安全的方式算出来的"
                 "（exp 溢出），求和不会这样"),
    ), "the first loss is far above ln K for near-neutral predictions - is the loss "
       "summed over the batch instead of averaged?",
       verdict_zh="预测几乎中性，第一个损失却远高于 ln K：损失是不是在批次上求和而不是求平均？"),
    # Read from the gradient itself wherever the output is trained by a softmax
    # cross-entropy, so it needs no validation and no particular first loss.
    also=(Signature((
        C("loss_weight_median", ">=", 1.5, "loss weight of one backward pass",
          "a loss averaged over its samples weighs the output rows 1 in total (every "
          "healthy run where it is measured: exactly 1; soft targets only lower it); a "
          "sum over B samples weighs B, at least 2. Read in steps of a quarter, like "
          "the accumulation fault's step weight",
          log=False, unit=0.25,
          label_zh="一次反向传播的损失权重",
          why_zh="在样本上求平均的损失，给输出各行的总权重是 1（所有能测到的健康运行都恰好是 1；软目标只会"
                 "让它更低）；对 B 个样本求和，权重是 B，至少为 2。以四分之一为单位读取，与梯度累积故障的每步"
                 "权重相同"),
        POSITIVE_LOSS,
    ), "each backward pass weighs its samples as if every one were a whole batch "
       "mean - is the loss summed over the batch instead of averaged?",
       verdict_zh="每次反向传播给样本的权重，就好像每个样本都是整个批次的平均：损失是不是在批次上求和而不是求"
                  "平均？"),),
    outcome=Signature((
        C("loss_start", ">=", 5, "loss at step 0", "still a sum",
          label_zh="第 0 步的损失",
          why_zh="仍是一个求和"),
        C("loss_start", "<=", 50, "loss at step 0",
          "half the samples, half the loss: 32 x ln 3 = 35",
          label_zh="第 0 步的损失",
          why_zh="样本减半，损失减半：32 x ln 3 = 35"),
    ), "the first loss halves with the batch: it is a sum over samples",
       verdict_zh="第一个损失随批大小减半：它是对样本的求和"),
)

NEGATIVE_START = C("loss_start", "<=", 0.0, "loss at step 0",
                   "a cross-entropy is never negative and starts near +ln K (1.1); a "
                   "negative first loss has the wrong sign", log=False, unit=0.1,
                   label_zh="第 0 步的损失",
                   why_zh="交叉熵从不为负，并从 +ln K（1.1）附近开始；负的第一个损失符号错了")

NEGATED_LOSS = Fault(
    name="negated_loss",
    title="Loss with the wrong sign: the optimizer climbs it",
    family="implementation", task="tabular", shape="nonfinite", phenomenon=None,
    symptom="The training loss starts at -1.1 and plunges towards minus infinity "
            "until it overflows, while validation accuracy drops below chance and the "
            "validation loss explodes.",
    cause="A log-likelihood meant to be maximised was handed to a minimiser without "
          "its minus sign (or the loss was negated twice). Minimising -CE maximises "
          "the cross-entropy: the model pushes its logits away from the true class "
          "ever harder, without bound.",
    experiment="Divide the learning rate by 10: the loss still falls below zero and "
               "heads the same way. A cross-entropy cannot be negative at any rate; "
               "its sign is wrong.",
    fix="Minimise the cross-entropy itself (or -log-likelihood), and check that the "
        "first loss is +ln K.",
    zh=Chinese(
        title="损失符号反了：优化器在往上爬",
        symptom="训练损失从 -1.1 开始，一路冲向负无穷直到溢出，同时验证准确率跌到随机水平以下，验证损失爆"
                "炸。",
        cause="一个本该最大化的对数似然被交给了最小化器，却没带上负号（或者损失被取了两次负）。最小化 -CE"
              " 就是最大化交叉熵：模型越来越用力地把 logits 推离正确类别，没有止境。",
        experiment="把学习率除以 10：损失仍然跌到零以下，朝同一方向走。交叉熵在任何学习率下都不可能为负；"
                   "是它的符号错了。",
        fix="最小化交叉熵本身（或 -log-likelihood），并检查第一个损失是否为 +ln K。"),
    edit=(Set("negate_loss", True),),
    repair=(Set("negate_loss", False),),
    probe=(Scale("lr", 0.1),),
    # The step's gradient against the gradient of the loss handed to investigate: a step
    # that descends the loss negated climbs the loss.  No refutation: a loss handed in
    # with the same wrong sign agrees with the step.
    confirm=(O("step_climbs_loss", "present"),),
    signature=Signature((
        NEGATIVE_START,
        C("val_loss_rise", ">=", 1.0, "validation loss rise from its minimum",
          "and the model moves away from the labels (healthy runs end within 0.07 of "
          "their minimum)", role="effect",
          label_zh="验证损失比其最低点的升幅",
          why_zh="而且模型在远离标签（健康运行最终与其最低点相差不超过 0.07）"),
    ), "the loss is negative and validation gets worse - does the loss have the "
       "wrong sign?",
       verdict_zh="损失为负，验证越来越差：损失的符号是不是反了？"),
    # Without a validation loss: the loss itself falls ever further below zero.
    also=(Signature((
        NEGATIVE_START,
        C("negative_loss_growth", ">=", 10, "final loss over its negative start",
          "the loss ends 10 times further below zero than it began: it has no floor, "
          "where a negative log-likelihood of a continuous density levels off within "
          "a few units of its start", role="effect", suffix="x", suffix_zh="x",
          label_zh="最终损失与其负起点之比",
          why_zh="损失最终比起点再往零下多走了 10 倍：它没有下界；而连续密度的负对数似然会在离起点几个单位内"
                 "趋于平稳"),
    ), "the loss is negative and falls without a floor - does the loss have the "
       "wrong sign?",
       verdict_zh="损失为负，而且一路下跌没有下界：损失的符号是不是反了？"),),
    outcome=Signature((
        C("loss_end", "<=", -1.0, "final training loss",
          "at a tenth of the rate the loss still falls below zero", log=False,
          unit=0.1,
          label_zh="最终训练损失",
          why_zh="学习率降到十分之一，损失仍跌到零以下"),
    ), "a smaller rate does not change the direction: the sign is wrong",
       verdict_zh="更小的学习率改变不了方向：符号错了"),
)

ACCUMULATION_NOT_DIVIDED = Fault(
    name="accumulation_not_divided",
    title="Gradient accumulation without dividing the loss",
    family="implementation", task="tabular", shape="diverging", phenomenon="A",
    # 16 micro-batch means add up to a 16x rate: huge_lr's curve (see its shapes)
    other_shapes=("plateau", "oscillating"),
    # every step is 16 times the batch mean's: huge steps, and where they blow the loss
    # up (zoo: attention under SGD or momentum at 8 micro-batches), an overflow
    explains=("huge_lr", "exploding_gradients"),
    symptom="The recorded loss is an ordinary mean (it starts at ln 3 = 1.1), yet the "
            "first updates move the weights by more than a tenth of their size; the "
            "loss jumps up and flattens near ln 3 as the ReLU units die, the curve of "
            "a far too large learning rate at the tuned one.",
    cause="The batch of 64 is split into 16 micro-batches of 4 with one backward each, "
          "and .grad adds them up. Each micro-batch loss is a mean over its 4 samples, "
          "so the sum is 16 times the batch's mean gradient: with SGD, a learning rate "
          "16 times too large (Adam would hide it, since it divides by the gradient's "
          "own scale).",
    experiment="Leave the loss as it is and divide the learning rate by 16, the "
               "number of micro-batches: the run trains like the baseline. The step "
               "was the sum of 16 means; a rate that is merely too large would not "
               "be cured by exactly the micro-batch count.",
    fix="Divide each micro-batch's loss by the number of micro-batches before "
        "backward (loss / accumulate), so that the accumulated gradient is the mean "
        "over the whole batch.",
    zh=Chinese(
        title="梯度累积时没有除以微批次数",
        symptom="记录下来的损失是普通的平均值（从 ln 3 = 1.1 开始），可最初几次更新就让权重变化超过自身大小"
                "的十分之一；损失跳高后在 ln 3 附近变平，ReLU 单元随之死亡：明明用的是调好的学习率，曲线却"
                "像学习率大得离谱。",
        cause="64 个样本的批次被拆成 16 个各含 4 个样本的微批次 (micro-batch)，每个做一次反向传播，.grad "
              "把它们加在一起。每个微批次的损失是它 4 个样本的平均，所以总和是整个批次平均梯度的 16 倍：对 "
              "SGD 来说，就是学习率大了 16 倍（Adam 会把它掩盖掉，因为它除以梯度自身的尺度）。",
        experiment="损失保持不变，把学习率除以 16，即微批次的个数：运行就像基线一样训练。每一步是 16 个平均"
                   "值之和；单纯的学习率过大，不会恰好被微批次数治好。",
        fix="反向传播之前，把每个微批次的损失除以微批次的个数（loss / accumulate），让累积起来的梯度是整个"
            "批次上的平均。",
        why_several_fields="这个错误需要两者同时成立：只有切成微批次的循环才有什么可除的，而没有除以微批次"
                       "数才是错误本身。单独切成 16 个微批次并正确地除，与基线一样训练（16 × 1/16 = 1）"
                       "。"),
    why_several_fields="The mistake needs both: only a loop cut into micro-batches has anything "
                   "to divide, and leaving the division out is the mistake itself. Cut into "
                   "16 micro-batches and divided correctly, the loop trains like the baseline "
                   "(16 x 1/16 = 1).",
    edit=(Set("accumulate", 16), Set("divide_accumulated", False)),
    repair=(Set("divide_accumulated", True),),
    probe=(Scale("lr", 1 / 16),),
    confirm=((O("gain[reference_step]", "better"), O("gain[lr/10]", "better")),),
    signature=Signature((
        C("step_loss_weight", ">=", 1.5, "loss weight per optimizer step",
          "a step whose gradient is the mean over its samples weighs them 1 in total, "
          "however it is cut into micro-batches (soft targets only lower the reading); "
          "k micro-batch means that are never divided by k weigh k, at least 2. Read "
          "in steps of a quarter: the weight counts means, and calibration keeps the "
          "line one quarter clear of the healthy 1",
          log=False, unit=0.25,
          label_zh="每个优化步的损失权重",
          why_zh="梯度是样本平均值的一步，不论怎样切成微批次，样本的总权重都是 1（软目标只会让读数更低）；"
                 "k 个从未除以 k 的微批次平均值，权重是 k，至少为 2。以四分之一为单位读取：这个权重数的是"
                 "平均值的个数，校准让这条线离健康的 1 至少四分之一"),
        C("output_backwards_median", ">=", 2, "backward passes per optimizer step",
          "the step was built from several backward passes (micro-batches): one pass "
          "with a heavier loss is a loss summed over its samples, or weighted on purpose",
          role="guard",
          label_zh="每个优化步的反向传播次数",
          why_zh="这一步由多次反向传播（微批次）构成：只有一次反向传播而损失权重更大，是在样本上求和的损失，"
                 "或是有意加的权重"),
        C("loss_weight_median", "<=", 1.5, "loss weight of one backward pass",
          "each micro-batch's own loss is a mean over its samples (weight 1): a sum "
          "over them is summed_loss, whatever the micro-batching",
          role="guard",
          label_zh="一次反向传播的损失权重",
          why_zh="每个微批次自己的损失是其样本的平均（权重 1）：在样本上求和属于 summed_loss，与是否切分微批"
                 "次无关"),
        POSITIVE_LOSS,
    ), "each optimizer step adds up several micro-batch means - divide each "
       "micro-batch's loss by the number of micro-batches",
       verdict_zh="每个优化步把好几个微批次的平均值加在一起：把每个微批次的损失除以微批次的个数"),
    outcome=Signature((
        C("step_loss_weight", ">=", 1.5, "loss weight per optimizer step",
          "the loss is still undivided", label_zh="每个优化步的损失权重",
          why_zh="损失仍然没有被除"),
        C("loss_progress", ">=", 0.5, "loss progress",
          "at the rate divided by 16 the run learns like the baseline", log=False, unit=0.1,
          label_zh="损失下降幅度",
          why_zh="学习率除以 16 后，运行就像基线一样学习"),
    ), "the micro-batch count, taken off the rate, heals the run: the step summed "
       "that many means",
       verdict_zh="把微批次数从学习率里除掉，运行就好了：这一步加了那么多个平均值"),
)

PARAMS_NOT_IN_OPTIMIZER = Fault(
    name="params_not_in_optimizer",
    title="Parameters left out of the optimizer",
    family="implementation", task="tabular", shape="plateau", phenomenon=None,
    other_shapes=("healthy",),  # the rest of a model often still fits (46 of 80 zoo runs)
    symptom="The loss falls for a few steps, then stalls far above the baseline's, and "
            "validation accuracy stops well short of it. Every layer but the last gets "
            "gradients at each step and never moves: its weights are the ones it was "
            "initialised with.",
    cause="The optimizer was given only the head's parameters (a line copied from a "
          "fine-tuning example; or an optimizer made before the model was re-created, "
          "or before a layer was added). backward() still fills .grad for the whole "
          "model, but step() updates only what the optimizer holds: the head learns a "
          "linear read-out of random features.",
    experiment="Freeze the body instead (requires_grad=False on every layer but the "
               "head): the loss curve is the faulty run's, step for step, so the body's "
               "gradients never changed anything: they were computed and thrown away.",
    fix="Give the optimizer model.parameters() (or check that the set of parameters "
        "with requires_grad equals the set in optimizer.param_groups), and make it after "
        "the model is final.",
    zh=Chinese(
        title="有参数没有交给优化器",
        symptom="损失下降几步之后就停滞在远高于基线的水平，验证准确率也远没达到基线。除最后一层外，"
                "每一层每一步都得到梯度却从不移动：它们的权重还是初始化时的样子。",
        cause="优化器只拿到了输出头的参数（从微调示例里抄来的一行；或者优化器建在模型被重新创建之前、"
              "或加上某一层之前）。backward() 仍然为整个模型填好 .grad，但 step() 只更新优化器持有的"
              "参数：输出头学到的是随机特征的一个线性读出。",
        experiment="改为冻结主体（除输出头外每层都设 requires_grad=False）：损失曲线与故障运行逐步相同，"
                   "所以主体的梯度从未改变任何东西：它们算出来就被丢掉了。",
        fix="把 model.parameters() 交给优化器（或检查 requires_grad 的参数集合等于 "
            "optimizer.param_groups 中的集合），并在模型定型之后再创建优化器。"),
    edit=(Set("optimize", "head"),),
    repair=(Set("optimize", "all"),),
    probe=(Set("freeze_body", True),),
    confirm=(O("grad_not_optimized", "present"),),
    refute=(O("grad_not_optimized", "absent"),),
    signature=Signature((
        C("unoptimized_max", ">=", 0.5, "parameters outside the optimizer",
          "a parameter tensor that receives a gradient and sits in no param group never "
          "changes, whatever its gradient says; every healthy loop has none (a count: "
          "one is already a layer that does not train)", log=False, unit=1.0,
          label_zh="不在优化器中的参数",
          why_zh="得到梯度却不在任何参数组里的参数张量永远不会变化，不管它的梯度说什么；每个健康的循环"
                 "一个也没有（这是个计数：一个就已经是一层不训练）"),
    ), "parameters get gradients the optimizer never applies - does the optimizer hold "
       "model.parameters()?",
       verdict_zh="参数得到了梯度，但优化器从不使用：优化器拿到的是 model.parameters() 吗？"),
    outcome=Signature((
        C("unoptimized_max", "<=", 0.5, "parameters outside the optimizer",
          "a frozen body takes no gradient, so nothing sits outside the optimizer",
          log=False, unit=1.0, label_zh="不在优化器中的参数",
          why_zh="冻结的主体不计算梯度，所以没有参数落在优化器之外"),
        C("frozen_share", ">=", 0.5, "share of the weights frozen",
          "the body, most of the weights, is frozen: the run the faulty one matches",
          log=False, unit=0.1, label_zh="被冻结的权重比例",
          why_zh="主体（大部分权重）被冻结：与故障运行一致的就是这样一次运行"),
    ), "with the body frozen the run is the faulty one: the body never trained",
       verdict_zh="冻结主体后的运行就是故障运行：主体从未训练"),
)

TARGET_BROADCAST = Fault(
    name="target_broadcast",
    title="MSE broadcasts (B, 1) predictions against (B,) targets",
    family="implementation", task="tabular", shape="plateau", phenomenon="B",
    # each batch's loss is its own targets' variance: a first batch whose targets sit
    # close together starts below the level the run then keeps, which the shape rules
    # read as a rise (seeds 3 and 8 of 0-9, ending 49% and 15% above the first loss)
    other_shapes=("diverging",),
    symptom="A regression's loss hardly falls: it stays near the targets' variance, 1. "
            "Every output converges to the same value, the targets' mean, whatever the "
            "input, and validation accuracy (predictions on the target's side of the "
            "mean) stays at a coin's 0.5. PyTorch warned once: 'Using a target size "
            "that is different to the input size'.",
    cause="The model returns (B, 1) and the targets are (B,). MSELoss broadcasts them "
          "to a (B, B) matrix, so the loss is the mean of (out_i - y_j)^2 over every "
          "pair: each prediction is compared with every target of the batch. Its "
          "gradient, (2/B)(out_i - mean of y), pulls every output to one value, and the "
          "loss cannot fall below the targets' variance.",
    experiment="Train on one batch of 64 samples, seen at every step (n_train = 64): "
               "a loss that compares each output with its own target lets the model "
               "memorise 64 samples, but this loss stays where it started, at those "
               "targets' variance: the cost of predicting their mean.",
    fix="Give the loss two tensors of one shape: loss_fn(out, y.view_as(out)), or "
        "out.squeeze(-1) against y. Check out.shape == y.shape once, and treat the "
        "'Using a target size' warning as an error.",
    why_several_fields="The lab's baseline is a classifier, so the mistake needs a "
                       "regression first: target = 'value' trains the same model, data "
                       "and optimizer on a score with MSE, a healthy run by itself "
                       "(validation accuracy 0.92 or more); target_shape = 'flat' is "
                       "the mistake.",
    zh=Chinese(
        title="MSE 把 (B, 1) 的预测与 (B,) 的目标广播相减",
        symptom="回归的损失几乎不下降：停在目标的方差 1 附近。不论输入是什么，每个输出都收敛到同一个值，"
                "即目标的均值；验证准确率（预测落在目标所在的均值同侧的比例）停在抛硬币的 0.5。PyTorch "
                "曾警告过一次：'Using a target size that is different to the input size'。",
        cause="模型返回 (B, 1)，目标却是 (B,)。MSELoss 把两者广播成 (B, B) 的矩阵，损失成了所有配对上 "
              "(out_i - y_j)^2 的平均：每个预测都与批次里的每个目标比较。它的梯度 (2/B)(out_i - y 的均值) "
              "把所有输出拉向同一个值，损失也不可能低于目标的方差。",
        experiment="只用一个 64 个样本的批次训练，每一步都看到它（n_train = 64）：一个把每个输出与它自己的"
                   "目标比较的损失能让模型记住这 64 个样本，而这个损失停在起点，即这些目标的方差：预测它们"
                   "均值的代价。",
        fix="让损失拿到形状相同的两个张量：loss_fn(out, y.view_as(out))，或者用 out.squeeze(-1) 对 y。"
            "检查一次 out.shape == y.shape，并把 'Using a target size' 警告当作错误处理。",
        why_several_fields="实验室的基线是分类器，所以这个错误首先需要一个回归：target = 'value' 用同样的模型、"
                           "数据和优化器以 MSE 拟合一个分数，它本身是健康的运行（验证准确率 0.92 或更高）；"
                           "target_shape = 'flat' 才是错误本身。"),
    edit=(Set("target", "value"), Set("target_shape", "flat")),
    repair=(Set("target_shape", "matched"),),
    probe=(Set("n_train", 64),),
    # Its mechanism is a pair of shapes, (B,) targets against (B, 1) outputs: the check
    # sees it, and the arm that gives the targets the output's shape (the fix, as an
    # experiment) confirms it. Targets that hold other entries (one sample's target
    # for the whole batch, a reshape that mixes samples) are not this cause, however
    # alike the curves: no shapes to reconcile refutes it.
    confirm=((O("gain[targets_shaped]", "better"), O("targets_misshaped", "present")),),
    refute=(O("targets_misshaped", "absent"), O("gain[targets_shaped]", "worse")),
    fixed_accuracy=0.9,
    signature=Signature((
        C("target_share", "<=", 1e-3, "share of the output gradient the output does "
          "not explain",
          "an MSE's gradient is w (output - target): what the output does not explain "
          "is its targets. Broadcast, every output is pulled to the same value, the "
          "batch's mean target, and the gradient is an exact line in the output: float "
          "rounding, 1e-6 and below. Targets that vary from sample to sample by 3% of "
          "the outputs' spread already leave 1e-3",
          label_zh="输出解释不了的输出梯度份额",
          why_zh="MSE 的梯度是 w (输出 - 目标)：输出解释不了的部分就是它的目标。广播之后，每个输出都被拉向"
                 "同一个值，即批次目标的均值，梯度恰好是输出的一条直线：只剩浮点舍入，1e-6 及以下。目标在样本"
                 "之间的变化只要达到输出散布的 3%，就已经留下 1e-3"),
        C("loss_vs_output_ce", ">=", 0.1, "relative distance of the loss from the "
          "output's own cross-entropy",
          "a loss that is its output's plain cross-entropy belongs to a classifier, which "
          "has no targets to broadcast; a regression has no such reading (NaN passes). "
          "Without it a classifier's history, which never records the target column, "
          "would leave this fault 'unchecked'", required=False, role="guard",
          label_zh="损失与输出本身的交叉熵之间的相对距离",
          why_zh="损失等于输出的普通交叉熵，说明这是一个分类器，它没有可以广播的目标；回归没有这个读数（NaN "
                 "视为通过）。没有这一条，一个从不记录目标那一列的分类器记录会把这个故障列为“无法检验”"),
        C("loss_progress", "<=", 0.99, "loss progress",
          "a broadcast MSE cannot fall below the variance of its batch's targets; a loss "
          "that lost 99% of its start had targets that (nearly) agree within a batch, "
          "such as targets that are all zero, and pulling every output to their one "
          "value is then the fit, which broadcasting does not change", log=False,
          role="guard",
          label_zh="损失下降幅度",
          why_zh="广播的 MSE 不可能降到批次目标的方差以下；损失消除了初始值的 99%，说明一个批次内的目标"
                 "（几乎）相同，例如全为零，这时把每个输出拉向那一个值本身就是拟合，广播改变不了什么"),
    ), "every output is pulled to the same target - does the loss compare (B, 1) outputs "
       "with (B,) targets?",
       verdict_zh="每个输出都被拉向同一个目标：损失是不是在拿 (B, 1) 的输出与 (B,) 的目标比较？"),
    outcome=Signature((
        C("loss_progress", "<=", 0.2, "loss progress",
          "on one batch of 64 the loss stays at those targets' variance, where a loss "
          "that pairs each output with its own target memorises them", log=False,
          unit=0.1,
          label_zh="损失下降幅度",
          why_zh="在一个 64 个样本的批次上，损失停在这些目标的方差上；而一个把每个输出与它自己的目标配对"
                 "的损失会记住它们"),
    ), "even one batch cannot be memorised: the loss never paired an output with its "
       "own target",
       verdict_zh="连一个批次都记不住：损失从未把一个输出与它自己的目标配对"),
)

FAULTS = (NO_ZERO_GRAD, ZERO_GRAD_MISPLACED, WRONG_LOSS, BAD_PADDING_MASK, INVERTED_PADDING_MASK, SUMMED_LOSS,
          NEGATED_LOSS, ACCUMULATION_NOT_DIVIDED, PARAMS_NOT_IN_OPTIMIZER,
          TARGET_BROADCAST)
