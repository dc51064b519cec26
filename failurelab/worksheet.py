"""The student's worksheet: predictions written before running, observations read from
the telemetry, and the course's four columns (symptom, possible cause, distinguishing
experiment, fix) filled in from the catalogue.

Two rules shape this module.  A prediction is evidence only if it was written before
the result was seen, so once an experiment is observed its prediction is locked
(re-submitting the identical one is a no-op, so a notebook can be re-run top to bottom).
And what was observed comes from `diagnose` on the history alone, never from the
experiment's name or recipe: a mislabelled run is reported as what it shows.

The file is plain JSON (never pickle), replaced atomically after every change.  Each
change is a read-modify-write under an exclusive lock on `<path>.lock`, so two notebooks
sharing one worksheet keep each other's entries.  A file that is not a worksheet is
refused and never touched.  Tables, grading and the answer key are in `grading`.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import grading
from .catalogue import FAULTS
from .diagnosis import diagnose
from .faults import SHAPES
from .files import atomic_write, exclusive_lock
from .grading import HEALTHY, NO_PREDICTION, grade
from .runs import history_of

FORMAT = "failurelab-worksheet"  # the marker that tells a worksheet from any other JSON
VERSION = 1


class PredictionLocked(ValueError):
    """A prediction changed after its experiment was observed: that is back-filling."""


@dataclass(frozen=True)
class Prediction:
    """What the student expected, written down before running."""

    shape: str | None  # one of SHAPES, or None: no guess
    cause: str | None  # a fault name or "healthy", or None: no guess
    note: str
    at: str  # UTC ISO time it was written

    @property
    def empty(self) -> bool:
        return self.shape is None and self.cause is None

    def same_as(self, other: Prediction) -> bool:
        return (self.shape, self.cause, self.note) == (other.shape, other.cause, other.note)

    def __str__(self) -> str:
        if self.empty:
            return NO_PREDICTION
        text = f"shape {self.shape or '?'}, cause {self.cause or '?'}"
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True)
class Observation:
    """What the telemetry showed, as `diagnose` read it: small, plain, JSON-safe."""

    shape: str
    cause: str | None  # top fault; "healthy" if none fired on a healthy curve; else None
    evidence: str  # the top cause's evidence sentence (the shape's, if no cause fired)
    shape_evidence: str
    confidence: str
    lookalikes: tuple[str, ...]
    next_step: str | None  # what diagnose suggests trying next (the top cause's experiment)
    steps: int  # rows of history read
    at: str

    def __str__(self) -> str:
        return f"shape {self.shape}, cause {self.cause or '?'} ({self.confidence} confidence)"


@dataclass
class Entry:
    """One experiment of the worksheet."""

    prediction: Prediction | None = None
    earlier: list[Prediction] = field(default_factory=list)  # replaced ones, oldest first
    observation: Observation | None = None

    def to_json(self) -> dict:
        return {"prediction": _plain(self.prediction),
                "earlier_predictions": [asdict(p) for p in self.earlier],
                "observation": _plain(self.observation)}

    @classmethod
    def from_json(cls, raw: dict) -> Entry:
        obs = raw["observation"]
        if obs is not None:
            obs = Observation(**{**obs, "lookalikes": tuple(obs["lookalikes"])})
        prediction = raw["prediction"]
        return cls(Prediction(**prediction) if prediction is not None else None,
                   [Prediction(**p) for p in raw["earlier_predictions"]], obs)


class Worksheet:
    """A student's worksheet, persisted as JSON at `path` after every change."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a directory; give a file path such as "
                                    f"{self.path / 'me.worksheet.json'}")
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"cannot create worksheet {self.path}: its directory "
                                    f"{self.path.parent} does not exist")
        if self.path.exists():
            _load(self.path)  # refuse a foreign or corrupt file now, not at the first change
        else:
            self._change(lambda entries: None)

    def __repr__(self) -> str:
        return f"Worksheet({str(self.path)!r}, {len(self.names)} experiments)"

    @property
    def names(self) -> list[str]:
        """The experiments, in the order they were first written down."""
        return list(_load(self.path))

    def prediction(self, name: str) -> Prediction | None:
        return _load(self.path).get(name, Entry()).prediction

    def observation(self, name: str) -> Observation | None:
        return _load(self.path).get(name, Entry()).observation

    def predict(self, name: str, shape: str | None = None, cause: str | None = None,
                note: str = "") -> Prediction:
        """Write down what you expect, BEFORE running; both None records no prediction."""
        name, shape, cause = check_name(name), check_shape(shape), check_cause(cause)
        new = Prediction(shape, cause, str(note or ""), _now())

        def change(entries: dict[str, Entry]) -> Prediction:
            entry = entries.setdefault(name, Entry())
            old = entry.prediction
            if _unchanged(entry, new):
                return old or new  # re-running the notebook: nothing changes
            if entry.observation is not None:
                raise PredictionLocked(
                    f"{name!r} was observed at {entry.observation.at} (in {self.path}); "
                    f"its prediction ({old or NO_PREDICTION}) can no longer change to "
                    f"({new}). Predict before running: to predict again, use a new "
                    f"experiment name.")
            if old is not None:
                entry.earlier.append(old)
            entry.prediction = new
            return new
        return self._change(change)

    def observe(self, name: str, run) -> Observation:
        """Record what the telemetry of `run` (a Run or a history) shows."""
        name = check_name(name)
        observation = read_telemetry(run)

        def change(entries: dict[str, Entry]) -> None:
            entries.setdefault(name, Entry()).observation = observation
        self._change(change)
        return observation

    def entries(self) -> dict[str, Entry]:
        """Every experiment's entry, as read from the file now."""
        return _load(self.path)

    def table(self, lang: str = "en") -> pd.DataFrame:
        """One row per experiment: the four worksheet columns, predicted, observed, match."""
        return grading.table(self.entries(), lang)

    def to_markdown(self, path: str | os.PathLike | None = None, lang: str = "en") -> str:
        return grading.export(grading.markdown_table(self.table(lang)), path)

    def to_csv(self, path: str | os.PathLike | None = None, lang: str = "en") -> str:
        return grading.export(self.table(lang).to_csv(lineterminator="\n"), path)

    def grade(self) -> pd.DataFrame:
        """Per experiment: shape and cause right or wrong, then a total row."""
        return grade(self)

    def _change(self, change):
        """Read the file, apply `change` to its entries, write it back: all under the lock."""
        with exclusive_lock(self.path):
            entries = _load(self.path)
            before = _dump(entries)
            result = change(entries)
            if not self.path.exists() or _dump(entries) != before:
                atomic_write(self.path, _dump(entries))
        return result


