"""The student's worksheet: predictions written before running, observations read from
the telemetry, and the student's own explanation of each experiment, written after.

Three rules shape this module.  A prediction is evidence only if it was written before
the result was seen, so once an experiment is observed (or revealed) its prediction is
locked; re-submitting the identical one is a no-op, so a notebook can be re-run top to
bottom.  What was observed comes from `diagnose` on the history alone, never from the
experiment's name or recipe.  And every record is also appended to a hash chain
(`chain`), so an edit made by hand afterwards is evident to the instructor.

The file is plain JSON (never pickle), replaced atomically after every change.  Each
change is a read-modify-write under an exclusive lock on `<path>.lock`, so two notebooks
sharing one worksheet keep each other's entries.  A file that is not a worksheet is
refused and never touched; files of version 1 (before explanations and the chain) are
read as they are.  A relative path is taken inside $FAILURELAB_WORKSHEET_DIR when that
is set: the notebook tests point it at a fresh folder, so verification never reads or
writes a student's worksheet.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ..basics.files import atomic_write, check_output, exclusive_lock
from ..basics.recipes import diff
from ..basics.text import Text
from ..catalogue import FAULTS
from ..catalogue.diagnosis import diagnose
from ..catalogue.faults import SHAPES
from ..evidence.runs import history_of
from ..views.tables import export
from . import chain as hash_chain
from . import grading, keys
from .grading import HEALTHY, NO_PREDICTION
from .records import Entry, Explanation, Observation, Prediction, Sheet, Truth, dump, load

DIRECTORY_VARIABLE = "FAILURELAB_WORKSHEET_DIR"
# Set to "record" by the notebook tests (conftest.py): they run the notebooks as
# shipped, unanswered, and a blank prediction is then recorded as "no prediction".
BLANK_VARIABLE = "FAILURELAB_BLANK_PREDICTIONS"

__all__ = ["Entry", "Explanation", "NotObservedYet", "Observation", "Prediction",
           "PredictionBlank", "PredictionLocked", "Sheet", "Worksheet", "load", "resolve"]


# What a refusal tells the student, in $FAILURELAB_LANG.
REFUSALS = {
    "locked": Text("{name} was observed at {when} (in {path}); its prediction ({old}) can no "
                   "longer change to ({new}). Predict before running: to predict again, use "
                   "a new experiment name.",
                   "{name} 已于 {when} 被观察（在 {path} 中）；它的预测（{old}）不能再改成"
                   "（{new}）。请在运行之前预测：要重新预测，请使用一个新的实验名称。"),
    "blank": Text("{name}: your prediction is blank, so this cell stopped the notebook "
                  "before the run could show you the answer. Replace None with the shape and "
                  "cause you expect (or, with no guess at all, say so in note=...), then run "
                  "this cell again.",
                  "{name}：你的预测是空的，所以这个单元格在运行揭晓答案之前停下了笔记本。请把 "
                  "None 换成你预期的曲线形状和原因（如果确实毫无猜测，请在 note=... 中写明），"
                  "然后再运行这个单元格。"),
    "unobserved": Text("{name} has not been observed yet (in {path}): run it and "
                       "ws.observe({name}, run) first, then explain what you saw",
                       "{name} 还没有被观察（在 {path} 中）：先运行它并调用 "
                       "ws.observe({name}, run)，再解释你看到了什么"),
}

class PredictionLocked(ValueError):
    """A prediction changed after its experiment was observed: that is back-filling."""


class PredictionBlank(ValueError):
    """A prediction cell run as shipped: stopping here keeps Run All from recording "no
    prediction" for a student who has not answered yet."""


class NotObservedYet(ValueError):
    """An explanation before the observation: explain what you saw, after seeing it."""


def resolve(path: str | os.PathLike) -> Path:
    """`path`, inside $FAILURELAB_WORKSHEET_DIR when that is set and `path` is relative."""
    path, directory = Path(path), os.environ.get(DIRECTORY_VARIABLE)
    return Path(directory) / path if directory and not path.is_absolute() else path


