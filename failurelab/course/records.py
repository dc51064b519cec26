"""What a worksheet file holds: small, frozen, JSON-safe records, and the file itself.

A prediction is written before running, an observation is what the telemetry showed,
an explanation is the student's own four columns written after observing, and a truth
is what a mystery really was, written by its reveal.  Every record carries the UTC time
it was written; the file keeps them plain (`asdict`), so any JSON reader can open it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..basics.files import WORKSHEET_FORMAT as FORMAT  # tells a worksheet from other JSON
from ..basics.text import Text
from . import chain as hash_chain

VERSION = 2  # 2: explanations, reveals and the chain
READS = (1, 2)


NO_PREDICTION = "no prediction"
# How a prediction and an observation read (a table's cells, `str(record)`).
TEXTS = {
    NO_PREDICTION: Text(NO_PREDICTION, "未作预测"),
    "prediction": Text("shape {shape}, cause {cause}", "曲线形状 {shape}，原因 {cause}"),
    "observation": Text("shape {shape}, cause {cause} ({confidence} confidence)",
                        "曲线形状 {shape}，原因 {cause}（置信度：{confidence}）"),
    "unverified": Text("not scored: {why}", "不计分：{why}"),
}


def prediction_text(p, lang: str | None = None) -> str:
    """"shape plateau, cause huge_lr (note)", in `lang`."""
    if p is None or p.empty:
        text = TEXTS[NO_PREDICTION].say(lang)
        return f"{text} ({p.note})" if p is not None and p.note else text
    text = TEXTS["prediction"].say(lang, shape=p.shape or "?", cause=p.cause or "?")
    return f"{text} ({p.note})" if p.note else text


def unverified_text(o, lang: str | None = None) -> str:
    """"not scored: ..." for an observation whose run is not evidence for its name."""
    return TEXTS["unverified"].say(lang, why=o.unverified)


def observation_text(o, lang: str | None = None) -> str:
    """"shape plateau, cause huge_lr (high confidence)", in `lang`."""
    from ..catalogue.diagnosis import CONFIDENCE  # the diagnosis' words for its confidence levels

    level = CONFIDENCE[o.confidence].say(lang) if o.confidence in CONFIDENCE else o.confidence
    return TEXTS["observation"].say(lang, shape=o.shape, cause=o.cause or "?", confidence=level)


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
        return prediction_text(self)  # in $FAILURELAB_LANG (English by default)

    def __repr__(self) -> str:  # a notebook cell's value: what was saved, and when
        return f"saved at {self.at}: {self}"


@dataclass(frozen=True)
class Observation:
    """What the telemetry showed, as `diagnose` read it."""

    shape: str
    cause: str | None  # top fault; "healthy" if none fired on a healthy curve; else None
    evidence: str  # the top cause's evidence sentence (the shape's, if no cause fired)
    shape_evidence: str
    confidence: str
    lookalikes: tuple[str, ...]
    next_step: str | None  # what diagnose suggests trying next (the top cause's experiment)
    steps: int  # rows of history read
    at: str
    fingerprint: str = ""  # the observed run's loss digest (as Run.fingerprint); "" in old files
    trained_at: str = ""  # when the observed run began training; "" for a bare history
    # Why this run is not evidence for the experiment it was recorded under ("": it is,
    # or the name binds no recipe): another recipe, or trained before the prediction.
    unverified: str = ""

    def same_as(self, other: Observation) -> bool:
        """The same reading of the same run, whenever it was taken."""
        return replace(self, at="") == replace(other, at="")

    def __str__(self) -> str:
        text = observation_text(self)  # in $FAILURELAB_LANG (English by default)
        return f"{text}\n{unverified_text(self)}" if self.unverified else text


# Fields added after records were first chained: written only when set, so a record
# from before them has the same JSON, and the same digest in the chain, as it had.
LATER_FIELDS = {"trained_at": "", "unverified": ""}


def plain(record) -> dict | None:
    """A record as JSON: `asdict`, less the later fields still at their default."""
    if record is None:
        return None
    return {k: v for k, v in asdict(record).items()
            if not (k in LATER_FIELDS and v == LATER_FIELDS[k])}


EXPLANATION_PARTS = ("symptom", "cause", "experiment", "fix", "invariant")


@dataclass(frozen=True)
class Explanation:
    """The student's own four columns, the invariant they would check first, and the
    minutes it took: written in their words, after observing."""

    symptom: str
    cause: str
    experiment: str
    fix: str
    invariant: str
    minutes: float | None
    at: str

    @property
    def empty(self) -> bool:
        return not any(getattr(self, p) for p in EXPLANATION_PARTS) and self.minutes is None

    def same_as(self, other: Explanation) -> bool:
        return replace(self, at="") == replace(other, at="")

    def __repr__(self) -> str:  # a notebook cell's value: what was saved, and when
        parts = [p for p in EXPLANATION_PARTS if getattr(self, p)]
        minutes = "" if self.minutes is None else f", {self.minutes:g} min"
        return f"saved at {self.at}: your {', '.join(parts)}{minutes}"


@dataclass(frozen=True)
class Truth:
    """What a mystery really was, recorded by `reveal`: its grade follows this."""

    fault: str
    at: str


@dataclass
class Entry:
    """One experiment of the worksheet."""

    prediction: Prediction | None = None
    earlier: list[Prediction] = field(default_factory=list)  # replaced ones, oldest first
    observation: Observation | None = None
    explanation: Explanation | None = None
    earlier_explanations: list[Explanation] = field(default_factory=list)
    truth: Truth | None = None

    @property
    def locked(self) -> bool:
        """Observed or revealed: the prediction can no longer change."""
        return self.observation is not None or self.truth is not None

    def records(self) -> list[tuple[str, dict]]:
        """(chain kind, record as JSON) for every record, the replaced ones included."""
        kinds = [*(("predict", p) for p in self.earlier), ("predict", self.prediction),
                 ("observe", self.observation),
                 *(("explain", e) for e in self.earlier_explanations),
                 ("explain", self.explanation), ("reveal", self.truth)]
        return [(kind, plain(r)) for kind, r in kinds if r is not None]

    def to_json(self) -> dict:
        return {"prediction": _plain(self.prediction),
                "earlier_predictions": [asdict(p) for p in self.earlier],
                "observation": _plain(self.observation),
                "explanation": _plain(self.explanation),
                "earlier_explanations": [asdict(e) for e in self.earlier_explanations],
                "truth": _plain(self.truth)}

    @classmethod
    def from_json(cls, raw: dict) -> Entry:
        """Read an entry; the keys added after version 1 may be absent."""
        obs = raw["observation"]
        if obs is not None:
            obs = Observation(**{**obs, "lookalikes": tuple(obs["lookalikes"])})
        return cls(_record(Prediction, raw["prediction"]),
                   [Prediction(**p) for p in raw["earlier_predictions"]], obs,
                   _record(Explanation, raw.get("explanation")),
                   [Explanation(**e) for e in raw.get("earlier_explanations", [])],
                   _record(Truth, raw.get("truth")))


@dataclass
class Sheet:
    """A worksheet file's content: the entries and the chain that vouches for them."""

    entries: dict[str, Entry] = field(default_factory=dict)
    chain: list[dict] = field(default_factory=list)
    started: str | None = None  # when the file began keeping a chain; None: it never did

    def write(self, kind: str, name: str, record) -> None:
        """Append record's event to the chain (the caller has put it in the entry)."""
        hash_chain.append(self.chain, kind, name, plain(record))

    def start(self, now: str) -> None:
        """Begin the chain; an older file's records are carried in as they stand."""
        self.started = now
        for name, entry in self.entries.items():
            for _, record in entry.records():
                hash_chain.carry(self.chain, name, record)

    def audit(self) -> hash_chain.Audit:
        return hash_chain.audit({n: e.records() for n, e in self.entries.items()}, self.chain,
                           self.started)


