"""The class gradebook: one row per worksheet, honest totals, edited entries named,
per-fault statistics, bad files skipped, student text escaped, nothing written back."""

import json
import zlib

import pandas as pd
import pytest

import failurelab as fl
from failurelab.cli import main
from failurelab.course.gradebook import gradebook
from failurelab.course.records import Entry, Observation, Prediction, Sheet, dump


def observation(fault: str, at: str) -> Observation:
    f = fl.FAULTS[fault]
    return Observation(f.shape, fault, "evidence", "shape evidence", "high", (), None, 300, at,
                       "0" * 16)


def write(path, answers: dict[str, tuple[str | None, str | None]], observed=None):
    """A worksheet written through the file format and chain, without a training run:
    experiment -> (predicted shape, predicted cause); all observed as the fault itself.
    Each file's records carry their own seconds, as two students' would."""
    second = zlib.crc32(path.name.encode()) % 29
    sheet = Sheet()
    sheet.start("2026-01-01T09:00:00.000+00:00")
    for k, (name, (shape, cause)) in enumerate(answers.items()):
        entry = sheet.entries.setdefault(name, Entry())
        entry.prediction = Prediction(shape, cause, "", f"2026-01-01T10:{k:02d}:{second:02d}.000+00:00")
        sheet.write("predict", name, entry.prediction)
        if observed is None or name in observed:
            fault = name if name in fl.FAULTS else "huge_lr"
            entry.observation = observation(fault, f"2026-01-01T10:{k:02d}:{second + 30:02d}.000+00:00")
            sheet.write("observe", name, entry.observation)
    path.write_text(dump(sheet), encoding="utf-8")
    return path


RIGHT = {"huge_lr": ("diverging", "huge_lr"), "dead_relu": (fl.FAULTS["dead_relu"].shape,
                                                            "dead_relu")}


def test_thirty_worksheets_give_thirty_rows_and_bad_files_are_skipped(tmp_path):
    names = list(fl.FAULTS)
    for i in range(30):
        answers = {n: ("plateau", n if (i + k) % 3 else "huge_lr")
                   for k, n in enumerate(names) if (i + k) % 4}
        write(tmp_path / f"s{i:02d}.worksheet.json", answers)
    (tmp_path / "notes.json").write_text('{"cells": []}', encoding="utf-8")
    (tmp_path / "torn.worksheet.json").write_text('{"format": "failurelab-work', "utf-8")
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    book = gradebook([tmp_path, tmp_path / "missing.json"])
    table = book.table()
    assert len(table) == 30 and list(table.index[:2]) == ["s00", "s01"]
    assert {p.rsplit("/", 1)[-1] for p, _ in book.skipped} == {
        "notes.json", "torn.worksheet.json", "missing.json"}
    for student in book.students:  # the totals are the worksheet's own ws.grade()
        own = fl.Worksheet(student.path).grade().loc["total"]
        assert table.loc[student.name, "points"] == own["points"]
        assert table.loc[student.name, "out_of"] == own["out_of"]
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written


def test_a_blank_worksheet_is_not_full_marks_in_the_gradebook(tmp_path):
    write(tmp_path / "blank.json", {"huge_lr": (None, None), "dead_relu": (None, None)})
    write(tmp_path / "good.json", RIGHT)
    table = gradebook([tmp_path]).table()
    assert table.loc["blank", "huge_lr"] == "no prediction"
    assert (table.loc["blank", "points"], table.loc["blank", "out_of"]) == (0, 0)
    assert table.loc["blank", "score"] == "" and table.loc["blank", "attempted"] == "0 of 2"
    assert table.loc["good", "huge_lr"] == "2 of 2" and table.loc["good", "score"] == "100%"


