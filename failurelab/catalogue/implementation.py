"""Implementation faults: code that runs without error and is wrong."""

from __future__ import annotations

from ..fault import Fault
from ..recipes import Scale, Set
from ..signatures import Condition as C
from ..signatures import Signature
from .conditions import ALL_OPTIMIZED, GRADIENTS_FLOW, LEARNS, TOKENS, UNHEALTHY

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
               "gradients still parallel) and the run still blows up, only later. A "
               "rate problem would have calmed down.",
    fix="Call optimizer.zero_grad() once per step, before loss.backward().",
    edit=(Set("zero_grad", False),),
    repair=(Set("zero_grad", True),),
    probe=(Scale("lr", 0.1),),
    signature=Signature((
        C("grad_turn_end", False, 0.05, "gradient turn (1 - cosine)",
          "a running sum of t gradients changes by one term in t, so consecutive "
          "sums are nearly parallel (turn ~1/t^2); fresh minibatch gradients turn by "
          "0.35 or more in every healthy run"),
        C("grad_growth", True, 1.5, "gradient norm",
          "parallel terms add up: a sum of a hundred gradients that agree in direction "
          "ends well above its first term. Gradients that stay parallel and do not "
          "grow are a different failure (the same gradient every step from a model "
          "that ignores its input; decay pulling every weight to 0; a dead layer). "
          "Healthy gradients grow too, so this is a precondition, not evidence",
          suffix="x its step-0 value", role="guard"),
        GRADIENTS_FLOW,  # a dead layer leaves one bias's gradient: parallel, not summed
        ALL_OPTIMIZED,
        C("label_purity_median", False, 0.99, "median share of the batch's main class",
          "unless every batch holds one class: unshuffled data also make consecutive "
          "gradients parallel (checked only when label columns exist)",
          log=False, unit=0.05, required=False, role="guard"),
    ), "the gradients are accumulating - is zero_grad() called every step?"),
    outcome=Signature((
        C("grad_cosine_end", True, 0.95, "gradient cosine",
          "still a running sum at a tenth of the rate", log=False, unit=0.01),
        C("grad_growth", True, 10, "gradient norm",
          "the sum still grows with the number of steps", suffix="x its step-0 value"),
    ), "the gradient still piles up at a tenth of the rate: not a rate problem"),
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
    edit=(Set("zero_grad_at", "before_step"),),
    repair=(Set("zero_grad_at", "before_backward"),),
    probe=(Set("zero_grad_at", "before_backward"),),
    signature=Signature((
        C("grad_zero_steps", True, 0.9, "share of steps whose gradient is exactly 0",
          "backward always leaves some parameter a non-zero gradient (the output "
          "bias gets (p - y) summed over the batch), so a gradient that is 0 "
          "everywhere at the step was erased; healthy runs have none", log=False,
          unit=0.05),
        UNHEALTHY,
    ), "every gradient is exactly 0 when the optimizer steps - is zero_grad() called "
       "between backward() and step()?"),
    outcome=Signature((LEARNS,), "with zero_grad() before backward() the model learns"),
)

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
    edit=(Set("output", "softmax"),),
    repair=(Set("output", "logits"),),
    probe=(Scale("steps", 3),),
    signature=Signature((
        C("output_prob_share", True, 0.9, "median share of output rows that are "
          "probabilities", "logits are unconstrained: rows of raw scores in [0, 1] "
          "that sum to 1 within 1e-3 do not happen by chance; a softmax layer makes "
          "every row one (a model that returns probabilities and takes their log "
          "itself would be named too: its outputs alone cannot tell)", log=False,
          unit=0.05),
    ), "the outputs are probabilities and the loss sits on a floor the predictions cannot explain - is softmax "
       "applied before a loss that applies it again?"),
    outcome=Signature((
        C("loss_end", True, 0.5, "final training loss",
          "three times the steps, the same floor above log(1 + 2/e) = 0.55"),
    ), "more training does not lower the floor"),
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
    edit=(Set("mask_padding", False),),
    repair=(Set("mask_padding", True),),
    probe=(Set("mask_padding", True),),
    signature=Signature((
        C("pad_attention_median", True, 0.01, "median attention on pads",
          "a masked pad gets exactly 0 attention"),
        C("pad_sensitivity_max", True, 1e-3, "prediction change from extra pads",
          "masked padding changes predictions only by float rounding (~1e-7)"),
        TOKENS,
    ), "attention reaches the padding - is the key padding mask applied?"),
    outcome=Signature((
        C("pad_sensitivity_max", False, 1e-5, "prediction change from extra pads",
          "with the mask extra padding changes nothing beyond rounding",
          log=False, unit=1e-5),
    ), "with the mask extra padding changes nothing"),
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
    edit=(Set("mask_inverted", True),),
    repair=(Set("mask_inverted", False),),
    probe=(Set("mask_padding", False),),
    instrument="padding",
    signature=Signature((
        C("pad_attention_median", True, 0.9, "median attention on pads",
          "nearly all attention on pads: only the real tokens are masked",
          log=False, unit=0.05),
        C("val_acc_best", False, 0.7, "best validation accuracy",
          "no better than guessing from the sequence length (the baseline reaches "
          "0.99)", log=False, unit=0.05),
        TOKENS,
    ), "the model attends only to padding - is the mask inverted?"),
    outcome=Signature((
        C("val_acc_best", True, 0.9, "best validation accuracy",
          "without any mask the model can read the tokens", log=False, unit=0.05),
    ), "without the mask the model learns: the mask hid the tokens"),
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
    edit=(Set("loss_reduction", "sum"),),
    repair=(Set("loss_reduction", "mean"),),
    probe=(Scale("batch_size", 0.5),),
    signature=Signature((
        C("loss_start", True, 5, "loss at step 0",
          "a mean cross-entropy of near-neutral predictions is about ln K (1.1 here; "
          "under 5 for up to 20 classes even with logit std 1); 5 or more is a sum"),
        C("output_scale_start", False, 3, "logit std at step 0",
          "the predictions are near neutral, so a large first loss is not confident "
          "mistakes (baseline 0.05-0.09; an oversized init starts at 3 or more)",
          role="guard"),
        C("val_acc_best", True, 0.0, "validation accuracy recorded (a classifier)",
          "a first loss far above ln K means a sum only for a classifier's "
          "cross-entropy; a regression's MSE starts wherever its targets' scale puts it",
          log=False, role="guard"),
        C("first_nonfinite", True, 10, "first non-finite loss at step",
          "a sum of finite per-sample losses is finite: a loss that is NaN or inf within "
          "the first 10 steps was computed unsafely (an exp that overflows), which "
          "summing does not do", log=False, role="guard"),
    ), "the first loss is far above ln K for near-neutral predictions - is the loss "
       "summed over the batch instead of averaged?"),
    outcome=Signature((
        C("loss_start", True, 5, "loss at step 0", "still a sum"),
        C("loss_start", False, 50, "loss at step 0",
          "half the samples, half the loss: 32 x ln 3 = 35"),
    ), "the first loss halves with the batch: it is a sum over samples"),
)

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
    edit=(Set("negate_loss", True),),
    repair=(Set("negate_loss", False),),
    probe=(Scale("lr", 0.1),),
    signature=Signature((
        C("loss_start", False, 0.0, "loss at step 0",
          "a cross-entropy is never negative and starts near +ln K (1.1); a negative "
          "first loss has the wrong sign", log=False, unit=0.1),
        C("val_loss_rise", True, 1.0, "validation loss rise from its minimum",
          "and the model moves away from the labels (healthy runs end within 0.07 of "
          "their minimum)", role="effect"),
    ), "the loss is negative and validation gets worse - does the loss have the "
       "wrong sign?"),
    outcome=Signature((
        C("loss_end", False, -1.0, "final training loss",
          "at a tenth of the rate the loss still falls below zero", log=False,
          unit=0.1),
    ), "a smaller rate does not change the direction: the sign is wrong"),
)

FAULTS = (NO_ZERO_GRAD, ZERO_GRAD_MISPLACED, WRONG_LOSS, BAD_PADDING_MASK, INVERTED_PADDING_MASK, SUMMED_LOSS,
          NEGATED_LOSS)

