"""The worksheet: predictions locked once observed, observations read from telemetry
only, a JSON file that survives crashes, reloads and a second notebook, and the course's
four columns in English and Chinese."""

import functools
import html
import io
import json
import os
import re
import threading
from pathlib import Path

import pandas as pd
import pytest

import failurelab as fl
from failurelab.course.gradebook import gradebook
from failurelab.course.grading import HEADINGS, answer_key, grade, markdown_table
from failurelab.course.worksheet import BLANK_VARIABLE, PredictionLocked, Worksheet

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
FOUR_EN = ["symptom", "possible cause", "distinguishing experiment", "fix"]
FOUR_ZH = ["现象", "可能原因", "区分实验", "修复动作"]


@functools.lru_cache(maxsize=None)
def short_run(name: str) -> fl.Run:
    return fl.run(name, steps=40)


@functools.lru_cache(maxsize=None)
def healthy_run() -> fl.Run:
    return fl.run("tabular")  # full length: 40 steps of the baseline are not yet healthy


@pytest.fixture
def path(tmp_path):
    return tmp_path / "student.worksheet.json"


def test_a_new_worksheet_is_a_marked_json_file(path):
    Worksheet(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert {k: doc[k] for k in ("format", "version", "entries", "chain")} == \
        {"format": "failurelab-worksheet", "version": 2, "entries": {}, "chain": []}
    assert isinstance(doc["chain_started"], str)


def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Worksheet(tmp_path / "nowhere" / "ws.json")


def test_a_reload_restores_predictions_and_observations(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging", cause="huge_lr", note="steps too big")
    ws.observe("huge_lr", short_run("huge_lr"))
    ws.predict("lr_too_small", shape="plateau")
    again = Worksheet(path)
    assert again.names == ["huge_lr", "lr_too_small"]
    assert again.prediction("huge_lr") == ws.prediction("huge_lr")
    assert again.prediction("huge_lr").note == "steps too big"
    assert again.observation("huge_lr") == ws.observation("huge_lr")
    assert again.observation("lr_too_small") is None


def test_a_different_prediction_after_observing_is_refused_the_same_one_accepted(path):
    ws = Worksheet(path)
    first = ws.predict("huge_lr", shape="diverging", cause="huge_lr")
    seen = ws.observe("huge_lr", short_run("huge_lr"))
    with pytest.raises(PredictionLocked, match=re.escape(f"observed at {seen.at}")):
        ws.predict("huge_lr", shape="plateau", cause="lr_too_small")
    with pytest.raises(ValueError):  # PredictionLocked is a ValueError
        ws.predict("huge_lr", shape="diverging", cause="huge_lr", note="added later")
    before = path.read_bytes()
    assert ws.predict("huge_lr", shape="diverging", cause="huge_lr") == first
    assert path.read_bytes() == before  # a no-op: not even the timestamp moves


def test_predicting_after_observing_an_unpredicted_experiment_is_refused(path):
    ws = Worksheet(path)
    ws.observe("huge_lr", short_run("huge_lr"))
    with pytest.raises(PredictionLocked):
        ws.predict("huge_lr", shape="diverging")
    ws.predict("huge_lr")  # "no prediction" again: the notebook as shipped still runs


def test_predicting_again_before_observing_replaces_and_keeps_the_history(path):
    ws = Worksheet(path)
    ws.predict("no_zero_grad", shape="plateau")
    ws.predict("no_zero_grad", shape="diverging", cause="no_zero_grad")
    ws.predict("no_zero_grad", shape="diverging", cause="no_zero_grad")  # identical
    doc = json.loads(path.read_text(encoding="utf-8"))["entries"]["no_zero_grad"]
    assert doc["prediction"]["cause"] == "no_zero_grad"
    assert [p["shape"] for p in doc["earlier_predictions"]] == ["plateau"]
    assert doc["earlier_predictions"][0]["at"] <= doc["prediction"]["at"]


def test_a_prediction_with_only_a_note_records_no_prediction_on_purpose(path):
    ws = Worksheet(path)
    ws.predict("mystery-7", note="no idea yet")
    assert ws.prediction("mystery-7").empty
    assert ws.table().loc["mystery-7", "predicted"] == "no prediction (no idea yet)"


@pytest.mark.parametrize("kwargs, closest", [
    (dict(shape="diverge"), "diverging"), (dict(cause="huge_rl"), "huge_lr"),
    (dict(cause="helthy"), "healthy")])
def test_an_unknown_shape_or_cause_names_the_closest_match(path, kwargs, closest):
    with pytest.raises(ValueError, match=f"Did you mean '{closest}'"):
        Worksheet(path).predict("x", **kwargs)


def test_an_empty_experiment_name_is_refused(path):
    with pytest.raises(ValueError, match="non-empty"):
        Worksheet(path).predict("  ", shape="plateau")


def test_an_interrupted_rename_leaves_the_old_file_intact(path, monkeypatch):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging")
    before = path.read_bytes()

    def crash(*args):
        raise OSError("power cut")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        ws.predict("lr_too_small", shape="plateau")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert Worksheet(path).names == ["huge_lr"]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary, no lock


def test_a_failed_temporary_write_leaves_the_old_file_intact(path, monkeypatch):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging")
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError("no space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="no space"):
        ws.observe("huge_lr", short_run("huge_lr"))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert Worksheet(path).observation("huge_lr") is None


@pytest.mark.parametrize("content, complaint", [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe\x00binary", "not valid JSON"),
    (b'{"cells": [], "nbformat": 4}', "marker"),
    (b"[1, 2, 3]", "marker"),
    (b'{"format": "failurelab-worksheet", "version": 99, "entries": {}}', "version"),
    (b'{"format": "failurelab-worksheet", "version": 1, "entries": []}', "entries"),
    (b'{"format": "failurelab-worksheet", "version": 1, "entries": {"a": 5}}', "structure"),
])
def test_a_corrupt_or_foreign_file_is_refused_and_left_untouched(path, content, complaint):
    path.write_bytes(content)
    with pytest.raises(ValueError, match=complaint) as err:
        Worksheet(path)
    assert str(path) in str(err.value)
    assert path.read_bytes() == content


def test_a_file_corrupted_while_open_is_never_overwritten(path):
    ws = Worksheet(path)
    path.write_bytes(b"half a worksheet {")
    with pytest.raises(ValueError, match="not a failurelab worksheet"):
        ws.predict("huge_lr", shape="diverging")
    with pytest.raises(ValueError, match="not a failurelab worksheet"):
        ws.observe("huge_lr", short_run("huge_lr"))
    assert path.read_bytes() == b"half a worksheet {"


def test_observing_reads_the_telemetry_not_the_experiment_name(path):
    seen = Worksheet(path).observe("huge_lr", healthy_run())
    assert (seen.shape, seen.cause) == ("healthy", "healthy")


def test_observing_a_bare_history_without_a_recipe_works(path):
    history = short_run("huge_lr").history.copy()
    seen = Worksheet(path).observe("unnamed", history)
    d = fl.diagnose(history)
    assert (seen.shape, seen.cause, seen.evidence) == ("diverging", "huge_lr", d.causes[0][2])
    assert seen.confidence == d.confidence and seen.steps == len(history)


def test_observing_an_unexplained_curve_records_no_cause(path):
    # A loss-only history that rises: unhealthy, and no signature can be checked on it.
    run = pd.DataFrame({"step": range(60), "loss": [1.0 + 0.02 * i for i in range(60)]})
    seen = Worksheet(path).observe("early", run)
    assert fl.diagnose(run).top is None and seen.shape != "healthy"
    assert seen.cause is None


def test_an_observation_is_stored_as_plain_json(path):
    Worksheet(path).observe("huge_lr", short_run("huge_lr"))
    stored = json.loads(path.read_text(encoding="utf-8"))["entries"]["huge_lr"]["observation"]
    assert set(stored) >= {"shape", "cause", "evidence", "confidence", "at"}
    assert all(isinstance(v, (str, int, list, type(None))) for v in stored.values())


def test_observing_something_that_is_not_telemetry_is_a_type_error(path):
    with pytest.raises(TypeError, match="history DataFrame"):
        Worksheet(path).observe("huge_lr", fl.baseline())


def test_two_notebooks_on_one_worksheet_keep_both_entries(path):
    first, second = Worksheet(path), Worksheet(path)
    first.predict("huge_lr", shape="diverging")
    second.predict("lr_too_small", shape="plateau")
    first.observe("huge_lr", short_run("huge_lr"))
    assert first.names == second.names == ["huge_lr", "lr_too_small"]
    assert Worksheet(path).observation("huge_lr") is not None


def test_concurrent_writers_lose_no_entries(path):
    Worksheet(path)

    def notebook(i):
        ws = Worksheet(path)
        for j in range(8):
            ws.predict(f"nb{i}-{j}", shape="plateau")
    threads = [threading.Thread(target=notebook, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(Worksheet(path).names) == 32


def test_the_table_has_the_worksheet_columns_in_english_and_chinese(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging")
    en, zh = ws.table(), ws.table(lang="zh")
    assert list(en.columns) == ["predicted", "observed", "match"] + FOUR_EN
    assert list(zh.columns) == ["预测", "观察", "是否一致"] + FOUR_ZH
    row_en, row_zh = en.iloc[0].tolist(), zh.iloc[0].tolist()
    assert row_en[:2] == ["shape diverging, cause ?", "not observed"]
    assert row_zh[:2] == ["曲线形状 diverging，原因 ?", "尚未观察"]  # names stay as they are


def test_an_unknown_language_is_refused(path):
    with pytest.raises(ValueError, match="en, zh"):
        Worksheet(path).table(lang="fr")


def test_the_table_shows_the_students_own_words_and_the_key_sits_beside_them(path):
    """Issue 29, item 14: the four columns are what the student wrote (the answer key's
    texts are in `explanations`, beside them), not the key's."""
    ws = Worksheet(path)
    ws.predict("a-run", shape="diverging", cause="no_zero_grad", note="grad norm will climb")
    ws.observe("a-run", short_run("huge_lr"))
    ws.explain("a-run", symptom="my words: it spikes", cause="my words: rate too big",
               experiment="my words: rate / 10", fix="my words: lower it")
    ws.predict("later", shape="plateau")
    table, key = ws.table(), answer_key()
    row = table.loc["a-run"]
    assert [row[c] for c in FOUR_EN] == ["my words: it spikes", "my words: rate too big",
                                         "my words: rate / 10", "my words: lower it"]
    assert row["predicted"] == "shape diverging, cause no_zero_grad (grad norm will climb)"
    assert row["match"] == "shape\u00a0✓, cause\u00a0✗"
    assert table.loc["later", "match"] == "—" and table.loc["later", "fix"] == ""
    beside = ws.explanations().loc["a-run"].set_index("column")
    assert beside.loc["fix", "yours"] == "my words: lower it"
    assert beside.loc["fix", "answer key"] == key.loc["huge_lr", "fix"]
    assert beside.loc["symptom", "answer key"].startswith("diverging: ")


def test_markdown_and_csv_exports_return_what_they_write(path, tmp_path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging", note="a | pipe")
    ws.observe("huge_lr", short_run("huge_lr"))
    md = ws.to_markdown(tmp_path / "ws.md", lang="zh")
    assert md == (tmp_path / "ws.md").read_text(encoding="utf-8")
    assert md.splitlines()[0] == "| 实验 | 预测 | 观察 | 是否一致 | " + " | ".join(FOUR_ZH) + " |"
    assert "a \\| pipe" in md and all(line.count(" | ") == 7 for line in md.splitlines())
    csv = ws.to_csv(tmp_path / "ws.csv")
    assert csv == (tmp_path / "ws.csv").read_text(encoding="utf-8")
    back = pd.read_csv(tmp_path / "ws.csv", index_col=0)
    assert back.loc["huge_lr", "match"] == ws.table().loc["huge_lr", "match"]


def test_the_markdown_renderer_needs_no_tabulate():
    frame = pd.DataFrame({"a": ["x\ny", None]}, index=pd.Index(["r1", "r2"], name="n"))
    assert markdown_table(frame) == "| n | a |\n| --- | --- |\n| r1 | x<br>y |\n| r2 |  |\n"


def test_grading_counts_correct_incorrect_and_missing(path):
    ws = Worksheet(path)
    ws.predict("right", shape="diverging", cause="huge_lr")
    ws.predict("wrong", shape="plateau", cause="no_zero_grad")
    ws.predict("blank", note="no idea")
    ws.predict("pending", shape="plateau")
    for name in ("right", "wrong", "blank"):
        ws.observe(name, short_run("huge_lr"))
    g = grade(ws)
    assert g.equals(ws.grade())
    assert g.loc["right", ["shape_correct", "cause_correct"]].tolist() == [True, True]
    assert g.loc["wrong", ["shape_correct", "cause_correct"]].tolist() == [False, False]
    assert g.loc["blank", "status"] == "no prediction" and g.loc["blank", "out_of"] == 0
    assert g.loc["pending", "status"] == "not observed" and g.loc["pending", "out_of"] == 0
    total = g.loc["total"]
    assert (total["points"], total["out_of"]) == (2, 4)
    assert total["status"] == "attempted 3 of 4, graded 2: 2/4 points (50%); 1 no prediction; " \
                              "1 not observed"


def test_a_healthy_prediction_matches_a_healthy_observation(path):
    ws = Worksheet(path)
    ws.predict("baseline", shape="healthy", cause="healthy")
    ws.observe("baseline", healthy_run())
    assert ws.grade().loc["baseline", "points"] == 2


def test_the_answer_key_covers_every_fault_in_both_languages():
    for lang in HEADINGS:
        key = answer_key(lang)
        assert list(key.index) == list(fl.FAULTS)
        assert key.notna().all().all()
    key = answer_key()
    assert list(key.columns[:4]) == FOUR_EN and {"shape", "phenomenon"} <= set(key.columns)
    for name, fault in fl.FAULTS.items():
        assert key.loc[name, "fix"] == fault.fix and key.loc[name, "shape"] == fault.shape
    assert list(answer_key("zh").columns[:4]) == FOUR_ZH


# --- where the file lives -----------------------------------------------------------------

def test_a_relative_path_is_taken_inside_the_worksheet_folder_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("FAILURELAB_WORKSHEET_DIR", str(tmp_path))
    ws = Worksheet("course.worksheet.json")
    assert ws.path == tmp_path / "course.worksheet.json" and ws.path.exists()
    absolute = tmp_path / "elsewhere.json"
    assert Worksheet(absolute).path == absolute
    monkeypatch.delenv("FAILURELAB_WORKSHEET_DIR")
    monkeypatch.chdir(tmp_path)
    assert str(Worksheet("plain.json").path) == "plain.json"


# --- the student's own columns --------------------------------------------------------------

def test_an_explanation_before_observing_is_refused(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging")
    with pytest.raises(fl.NotObservedYet, match="not been observed"):
        ws.explain("huge_lr", symptom="loss blew up")
    assert ws.explanation("huge_lr") is None


def test_an_explanation_after_observing_is_kept_timestamped_and_revisable(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging", cause="huge_lr")
    seen = ws.observe("huge_lr", short_run("huge_lr"))
    first = ws.explain("huge_lr", symptom="loss rises to ln 3", cause="steps too big",
                       experiment="lr / 10", fix="lower the rate", invariant="update ratio",
                       minutes=12)
    assert first.at >= seen.at and first.minutes == 12.0
    before = path.read_bytes()
    assert ws.explain("huge_lr", symptom="loss rises to ln 3", cause="steps too big",
                      experiment="lr / 10", fix="lower the rate", invariant="update ratio",
                      minutes=12) == first
    assert path.read_bytes() == before  # the same explanation again: a no-op
    second = ws.explain("huge_lr", symptom="loss rises, then flattens at ln 3")
    doc = json.loads(path.read_text(encoding="utf-8"))["entries"]["huge_lr"]
    assert doc["explanation"]["symptom"] == second.symptom
    assert [e["cause"] for e in doc["earlier_explanations"]] == ["steps too big"]
    with pytest.raises(PredictionLocked):  # explaining never unlocks the prediction
        ws.predict("huge_lr", shape="plateau")


def test_an_empty_explanation_records_nothing_and_bad_minutes_are_refused(path):
    ws = Worksheet(path)
    ws.observe("huge_lr", short_run("huge_lr"))
    before = path.read_bytes()
    assert ws.explain("huge_lr") is None and path.read_bytes() == before
    for minutes in (-1, float("nan"), "ten", True):
        with pytest.raises(ValueError, match="minutes"):
            ws.explain("huge_lr", symptom="x", minutes=minutes)
    with pytest.raises(TypeError, match="own words"):
        ws.explain("huge_lr", symptom=3)


def test_explanations_sit_beside_the_answer_key_in_every_export(path, tmp_path):
    ws = Worksheet(path)
    ws.observe("huge_lr", short_run("huge_lr"))
    ws.explain("huge_lr", symptom="<script>alert(1)</script> | rises", fix="lower lr",
               minutes=7.5)
    own = ws.explanations()
    rows = own.loc["huge_lr"].set_index("column")
    assert rows.loc["symptom", "yours"].startswith("<script>")
    assert rows.loc["fix", "answer key"] == fl.FAULTS["huge_lr"].fix
    assert rows.loc["minutes", "yours"] == "7.5"
    page = ws.to_html(tmp_path / "ws.html")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert fl.FAULTS["huge_lr"].fix in page
    md = ws.to_markdown()
    assert "&lt;" not in md and "\\| rises" in md and "answer key" in md
    back = pd.read_csv(io.StringIO(ws.to_csv()), index_col=0)
    assert back.loc["huge_lr", "fix"] == "lower lr" == ws.table().loc["huge_lr", "fix"]
    assert back.loc["huge_lr", "yours: minutes"] == 7.5


def test_tables_show_every_cell_whole_wrapped_and_left_aligned(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="diverging", note="a <long> note " * 20)
    ws.observe("huge_lr", short_run("huge_lr"))
    ws.explain("huge_lr", fix="a fix in many words " * 5)
    table = ws.table()
    shown, beside = table._repr_html_(), ws.explanations()._repr_html_()
    fix = fl.FAULTS["huge_lr"].fix
    assert len(fix) > 50 and html.escape(fix) in beside  # whole, not cut at 50 characters
    assert table.loc["huge_lr", "fix"] in shown
    assert "a &lt;long&gt; note" in shown and "<long>" not in shown
    assert shown.count("text-align:left") >= table.size
    assert "white-space:pre-wrap" in shown
    assert "text-align:left" in ws.grade()._repr_html_()


# --- old files ------------------------------------------------------------------------------

VERSION_1 = {"format": "failurelab-worksheet", "version": 1, "entries": {
    "huge_lr": {"prediction": {"shape": "diverging", "cause": "huge_lr", "note": "",
                               "at": "2025-09-01T10:00:00.000+00:00"},
                "earlier_predictions": [],
                "observation": {"shape": "diverging", "cause": "huge_lr", "evidence": "e",
                                "shape_evidence": "s", "confidence": "high",
                                "lookalikes": ["exploding_gradients"], "next_step": None,
                                "steps": 300, "at": "2025-09-01T10:01:00.000+00:00"}}}}


def test_a_version_1_file_still_loads_grades_and_upgrades_on_the_next_change(path):
    path.write_text(json.dumps(VERSION_1), encoding="utf-8")
    ws = Worksheet(path)
    assert path.read_text(encoding="utf-8") == json.dumps(VERSION_1)  # opening changes nothing
    assert ws.grade().loc["huge_lr", "points"] == 2
    assert ws.audit().clean and ws.audit().unverified == ("huge_lr",)
    ws.predict("lr_too_small", shape="plateau")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["version"] == 2 and doc["entries"]["huge_lr"] == {
        **VERSION_1["entries"]["huge_lr"], "explanation": None, "earlier_explanations": [],
        "truth": None, "observation": {**VERSION_1["entries"]["huge_lr"]["observation"],
                                       "fingerprint": ""}}
    audit = ws.audit()
    assert audit.clean and audit.unverified == ("huge_lr",)  # older than the chain, not edited


# --- edits made by hand are evident ---------------------------------------------------------

def _edit(path, change):
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


@pytest.fixture
def observed(path):
    ws = Worksheet(path)
    ws.predict("huge_lr", shape="plateau", cause="lr_too_small")
    ws.observe("huge_lr", short_run("huge_lr"))
    ws.explain("huge_lr", symptom="it rose")
    ws.predict("later", shape="plateau")
    assert ws.audit().clean and not ws.audit().unverified
    return ws


def test_a_prediction_changed_by_hand_after_observing_is_evident(observed, path):
    _edit(path, lambda d: d["entries"]["huge_lr"]["prediction"].update(cause="huge_lr",
                                                                       shape="diverging"))
    audit = observed.audit()
    assert not audit.clean and "changed or back-dated" in " ".join(audit.of("huge_lr"))
    assert audit.of("later") == ()


def test_a_back_dated_prediction_is_evident(observed, path):
    _edit(path, lambda d: d["entries"]["later"]["prediction"].update(
        at="2020-01-01T00:00:00.000+00:00"))
    assert "back-dated" in " ".join(observed.audit().of("later"))


def test_deleting_an_observation_to_predict_again_is_evident(observed, path):
    _edit(path, lambda d: d["entries"]["huge_lr"].update(observation=None, explanation=None))
    observed.predict("huge_lr", shape="diverging", cause="huge_lr")  # the lock is gone...
    issues = " ".join(observed.audit().of("huge_lr"))  # ...but the chain remembers
    assert "after the experiment was observed" in issues and "deleted by hand" in issues


def test_a_broken_chain_is_evident(observed, path):
    _edit(path, lambda d: d["chain"][1].update(at="2020-01-01T00:00:00.000+00:00"))
    audit = observed.audit()
    assert "breaks at event 2" in " ".join(audit.general)
    assert "chain breaks" in " ".join(audit.of("later"))


def test_a_removed_entry_is_evident(observed, path):
    _edit(path, lambda d: d["entries"].pop("later"))
    assert any("'later'" in g and "removed" in g for g in observed.audit().general)


# --- grading counts only what was attempted -----------------------------------------------------

def test_a_worked_example_alone_is_not_full_marks(path, monkeypatch):
    monkeypatch.setenv(BLANK_VARIABLE, "record")  # as the notebook tests run them
    ws = Worksheet(path)
    ws.predict("demo-baseline", shape="healthy", cause="healthy")
    ws.observe("demo-baseline", healthy_run())
    ws.predict("huge_lr")  # shipped blank, run, observed
    ws.observe("huge_lr", short_run("huge_lr"))
    ws.predict("lr_too_small", shape="plateau")  # predicted, never run
    g = ws.grade()
    assert g.loc["demo-baseline", "status"] == "worked example"
    assert g.loc["demo-baseline", "out_of"] == 0 and g.loc["demo-baseline", "points"] == 0
    total = g.loc["total"]
    assert (total["points"], total["out_of"]) == (0, 0)
    assert total["status"].startswith("attempted 1 of 2, graded 0: nothing graded yet")
    assert "100" not in total["status"]


# --- issue 29: grades follow the student's own run, and nothing forfeits silently ---------------

@functools.lru_cache(maxsize=None)
def no_zero_grad_run() -> fl.Run:
    """Experiment 01-1's own recipe, trained once for this module (before any prediction
    a test writes afterwards)."""
    return fl.run("no_zero_grad")


def test_a_course_key_is_resolved_to_its_fault_only_by_the_key_table():
    from failurelab.course import keys

    assert keys.fault_of("01-2") == "huge_lr" and keys.fault_of("huge_lr") == "huge_lr"
    assert keys.recipe_of("01-2") == fl.inject(fl.baseline(), "huge_lr")
    assert keys.faults_of("huge_lr+shuffled_labels") == ("huge_lr", "shuffled_labels")
    assert keys.recipe_of("mystery-7") is None and keys.recipe_of("my_loop") is None
    assert sorted(keys.EXPERIMENTS.values()) == sorted(fl.FAULTS)  # each fault, one key


def test_observing_the_healthy_baseline_under_a_fault_key_is_not_scored(path, tmp_path):
    """Issue 29, item 3: predict "healthy", observe the healthy baseline as 01-2."""
    ws = Worksheet(path)
    ws.predict("01-2", shape="healthy", cause="healthy")
    seen = ws.observe("01-2", healthy_run())
    assert "not experiment 01-2" in seen.unverified and "lr" in seen.unverified
    assert "not scored" in str(seen)
    row = ws.grade().loc["01-2"]
    assert row["status"] == "run not verified" and (row["points"], row["out_of"]) == (0, 0)
    assert "not scored" in ws.table().iloc[0]["match"]
    book = gradebook([path]).table()
    assert book.loc["student", "huge_lr"] == "run not verified"
    assert book.loc["student", "run not verified"] == "huge_lr"
    assert (book.loc["student", "points"], book.loc["student", "out_of"]) == (0, 0)
    history = ws.observe("01-2", healthy_run().history)  # a bare history names no recipe
    assert "a history alone" in history.unverified


def test_a_run_trained_before_the_prediction_is_not_evidence_and_one_after_it_is(path):
    ws = Worksheet(path)
    early = no_zero_grad_run()
    ws.predict("01-1", shape="diverging", cause="no_zero_grad")
    seen = ws.observe("01-1", early)
    assert "before the prediction" in seen.unverified
    assert ws.grade().loc["01-1", "status"] == "run not verified"
    later = fl.run("no_zero_grad", seed=4)  # any seed of the experiment's own recipe
    assert later.trained_at > ws.prediction("01-1").at
    seen = ws.observe("01-1", later)
    assert seen.unverified == "" and seen.trained_at == later.trained_at
    row = ws.grade().loc["01-1"]
    assert row["status"] == "graded" and row["out_of"] == 2
    assert ws.table().index[0] == "01-1 · no_zero_grad"  # revealed once observed


def test_the_training_time_is_not_part_of_the_history_or_fingerprint():
    first = no_zero_grad_run()
    again = fl.run("no_zero_grad")
    assert again.trained_at > first.trained_at
    assert again.fingerprint == no_zero_grad_run().fingerprint
    assert "trained_at" not in again.history.columns
    timing = ["t_data", "t_forward", "t_backward", "t_step"]  # wall clock, never bitwise
    assert again.history.drop(columns=timing).equals(first.history.drop(columns=timing))


def test_an_older_worksheet_keyed_by_fault_names_still_opens_and_grades(path):
    ws = Worksheet(path)
    ws.predict("no_zero_grad", shape="diverging", cause="no_zero_grad")
    ws.observe("no_zero_grad", fl.run("no_zero_grad"))
    assert ws.grade().loc["no_zero_grad", "points"] == 2
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert "unverified" not in doc["entries"]["no_zero_grad"]["observation"]  # as before
    assert Worksheet(path).audit().clean


def test_an_entry_edited_by_hand_is_shown_and_not_scored_in_both_grades(path):
    """Issue 29, item 4: edited entries no longer count (two flagged entries were 50 %)."""
    ws = Worksheet(path)
    for name in ("a", "b", "c", "d"):
        ws.predict(name, shape="plateau", cause="lr_too_small")
        ws.observe(name, short_run("huge_lr"))
    for name in ("a", "b"):
        _edit(path, lambda d, n=name: d["entries"][n]["prediction"].update(
            shape="diverging", cause="huge_lr"))
    g = Worksheet(path).grade()
    assert g.loc["a", "status"] == g.loc["b", "status"] == "looks edited"
    assert "changed or back-dated" in g.loc["a", "note"]
    assert (g.loc["total", "points"], g.loc["total", "out_of"]) == (0, 4)
    book = gradebook([path]).table().loc["student"]
    assert (book["points"], book["out_of"]) == (0, 4) and book["a"] == "looks edited"


def test_identical_worksheets_in_a_class_are_shown_and_not_scored(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    ws = Worksheet(folder / "ann.worksheet.json")
    ws.predict("x", shape="diverging", cause="huge_lr")
    ws.observe("x", short_run("huge_lr"))
    (folder / "bob.worksheet.json").write_bytes(ws.path.read_bytes())  # byte-identical
    doc = json.loads(ws.path.read_text(encoding="utf-8"))  # the same records, re-indented
    (folder / "cy.worksheet.json").write_text(json.dumps(doc, indent=4), encoding="utf-8")
    other = Worksheet(folder / "dee.worksheet.json")  # the same answers, her own records
    other.predict("x", shape="diverging", cause="huge_lr")
    other.observe("x", short_run("huge_lr"))
    book = gradebook([folder])
    table = book.table()
    assert table.loc["ann", "duplicate of"] == "bob, cy"
    assert table.loc["bob", "duplicate of"] == "ann, cy"
    assert (table.loc["ann", "points"], table.loc["ann", "out_of"]) == (0, 0)
    assert table.loc["dee", "duplicate of"] == "" and table.loc["dee", "points"] == 2
    assert book.faults().loc["huge_lr", "graded"] == 1  # only dee's answer counts
    assert "Identical worksheets" in book.to_html()


def test_a_blank_prediction_stops_instead_of_forfeiting(path, monkeypatch):
    """Issue 29, item 8: run as shipped, a prediction cell stops the notebook with a
    short message, writes nothing, and the answer is still the student's to give."""
    monkeypatch.delenv(BLANK_VARIABLE, raising=False)
    ws = Worksheet(path)
    before = path.read_bytes()
    with pytest.raises(fl.PredictionBlank, match="blank") as refusal:
        ws.predict("01-2", shape=None, cause=None, note="")
    assert len(str(refusal.value).splitlines()) == 1 and "01-2" in str(refusal.value)
    assert path.read_bytes() == before and ws.prediction("01-2") is None
    ws.predict("01-2", shape="diverging", cause="huge_lr")  # then the answer is accepted
    assert ws.prediction("01-2").cause == "huge_lr"
    ws.predict("01-3", note="no idea")  # no guess, on purpose: recorded
    assert ws.prediction("01-3").empty


def test_a_blank_prediction_already_locked_reruns_quietly(path, monkeypatch):
    """An older worksheet whose experiment was observed without a prediction: re-running
    its blank cell must not stop the notebook forever."""
    monkeypatch.setenv(BLANK_VARIABLE, "record")
    ws = Worksheet(path)
    ws.predict("01-4")
    ws.observe("01-4", short_run("huge_lr"))
    monkeypatch.delenv(BLANK_VARIABLE)
    assert ws.predict("01-4").empty


def test_run_all_of_notebook_01_stops_at_the_first_blank_prediction(tmp_path, monkeypatch):
    """Its code cells run in order as Run All would, with nothing written: the first
    prediction cell stops it before any experiment runs."""
    monkeypatch.delenv(BLANK_VARIABLE, raising=False)
    monkeypatch.setenv("FAILURELAB_WORKSHEET_DIR", str(tmp_path))
    notebook = json.loads((NOTEBOOKS / "01_first_four.ipynb").read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    with pytest.raises(fl.PredictionBlank):
        for source in cells:
            assert "fl.experiment(" not in source, "an experiment ran before a prediction"
            exec(compile(source, "cell", "exec"), namespace)  # noqa: S102
    assert fl.Worksheet(tmp_path / "course.worksheet.json").names == []


def test_tables_print_whole_in_a_terminal(path, monkeypatch):
    """Issue 29, item 14: no "..." in a terminal, and no line wider than it."""
    monkeypatch.setenv("COLUMNS", "80")
    ws = Worksheet(path)
    note = "the update ratio of the first steps will be far above the healthy band " * 2
    ws.predict("x", shape="diverging", cause="huge_lr", note=note.strip())
    ws.observe("x", short_run("huge_lr"))
    ws.explain("x", fix="lower the learning rate by ten and watch the update ratio again")
    for shown in (str(ws.table()), repr(ws.explanations()), str(ws.grade())):
        assert "..." not in shown and max(map(len, shown.splitlines())) <= 80
    words = " ".join(str(ws.explanations()).split())
    assert " ".join(fl.FAULTS["huge_lr"].fix.split()) in words
    table = " ".join(str(ws.table()).split())
    assert note.strip() in table and "watch the update ratio again" in table


def test_a_shape_the_fault_can_honestly_show_is_right_in_the_worksheet_too(path):
    """Issue 29, item 5: one shape rule.  huge_lr's curve can read diverging, plateau or
    oscillating; a prediction of any of them is right on the worksheet, as in a mystery
    and in the gradebook, whichever one this seed's telemetry read."""
    from failurelab.catalogue.fault import accepted_shapes

    run = fl.run("huge_lr", seed=0)
    observed = fl.diagnose(run).shape
    other = next(s for s in accepted_shapes(fl.FAULTS["huge_lr"]) if s != observed)
    ws = Worksheet(path)
    ws.predict("01-2", shape=other, cause="huge_lr")  # not the shape this seed reads
    seen = ws.observe("01-2", fl.run("huge_lr", seed=0))
    assert not seen.unverified and seen.shape == observed != other
    assert bool(ws.grade().loc["01-2", "shape_correct"])
    assert gradebook([path]).table().loc["student", "points"] == 2
    wrong = Worksheet(path.with_name("other.worksheet.json"))
    wrong.predict("01-2", shape="healthy", cause="huge_lr")
    wrong.observe("01-2", fl.run("huge_lr", seed=0))
    assert not bool(wrong.grade().loc["01-2", "shape_correct"])  # healthy is no shape of it
