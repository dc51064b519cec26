"""Evaluation faults: training is fine; measuring it is not."""

from __future__ import annotations

from ..fault import Fault
from ..recipes import Set
from ..signatures import Condition as C
from ..signatures import Signature

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
    edit=(Set("eval_mode", False),),
    repair=(Set("eval_mode", True),),
    probe=(Set("dropout", 0.0),),
    signature=Signature((
        C("val_jitter_max", True, 1e-4, "logit difference between two validation "
          "passes", "in eval mode two passes are bitwise identical (exactly 0); "
          "1e-4 is far above float rounding"),
    ), "validation is not repeatable - is model.eval() called?"),
    outcome=Signature((
        C("val_jitter_max", False, 1e-6, "logit difference between two passes",
          "without dropout nothing random is left", log=False, unit=1e-6),
    ), "with dropout off the passes agree: dropout was left on"),
)

FAULTS = (EVAL_MODE_FORGOTTEN,)
