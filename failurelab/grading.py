"""Worksheets as tables: the course's four columns, grading, and the answer key.

The key's cells come from the catalogue's texts for the cause the telemetry showed, so a
student's table reads like the course's own worksheet; a prediction is graded against
what `diagnose` observed, never against the experiment's name, except for a mystery
whose reveal recorded what it really was: that is graded against the truth (its
documented shape, or one of the other shapes its seeds show), and where the telemetry
read it otherwise the grade says so in a note.  Only attempted, observed predictions
count: a blank, an unobserved guess or a worked example never counts as full marks.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pandas as pd

from .catalogue import FAULTS
from .faults import PHENOMENA
from .tables import TextTable, html_table, markdown_table, page

if TYPE_CHECKING:
    from .records import Entry

HEALTHY = "healthy"  # the cause of a run on which no fault signature fired
NO_PREDICTION = "no prediction"
NOT_OBSERVED = "not observed"
WORKED_EXAMPLE = "worked example"  # notebook 00's demo: shipped filled in, never graded
WORKED_EXAMPLE_PREFIX = "demo-"
NONE = "—"

HEADINGS = {
    "en": {"symptom": "symptom", "cause": "possible cause",
           "experiment": "distinguishing experiment", "fix": "fix", "predicted": "predicted",
           "observed": "observed", "match": "match", "name": "experiment", "fault": "fault",
           "shape": "shape", "phenomenon": "phenomenon", "invariant": "invariant to check first",
           "minutes": "minutes", "part": "column", "yours": "yours", "key": "answer key"},
    "zh": {"symptom": "现象", "cause": "可能原因", "experiment": "区分实验", "fix": "修复动作",
           "predicted": "预测", "observed": "观察", "match": "是否一致", "name": "实验",
           "fault": "故障", "shape": "曲线形状", "phenomenon": "现场现象",
           "invariant": "最先检查的不变量", "minutes": "用时（分钟）", "part": "栏目",
           "yours": "你的回答", "key": "参考答案"},
}
FOUR = ("symptom", "cause", "experiment", "fix")


def headings(lang: str) -> dict[str, str]:
    if lang not in HEADINGS:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(HEADINGS)}")
    return HEADINGS[lang]


def table(entries: dict, lang: str = "en") -> TextTable:
    """One row per experiment: the four worksheet columns, predicted, observed, match."""
    heads = headings(lang)
    keys = (*FOUR, "predicted", "observed", "match")
    frame = TextTable([_row(e) for e in entries.values()], index=list(entries),
                      columns=list(keys), dtype=object)
    frame.columns = [heads[k] for k in keys]
    frame.index.name = heads["name"]
    return frame


def explanations(entries: dict, lang: str = "en") -> TextTable:
    """Per explained experiment, six rows: your symptom, cause, experiment, fix,
    invariant and minutes beside the answer key's (the revealed fault's texts for a
    mystery, else those of the cause the telemetry showed)."""
    heads = headings(lang)
    rows, index = [], []
    for name, entry in entries.items():
        e = entry.explanation
        if e is None:
            continue
        key = _key_texts(entry)
        minutes = "" if e.minutes is None else f"{e.minutes:g}"
        for part, yours in zip((*FOUR, "invariant", "minutes"),
                               (e.symptom, e.cause, e.experiment, e.fix, e.invariant, minutes)):
            rows.append((heads[part], yours, key.get(part, "")))
            index.append(name)
    frame = TextTable(rows, index=index, columns=[heads["part"], heads["yours"], heads["key"]],
                      dtype=object)
    frame.index.name = heads["name"]
    return frame


def grade(entries) -> TextTable:
    """Per experiment: shape and cause right or wrong, a note, then a total row.

    `entries` is a worksheet's entries (or the Worksheet).  Points count only where a
    prediction was made and its experiment observed (or revealed); the total row says
    how many were attempted and graded."""
    if hasattr(entries, "entries"):
        entries = entries.entries()
    rows = {name: grade_row(e, name) for name, e in entries.items()}
    frame = TextTable([[r[c] for c in GRADE_COLUMNS] for r in rows.values()],
                      index=list(rows), columns=list(GRADE_COLUMNS), dtype=object)
    total = _total_row(summary(rows.values()))
    frame = pd.concat([frame, TextTable([total], index=["total"], dtype=object)])
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
    frame = TextTable.from_dict(rows, orient="index", dtype=object)
    frame.index.name = heads["fault"]
    return frame


def _row(entry: Entry) -> tuple[str, ...]:
    obs, predicted = entry.observation, str(entry.prediction or NO_PREDICTION)
    if obs is None:
        return "", "", "", "", predicted, NOT_OBSERVED, NONE
    symptom = f"{obs.shape}: {obs.shape_evidence}"
    if obs.evidence != obs.shape_evidence:
        symptom += f"; {obs.evidence}"
    key = _telemetry_texts(obs)
    cause = key["cause"]
    if obs.lookalikes:
        cause += f" (look-alikes: {', '.join(obs.lookalikes)})"
    return symptom, cause, key["experiment"], key["fix"], predicted, str(obs), _match(entry)


def _telemetry_texts(obs) -> dict[str, str]:
    """The catalogue's texts for the cause the telemetry showed."""
    fault = FAULTS.get(obs.cause)
    if fault is not None:
        return {"cause": _cause_text(fault), "experiment": fault.experiment, "fix": fault.fix}
    if obs.cause == HEALTHY:
        return {"cause": "none: no fault signature fired", "experiment": "",
                "fix": "nothing to fix"}
    return {"cause": "unexplained: no catalogue signature fired",
            "experiment": obs.next_step or "", "fix": ""}