# --- the file ----------------------------------------------------------------------------

def dump(sheet: Sheet) -> str:
    doc = {"format": FORMAT, "version": VERSION,
           "entries": {name: e.to_json() for name, e in sheet.entries.items()},
           "chain_started": sheet.started, "chain": sheet.chain}
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def load(path: str | os.PathLike) -> Sheet:
    """The worksheet at `path` (empty if absent); ValueError if the file is not one."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Sheet()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _foreign(path, f"it is not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _foreign(path, f"it has no \"format\": \"{FORMAT}\" marker")
    if doc.get("version") not in READS:
        raise _foreign(path, f"its version is {doc.get('version')!r}; this failurelab "
                             f"reads versions {', '.join(map(str, READS))}")
    if not isinstance(doc.get("entries"), dict) or not isinstance(doc.get("chain", []), list):
        raise _foreign(path, "its \"entries\" or \"chain\" has the wrong type")
    try:
        entries = {str(name): Entry.from_json(raw) for name, raw in doc["entries"].items()}
    except (TypeError, KeyError, AttributeError) as err:
        raise _foreign(path, f"an entry has the wrong structure ({err!r})") from None
    started = doc.get("chain_started")
    return Sheet(entries, list(doc.get("chain", [])), started if isinstance(started, str)
                 else None)


class NotAWorksheet(ValueError):
    """A file that is not a worksheet; `reason` says why, for a reader other than its
    owner (a gradebook lists it as skipped)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path} is not a failurelab worksheet: {reason}. The file was left "
                         f"untouched; move it away or choose another path.")
        self.reason = reason


def _foreign(path: Path, what: str) -> NotAWorksheet:
    return NotAWorksheet(path, what)


def _record(kind, raw: dict | None):
    return None if raw is None else kind(**raw)


def _plain(record) -> dict | None:
    return plain(record)
