"""Worksheets as tables: the course's four columns, grading, and the answer key.

The cells come from the catalogue's texts for the cause the telemetry showed, so a
student's table reads like the course's own worksheet; a prediction is graded against
what `diagnose` observed, never against the experiment's name.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import pandas as pd

from .catalogue import FAULTS
from .faults import PHENOMENA

if TYPE_CHECKING:
    from .worksheet import Entry

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


def headings(lang: str) -> dict[str, str]:
    if lang not in HEADINGS:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(HEADINGS)}")
    return HEADINGS[lang]


def table(entries: dict, lang: str = "en") -> pd.DataFrame:
    """One row per experiment: the four worksheet columns, predicted, observed, match."""
    heads = headings(lang)
    keys = ("symptom", "cause", "experiment", "fix", "predicted", "observed", "match")
    frame = pd.DataFrame([_row(e) for e in entries.values()], index=list(entries),
                         columns=list(keys), dtype=object)
    frame.columns = [heads[k] for k in keys]
    frame.index.name = heads["name"]
    return frame


def grade(ws) -> pd.DataFrame:
    """Shape correct? Cause correct (predicted == diagnosed top cause)? And a total row.

    Missing predictions and observations are reported as such and counted in `out_of`
    only where both sides exist."""
    rows = {name: _grade_row(e) for name, e in ws.entries().items()}
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


def export(text: str, path: str | os.PathLike | None) -> str:
    if path is not None:
        with open(path, "w", encoding="utf-8", newline="") as out:
            out.write(text)
    return text
