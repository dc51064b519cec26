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
refused and never touched.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .catalogue import FAULTS
from .diagnosis import diagnose
from .faults import PHENOMENA, SHAPES

try:
    import fcntl
except ImportError:  # no flock (Windows): each write is still atomic, just not serialised
    fcntl = None

FORMAT = "failurelab-worksheet"  # the marker that tells a worksheet from any other JSON
VERSION = 1
HEALTHY = "healthy"  # the cause of a run on which no fault signature fired
NO_PREDICTION = "no prediction"
NOT_OBSERVED = "—"

HEADINGS = {
    "en": {"symptom": "symptom", "cause": "possible cause",
           "experiment": "distinguishing experiment", "fix": "fix", "predicted": "predicted",
           "observed": "observed", "match": "match", "name": "experiment", "fault": "fault",
           "shape": "shape", "phenomenon": "phenomenon"},
    "zh": {"symptom": "现象", "cause": "可能原因", "experiment": "区分实验", "fix": "修复动作",
           "predicted": "预测", "observed": "观察", "match": "是否一致", "name": "实验",
           "fault": "故障", "shape": "曲线形状", "phenomenon": "现场现象"},
}


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

    def table(self, lang: str = "en") -> pd.DataFrame:
        """One row per experiment: the four worksheet columns, predicted, observed, match."""
        heads, entries = headings(lang), _load(self.path)
        keys = ("symptom", "cause", "experiment", "fix", "predicted", "observed", "match")
        frame = pd.DataFrame([_row(e) for e in entries.values()], index=list(entries),
                             columns=list(keys), dtype=object)
        frame.columns = [heads[k] for k in keys]
        frame.index.name = heads["name"]
        return frame

    def to_markdown(self, path: str | os.PathLike | None = None, lang: str = "en") -> str:
        return _export(markdown_table(self.table(lang)), path)

    def to_csv(self, path: str | os.PathLike | None = None, lang: str = "en") -> str:
        return _export(self.table(lang).to_csv(lineterminator="\n"), path)

    def grade(self) -> pd.DataFrame:
        """Per experiment: shape and cause right or wrong, then a total row."""
        return grade(self)

    def _change(self, change):
        """Read the file, apply `change` to its entries, write it back: all under the lock."""
        with _locked(self.path):
            entries = _load(self.path)
            before = _dump(entries)
            result = change(entries)
            if not self.path.exists() or _dump(entries) != before:
                _atomic_write(self.path, _dump(entries))
        return result


def _unchanged(entry: Entry, new: Prediction) -> bool:
    """The same prediction again, or "no prediction" where none was ever made."""
    if entry.prediction is not None:
        return entry.prediction.same_as(new)
    return new.empty and entry.observation is not None


def grade(ws: Worksheet) -> pd.DataFrame:
    """Shape correct? Cause correct (predicted == diagnosed top cause)? And a total row.

    Missing predictions and observations are reported as such and counted in `out_of`
    only where both sides exist."""
    rows = {name: _grade_row(e) for name, e in _load(ws.path).items()}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(_GRADE_COLUMNS),
                                   dtype=object)
    total = _total_row(list(rows.values()))
    frame = pd.concat([frame, pd.DataFrame([total], index=["total"], dtype=object)])
    frame = frame.astype({"points": int, "out_of": int})
    frame.index.name = "experiment"
    return frame


def answer_key(lang: str = "en") -> pd.DataFrame:
    """The whole catalogue as a worksheet, for instructors: one row per fault."""
    heads = headings(lang)
    rows = {name: {heads["symptom"]: f.symptom, heads["cause"]: _cause_text(f),
                   heads["experiment"]: f.experiment, heads["fix"]: f.fix,
                   heads["shape"]: f.shape,
                   heads["phenomenon"]: f"{f.phenomenon}: {PHENOMENA[f.phenomenon]}"
                   if f.phenomenon else ""} for name, f in FAULTS.items()}
    frame = pd.DataFrame.from_dict(rows, orient="index", dtype=object)
    frame.index.name = heads["fault"]
    return frame


def headings(lang: str) -> dict[str, str]:
    if lang not in HEADINGS:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(HEADINGS)}")
    return HEADINGS[lang]


def read_telemetry(run) -> Observation:
    """Diagnose a Run's history or a bare history; nothing but the telemetry is read."""
    history = getattr(run, "history", run)
    if not isinstance(history, pd.DataFrame):
        raise TypeError(f"observe needs a Run or a history DataFrame, got {type(run).__name__}")
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


