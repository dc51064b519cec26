"""Verification never reads or writes a student's worksheet.

Two notebooks written as the course writes them (`fl.Worksheet("course.worksheet.json")`,
a blank prediction, a run, an observation) are verified twice with `pytest --nbmake
-n 2` in a folder where a student has already worked, under the repository's own
conftest.py.  Had they shared the student's file, the first notebook would overwrite
the student's open prediction and the second would meet the student's observation and
fail with PredictionLocked.  The student's file must come back byte for byte.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import failurelab as fl

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbmake")
pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[1]


def notebook(experiment: str) -> dict:
    cells = ['import failurelab as fl\n\nws = fl.Worksheet("course.worksheet.json")',
             f'ws.predict("{experiment}", shape=None, cause=None, note="")',
             f'run = fl.run("{experiment}", steps=30)\nprint(ws.observe("{experiment}", run))',
             "ws.table()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def student_worksheet(folder: Path) -> Path:
    """A student mid-course: huge_lr predicted, not yet run; lr_too_small observed."""
    ws = fl.Worksheet(folder / "course.worksheet.json")
    ws.predict("huge_lr", shape="diverging", cause="huge_lr", note="steps too big")
    ws.predict("lr_too_small", shape="plateau", cause="lr_too_small")
    ws.observe("lr_too_small", fl.run("lr_too_small", steps=30))
    return ws.path


def test_verifying_the_notebooks_twice_leaves_a_students_worksheet_byte_identical(tmp_path,
                                                                                  monkeypatch):
    monkeypatch.delenv("FAILURELAB_WORKSHEET_DIR", raising=False)  # as in a student session
    course = tmp_path / "notebooks"
    course.mkdir()
    for name in ("huge_lr", "lr_too_small"):
        nbformat.write(nbformat.from_dict(notebook(name)), str(course / f"{name}.ipynb"))
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")  # the file under test
    student = student_worksheet(course)
    before = student.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    env.pop("FAILURELAB_WORKSHEET_DIR", None)
    for attempt in (1, 2):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
             "-rf", "--nbmake", "--nbmake-timeout=300", "notebooks"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"run {attempt}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        assert "2 passed" in done.stdout
        assert student.read_bytes() == before, f"run {attempt} changed the student's worksheet"
    assert sorted(p.name for p in course.iterdir() if not p.name.endswith(".ipynb")) == [
        "course.worksheet.json"]  # nothing new beside it (its lock lives in the temp folder)
    doc = json.loads(before)
    assert doc["entries"]["huge_lr"]["observation"] is None  # still the student's to run