def _key_texts(entry: Entry) -> dict[str, str]:
    """The answer key for one experiment: the revealed fault, else the telemetry's."""
    if entry.truth is not None and entry.truth.fault in FAULTS:
        f = FAULTS[entry.truth.fault]
        return {"symptom": f.symptom, "cause": _cause_text(f), "experiment": f.experiment,
                "fix": f.fix}
    if entry.observation is None:
        return {}
    obs = entry.observation
    return {"symptom": f"{obs.shape}: {obs.shape_evidence}", **_telemetry_texts(obs)}


def _cause_text(fault) -> str:
    return f"{fault.title}: {fault.cause}"


def _match(entry: Entry) -> str:
    """"shape ✓, cause ✗"; "?" where there is nothing to compare with."""
    if not entry.locked:
        return NONE
    parts = [f"{what} {'✓' if ok else '✗' if ok is False else '?'}"
             for what, (guess, ok) in verdicts(entry).items() if guess is not None]
    return ", ".join(parts) or NO_PREDICTION


def expected(entry: Entry) -> dict[str, tuple[str, ...] | None]:
    """What each part is graded against: the accepted shapes and the cause.

    A revealed mystery: its fault's documented shape (and other_shapes) and its name.
    Otherwise: what the telemetry showed (None where nothing was observed)."""
    if entry.truth is not None:
        fault = FAULTS.get(entry.truth.fault)
        shapes = (fault.shape, *fault.other_shapes) if fault else ()
        return {"shape": shapes or None, "cause": (entry.truth.fault,)}
    o = entry.observation
    return {"shape": (o.shape,) if o else None,
            "cause": (o.cause,) if o and o.cause is not None else None}


def verdicts(entry: Entry) -> dict[str, tuple[str | None, bool | None]]:
    """(guess, right?) per part; right? is None when either side is missing."""
    p, wanted = entry.prediction, expected(entry)
    out = {}
    for part in ("shape", "cause"):
        guess = getattr(p, part) if p else None
        accepted = wanted[part]
        out[part] = guess, None if guess is None or accepted is None else guess in accepted
    return out


GRADE_COLUMNS = ("predicted_shape", "observed_shape", "shape_correct", "predicted_cause",
                 "observed_cause", "cause_correct", "points", "out_of", "status", "note")


def grade_row(entry: Entry, name: str = "") -> dict:
    """One experiment's grade: each part right, wrong or ungraded, and why."""
    v, o = verdicts(entry), entry.observation
    attempted = entry.prediction is not None and not entry.prediction.empty
    if name.startswith(WORKED_EXAMPLE_PREFIX):
        status, oks = WORKED_EXAMPLE, [None, None]
    elif not entry.locked:
        status, oks = NOT_OBSERVED, [None, None]
    else:
        status, oks = ("graded" if attempted else NO_PREDICTION), [v["shape"][1], v["cause"][1]]
    return dict(predicted_shape=v["shape"][0], observed_shape=o.shape if o else None,
                shape_correct=oks[0], predicted_cause=v["cause"][0],
                observed_cause=o.cause if o else None, cause_correct=oks[1],
                points=sum(ok is True for ok in oks), out_of=sum(ok is not None for ok in oks),
                status=status, attempted=attempted and status != WORKED_EXAMPLE,
                note=_note(entry))