# --- table cells and grading -----------------------------------------------------------

def _row(entry: Entry) -> tuple[str, ...]:
    obs, predicted = entry.observation, str(entry.prediction or NO_PREDICTION)
    if obs is None:
        return "", "", "", "", predicted, "not observed", NOT_OBSERVED
    symptom = f"{obs.shape}: {obs.shape_evidence}"
    if obs.evidence != obs.shape_evidence:
        symptom += f"; {obs.evidence}"
    fault = FAULTS.get(obs.cause)
    if fault is not None:
        cause, experiment, fix = _cause_text(fault), fault.experiment, fault.fix
    elif obs.cause == HEALTHY:
        cause, experiment, fix = "none: no fault signature fired", "", "nothing to fix"
    else:
        cause, fix = "unexplained: no catalogue signature fired", ""
        experiment = obs.next_step or ""
    if obs.lookalikes:
        cause += f" (look-alikes: {', '.join(obs.lookalikes)})"
    return symptom, cause, experiment, fix, predicted, str(obs), _match(entry)


def _cause_text(fault) -> str:
    return f"{fault.title}: {fault.cause}"


def _match(entry: Entry) -> str:
    """"shape ✓, cause ✗"; "?" where the telemetry named no cause to compare with."""
    if entry.observation is None:
        return NOT_OBSERVED
    parts = [f"{what} {'✓' if ok else '✗' if ok is False else '?'}"
             for what, (guess, ok) in _verdicts(entry).items() if guess is not None]
    return ", ".join(parts) or NO_PREDICTION


def _verdicts(entry: Entry) -> dict[str, tuple[str | None, bool | None]]:
    """(guess, right?) per part; right? is None when either side is missing."""
    p, o = entry.prediction, entry.observation
    out = {}
    for part in ("shape", "cause"):
        guess = getattr(p, part) if p else None
        seen = getattr(o, part) if o else None
        out[part] = guess, None if guess is None or seen is None else guess == seen
    return out


_GRADE_COLUMNS = ("predicted_shape", "observed_shape", "shape_correct", "predicted_cause",
                  "observed_cause", "cause_correct", "points", "out_of", "status")


def _grade_row(entry: Entry) -> dict:
    v, o = _verdicts(entry), entry.observation
    oks = [v["shape"][1], v["cause"][1]]
    if o is None:
        status = "not observed"
    elif entry.prediction is None or entry.prediction.empty:
        status = NO_PREDICTION
    else:
        status = "graded"
    return dict(predicted_shape=v["shape"][0], observed_shape=o.shape if o else None,
                shape_correct=oks[0], predicted_cause=v["cause"][0],
                observed_cause=o.cause if o else None, cause_correct=oks[1],
                points=sum(ok is True for ok in oks),
                out_of=sum(ok is not None for ok in oks), status=status)


def _total_row(rows: list[dict]) -> dict:
    points, out_of = sum(r["points"] for r in rows), sum(r["out_of"] for r in rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in (NO_PREDICTION, "not observed")}
    score = f"score {points}/{out_of}" + (f" ({points / out_of:.0%})" if out_of else "")
    status = "; ".join([score] + [f"{n} {s}" for s, n in counts.items() if n])
    return dict(predicted_shape="", observed_shape="",
                shape_correct=sum(r["shape_correct"] is True for r in rows),
                predicted_cause="", observed_cause="",
                cause_correct=sum(r["cause_correct"] is True for r in rows),
                points=points, out_of=out_of, status=status)


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no `tabulate` dependency)."""
    header = [frame.index.name or "", *map(str, frame.columns)]
    body = [[str(i), *row] for i, row in zip(frame.index, frame.itertuples(index=False))]
    lines = [header, ["---"] * len(header), *body]
    return "".join("| " + " | ".join(_md_cell(c) for c in line) + " |\n" for line in lines)


def _md_cell(value) -> str:
    if value is None or isinstance(value, float) and math.isnan(value):
        return ""
    return str(value).replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _export(text: str, path: str | os.PathLike | None) -> str:
    if path is not None:
        with open(path, "w", encoding="utf-8", newline="") as out:
            out.write(text)
    return text


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


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on `<path>.lock`, shared by every process using this worksheet."""
    if fcntl is None:
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _atomic_write(path: Path, text: str) -> None:
    """Write a temporary file beside `path`, fsync it, then rename it over `path`:
    a crash at any point leaves either the old file or the new one, never half."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every platform allows it)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
