"""Mystery runs: one seed names one fault everywhere, the answer stays hidden until the
reveal, and the reveal grades direct and worksheet answers."""

import functools
import math
import re

import pandas as pd
import pytest

import failurelab as fl
from failurelab.catalogue.faults import accepted_shapes
from failurelab.course import mystery as mystery_module
from failurelab.course.mystery import POOL, Mystery, mystery, pick, reveal
from failurelab.course.worksheet import PredictionLocked, Worksheet
from failurelab.evidence import shapes

FAST = ("huge_lr", "lr_too_small", "dead_relu", "saturated_sigmoid")  # short tabular runs


@functools.lru_cache(maxsize=None)
def short_mystery(seed: int) -> Mystery:
    return mystery(seed, FAST, steps=40)


def answer(m: Mystery) -> str:
    return reveal(m).fault


def other_than(fault: str) -> str:
    return next(name for name in FAST if name != fault)


def test_the_same_seed_gives_the_same_fault_and_telemetry():
    a, b = short_mystery(3), mystery(3, FAST, steps=40)
    assert answer(a) == answer(b) == pick(3, FAST)
    pd.testing.assert_series_equal(a.history["loss"], b.history["loss"])


def test_a_mystery_is_the_picked_fault_run_with_its_own_seed():
    m = short_mystery(5)
    run = fl.run(answer(m), seed=5, steps=40)
    pd.testing.assert_series_equal(m.history["grad_norm"], run.history["grad_norm"])
    assert m.task == fl.FAULTS[answer(m)].task


def test_consecutive_seeds_cover_the_whole_pool_before_repeating():
    assert {pick(seed) for seed in range(len(POOL))} == set(POOL)
    assert {pick(seed, FAST) for seed in range(4, 8)} == set(FAST)


def test_a_growing_catalogue_deals_every_seed_the_same_fault(monkeypatch):
    """A student's answer to mystery 7 is graded against what mystery 7 was when they
    wrote it: an upgrade that adds a fault must not re-deal the seeds."""
    before = [pick(seed) for seed in range(2 * len(POOL))]
    grown = dict(fl.FAULTS, a_new_fault=fl.FAULTS["huge_lr"])
    monkeypatch.setattr(mystery_module, "FAULTS", grown)
    assert [pick(seed) for seed in range(2 * len(POOL))] == before


def test_the_pool_names_catalogue_faults_only():
    assert len(set(POOL)) == len(POOL) and set(POOL) <= set(fl.FAULTS)


def test_a_subset_picks_the_same_fault_whatever_its_order():
    for seed in range(6):
        assert pick(seed, set(FAST)) == pick(seed, list(reversed(FAST))) == pick(seed, FAST)


def test_unknown_faults_or_bad_seeds_are_refused():
    with pytest.raises(KeyError, match="huge_lr"):
        pick(0, ["huge_rl"])
    with pytest.raises(ValueError, match="empty"):
        pick(0, [])
    for seed in (-1, 1.5, True):
        with pytest.raises(ValueError, match="non-negative integer"):
            pick(seed)


def test_the_answer_is_hidden_from_repr_and_public_attributes():
    m = short_mystery(1)
    fault = fl.FAULTS[answer(m)]
    assert repr(m) == "Mystery(seed=1, task='tabular', key='mystery-1')"
    for attr in (a for a in dir(m) if not a.startswith("_")):
        value = getattr(m, attr)
        assert not isinstance(value, (fl.Recipe, fl.Run)), attr
        assert fault.name not in repr(value) and fault.title not in repr(value), attr
    assert m.history.attrs == {} and fault.name not in " ".join(m.history.columns)


def test_reveal_grades_a_right_and_a_wrong_answer():
    m = short_mystery(2)
    right = reveal(m, answer(m))
    assert right.correct is True and "correct" in str(right)
    wrong = reveal(m, other_than(answer(m)))
    assert wrong.correct is False and "not it" in str(wrong)
    assert wrong.details.fix in str(wrong) and wrong.details.experiment in str(wrong)
    assert wrong.details is fl.FAULTS[wrong.fault]


def test_reveal_without_an_answer_is_ungraded():
    r = reveal(short_mystery(2))
    assert r.correct is None and "No answer" in str(r)


def test_reveal_from_a_seed_needs_no_run_and_agrees_with_the_mystery():
    assert reveal(2, faults=FAST).fault == answer(short_mystery(2))
    assert reveal(2).fault == pick(2)


def test_a_healthy_answer_to_a_mystery_is_wrong():
    assert reveal(short_mystery(0), "healthy").correct is False


def test_an_unknown_answer_names_the_closest_fault():
    with pytest.raises(ValueError, match="Did you mean 'huge_lr'"):
        reveal(short_mystery(0), "huge_rl")


def test_reveal_takes_the_answer_from_the_worksheet_and_locks_it(tmp_path):
    m = short_mystery(4)
    ws = Worksheet(tmp_path / "capstone.worksheet.json")
    ws.predict(m.key, cause=answer(m))
    assert reveal(m, worksheet=ws).correct is True
    assert ws.observation(m.key) is not None  # the reveal recorded the telemetry...
    with pytest.raises(PredictionLocked):  # ...so the answer can no longer change
        ws.predict(m.key, cause=other_than(answer(m)))


