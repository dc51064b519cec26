"""Evaluation faults: training is fine; measuring it is not."""

from __future__ import annotations

from ..basics.recipes import Set
from ..evidence.experiments import Outcome as O
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
    # On a user's loop, with their evaluation handed in (`evaluate`): the model is seen
    # in training mode during it while it holds dropout or batch norm, the mechanism
    # itself; every pass in eval mode (or nothing that the mode changes) refutes it.
    confirm=(O("evaluates_in_train_mode", "present"),),
    refute=(O("evaluates_in_train_mode", "absent"),),
    signature=Signature((
        C("val_jitter_max", ">=", 1e-4, "logit difference between two validation "
          "passes", "in eval mode two passes are bitwise identical (exactly 0); "
          "1e-4 is far above float rounding",
          label_zh="两次验证之间的 logit 差异",
          why_zh="在评估模式下两次前向逐位相同（恰好为 0）；1e-4 远高于浮点舍入"),
    ), "validation is not repeatable - is model.eval() called?",
       verdict_zh="验证结果不可重复：调用了 model.eval() 吗？"),
    outcome=Signature((
        C("val_jitter_max", "<=", 1e-6, "logit difference between two passes",
          "without dropout nothing random is left", log=False, unit=1e-6,
          label_zh="两次前向之间的 logit 差异",
          why_zh="没有 dropout 就没有任何随机的东西了"),
    ), "with dropout off the passes agree: dropout was left on",
       verdict_zh="关掉 dropout 后两次结果一致：dropout 没有关"),
)

TRAIN_MODE_NOT_RESTORED = Fault(
    name="train_mode_not_restored",
    title="Forgetting model.train() after validation",
    family="evaluation", task="tabular", shape="healthy", phenomenon=None,
    symptom="Nothing looks wrong: the loss falls as before and validation is "
            "repeatable. But from the first validation on, the training loss is computed "
            "without dropout, and a model with BatchNorm would normalise with its running "
            "statistics instead of the batch's.",
    cause="Calling model.eval() before validating switches every layer to eval mode, "
          "and the loop never switches back. The optimizer keeps stepping, but on a different "
          "model from the one written: its regularisation is gone, and BatchNorm's "
          "running statistics stop following the weights.",
    experiment="Stop calling model.eval() before validating: every training step is "
               "taken in training mode again (the monitor's train_mode column reads 1), "
               "so the mode was lost at the eval() call, never undone.",
    fix="Call model.train() after validating (or at the top of every training step), "
        "or validate inside a helper that restores the mode it found.",
    zh=Chinese(
        title="验证之后忘了调用 model.train()",
        symptom="看不出任何问题：损失照样下降，验证结果也可重复。但从第一次验证起，训练损失是在没有 "
                "dropout 的情况下算出的；带 BatchNorm 的模型会用运行统计量而不是当前批次的统计量做归一化。",
        cause="验证前的 model.eval() 把每一层都切换到评估模式，而循环再也没有切换回来。优化器照常更新，"
              "但更新的是另一个模型：正则化没有了，BatchNorm 的运行统计量也不再跟随权重变化。",
        experiment="验证前不再调用 model.eval()：每一步训练又都在训练模式下进行（监视器的 train_mode "
                   "列读数为 1），所以模式是在 eval() 调用时丢失的，之后从未恢复。",
        fix="验证之后调用 model.train()（或在每个训练步开头调用），或者在一个会恢复原有模式的辅助函数里"
            "验证。"),
    edit=(Set("restore_train_mode", False),),
    repair=(Set("restore_train_mode", True),),
    probe=(Set("eval_mode", False),),
    # On a user's loop: training mode before every forward pass that takes gradients.
    # The mode changes the outcome either way (dropout on again raises the training
    # loss; BatchNorm on the batch's statistics may rescue a diverging run), so the
    # effect must be a change beyond the spread, with the steps in eval mode seen.
    confirm=((O("gain[train_mode]", "changed"), O("steps_in_eval", "present")),),
    refute=(O("steps_in_eval", "absent"),),
    signature=Signature((
        C("eval_mode_share", ">=", 0.1, "share of optimizer steps taken in eval mode",
          "a loop that trains in training mode takes none (exactly 0); a mode lost at one "
          "validation and never restored holds from there to the end of the run, or of "
          "the epoch, most of it", log=False, unit=0.05,
          label_zh="在评估模式下进行的优化器步所占比例",
          why_zh="在训练模式下训练的循环一步也没有（恰好为 0）；在某次验证时丢失且从未恢复的模式会一直"
                 "持续到训练结束或本轮结束，占去大部分步数"),
    ), "the model trains in eval mode - is model.train() called after validating?",
       verdict_zh="模型在评估模式下训练：验证之后调用了 model.train() 吗？"),
    outcome=Signature((
        C("eval_mode_share", "<=", 0.1, "share of optimizer steps taken in eval mode",
          "with no eval() call the model never leaves training mode", log=False, unit=0.05,
          label_zh="在评估模式下进行的优化器步所占比例",
          why_zh="没有 eval() 调用，模型就不会离开训练模式"),
    ), "without eval() every step trains in training mode: eval() was never undone",
       verdict_zh="不调用 eval() 时每一步都在训练模式下：eval() 从未被撤销"),
)

FAULTS = (EVAL_MODE_FORGOTTEN, TRAIN_MODE_NOT_RESTORED)