def _note(entry: Entry) -> str:
    """Where the grade follows a reveal the telemetry disagrees with, say so."""
    if entry.truth is None:
        return ""
    wanted, o = expected(entry), entry.observation
    shapes = " or ".join(wanted["shape"] or ())
    text = f"graded against the reveal: {entry.truth.fault} (shape {shapes})"
    if o is None:
        return text + "; its telemetry was not observed"
    if o.cause != entry.truth.fault or o.shape not in (wanted["shape"] or ()):
        return f"{text}; the telemetry read {o} and disagrees"
    return text


def summary(rows) -> dict[str, int]:
    """Counts over grade rows: experiments, attempted, graded, points, out_of, ..."""
    rows = list(rows)
    count = {s: sum(r["status"] == s for r in rows)
             for s in ("graded", NO_PREDICTION, NOT_OBSERVED, WORKED_EXAMPLE)}
    return dict(experiments=len(rows) - count[WORKED_EXAMPLE],
                attempted=sum(bool(r.get("attempted")) for r in rows),
                graded=count["graded"], points=sum(r["points"] for r in rows),
                out_of=sum(r["out_of"] for r in rows), no_prediction=count[NO_PREDICTION],
                not_observed=count[NOT_OBSERVED], worked_examples=count[WORKED_EXAMPLE],
                shape_correct=sum(r["shape_correct"] is True for r in rows),
                cause_correct=sum(r["cause_correct"] is True for r in rows))


def score_text(s: dict[str, int]) -> str:
    """"attempted 3 of 25, graded 2: 3/4 points (75%)": never a bare 100 %."""
    text = f"attempted {s['attempted']} of {s['experiments']}, graded {s['graded']}"
    if not s["out_of"]:
        return text + ": nothing graded yet"
    return text + f": {s['points']}/{s['out_of']} points ({s['points'] / s['out_of']:.0%})"


def _total_row(s: dict[str, int]) -> dict:
    extras = [f"{s[k]} {label}" for k, label in (
        ("no_prediction", NO_PREDICTION), ("not_observed", NOT_OBSERVED),
        ("worked_examples", "worked example (not graded)")) if s[k]]
    return dict(predicted_shape="", observed_shape="", shape_correct=s["shape_correct"],
                predicted_cause="", observed_cause="", cause_correct=s["cause_correct"],
                points=s["points"], out_of=s["out_of"],
                status="; ".join([score_text(s), *extras]), note="")


# --- exports -----------------------------------------------------------------------------

def csv_table(entries: dict, lang: str = "en") -> str:
    """The worksheet table with the student's own columns after it, one row each."""
    heads = headings(lang)
    frame = pd.DataFrame(table(entries, lang))
    for part in (*FOUR, "invariant", "minutes"):
        frame[f"{heads['yours']}: {heads[part]}"] = [_own(e, part) for e in entries.values()]
    buffer = io.StringIO()
    frame.to_csv(buffer, lineterminator="\n")
    return buffer.getvalue()


def _own(entry: Entry, part: str) -> str:
    e = entry.explanation
    if e is None:
        return ""
    value = getattr(e, part)
    return "" if value is None else f"{value:g}" if part == "minutes" else value


def markdown_document(entries: dict, lang: str = "en") -> str:
    """The worksheet table; then, if any, the explanations beside the answer key."""
    text = markdown_table(table(entries, lang))
    own = explanations(entries, lang)
    if len(own):
        text += f"\n## {headings(lang)['yours']} / {headings(lang)['key']}\n\n"
        text += markdown_table(own)
    return text


def html_document(entries: dict, lang: str = "en", title: str = "worksheet") -> str:
    body = html_table(table(entries, lang))
    own = explanations(entries, lang)
    if len(own):
        body += f"<h2>{headings(lang)['yours']} / {headings(lang)['key']}</h2>"
        body += html_table(own)
    return page(title, body)
