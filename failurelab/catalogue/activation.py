"""Activation faults: units that saturate or die, and initialisation scale."""

from __future__ import annotations

from ..fault import Fault
from ..recipes import Scale, Set
from ..signatures import Condition as C
from ..signatures import Signature
from .conditions import ALL_CONNECTED, FINITE, INPUTS_SCALED, STEPS_SANE, STUCK

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
    edit=(Set("sigmoid_gain", 30.0),),
    repair=(Set("sigmoid_gain", 1.0),),
    probe=(Set("sigmoid_gain", 1.0),),
    signature=Signature((
        C("saturation_median", True, 0.3, "median saturated share",
          "a third of the sigmoid/tanh outputs pass < 1% of the gradient back; healthy "
          "layers work in their linear range", log=False, unit=0.1),
        C("first_layer_grad_share", False, 0.6, "first over last layer gradient norm",
          "the gradient is attenuated across the saturated layer: a saturated unit "
          "passes < 1% of it back, so the first layer gets a fraction of what the last "
          "one gets (a guard: how much the first layer gets also depends on the "
          "architecture)", role="guard"),
        INPUTS_SCALED,
        ALL_CONNECTED,
        STEPS_SANE,
        C("nonfinite_losses", False, 0.5, "non-finite losses",
          "saturated sigmoids bound their outputs and stall training; they cannot make "
          "the loss overflow, so a run that did has another cause upstream", log=False,
          role="guard"),
    ), "sigmoid units are saturated by their own weights, not by the inputs"),
    outcome=Signature((
        C("saturation_median", False, 0.05, "median saturated share",
          "at the default scale sigmoids work in their linear range", log=False,
          unit=0.05),
    ), "at the default init scale the sigmoids leave saturation"),
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
    edit=(Set("relu_bias", -10.0),),
    repair=(Set("relu_bias", 0.0),),
    probe=(Scale("lr", 10),),
    signature=Signature((
        C("dead_start", True, 0.9, "dead ReLU share at step 0",
          "nine in ten units off for a whole batch at initialisation; a healthy layer "
          "has a third or fewer off, and units that die later point to large updates "
          "instead. Named even when the loss still falls (a residual or normalised "
          "path routes around the dead layer): the layer is lost capacity either way",
          log=False, unit=0.01),
    ), "the ReLU layer is dead from initialisation - check its bias and init"),
    outcome=Signature((STUCK, C("zero_grad_median", True, 0.99,
                                "median share of zero gradients",
                                "still exactly zero gradient everywhere",
                                log=False, unit=0.01)),
                      "a larger rate changes nothing: the gradient is exactly zero"),
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
    edit=(Set("init_scale", 10.0),),
    repair=(Set("init_scale", 1.0),),
    probe=(Scale("lr", 0.1),),
    # oversized weights make oversized pre-activations (saturated sigmoids) and
    # oversized gradients (huge first steps): their evidence is its consequence
    explains=("saturated_sigmoid", "huge_lr"),
    signature=Signature((
        C("output_scale_start", True, 3, "logit std at step 0",
          "a fresh classifier's logits should be O(1) or smaller (baseline 0.05): "
          "std 3 means some classes start e^3 = 20x likelier for no reason"),
        INPUTS_SCALED,
    ), "the model starts out confidently wrong - check the initialisation scale"),
    outcome=Signature((
        C("output_scale_start", True, 3, "logit std at step 0",
          "unchanged: step 0 comes before any update"),
    ), "the rate changes nothing at step 0: it is the initialisation"),
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
    edit=(Set("init_scale", 0.1),),
    repair=(Set("init_scale", 1.0),),
    probe=(Scale("lr", 10),),
    instrument="gradients",
    signature=Signature((
        C("first_layer_grad_share_start", False, 0.06,
          "first-layer over last-layer gradient, first steps",
          "backward through weights 10x too small shrinks the gradient by 10x per layer "
          "crossed, from the very first step; the baseline's first layer starts with "
          "a fifth to a third of the last layer's gradient, 3x above this threshold"),
        STUCK,
        ALL_CONNECTED,
        C("dead_start", False, 0.9, "dead ReLU share at step 0",
          "the units are alive at initialisation: a layer dead from step 0 is a bias "
          "problem, with no gradient at all", log=False, unit=0.05, role="guard"),
        FINITE,
        INPUTS_SCALED,
        C("input_is_tokens", False, 0.5, "token-id inputs",
          "dense inputs: an embedding's gradient is sparse per token, so its ratio to "
          "the last layer's says nothing about init scale", log=False, required=False,
          role="guard"),
    ), "the gradient fades on its way back to the first layer - is the "
       "initialisation too small?"),
    outcome=Signature((
        STUCK,
        C("first_layer_grad_share", False, 0.2, "first-layer over last-layer gradient",
          "still vanishing at ten times the rate"),
    ), "a larger rate changes nothing: the gradient vanishes in the weights"),
)

FAULTS = (SATURATED_SIGMOID, DEAD_RELU, BAD_INIT, INIT_TOO_SMALL)