class Worksheet:
    """A student's worksheet, persisted as JSON at `path` after every change."""

    def __init__(self, path: str | os.PathLike):
        self.path = resolve(path)
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a directory; give a file path such as "
                                    f"{self.path / 'me.worksheet.json'}")
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"cannot create worksheet {self.path}: its directory "
                                    f"{self.path.parent} does not exist")
        if self.path.exists():
            load(self.path)  # refuse a foreign or corrupt file now, not at the first change
        else:
            self._change(lambda sheet: None)

    def __repr__(self) -> str:
        return f"Worksheet({str(self.path)!r}, {len(self.names)} experiments)"

    @property
    def names(self) -> list[str]:
        """The experiments, in the order they were first written down."""
        return list(self.entries())

    def prediction(self, name: str) -> Prediction | None:
        return self.entries().get(name, Entry()).prediction

    def observation(self, name: str) -> Observation | None:
        return self.entries().get(name, Entry()).observation

    def explanation(self, name: str) -> Explanation | None:
        return self.entries().get(name, Entry()).explanation

    def predict(self, name: str, shape: str | None = None, cause: str | None = None,
                note: str = "") -> Prediction:
        """Write down what you expect, BEFORE running.  Left blank (shape, cause and note
        all empty) it stops with PredictionBlank, so a Run All cannot forfeit it; a note
        alone ("no idea") records no prediction on purpose."""
        name, shape, cause = check_name(name), check_shape(shape), check_cause(cause)
        guess = Prediction(shape, cause, str(note or "").strip(), "")
        if guess.empty and not guess.note and os.environ.get(BLANK_VARIABLE) != "record" \
                and not _unchanged(self.entries().get(name, Entry()), guess):
            raise PredictionBlank(REFUSALS["blank"].say(name=repr(name)))  # a short trace

        def change(sheet: Sheet) -> Prediction:
            entry = sheet.entries.setdefault(name, Entry())
            old = entry.prediction
            if _unchanged(entry, guess):
                return old or replace(guess, at=_now())  # re-running: nothing changes
            if entry.locked:
                when = entry.observation.at if entry.observation else entry.truth.at
                raise PredictionLocked(REFUSALS["locked"].say(
                    name=repr(name), when=when, path=self.path, old=old or NO_PREDICTION,
                    new=guess))
            if old is not None:
                entry.earlier.append(old)
            entry.prediction = replace(guess, at=_now())
            sheet.write("predict", name, entry.prediction)
            return entry.prediction
        return self._change(change)

    def observe(self, name: str, run) -> Observation:
        """Record what the telemetry of `run` (a Run or a history) shows; its evidence
        sentences are written in the session's language ($FAILURELAB_LANG)."""
        name = check_name(name)
        telemetry = read_telemetry(run)

        def change(sheet: Sheet) -> Observation:
            entry = sheet.entries.setdefault(name, Entry())
            seen = replace(telemetry, unverified=binding(name, run, entry.prediction))
            if entry.observation is not None and entry.observation.same_as(seen):
                return entry.observation  # the same run read again: nothing changes
            entry.observation = replace(seen, at=_now())
            sheet.write("observe", name, entry.observation)
            return entry.observation
        return self._change(change)

    def explain(self, name: str, symptom: str = "", cause: str = "", experiment: str = "",
                fix: str = "", invariant: str = "", minutes: float | None = None
                ) -> Explanation | None:
        """Your own four columns for `name`, the invariant you would check first and the
        minutes it took, AFTER observing; writing it again keeps the earlier version.
        All empty records nothing (returns None)."""
        name = check_name(name)
        texts = [_text(v, part) for v, part in zip(
            (symptom, cause, experiment, fix, invariant),
            ("symptom", "cause", "experiment", "fix", "invariant"), strict=False)]
        draft = Explanation(*texts, check_minutes(minutes), "")
        if draft.empty:
            return None

        def change(sheet: Sheet) -> Explanation:
            entry = sheet.entries.get(name)
            if entry is None or not entry.locked:
                raise NotObservedYet(REFUSALS["unobserved"].say(name=repr(name),
                                                               path=self.path))
            if entry.explanation is not None and entry.explanation.same_as(draft):
                return entry.explanation
            if entry.explanation is not None:
                entry.earlier_explanations.append(entry.explanation)
            entry.explanation = replace(draft, at=_now())
            sheet.write("explain", name, entry.explanation)
            return entry.explanation
        return self._change(change)

    def record_truth(self, name: str, fault: str) -> Truth:
        """What `name` really was (a mystery's reveal): grading follows it from now on,
        and the prediction is locked."""
        name, fault = check_name(name), check_cause(fault)

        def change(sheet: Sheet) -> Truth:
            entry = sheet.entries.setdefault(name, Entry())
            if entry.truth is None or entry.truth.fault != fault:
                entry.truth = Truth(fault, _now())
                sheet.write("reveal", name, entry.truth)
            return entry.truth
        return self._change(change)

    def entries(self) -> dict[str, Entry]:
        """Every experiment's entry, as read from the file now."""
        return load(self.path).entries

    def audit(self) -> hash_chain.Audit:
        """What looks edited by hand since it was written (see `failurelab.course.chain`)."""
        return load(self.path).audit()

    def table(self, lang: str | None = None) -> pd.DataFrame:
        """One row per experiment: your prediction, what was observed, whether they match,
        and your own four columns (the answer key is in `explanations`)."""
        sheet = load(self.path)
        return grading.table(sheet.entries, lang, sheet.audit().issues)

    def explanations(self, lang: str | None = None) -> pd.DataFrame:
        """Your four columns, invariant and minutes, beside the answer key's."""
        return grading.explanations(self.entries(), lang)

    def to_markdown(self, path: str | os.PathLike | None = None, lang: str | None = None) -> str:
        """The worksheet table, then your explanations beside the answer key."""
        return export(grading.markdown_document(self.entries(), lang),
                      self._export_path(path, (".md", ".markdown")))

    def to_csv(self, path: str | os.PathLike | None = None, lang: str | None = None) -> str:
        """One row per experiment: the worksheet table and your own columns."""
        return export(grading.csv_table(self.entries(), lang), self._export_path(path, (".csv",)))

    def to_html(self, path: str | os.PathLike | None = None, lang: str | None = None) -> str:
        """A page with the worksheet table and your explanations, text escaped."""
        return export(grading.html_document(self.entries(), lang, title=self.path.name),
                      self._export_path(path, (".html", ".htm")))

    def _export_path(self, path, suffixes) -> Path | None:
        """Where an export may go: never over this worksheet or any other one, and only
        to a name of its format (a CSV named .json would pass for a broken worksheet)."""
        if path is None:
            return None
        return check_output(path, suffixes, inputs=(self.path,), what="worksheet export")

    def grade(self, lang: str | None = None) -> pd.DataFrame:
        """Per experiment: shape and cause right or wrong, then a total row.  Entries that
        look edited by hand, or whose run is not verified, are shown and not scored."""
        sheet = load(self.path)
        return grading.grade(sheet.entries, lang, sheet.audit().issues)

    def _change(self, change):
        """Read the file, apply `change` to its sheet, write it back: all under the lock."""
        with exclusive_lock(self.path):
            sheet = load(self.path)
            before = len(sheet.chain)
            if sheet.started is None:  # a new file, or one from before the chain
                sheet.start(_now())
            result = change(sheet)
            if not self.path.exists() or len(sheet.chain) != before:
                atomic_write(self.path, dump(sheet))
        return result