def test_a_wrong_or_missing_worksheet_answer_is_graded_as_such(tmp_path):
    m = short_mystery(4)
    ws = Worksheet(tmp_path / "capstone.worksheet.json")
    assert reveal(m, worksheet=ws).correct is None
    other = Worksheet(tmp_path / "other.worksheet.json")
    other.predict(m.key, cause=other_than(answer(m)))
    assert reveal(m.seed, worksheet=other, faults=FAST).correct is False


def test_an_answer_and_a_worksheet_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        reveal(0, "huge_lr", Worksheet(tmp_path / "w.json"))


def test_the_readout_shows_measured_instruments_never_a_recipe_field():
    """A recipe field in the readout (the batch size of batch_too_small) would hand the
    student the answer instead of the evidence."""
    from dataclasses import fields

    from failurelab.course.mystery import INSTRUMENTS

    recipe_fields = {f.name for f in fields(fl.Recipe)}
    assert not [c for c, _ in INSTRUMENTS if c.rstrip("/") in recipe_fields]
    readout = short_mystery(2).readout()
    assert len(readout) >= 5 and "batch size" not in set(readout.instrument)


def test_a_mystery_seed_beyond_64_bits_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"no larger than 2\*\*63 - 1"):
        pick(2**63)


def test_a_mystery_is_graded_against_its_reveal_and_notes_any_disagreement(tmp_path):
    """Mystery 11 is dropout_too_strong, a plateau; diagnose names the cause and reads
    the curve as healthy, a shape this fault also shows.  The student who named it is
    right in the reveal and in the grade; the note says what the grade followed, and
    that the telemetry disagrees only where it does (a forced disagreement: the next
    test).  Which fault a mystery number draws changes when the catalogue grows."""
    m = mystery(11)
    truth = fl.FAULTS[answer(m)]
    ws = Worksheet(tmp_path / "capstone.worksheet.json")
    ws.predict(m.key, shape=truth.shape, cause=truth.name)
    assert reveal(m, worksheet=ws).correct is True
    row = ws.grade().loc[m.key]
    assert (row["shape_correct"], row["cause_correct"], row["points"]) == (True, True, 2)
    seen = ws.observation(m.key)
    agrees = seen.cause == truth.name and seen.shape in accepted_shapes(truth)
    assert ("disagrees" in row["note"]) == (not agrees)
    assert f"graded against the reveal: {truth.name}" in row["note"]


def test_a_disagreeing_observation_never_flips_the_mark(tmp_path):
    m = short_mystery(4)
    truth = fl.FAULTS[answer(m)]
    ws = Worksheet(tmp_path / "capstone.worksheet.json")
    ws.predict(m.key, shape=truth.shape, cause=truth.name)
    ws.observe(m.key, fl.run("tabular").history)  # telemetry that reads healthy
    reveal(m, worksheet=ws)
    row = ws.grade().loc[m.key]
    assert row["observed_cause"] == "healthy" and row["points"] == 2
    assert "disagrees" in row["note"]
    wrong = Worksheet(tmp_path / "wrong.worksheet.json")
    wrong.predict(m.key, shape="healthy", cause="healthy")  # agrees with the telemetry...
    wrong.observe(m.key, fl.run("tabular").history)
    reveal(m, worksheet=wrong)
    assert wrong.grade().loc[m.key, "points"] == 0  # ...and is still wrong


def test_a_documented_other_shape_is_accepted(tmp_path):
    name = next(n for n, f in fl.FAULTS.items() if f.other_shapes)
    seed = next(s for s in range(500) if pick(s) == name)
    ws = Worksheet(tmp_path / "w.json")
    ws.predict(f"mystery-{seed}", shape=fl.FAULTS[name].other_shapes[0], cause=name)
    reveal(seed, worksheet=ws)  # a bare seed: the truth alone locks and grades
    assert ws.grade().loc[f"mystery-{seed}", "points"] == 2
    with pytest.raises(PredictionLocked):
        ws.predict(f"mystery-{seed}", cause="huge_lr")


# --- solvable from the readout alone (issue 29, item 6) ----------------------------------

def _printed_values(text: str) -> dict[str, float]:
    """quantity -> value, read back from the printed measurements table."""
    from failurelab.course.mystery import SIGNATURE_QUANTITIES

    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name in SIGNATURE_QUANTITIES and rest.strip():
            values[name] = float(rest.split()[0])
    return values


