"""`fl.in_the_wild`: one zoo fault in several unlike loops, each beside its control."""

import pytest

import failurelab as fl


@pytest.fixture(scope="module")
def wild():
    return fl.in_the_wild("no_zero_grad")


def test_three_unlike_families_each_beside_its_own_control(wild):
    table = wild.table
    assert len(table) == 3 and table["family"].is_unique
    for s in wild.sightings:
        assert s.case.fault == "no_zero_grad" and s.case.expected == "no_zero_grad"
        assert len(s.faulty) > 1 and len(s.healthy) > 1


def test_the_bug_is_physically_present_and_the_controls_are_not(wild):
    # Gradients that are never cleared add up: consecutive ones stay parallel.
    for s in wild.sightings:
        assert s.faulty["grad_cosine"].iloc[20:].median() > 0.99
        assert s.healthy["grad_cosine"].iloc[20:].median() < 0.99


def test_unknown_faults_and_families_are_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="known: .*no_zero_grad"):
        fl.in_the_wild("no_such_bug")
    with pytest.raises(ValueError, match="applies to"):
        fl.in_the_wild("deep_unscaled_residual", families=["gru"])