def _unchanged(entry: Entry, new: Prediction) -> bool:
    """The same prediction again, or "no prediction" where none was ever made."""
    if entry.prediction is not None:
        return entry.prediction.same_as(new)
    return new.empty and entry.locked


def read_telemetry(run) -> Observation:
    """Diagnose a Run's history or a bare history; nothing but the telemetry is read."""
    history = history_of(run, "observe")
    d = diagnose(history)
    cause = d.top or (HEALTHY if d.shape == "healthy" else None)
    evidence = d.causes[0][2] if d.causes else d.shape_evidence
    return Observation(d.shape, cause, evidence, d.shape_evidence, d.confidence,
                       tuple(d.lookalikes), d.experiment, len(history), _now(),
                       fingerprint(history), str(getattr(run, "trained_at", "") or ""))


# Why a run is not evidence for the experiment it is observed under, in $FAILURELAB_LANG.
UNBOUND = {
    "bare": Text("{name} is a course experiment, and a history alone does not say which "
                 "recipe it came from: observe the Run itself",
                 "{name} 是课程中的实验，仅凭历史记录无法知道它来自哪个配方：请观察 Run 本身"),
    "recipe": Text("this run is not experiment {name}: its recipe differs in {fields}",
                   "这次运行不是实验 {name}：它的配方在 {fields} 上不同"),
    "untimed": Text("the run carries no training time, so it cannot be shown to come after "
                    "the prediction", "这次运行没有记录训练时间，无法证明它在预测之后"),
    "early": Text("the run was trained at {trained}, before the prediction written at "
                  "{predicted}", "这次运行训练于 {trained}，早于写下预测的 {predicted}"),
}