def _solvable(name: str, history: pd.DataFrame) -> list[str]:
    """What a student could not read off the printed readout of `name`'s run: each
    condition of its signature (the main one, or a route that fired) whose quantity is
    missing or printed on the wrong side of its threshold."""
    from failurelab.cli import mystery_text

    fault = fl.FAULTS[name]
    printed = _printed_values(mystery_text(Mystery(0, fault.task, history, name)))
    fired = [s for s in fault.signatures if s.evaluate(name, history).fired]
    signature = fault.signature if fault.signature in fired else fired[0]
    # the shape itself is not printed: the student reads it off the shape rules' inputs
    inputs = {q: printed.get(q, math.nan) for q in shapes.INPUTS}
    printed["unhealthy_curve"] = float(shapes.classify(inputs)[0] != "healthy")
    problems = []
    for c in signature.conditions:
        if c.quantity not in printed:
            if c.required:
                problems.append(f"{c.quantity} not printed")
        elif c.margin(printed[c.quantity]) < 0:
            problems.append(f"{c.quantity} printed as {printed[c.quantity]}, on the healthy "
                            f"side of {c.threshold:.4g}")
    return problems


@pytest.mark.parametrize("name", list(fl.FAULTS))
def test_every_mystery_is_solvable_from_its_printed_readout(name):
    """The readout printed for a fault's run carries every quantity its signature reads,
    each printed on the fault's side of the threshold: the student has what the
    diagnosis has.  On each fault's seed-0 run (the runs test_faults checks)."""
    from runs_cache import cached_run

    fault = fl.FAULTS[name]
    history = cached_run(fault.inject(fl.baseline(fault.task)), 0).history
    assert _solvable(name, history) == []


def _seed_of(fault: str) -> int:
    """The first mystery seed that picks `fault` (which one depends on the catalogue's
    size: a new fault reshuffles the rounds)."""
    return next(s for s in range(len(fl.FAULTS)) if pick(s) == fault)


def test_the_accumulation_mystery_prints_the_loss_weight_and_backward_passes_per_step():
    """The issue's own case (mystery 7 while the catalogue had 36 faults):
    accumulation_not_divided, solvable only from the loss weight per step (16 micro-batch
    means) and the backward passes per step."""
    from failurelab.cli import mystery_text

    m = mystery(_seed_of("accumulation_not_divided"))
    assert reveal(m).fault == "accumulation_not_divided"
    printed = _printed_values(mystery_text(m))
    assert printed["step_loss_weight"] == printed["output_backwards_median"] == 16
    assert printed["loss_weight_median"] == 1
    assert _solvable("accumulation_not_divided", m.history) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(len(fl.FAULTS)))
def test_every_real_mystery_is_solvable_from_its_printed_readout(seed):
    m = mystery(seed)
    assert _solvable(reveal(m).fault, m.history) == []


def test_the_readout_start_reads_the_steps_the_diagnosis_reads():
    """'start' is the first MIN_WINDOW steps, where update_ratio_start looks; 'end' the
    last LATE share, where the *_end quantities look."""
    from failurelab.course.mystery import readout
    from failurelab.evidence import quantities

    steps = 300
    ratio = [1.0] * quantities.MIN_WINDOW + [0.01] * (steps - quantities.MIN_WINDOW)
    history = pd.DataFrame({"step": range(steps), "loss": [1.0] * steps, "update_ratio": ratio})
    row = readout(history).set_index("instrument").loc["update ratio"]
    assert row["start"] == quantities.update_ratio_start(history) == 1.0
    assert row["end"] == 0.01


def test_the_reveal_calls_a_lookalike_a_lookalike_and_a_stranger_not_it():
    """accumulation_not_divided makes huge_lr's evidence (every step 16x too large): the
    reveal says so instead of a bare "not it" under a symptom that names huge_lr's curve."""
    seed = _seed_of("accumulation_not_divided")
    r = reveal(seed, "huge_lr")
    assert r.fault == "accumulation_not_divided" and r.correct is False and r.lookalike
    assert "look-alike" in str(r) and "distinguishing experiment" in str(r)
    stranger = reveal(seed, "slow_data")
    assert not stranger.lookalike and "not it." in str(stranger)
    assert "相似" in r.text("zh")


def test_the_mystery_html_shows_both_tables_escaped():
    m = short_mystery(2)
    page = m._repr_html_()
    assert page.count("<table") == 2 and "update_ratio_start" in page
    assert answer(m) not in page and "unhealthy_curve" not in page  # the shape is to predict
    assert "loss_end_spread" in page  # ...from the shape rules' inputs, shown


def test_list_hides_the_shapes_unless_asked_for_the_answers(capsys):
    """The mystery sends students to `failurelab list` for the names: it must not print
    the shape or field phenomenon they are asked to predict (issue 29, item 7)."""
    from failurelab.cli import main
    from failurelab.evidence.shapes import SHAPES

    assert main(["list"]) == 0
    plain = capsys.readouterr().out
    rows = {line.split()[0]: line for line in plain.splitlines() if line.split()
            and line.split()[0] in fl.FAULTS}
    assert set(rows) == set(fl.FAULTS) and "--answers" in plain
    for name, line in rows.items():
        words = set(re.findall(r"[a-z]+", line.removeprefix(name)))
        assert not words & set(SHAPES) - {"healthy"}, line
    assert main(["list", "--answers"]) == 0
    answers = capsys.readouterr().out
    line = next(row for row in answers.splitlines() if row.startswith("huge_lr "))
    assert " / ".join(accepted_shapes(fl.FAULTS["huge_lr"])) in line
