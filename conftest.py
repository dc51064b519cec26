"""Verification never reads or writes a student's worksheet.

The notebooks open `fl.Worksheet("course.worksheet.json")`, a path relative to the
notebook's folder, where a student's own worksheet lives.  Before each test item (a
notebook under nbmake, or a test) this points $FAILURELAB_WORKSHEET_DIR at a fresh,
empty folder of its own, which `Worksheet` resolves relative paths in; nbmake starts
each notebook's kernel during the item's call, so the kernel inherits that item's
folder.  Notebooks running side by side (`-n 2`) therefore never share a file, and a
rerun never meets the previous run's observations.  The folder is removed afterwards,
except when the item failed: then its path is in the report, to read the worksheet.

The Chinese edition (`notebooks/zh/`) has the English code cells, so its language
cannot come from them: it comes from the folder its kernel starts in (nbmake, like
Jupyter, runs a notebook in its own folder; see `failurelab.basics.text.language`), so
nothing here sets it: the notebooks run exactly as a student's do.

The notebooks ship with blank predictions, and a blank prediction stops a notebook
(`PredictionBlank`) so that a student's Run All cannot record "no prediction" for them.
Verification runs them as shipped, unanswered: for notebook items this sets
$FAILURELAB_BLANK_PREDICTIONS to "record", and each blank is recorded as "no prediction".

Notebook items also share one folder of finished runs for the session
($FAILURELAB_RUN_CACHE, see `failurelab.lab.runcache`): the Chinese edition reads the runs
its English edition computed instead of training them again.  Runs are bitwise
reproducible, so this changes no output; unit tests never get the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

VARIABLE = "FAILURELAB_WORKSHEET_DIR"  # failurelab.course.worksheet.DIRECTORY_VARIABLE
_SAVED = pytest.StashKey[tuple[str | None, str]]()
_FAILED = pytest.StashKey[bool]()
RUNS = "FAILURELAB_RUN_CACHE"  # failurelab.lab.runcache.VARIABLE
_RUNS = pytest.StashKey[str]()  # on the config: the session's folder of runs
_PREVIOUS_RUNS = pytest.StashKey[str | None]()  # on an item: the variable before it
_RUN_FOLDER = "failurelab_runs"  # the key that hands the folder to xdist workers
BLANK = "FAILURELAB_BLANK_PREDICTIONS"  # failurelab.course.worksheet.BLANK_VARIABLE
_PREVIOUS_BLANK = pytest.StashKey[str | None]()


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is not None:  # an xdist worker: the controller made the folder
        config.stash[_RUNS] = worker[_RUN_FOLDER]
    else:
        config.stash[_RUNS] = tempfile.mkdtemp(prefix="failurelab-runs-")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker shares the controller's folder of runs."""
    node.workerinput[_RUN_FOLDER] = node.config.stash[_RUNS]


@pytest.fixture(scope="session")
def session_runs_folder(pytestconfig: pytest.Config) -> str:
    """The session's folder of runs, for `tests/runs_cache.py`: a test's plain run of a
    recipe (nothing patched) and the notebooks' runs of the same recipe are one run."""
    return pytestconfig.stash[_RUNS]


def pytest_unconfigure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is None and _RUNS in config.stash:
        shutil.rmtree(config.stash[_RUNS], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    folder = tempfile.mkdtemp(prefix="failurelab-verify-")
    item.stash[_SAVED] = (os.environ.get(VARIABLE), folder)
    os.environ[VARIABLE] = folder
    if Path(item.path).suffix == ".ipynb":
        item.stash[_PREVIOUS_RUNS] = os.environ.get(RUNS)
        os.environ[RUNS] = item.config.stash[_RUNS]
        item.stash[_PREVIOUS_BLANK] = os.environ.get(BLANK)
        os.environ[BLANK] = "record"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _SAVED in item.stash:
        item.stash[_FAILED] = True
        report.sections.append(("worksheet", f"kept for reading: {item.stash[_SAVED][1]}"))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    previous, folder = item.stash.get(_SAVED, (None, ""))
    if _PREVIOUS_RUNS in item.stash:
        _restore(RUNS, item.stash[_PREVIOUS_RUNS])
    if _PREVIOUS_BLANK in item.stash:
        _restore(BLANK, item.stash[_PREVIOUS_BLANK])
    if previous is None:
        os.environ.pop(VARIABLE, None)
    else:
        os.environ[VARIABLE] = previous
    if folder and not item.stash.get(_FAILED, False):
        shutil.rmtree(folder, ignore_errors=True)


def _restore(variable: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = value