def binding(name: str, run, prediction: Prediction | None) -> str:
    """"" when `run` is evidence for experiment `name`, else why not: a course key (or a
    fault name) must be observed on its own recipe, on any seed, trained after its
    prediction.  A name that stands for no recipe binds nothing."""
    wanted = keys.recipe_of(name)
    if wanted is None:
        return ""
    recipe = getattr(run, "recipe", None)
    if recipe is None:
        return UNBOUND["bare"].say(name=name)
    if recipe != wanted:
        return UNBOUND["recipe"].say(name=name, fields=", ".join(diff(wanted, recipe)))
    if prediction is None or prediction.empty:
        return ""  # nothing to score, so nothing to date
    trained = str(getattr(run, "trained_at", "") or "")
    if not trained:
        return UNBOUND["untimed"].say()
    if trained < prediction.at:
        return UNBOUND["early"].say(trained=trained, predicted=prediction.at)
    return ""


def fingerprint(history: pd.DataFrame) -> str:
    """The loss trajectory's digest, as `Run.fingerprint`: the same run, the same digest."""
    losses = history["loss"].to_numpy(dtype=np.float64)
    return hashlib.sha256(losses.tobytes()).hexdigest()[:16]


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"an experiment name must be a non-empty string, got {name!r}")
    return name.strip()


def check_shape(shape: str | None) -> str | None:
    return _one_of(shape, SHAPES, "shape")


def check_cause(cause: str | None) -> str | None:
    return _one_of(cause, (HEALTHY, *FAULTS), "cause")


MAX_MINUTES = 24 * 60  # the time one experiment took: more than a day is a typo


def check_minutes(minutes) -> float | None:
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) \
            or not math.isfinite(minutes) or not 0 < minutes <= MAX_MINUTES:
        raise ValueError(f"minutes must be the minutes this experiment took, more than 0 "
                         f"and at most {MAX_MINUTES} (a day), got {minutes!r}")
    return float(minutes)


def _text(value, part: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{part} must be text in your own words, got {type(value).__name__}")
    return value.strip()


def _one_of(value, allowed, what):
    if value is None or value in allowed:
        return value
    close = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown {what} {value!r}.{hint} Known: {', '.join(allowed)} (or None)")


# --- the file ----------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
