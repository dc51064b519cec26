"""Evaluation faults: training is fine; measuring it is not."""

from __future__ import annotations

from ..basics.recipes import Set
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from .fault import Chinese, Fault

EVAL_MODE_FORGOTTEN = Fault(
    name="eval_mode_forgotten",
    title="Forgetting model.eval() before validation",
    family="evaluation", task="tabular", shape="healthy", phenomenon=None,
    symptom="Training looks perfectly healthy, but validating the same model twice "
            "on the same data gives different logits; validation metrics jitter.",
    cause="Without model.eval(), dropout keeps dropping units during validation, so "
          "each validation pass evaluates a different random sub-network. Nothing "
          "in the training loss can show it.",
    experiment="Keep forgetting eval() but set dropout to 0: the two validation "
               "passes agree exactly again, so the jitter came from dropout left on.",
    fix="Call model.eval() before evaluating (and model.train() after), or evaluate "
        "inside a helper that does both.",
    zh=Chinese(
        title="验证前忘了调用 model.eval()",
        symptom="训练看起来完全健康，但在同样的数据上对同一个模型验证两次，得到的 logits 不同；验证指标来"
                "回抖动。",
        cause="没有 model.eval() 时，dropout 在验证中继续丢弃单元，所以每次验证评估的是一个不同的随机子网"
              "络。训练损失里看不出任何迹象。",
        experiment="继续忘掉 eval()，但把 dropout 设为 0：两次验证又完全一致，所以抖动来自没关掉的 "
                   "dropout。",
        fix="评估前调用 model.eval()（评估后调用 model.train()），或者在一个同时做这两件事的辅助函数里评"
            "估。"),
    edit=(Set("eval_mode", False),),
    repair=(Set("eval_mode", True),),
    probe=(Set("dropout", 0.0),),
    signature=Signature((
        C("val_jitter_max", True, 1e-4, "logit difference between two validation "
          "passes", "in eval mode two passes are bitwise identical (exactly 0); "
          "1e-4 is far above float rounding",
          label_zh="两次验证之间的 logit 差异",
          why_zh="在评估模式下两次前向逐位相同（恰好为 0）；1e-4 远高于浮点舍入"),
    ), "validation is not repeatable - is model.eval() called?",
       verdict_zh="验证结果不可重复：调用了 model.eval() 吗？"),
    outcome=Signature((
        C("val_jitter_max", False, 1e-6, "logit difference between two passes",
          "without dropout nothing random is left", log=False, unit=1e-6,
          label_zh="两次前向之间的 logit 差异",
          why_zh="没有 dropout 就没有任何随机的东西了"),
    ), "with dropout off the passes agree: dropout was left on",
       verdict_zh="关掉 dropout 后两次结果一致：dropout 没有关"),
)

FAULTS = (EVAL_MODE_FORGOTTEN,)
