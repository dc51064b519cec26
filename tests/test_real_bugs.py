"""Smoke test of the real-bug runner: the corpus and its ground truth agree, a few fast
cases go through the harness, the harm measurement and the diagnosis scoring.  The full
corpus stays in benchmarks/ (python benchmarks/real_bugs/run.py)."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

import failurelab as fl

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "real_bugs" / "run.py"
FAST = ("gh_coursia_926", "gh_daisyrec_15", "gh_farm_229")  # ~0.5 s a run each


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("real_bugs_run", RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_bugs_run"] = module
    spec.loader.exec_module(module)
    return module


def test_every_case_has_ground_truth_with_catalogue_names(run):
    truth = run.read_truth()
    assert sorted(truth) == run.case_names()
    for name, row in truth.items():
        assert row["kind"] in ("failure", "control"), name
        assert set(row["accepted"]) <= set(fl.FAULTS), (name, row["accepted"])
        if row["kind"] == "control":
            assert not row["accepted"], name


def test_the_docs_table_of_cases_says_what_the_truth_file_says(run):
    """docs/real_bugs.md lists every case with its accepted names; a truth change
    (truth_changes.md) must reach that table too, or readers score against stale names."""
    lines = (RUNNER.parents[2] / "docs" / "real_bugs.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| case | root cause"))
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = cells[-1]
    truth = run.read_truth()
    assert sorted(table) == sorted(truth)
    for name, row in truth.items():
        outside = "-" if row["kind"] == "control" else "(outside)"
        assert table[name] == ("; ".join(row["accepted"]) or outside), name


def test_every_case_follows_the_format(run):
    for name in run.case_names():
        module = run.load_case(name)
        assert module.KIND in ("failure", "control"), name
        assert getattr(module, "HARM_METRIC", "train_loss") in run.HIGHER_IS_BETTER, name
        source = Path(module.__file__).read_text()
        assert "Source: https://" in source and "Root cause" in source or \
            module.KIND == "control", name
        if module.KIND == "failure":
            assert "# BUG" in source and "# FIX" in source, name


def test_the_fix_helps_on_a_fast_case(run):
    """gh_coursia_926 measured val MSE 1.08 buggy vs 0.21 fixed (seeds 0-2); one seed of
    each must keep the order with a wide margin."""
    module = run.load_case("gh_coursia_926")
    buggy = run.harm_row("gh_coursia_926", module, fixed=False, seed=0)
    fixed = run.harm_row("gh_coursia_926", module, fixed=True, seed=0)
    assert fixed["val_loss"] < 0.5 * buggy["val_loss"]
    helps, text = run.verdict([buggy, fixed], "val_loss")
    assert helps, text


@pytest.mark.parametrize("name", FAST)
def test_diagnosis_is_scored_against_the_truth(run, name):
    truth = run.read_truth()
    row = run.diagnose_case(name, truth, with_active=False)
    assert row["passive_score"] in ("named", "missed", "confident-wrong")
    assert row["fixed_healthy"] in ("yes", "no")
    assert math.isfinite(row["t_passive"]) and row["t_passive"] > 0


def test_scoring_rules(run):
    class Reading:
        def __init__(self, shape, top, confidence):
            self.shape, self.top, self.confidence = shape, top, confidence

    assert run.score(Reading("plateau", "wrong_loss", "high"), ["wrong_loss"], "failure") == "named"
    assert run.score(Reading("plateau", "huge_lr", "medium"), ["wrong_loss"], "failure") == \
        "confident-wrong"
    assert run.score(Reading("plateau", "huge_lr", "low"), ["wrong_loss"], "failure") == "missed"
    assert run.score(Reading("plateau", "huge_lr", "high"), [], "failure") == "confident-wrong"
    assert run.score(Reading("healthy", None, "high"), [], "control") == "healthy"
    assert run.score(Reading("plateau", None, "low"), [], "control") == "flagged"


def test_the_split_is_made_once(run, tmp_path, monkeypatch):
    monkeypatch.setattr(run, "SPLIT", tmp_path / "split.csv")
    run.make_split()
    first = (tmp_path / "split.csv").read_text()
    with pytest.raises(SystemExit):
        run.make_split()
    assert (tmp_path / "split.csv").read_text() == first
    parts = [line.split(",")[1] for line in first.strip().splitlines()[1:]]
    assert set(parts) == {"dev", "held"}


def test_extending_the_split_moves_no_case(run, tmp_path, monkeypatch):
    """Cases added after the split get a part; the parts already drawn never change."""
    monkeypatch.setattr(run, "SPLIT", tmp_path / "split.csv")
    names = sorted(run.read_truth())
    early, late = names[:-6], names[-6:]
    (tmp_path / "split.csv").write_text(
        "case,part\n" + "".join(f"{n},{'held' if i % 2 else 'dev'}\n" for i, n in enumerate(early)))
    before = run.read_split()
    run.extend_split()
    after = run.read_split()
    assert {n: after[n] for n in early} == before
    assert sorted(after) == names
    assert sorted(after[n] for n in late) == ["dev"] * 3 + ["held"] * 3
    text = (tmp_path / "split.csv").read_text()
    run.extend_split()  # nothing missing: a no-op
    assert (tmp_path / "split.csv").read_text() == text


def test_totals_of_an_empty_part(run):
    """A part with no case (only held cases named with --cases) prints, not crashes."""
    assert run.totals([]) == ["no cases"]


def test_a_diagnosis_that_raises_is_scored_crashed_and_the_corpus_goes_on(run):
    """A case whose program raises at step 0 (a newer torch rejecting its data, as
    gh_pytorch_unet_78's did) used to end the whole corpus run."""
    def raises():
        raise ValueError("Target and input must have the same number of elements")
    reading = run.guarded(raises)
    assert run.score(reading, ["huge_lr"], "failure") == "crashed"
    assert run.score(reading, [], "control") == "crashed"
    assert not run.healthy(reading)
    assert run.describe(reading).startswith("crashed (ValueError: Target and input")
