"""The output-path guard (basics/files.py), as every command and export meets it: no
command ever writes over its own input, a worksheet, or a file of another format, and
a missing or empty input is an error, not an empty result.  Issue 29, items 1, 2, 12
and 13.  Everything here is in-process and reads or writes a few small files."""

import json
import multiprocessing
import os
import tempfile

import pandas as pd
import pytest

from failurelab.basics.files import OutputRefused, check_output, check_output_folder, exclusive_lock, is_worksheet
from failurelab.cli import main
from failurelab.course.records import Entry, Prediction, Sheet, dump
from failurelab.course.worksheet import Worksheet
from failurelab.evidence.runs import read_history, save_history


def in_process(capsys, *args):
    """(exit status, stdout, stderr) of `main`, as the console script would exit."""
    try:
        status = main([str(a) for a in args])
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def worksheet(path, name="huge_lr"):
    """A small worksheet written through the file format (no training run)."""
    sheet = Sheet()
    sheet.start("2026-01-01T09:00:00.000+00:00")
    entry = sheet.entries.setdefault(name, Entry())
    entry.prediction = Prediction("diverging", "huge_lr", "", "2026-01-01T10:00:00.000+00:00")
    sheet.write("predict", name, entry.prediction)
    path.write_text(dump(sheet), encoding="utf-8")
    return path


@pytest.fixture
def klass(tmp_path):
    """A submissions folder: two worksheets and a stray JSON file."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    worksheet(folder / "alice.worksheet.json")
    worksheet(folder / "bob.worksheet.json")
    (folder / "package.json").write_text('{"name": "not a worksheet"}')
    return folder


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# --- item 1: grade ------------------------------------------------------------------------

@pytest.mark.parametrize("out, why", [
    ("submissions/alice.worksheet.json", "it is a worksheet"),
    ("submissions/gradebook.csv", "a folder this command reads"),
    ("gradebook.txt", "must end in .csv or .html or .htm"),
    ("submissions", "it is a folder"),
])
def test_grade_never_writes_over_a_worksheet_into_its_input_or_in_another_format(
        capsys, tmp_path, monkeypatch, klass, out, why):
    monkeypatch.chdir(tmp_path)
    before, around = snapshot(klass), sorted(p.name for p in tmp_path.iterdir())
    status, stdout, err = in_process(capsys, "grade", "submissions", "--out", out)
    assert status == 2 and not stdout
    assert why in one_error_line(err) and out in err
    assert snapshot(klass) == before  # alice's worksheet byte for byte, nothing added
    assert sorted(p.name for p in tmp_path.iterdir()) == around


def test_grade_writes_its_csvs_beside_the_named_file_outside_the_class(capsys, tmp_path,
                                                                      monkeypatch, klass):
    monkeypatch.chdir(tmp_path)
    status, stdout, err = in_process(capsys, "grade", "submissions", "--out", "book.csv")
    assert status == 0, err
    assert {"book.csv", "book.faults.csv", "book.confusions.csv"} <= {
        p.name for p in tmp_path.iterdir()}
    assert list(pd.read_csv(tmp_path / "book.csv", index_col=0).index) == ["alice", "bob"]


def test_grade_refuses_to_write_a_companion_csv_over_a_worksheet(capsys, tmp_path,
                                                                 monkeypatch, klass):
    monkeypatch.chdir(tmp_path)
    worksheet(tmp_path / "book.faults.csv")  # a worksheet someone saved under that name
    before = (tmp_path / "book.faults.csv").read_bytes()
    status, _, err = in_process(capsys, "grade", "submissions", "--out", "book.csv")
    error = err.strip().splitlines()[-1]  # after the line naming the skipped package.json
    assert status == 2 and "book.faults.csv" in error and "it is a worksheet" in error
    assert (tmp_path / "book.faults.csv").read_bytes() == before
    assert not (tmp_path / "book.csv").exists()  # all three are checked before any is written


@pytest.mark.parametrize("given, why", [("missing", "no such worksheet or folder"),
                                         ("empty", "no worksheet to grade")])
def test_grade_of_a_missing_path_or_an_empty_folder_is_an_error(capsys, tmp_path,
                                                                monkeypatch, given, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    status, stdout, err = in_process(capsys, "grade", given)
    assert status == 2 and not stdout and why in one_error_line(err)


def test_grade_tells_the_instructor_a_skipped_file_is_not_a_worksheet(capsys, klass):
    status, _, err = in_process(capsys, "grade", klass)
    assert status == 0
    line = next(x for x in err.splitlines() if "package.json" in x)
    assert "not a worksheet" in line and "move it away" not in line


# --- item 2: worksheet exports --------------------------------------------------------------

@pytest.mark.parametrize("export, target, why", [
    ("to_csv", "my.worksheet.json", "it is a worksheet"),
    ("to_html", "my.worksheet.json", "it is a worksheet"),
    ("to_markdown", "my.worksheet.json", "it is a worksheet"),
    ("to_csv", "other.worksheet.json", "it is a worksheet"),
    ("to_csv", "table.txt", "must end in .csv"),
    ("to_html", "page.csv", "must end in .html or .htm"),
    ("to_markdown", "notes.html", "must end in .md or .markdown"),
])
def test_a_worksheet_export_never_replaces_a_worksheet_or_mislabels_its_format(
        tmp_path, export, target, why):
    ws = Worksheet(worksheet(tmp_path / "my.worksheet.json"))
    worksheet(tmp_path / "other.worksheet.json")
    before = snapshot(tmp_path)
    with pytest.raises(OutputRefused, match=why):
        getattr(ws, export)(tmp_path / target)
    assert snapshot(tmp_path) == before
    ws.to_html(tmp_path / "my.html")  # and the worksheet still reads, whole
    assert ws.names == ["huge_lr"]


def test_a_worksheet_under_any_name_is_protected_by_its_content(tmp_path):
    """A worksheet saved as sheet.csv is still a student's work: to_csv must not replace
    it, neither as its own file nor as any other command's output."""
    odd = worksheet(tmp_path / "sheet.csv")
    assert is_worksheet(odd) and not is_worksheet(tmp_path / "missing.csv")
    before = odd.read_bytes()
    with pytest.raises(OutputRefused, match="worksheet"):
        Worksheet(odd).to_csv(odd)
    with pytest.raises(OutputRefused, match="worksheet"):
        save_history(pd.DataFrame({"loss": [1.0]}), odd)
    assert odd.read_bytes() == before


