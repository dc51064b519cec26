"""The course notebooks, read as JSON: shipped clean, complete, and in the course's rhythm.

These tests never execute a notebook; nbmake does that (`pytest --nbmake notebooks`,
which proves every experiment still reproduces).  Here we check what can be checked
from the files alone, in milliseconds: no outputs are committed, every fault of the
catalogue is taught exactly once with a prediction written before it runs, under a
heading that does not give the answer away, the self-check questions of the course are
asked, and each file is valid nbformat v4.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import failurelab as fl

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))

# The course plan: these notebooks, in this order (fault notebooks are 01-06, 08 and 11).
COURSE = (
    "00_instruments.ipynb", "01_first_four.ipynb", "02_data.ipynb",
    "03_optimization.ipynb", "04_activations_and_init.ipynb", "05_numerics.ipynb",
    "06_implementation_and_evaluation.ipynb", "07_lr_range_test.ipynb",
    "08_slow_training.ipynb", "09_capstone.ipynb", "10_in_the_wild.ipynb",
    "11_more_causes.ipynb",
)

# COURSE.md §6: the questions a student must be able to answer from evidence.  Each
# must appear, as a heading or a prompt, in some notebook (matched case-insensitively,
# with "LR" written out as "learning rate").
SELF_CHECK_QUESTIONS = (
    "Why does a missing zero_grad not always explode at step 1?",
    "How do you tell a too-large learning rate from random labels when the loss will not go down?",
    "Which observations prove saturation rather than guess it?",
    "Why does changing one variable at a time give causal evidence?",
)

EXPERIMENT = re.compile(r"""fl\.experiment\(\s*["']([A-Za-z0-9_\-]+)["']""")
OBSERVED = re.compile(r"ws\.observe\(([^,]+),|fl\.reveal\((\w+),")  # name, or mystery
PREDICT = re.compile(r"""ws\.predict\(\s*([^,)]+)(.*)\)""")
WORKSHEET = 'fl.Worksheet("course.worksheet.json")'
FAULT_HEADING = re.compile(r"## Experiment (\d+) · \S")  # then the change, in words


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _sections(notebook: dict) -> list[list[dict]]:
    """Cells grouped under the markdown headings of level 1 and 2 that open them."""
    sections: list[list[dict]] = [[]]
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown" and re.match(r"#{1,2} ", _source(cell).lstrip()):
            sections.append([])
        sections[-1].append(cell)
    return [s for s in sections if s]


def _code(cells: list[dict]) -> list[str]:
    return [_source(c) for c in cells if c["cell_type"] == "code"]


def _normalise(text: str) -> str:
    text = re.sub(r"\blr\b", "learning rate", re.sub(r"[*_`#>]", " ", text.lower()))
    return re.sub(r"\s+", " ", text)


def _fault_sections() -> dict[str, list[tuple[str, list[dict]]]]:
    """fault name -> every (notebook, section) that runs `fl.experiment("<key>")`."""
    from failurelab.course.keys import fault_of

    found: dict[str, list[tuple[str, list[dict]]]] = {}
    for path in PATHS:
        for section in _sections(_read(path)):
            for source in _code(section):
                for key in EXPERIMENT.findall(source):
                    found.setdefault(fault_of(key) or key, []).append((path.name, section))
    return found


def test_the_course_plan_is_complete():
    assert tuple(p.name for p in PATHS) == COURSE


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_is_valid_nbformat_v4_with_a_python3_kernel(path):
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert notebook.nbformat == 4
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs_or_execution_counts(path):
    dirty = [i for i, cell in enumerate(_read(path)["cells"]) if cell["cell_type"] == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts; run " \
                      f"jupyter nbconvert --clear-output --inplace notebooks/*.ipynb"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_opens_with_a_title_and_the_worksheet_and_ends_with_its_table(path):
    cells = _read(path)["cells"]
    assert cells[0]["cell_type"] == "markdown" and _source(cells[0]).startswith("# ")
    code = _code(cells)
    assert WORKSHEET in code[0] or WORKSHEET in code[1], "set up ws in the first code cells"
    assert "ws.table()" in "\n".join(code[-3:]), "end with the worksheet's table"


def test_every_fault_is_taught_in_exactly_one_section_of_one_notebook():
    found = _fault_sections()
    missing = [name for name in fl.FAULTS if name not in found]
    repeated = {name: [nb for nb, _ in where] for name, where in found.items()
                if len(where) != 1}
    unknown = [name for name in found if name not in fl.FAULTS]
    assert not missing, f"faults without a notebook section: {missing}"
    assert not repeated, f"faults run by fl.experiment more than once: {repeated}"
    assert not unknown, f"fl.experiment of unknown faults: {unknown}"


@pytest.mark.parametrize("name", list(fl.FAULTS))
def test_fault_section_predicts_before_it_runs_then_observes_and_checks(name):
    where = _fault_sections().get(name)
    if not where:
        pytest.fail(f"{name} has no section")
    from failurelab.course.keys import KEYS

    notebook, section = where[0]
    code, key = _code(section), KEYS[name]
    # First cell (in order) that contains each call; predict must come before the run.
    steps = {"predict": f'ws.predict("{key}"', "run": f'fl.experiment("{key}"',
             "observe": f'ws.observe("{key}"', "check": ".check()",
             "explain": f'ws.explain("{key}"'}
    first = {}
    for step, needle in steps.items():
        hits = [i for i, source in enumerate(code) if needle in source]
        assert hits, f"{notebook}, section of {name}: no {needle} call"
        first[step] = hits[0]
    assert first["predict"] < first["run"] <= first["observe"] < first["explain"], \
        f"{notebook}, section of {name}: predict, then run, then observe, then explain"
    assert first["check"] >= first["run"]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_every_observed_experiment_has_an_explain_cell_after_it(path):
    """The course's worksheet is the student's own four columns: every experiment a
    notebook observes (or reveals) gets a cell to write them, once it is observed."""
    code = _code(_read(path)["cells"])
    observed = [(m.group(1) or f"{m.group(2)}.key", i) for i, source in enumerate(code)
                for m in OBSERVED.finditer(source)]
    for name, at in observed:
        later = [source for source in code[at + 1:] if f"ws.explain({name}," in source]
        assert later, f"{path.name}: {name} is observed but has no ws.explain cell after it"


@pytest.mark.parametrize("name", list(fl.FAULTS))
def test_fault_heading_describes_the_change_without_naming_any_fault(name):
    """The heading sits right above the prediction: a fault's name (or its words) there
    would answer the question the student is about to be asked."""
    notebook, section = _fault_sections()[name][0]
    heading = _source(section[0]).lstrip().splitlines()[0]
    assert FAULT_HEADING.match(heading), \
        f"{notebook}: {heading!r} should read '## Experiment N · <what was changed>'"
    words = _normalise(heading)
    named = [n for n in fl.FAULTS if n in heading or _normalise(n.replace("_", " ")) in words]
    assert not named, f"{notebook}: the heading {heading!r} names {named}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_experiments_are_numbered_from_one_in_each_notebook(path):
    numbers = [int(m.group(1)) for cell in _read(path)["cells"]
               if cell["cell_type"] == "markdown"
               and (m := FAULT_HEADING.match(_source(cell).lstrip()))]
    assert numbers == list(range(1, len(numbers) + 1))


@pytest.mark.parametrize("question", SELF_CHECK_QUESTIONS)
def test_self_check_question_is_asked_in_some_notebook(question):
    wanted = _normalise(question)
    for path in PATHS:
        for cell in _read(path)["cells"]:
            if cell["cell_type"] == "markdown" and wanted in _normalise(_source(cell)):
                return
    pytest.fail(f"no notebook asks: {question}")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_predictions_ship_empty_so_the_answers_are_the_students(path):
    """Every prediction cell ships as "no prediction", except the worked demo of 00."""
    for source in _code(_read(path)["cells"]):
        for name, rest in PREDICT.findall(source):
            if name.strip().strip("\"'").startswith("demo"):
                continue
            assert "shape=None" in rest and "cause=None" in rest, \
                f"{path.name}: ws.predict({name}...) ships a filled-in answer"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebooks_define_no_library_code(path):
    """All logic lives in the package; a notebook holds prose, calls and answers."""
    for source in _code(_read(path)["cells"]):
        assert not re.search(r"^\s*(def|class) ", source, re.MULTILINE), \
            f"{path.name} defines a function or class:\n{source}"
        assert "import *" not in source


KEY = re.compile(r"""ws\.(predict|observe)\(\s*["']([^"']+)["']""")
QUOTED = re.compile(r"""["']([A-Za-z0-9_+\-]+)["']""")


def _without_comments(source: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in source.splitlines())


def _answers_before_observing(path: Path) -> list[str]:
    """Each prediction's answer, where the code a student reads before the observation
    gives it: a fault not observed yet, or a shape name (comments, which list every
    shape as the choices, are left out)."""
    from failurelab.catalogue.faults import SHAPES
    from failurelab.course.keys import faults_of

    found, seen = [], set()
    sections = _sections(_read(path))
    code = [(n, _without_comments(s)) for n, section in enumerate(sections)
            for s in _code(section)]
    for i, (section, source) in enumerate(code):
        for call, key in KEY.findall(source):
            if call == "observe":
                seen.update(faults_of(key))
                continue
            ends = [j for j, (_, s) in enumerate(code) if f'ws.observe("{key}"' in s]
            window = code[:ends[0] if ends else len(code)]
            hidden = [f for f in faults_of(key) if f not in seen]
            for j, (where, text) in enumerate(window):
                words = set(re.findall(r"[A-Za-z0-9_]+", text)) | set(QUOTED.findall(text))
                found += [f"{key}: code cell {j} names the fault {f}" for f in hidden
                          if f in words]
                if where == section:
                    found += [f"{key}: code cell {j} names the shape {s!r}" for s in SHAPES
                              if s in QUOTED.findall(text)]
    return found


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_the_code_before_an_observation_names_neither_its_fault_nor_a_shape(path):
    """Issue 29, item 7: the heading hides the cause, so the code under it must too: a
    course experiment is named by its key ("01-2") until it is observed."""
    assert not _answers_before_observing(path)


def test_every_course_key_is_its_notebook_and_experiment_number():
    """One table (`failurelab.course.keys`) maps keys to faults; each key is where its
    fault is taught, "NN-k" for notebook NN, Experiment k."""
    from failurelab.course.keys import EXPERIMENTS

    for fault, where in _fault_sections().items():
        notebook, section = where[0]
        number = FAULT_HEADING.match(_source(section[0]).lstrip()).group(1)
        key = f"{notebook[:2]}-{number}"
        assert EXPERIMENTS.get(key) == fault, f"{notebook}: {fault} should be key {key}"