def test_per_fault_statistics_name_what_the_class_confused(tmp_path):
    # stepwise is no shape huge_lr's curve shows (plateau would be right: one shape rule)
    write(tmp_path / "a.json", {**RIGHT, "huge_lr": ("stepwise", "lr_too_small")})
    write(tmp_path / "b.json", {"huge_lr": ("stepwise", "lr_too_small")})
    write(tmp_path / "c.json", {"huge_lr": ("diverging", "huge_lr"), "dead_relu":
                                ("plateau", "dead_relu")})
    book = gradebook([tmp_path])
    faults = book.faults()
    assert faults.index[0] == "huge_lr"  # the most mispredicted first
    assert faults.loc["huge_lr", ["graded", "cause wrong", "shape wrong"]].tolist() == [3, 2, 2]
    assert faults.loc["huge_lr", "wrong causes guessed"] == "lr_too_small (2)"
    confusions = book.confusions().reset_index()
    top = confusions.iloc[0].tolist()
    assert top in (["shape", "diverging", "stepwise", 2], ["cause", "huge_lr", "lr_too_small", 2])
    assert ["cause", "huge_lr", "lr_too_small", 2] in confusions.values.tolist()


def test_an_entry_edited_by_hand_is_named(tmp_path):
    path = write(tmp_path / "edited.json", {"huge_lr": ("plateau", "lr_too_small")})
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["entries"]["huge_lr"]["prediction"].update(shape="diverging", cause="huge_lr")
    path.write_text(json.dumps(doc), encoding="utf-8")
    write(tmp_path / "honest.json", {"huge_lr": ("plateau", "lr_too_small")})
    table = gradebook([tmp_path]).table()
    assert table.loc["edited", "huge_lr"] == "looks edited"  # shown, not scored
    assert (table.loc["edited", "points"], table.loc["edited", "out_of"]) == (0, 0)
    assert table.loc["edited", "looks edited"] == "huge_lr"
    assert table.loc["honest", "looks edited"] == ""


def test_student_text_is_escaped_in_the_page(tmp_path):
    evil = "<img src=x onerror=alert(1)>"
    write(tmp_path / "<b>mallory<i>.json", {evil: ("plateau", "huge_lr")})
    page = gradebook([tmp_path]).to_html(tmp_path / "book.html")
    assert "<img" not in page and "<b>mallory" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;b&gt;mallory" in page


def test_the_grade_command_writes_csv_or_html_and_lists_bad_files(tmp_path, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    write(folder / "ann.worksheet.json", RIGHT)
    (folder / "junk.json").write_text("not json", encoding="utf-8")
    assert main(["grade", str(folder), "--out", str(tmp_path / "book.csv")]) == 0
    out, err = capsys.readouterr()
    assert "junk.json" in err and "not valid JSON" in err
    back = pd.read_csv(tmp_path / "book.csv", index_col=0)
    assert back.loc["ann", "huge_lr"] == "2 of 2" and back.loc["ann", "points"] == 4
    assert (tmp_path / "book.faults.csv").exists() and (tmp_path / "book.confusions.csv").exists()
    assert main(["grade", str(folder), "--out", str(tmp_path / "book.html")]) == 0
    assert "<table" in (tmp_path / "book.html").read_text(encoding="utf-8")
    assert main(["grade", str(tmp_path / "nothing-here")]) == 2  # a typo is not an empty class
    assert "no such worksheet or folder" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".csv", ".html"])
def test_an_unwritable_gradebook_is_one_clear_line(tmp_path, capsys, suffix):
    write(tmp_path / "ann.json", RIGHT)
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "no" / f"b{suffix}")]) == 2
    assert "cannot write the gradebook" in capsys.readouterr().err


def test_a_file_edited_into_odd_shapes_is_skipped_not_fatal(tmp_path):
    path = write(tmp_path / "odd.json", {"huge_lr": ("plateau", "lr_too_small")})
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["entries"]["huge_lr"]["prediction"]["cause"] = ["a", "list"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    write(tmp_path / "fine.json", RIGHT)
    book = gradebook([tmp_path])
    skipped = sorted(p.rsplit("/", 1)[-1] for p, _ in book.skipped)
    assert "deep.json" in skipped and "fine" in [s.name for s in book.students]
    if "odd.json" not in skipped:  # read: then its edited entry is shown, never scored
        assert book.table().loc["odd", "huge_lr"] == "looks edited"
        assert book.table().loc["odd", "out_of"] == 0
    book.to_html(tmp_path / "b.html")