def test_run_refuses_a_plot_or_history_path_over_a_worksheet(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sheet = worksheet(tmp_path / "course.worksheet.json")
    before = sheet.read_bytes()

    def refuse(*args, **kwargs):
        raise AssertionError("a run started before the output paths were checked")
    monkeypatch.setattr("failurelab.lab.train.run", refuse)
    for option in ("--plot", "--save"):
        status, _, err = in_process(capsys, "run", "huge_lr", option, sheet.name)
        assert status == 2 and "it is a worksheet" in one_error_line(err)
    assert sheet.read_bytes() == before


# --- item 12 and report's folder ---------------------------------------------------------------

def _unwritable_folder(tmp_path):
    """A folder this process cannot write: by permissions for a normal user; root ignores
    those, so for root a file system that refuses it (/sys on Linux)."""
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    try:
        tempfile.TemporaryFile(dir="/sys").close()
    except PermissionError:
        return "/sys"
    except OSError:
        pass
    pytest.skip("no folder this (root) process is refused to write in")


@pytest.mark.parametrize("kind", ["unwritable folder", "a file"])
def test_report_into_a_folder_it_cannot_write_is_one_line_before_any_run(
        capsys, tmp_path, monkeypatch, kind):
    target = _unwritable_folder(tmp_path) if kind == "unwritable folder" else \
        tmp_path / "notes.txt"
    if kind == "a file":
        target.write_text("my notes")

    def refuse(*args, **kwargs):
        raise AssertionError("a run started before the report folder was checked")
    monkeypatch.setattr("failurelab.lab.train.run", refuse)
    status, stdout, err = in_process(capsys, "report", "--out", target, "--faults", "huge_lr")
    line = one_error_line(err)
    assert status == 2 and str(target) in line
    assert ("no permission to write" in line) if kind != "a file" else (
        "it is a file, not a folder" in line and target.read_text() == "my notes")


def test_check_output_folder_creates_a_missing_folder(tmp_path):
    assert check_output_folder(tmp_path / "a" / "b").is_dir()


# --- item 13: one-line errors ------------------------------------------------------------------

def test_a_history_with_text_where_a_number_belongs_names_file_column_and_line(
        capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("step,loss,grad_norm\n0,1.0,0.5\n1,0.9,abc\n")
    with pytest.raises(ValueError, match=r"bad.csv: column 'grad_norm' holds 'abc' on line 3"):
        read_history(bad)
    status, _, err = in_process(capsys, "diagnose", bad)
    assert status == 2 and "'grad_norm'" in one_error_line(err)


def test_a_folder_given_where_a_history_file_belongs_says_so(capsys, tmp_path):
    status, _, err = in_process(capsys, "diagnose", tmp_path)
    line = one_error_line(err)
    assert status == 2 and "is a folder" in line and "Errno" not in line


def test_an_option_without_a_command_says_what_the_commands_are(capsys):
    status, _, err = in_process(capsys, "--frobnicate")
    assert status == 2
    assert "--frobnicate" in err and "list, run, verify" in err and "required" not in err


@pytest.mark.parametrize("minutes", [0, -1, 1e9, 24 * 60 + 1])
def test_implausible_minutes_are_refused(tmp_path, minutes):
    ws = Worksheet(worksheet(tmp_path / "w.worksheet.json"))
    with pytest.raises(ValueError, match="at most 1440"):
        ws.explain("huge_lr", symptom="x", minutes=minutes)


def test_a_read_only_folder_is_named_not_a_lock_file(tmp_path):
    folder = _unwritable_folder(tmp_path)
    with pytest.raises(OSError) as refused:
        Worksheet(f"{folder}/me.worksheet.json")
    message = str(refused.value)
    assert str(folder) in message and ".lock" not in message and ".tmp" not in message


def test_no_lock_file_is_left_beside_a_worksheet(tmp_path):
    ws = Worksheet(tmp_path / "me.worksheet.json")
    ws.predict("huge_lr", shape="diverging")
    assert [p.name for p in tmp_path.iterdir()] == ["me.worksheet.json"]


def _predict_many(args):
    path, who = args
    ws = Worksheet(path)
    for k in range(5):
        ws.predict(f"{who}-{k}", shape="plateau")


def test_the_lock_elsewhere_still_serialises_writers_in_separate_processes(tmp_path):
    path = tmp_path / "shared.worksheet.json"
    Worksheet(path)
    with multiprocessing.get_context("fork").Pool(3) as pool:
        pool.map(_predict_many, [(path, f"nb{i}") for i in range(3)])
    assert len(Worksheet(path).names) == 15
    assert json.loads(path.read_text())["format"] == "failurelab-worksheet"
    assert exclusive_lock(path).lock_file == exclusive_lock(tmp_path / "." /
                                                            path.name).lock_file


def test_check_output_accepts_a_fresh_file_of_its_format(tmp_path):
    assert check_output(tmp_path / "a.CSV", (".csv",)) == tmp_path / "a.CSV"
