"""fl.experiment: a fault beside its baseline, and what its follow-up runs print."""

import failurelab as fl
from failurelab.course.experiment import Followup
from failurelab.evidence.signatures import fmt


def test_a_fix_that_heals_says_healed_and_which_conditions_are_gone():
    fix = fl.experiment("huge_lr").fix()
    assert fix.passed
    text = str(fix)
    assert text.startswith("fix (lr: 3 → 0.1): ✓ healed")
    assert "✗" not in text and "as documented" not in text
    threshold = fl.FAULTS["huge_lr"].signature.conditions[0].threshold
    assert f"(fault: ≥ {fmt(threshold)}) ✓ gone" in text  # against the fault's threshold


def test_a_distinguishing_experiment_prints_its_change_without_float_noise():
    probe = fl.experiment("no_zero_grad").distinguish()
    assert probe.change["lr"][1] != 0.01  # 0.1 * 0.1 in floating point
    assert str(probe).startswith("distinguishing experiment (lr: 0.1 → 0.01): ✓ as documented")


def test_a_fix_that_does_not_heal_says_so():
    exp = fl.experiment("huge_lr")
    still = Followup("fix", {}, exp.faulty, exp.fault.evidence(exp.faulty.history),
                            False)
    assert "✗ NOT healed" in str(still) and "✓" not in str(still)