def _unchanged(entry: Entry, new: Prediction) -> bool:
    """The same prediction again, or "no prediction" where none was ever made."""
    if entry.prediction is not None:
        return entry.prediction.same_as(new)
    return new.empty and entry.observation is not None


def read_telemetry(run) -> Observation:
    """Diagnose a Run's history or a bare history; nothing but the telemetry is read."""
    history = history_of(run, "observe")
    d = diagnose(history)
    cause = d.top or (HEALTHY if d.shape == "healthy" else None)
    evidence = d.causes[0][2] if d.causes else d.shape_evidence
    return Observation(d.shape, cause, evidence, d.shape_evidence, d.confidence,
                       tuple(d.lookalikes), d.experiment, len(history), _now())


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"an experiment name must be a non-empty string, got {name!r}")
    return name.strip()


def check_shape(shape: str | None) -> str | None:
    return _one_of(shape, SHAPES, "shape")


def check_cause(cause: str | None) -> str | None:
    return _one_of(cause, (HEALTHY, *FAULTS), "cause")


def _one_of(value, allowed, what):
    if value is None or value in allowed:
        return value
    close = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown {what} {value!r}.{hint} Known: {', '.join(allowed)} (or None)")


# --- the file ----------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _plain(record) -> dict | None:
    return None if record is None else asdict(record)


def _dump(entries: dict[str, Entry]) -> str:
    doc = {"format": FORMAT, "version": VERSION,
           "entries": {name: e.to_json() for name, e in entries.items()}}
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _load(path: Path) -> dict[str, Entry]:
    """The entries of the worksheet at `path` ({} if absent); ValueError if not one."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _foreign(path, f"it is not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _foreign(path, f"it has no \"format\": \"{FORMAT}\" marker")
    if doc.get("version") != VERSION:
        raise _foreign(path, f"its version is {doc.get('version')!r}; this failurelab "
                             f"reads version {VERSION}")
    if not isinstance(doc.get("entries"), dict):
        raise _foreign(path, "its \"entries\" is not an object")
    try:
        return {str(name): Entry.from_json(raw) for name, raw in doc["entries"].items()}
    except (TypeError, KeyError, AttributeError) as err:
        raise _foreign(path, f"an entry has the wrong structure ({err!r})") from None


def _foreign(path: Path, what: str) -> ValueError:
    return ValueError(f"{path} is not a failurelab worksheet: {what}. The file was left "
                      f"untouched; move it away or choose another path.")


