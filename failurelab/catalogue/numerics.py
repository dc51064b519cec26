"""Numerics faults: float16's limited range, both ends of it."""

from __future__ import annotations

from dataclasses import replace

from ..fault import Fault
from ..recipes import Set
from ..signatures import Condition as C
from ..signatures import Signature
from .conditions import FINITE, FLOAT16

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
    edit=(Set("dtype", "float16"),),
    repair=(Set("loss_scaling", True),),
    probe=(Set("dtype", "bfloat16"),),
    signature=Signature((
        FLOAT16,
        C("output_grad_zero_median", True, 0.1, "median zero share of the logit "
          "gradient", "the baseline has 3% or less; loss scaling keeps float16 at 5% "
          "or less", log=False, unit=0.05),
        C("output_grad_floor", True, 3e-8, "smallest non-zero logit gradient",
          "float16's smallest subnormal is 6e-8 and anything under half of it "
          "rounds to 0: nothing smaller ever arrived (float32 runs reach 1e-13)",
          role="guard"),
        C("output_grad_floor", False, 6.1e-5, "smallest non-zero logit gradient",
          "float16's smallest normal number: only gradients that reach the subnormal "
          "range below it can underflow (a loss whose gradients are all large, such as "
          "a margin loss, has exact zeros for another reason)", role="guard"),
        FINITE,
    ), "gradients are underflowing to zero in float16 - use loss scaling"),
    outcome=Signature((
        C("output_grad_zero_median", False, 0.08, "median zero share of the logit "
          "gradient", "bfloat16's range keeps them representable", log=False,
          unit=0.05),
    ), "with float32's exponent range the zeros disappear"),
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
          "float16's largest finite number: anything above becomes inf"),
        C("nonfinite_losses", True, 0.5, "non-finite losses", "the loss did become NaN",
          log=False, role="effect"),
        C("input_nonfinite_total", False, 0.5, "non-finite input values",
          "the data themselves are finite: the NaN was made inside the model",
          log=False, role="guard"),
        replace(FLOAT16, required=False),
    ), "finite inputs beyond float16's range turned into inf - standardise them or "
       "keep them in float32"),
    outcome=Signature((
        C("nonfinite_losses", False, 0.5, "non-finite losses",
          "bfloat16 holds 2e5 without overflow", log=False),
    ), "with float32's exponent range there is no NaN: it was an overflow"),
)

FAULTS = (FP16_NO_SCALING, FP16_OVERFLOW)
