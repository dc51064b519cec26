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

import pandas as pd

from ..basics.text import Text, language
from ..catalogue import FAULTS
from ..catalogue.fault import accepted_shapes, phenomenon
from ..evidence import shapes
from ..views.tables import TextTable, html_table, markdown_table, page
from . import keys as course_keys
from .records import NO_PREDICTION, Entry, observation_text, prediction_text
from .records import TEXTS as RECORD_TEXTS

HEALTHY = "healthy"  # the cause of a run on which no fault signature fired
NOT_OBSERVED = "not observed"
WORKED_EXAMPLE = "worked example"  # notebook 00's demo: shipped filled in, never graded
WORKED_EXAMPLE_PREFIX = "demo-"
EDITED = "looks edited"  # the hash chain does not vouch for the entry: shown, not scored
UNVERIFIED = "run not verified"  # observed on another recipe, or on a run trained earlier
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


# The words a student reads in the tables (the stored values stay English).
WORDS = {
    NO_PREDICTION: RECORD_TEXTS[NO_PREDICTION],
    NOT_OBSERVED: Text(NOT_OBSERVED, "尚未观察"),
    WORKED_EXAMPLE: Text(WORKED_EXAMPLE, "示例（不计分）"),
    EDITED: Text(EDITED, "疑似手工修改"),
    UNVERIFIED: Text(UNVERIFIED, "运行未经核实"),
    "graded": Text("graded", "已评分"),
    "shape": Text("shape", "曲线形状"), "cause": Text("cause", "原因"),
}
TEXTS = {
    "lookalikes": Text(" (look-alikes: {names})", "（相似的原因：{names}）"),
    "healthy_cause": Text("none: no fault signature fired", "无：没有任何故障的特征成立"),
    "nothing_to_fix": Text("nothing to fix", "无需修复"),
    "unexplained": Text("unexplained: no catalogue signature fired",
                        "无法解释：目录中没有任何特征成立"),
    "reveal": Text("graded against the reveal: {fault} (shape {shapes})",
                   "按揭晓的答案评分：{fault}（曲线形状 {shapes}）"),
    "unobserved": Text("; its telemetry was not observed", "；其遥测数据尚未观察"),
    "disagrees": Text("; the telemetry read {observed} and disagrees",
                      "；遥测数据读出的是 {observed}，与之不符"),
    "or": Text(" or ", " 或 "),
    "not_scored": Text(" (not scored: {why})", "（不计分：{why}）"),
    "symptom": Text("{shape}: {evidence}", "{shape}：{evidence}"),
    "more": Text("; {evidence}", "；{evidence}"),
    "attempted": Text("attempted {attempted} of {experiments}, graded {graded}",
                      "作答 {attempted}/{experiments}，已评分 {graded}"),
    "nothing_graded": Text(": nothing graded yet", "：尚无评分"),
    "points": Text(": {points}/{out_of} points ({share:.0%})", "：{points}/{out_of} 分（{share:.0%}）"),
    "worked_total": Text("worked example (not graded)", "示例（不计分）"),
}


def headings(lang: str | None = None) -> dict[str, str]:
    return HEADINGS[language(lang)]


def word(value: str, lang: str | None = None) -> str:
    """A stored status word in `lang`."""
    text = WORDS.get(value)
    return value if text is None else text.say(lang)


def say(key: str, lang: str | None = None, **values) -> str:
    return TEXTS[key].say(lang, **values)


def table(entries: dict, lang: str | None = None, flagged=None) -> TextTable:
    """One row per experiment: the prediction, what the telemetry showed, whether they
    match, then the student's own four columns (empty until explained).  The answer
    key's columns are in `explanations`, beside the student's."""
    heads = headings(lang)
    keys = ("predicted", "observed", "match", *FOUR)
    frame = TextTable([_row(e, lang, name, flagged) for name, e in entries.items()],
                      index=[course_keys.shown(n, e.locked) for n, e in entries.items()],
                      columns=list(keys), dtype=object)
    frame.columns = [heads[k] for k in keys]
    frame.index.name = heads["name"]
    return frame


def explanations(entries: dict, lang: str | None = None) -> TextTable:
    """Per explained experiment, six rows: your symptom, cause, experiment, fix,
    invariant and minutes beside the answer key's (the revealed fault's texts for a
    mystery, else those of the cause the telemetry showed)."""
    heads = headings(lang)
    rows, index = [], []
    for name, entry in entries.items():
        e = entry.explanation
        if e is None:
            continue
        key = _key_texts(entry, lang)
        minutes = "" if e.minutes is None else f"{e.minutes:g}"
        for part, yours in zip((*FOUR, "invariant", "minutes"),
                               (e.symptom, e.cause, e.experiment, e.fix, e.invariant, minutes), strict=False):
            rows.append((heads[part], yours, key.get(part, "")))
            index.append(course_keys.shown(name, entry.locked))
    frame = TextTable(rows, index=index, columns=[heads["part"], heads["yours"], heads["key"]],
                      dtype=object)
    frame.index.name = heads["name"]
    return frame


def grade(entries, lang: str | None = None, flagged=None) -> TextTable:
    """Per experiment: shape and cause right or wrong, a note, then a total row.

    `entries` is a worksheet's entries (or the Worksheet), `flagged` the audit's issues
    (experiment -> what looks edited; a Worksheet's own audit when it is given).  Points
    count only where a prediction was made and its experiment observed (or revealed) on
    a verified run, in an entry the chain vouches for; the total row says how many were
    attempted and graded.  `lang` words the status and the notes; the column names are
    the same in every language."""
    if hasattr(entries, "entries"):
        flagged = entries.audit().issues if flagged is None else flagged
        entries = entries.entries()
    rows = {name: grade_row(e, name, lang, (flagged or {}).get(name, ()))
            for name, e in entries.items()}
    frame = TextTable([[word(r[c], lang) if c == "status" else r[c] for c in GRADE_COLUMNS]
                       for r in rows.values()],
                      index=list(rows), columns=list(GRADE_COLUMNS), dtype=object)
    total = _total_row(summary(rows.values()), lang)
    frame = pd.concat([frame, TextTable([total], index=["total"], dtype=object)])
    frame = frame.astype({"points": int, "out_of": int})
    frame.index.name = "experiment"
    return frame


def answer_key(lang: str | None = None) -> pd.DataFrame:
    """The whole catalogue as a worksheet, for instructors: one row per fault."""
    heads = headings(lang)
    rows = {name: {heads["symptom"]: f.text("symptom", lang),
                   heads["cause"]: _cause_text(f, lang),
                   heads["experiment"]: f.text("experiment", lang),
                   heads["fix"]: f.text("fix", lang), heads["shape"]: shapes.name(f.shape, lang),
                   heads["phenomenon"]: phenomenon(f.phenomenon, lang)}
            for name, f in FAULTS.items()}
    frame = TextTable.from_dict(rows, orient="index", dtype=object)
    frame.index.name = heads["fault"]
    return frame


def _row(entry: Entry, lang: str | None = None, name: str = "",
         flagged=None) -> tuple[str, ...]:
    obs, predicted = entry.observation, prediction_text(entry.prediction, lang)
    own = [getattr(entry.explanation, part) if entry.explanation else "" for part in FOUR]
    issues = (flagged or {}).get(name, ())
    observed = word(NOT_OBSERVED, lang) if obs is None else observation_text(obs, lang)
    return (predicted, observed, _match(entry, lang, name, issues), *own)


def _telemetry_texts(obs, lang: str | None = None) -> dict[str, str]:
    """The catalogue's texts for the cause the telemetry showed."""
    fault = FAULTS.get(obs.cause)
    if fault is not None:
        return {"cause": _cause_text(fault, lang), "experiment": fault.text("experiment", lang),
                "fix": fault.text("fix", lang)}
    if obs.cause == HEALTHY:
        return {"cause": say("healthy_cause", lang), "experiment": "",
                "fix": say("nothing_to_fix", lang)}
    return {"cause": say("unexplained", lang), "experiment": obs.next_step or "", "fix": ""}


def _key_texts(entry: Entry, lang: str | None = None) -> dict[str, str]:
    """The answer key for one experiment: the revealed fault, else the telemetry's."""
    if entry.truth is not None and entry.truth.fault in FAULTS:
        f = FAULTS[entry.truth.fault]
        return {"symptom": f.text("symptom", lang), "cause": _cause_text(f, lang),
                "experiment": f.text("experiment", lang), "fix": f.text("fix", lang)}
    if entry.observation is None:
        return {}
    obs = entry.observation
    symptom = say("symptom", lang, shape=shapes.name(obs.shape, lang),
                  evidence=obs.shape_evidence)
    if obs.evidence != obs.shape_evidence:
        symptom += say("more", lang, evidence=obs.evidence)
    key = _telemetry_texts(obs, lang)
    if obs.lookalikes:
        key["cause"] += say("lookalikes", lang, names=", ".join(obs.lookalikes))
    return {"symptom": symptom, **key}


def _cause_text(fault, lang: str | None = None) -> str:
    return f"{fault.text('title', lang)}: {fault.text('cause', lang)}"


def _match(entry: Entry, lang: str | None = None, name: str = "",
           issues: tuple[str, ...] = ()) -> str:
    """"shape ✓, cause ✗"; "?" where there is nothing to compare with; why an entry is
    not scored, where it is not."""
    if not entry.locked:
        return NONE
    parts = [f"{word(what, lang)}\u00a0{'✓' if ok else '✗' if ok is False else '?'}"
             for what, (guess, ok) in verdicts(entry, name).items() if guess is not None]
    text = ", ".join(parts) or word(NO_PREDICTION, lang)  # breaks between parts only
    status = grade_row(entry, name, lang, issues)["status"]
    if status in (EDITED, UNVERIFIED) and parts:
        text += say("not_scored", lang, why=word(status, lang))
    return text


def expected(entry: Entry, name: str = "") -> dict[str, tuple[str, ...] | None]:
    """What each part is graded against: the accepted shapes and the cause.

    A revealed mystery: its fault's accepted shapes (the one shape rule) and its name.
    Otherwise: what the telemetry showed (None where nothing was observed); an
    experiment `name` that stands for one catalogue fault also accepts that fault's
    shapes, the same rule a mystery and the report read."""
    if entry.truth is not None:
        fault = FAULTS.get(entry.truth.fault)
        shapes = accepted_shapes(fault) if fault else ()
        return {"shape": shapes or None, "cause": (entry.truth.fault,)}
    o = entry.observation
    fault = FAULTS.get(course_keys.fault_of(name) or "") if name else None
    seen = (o.shape,) if o else ()
    if o and fault is not None and not o.unverified:
        seen += tuple(s for s in accepted_shapes(fault) if s != o.shape)
    return {"shape": seen or None,
            "cause": (o.cause,) if o and o.cause is not None else None}


def verdicts(entry: Entry, name: str = "") -> dict[str, tuple[str | None, bool | None]]:
    """(guess, right?) per part; right? is None when either side is missing."""
    p, wanted = entry.prediction, expected(entry, name)
    out = {}
    for part in ("shape", "cause"):
        guess = getattr(p, part) if p else None
        accepted = wanted[part]
        out[part] = guess, None if guess is None or accepted is None else guess in accepted
    return out


GRADE_COLUMNS = ("predicted_shape", "observed_shape", "shape_correct", "predicted_cause",
                 "observed_cause", "cause_correct", "points", "out_of", "status", "note")


def grade_row(entry: Entry, name: str = "", lang: str | None = None,
              issues: tuple[str, ...] = ()) -> dict:
    """One experiment's grade: each part right, wrong or ungraded, and why.  `issues`:
    what the hash chain found edited in this entry (then it is shown, not scored)."""
    v, o = verdicts(entry, name), entry.observation
    attempted = entry.prediction is not None and not entry.prediction.empty
    unverified = entry.truth is None and o is not None and bool(o.unverified)
    if name.startswith(WORKED_EXAMPLE_PREFIX):
        status, oks = WORKED_EXAMPLE, [None, None]
    elif not entry.locked:
        status, oks = NOT_OBSERVED, [None, None]
    elif not attempted:
        status, oks = NO_PREDICTION, [None, None]
    elif issues:
        status, oks = EDITED, [None, None]
    elif unverified:
        status, oks = UNVERIFIED, [None, None]
    else:
        status, oks = "graded", [v["shape"][1], v["cause"][1]]
    note = "; ".join(issues) if status == EDITED else \
        o.unverified if status == UNVERIFIED else _note(entry, lang)
    return dict(predicted_shape=v["shape"][0], observed_shape=o.shape if o else None,
                shape_correct=oks[0], predicted_cause=v["cause"][0],
                observed_cause=o.cause if o else None, cause_correct=oks[1],
                points=sum(ok is True for ok in oks), out_of=sum(ok is not None for ok in oks),
                status=status, attempted=attempted and status != WORKED_EXAMPLE, note=note)


def _note(entry: Entry, lang: str | None = None) -> str:
    """Where the grade follows a reveal the telemetry disagrees with, say so."""
    if entry.truth is None:
        return ""
    wanted, o = expected(entry), entry.observation
    accepted = say("or", lang).join(wanted["shape"] or ())
    text = say("reveal", lang, fault=entry.truth.fault, shapes=accepted)
    if o is None:
        return text + say("unobserved", lang)
    if o.cause != entry.truth.fault or o.shape not in (wanted["shape"] or ()):
        return text + say("disagrees", lang, observed=observation_text(o, lang))
    return text


def summary(rows) -> dict[str, int]:
    """Counts over grade rows: experiments, attempted, graded, points, out_of, ..."""
    rows = list(rows)
    count = {s: sum(r["status"] == s for r in rows)
             for s in ("graded", NO_PREDICTION, NOT_OBSERVED, WORKED_EXAMPLE, EDITED,
                       UNVERIFIED)}
    return dict(experiments=len(rows) - count[WORKED_EXAMPLE],
                attempted=sum(bool(r.get("attempted")) for r in rows),
                graded=count["graded"], points=sum(r["points"] for r in rows),
                out_of=sum(r["out_of"] for r in rows), no_prediction=count[NO_PREDICTION],
                not_observed=count[NOT_OBSERVED], worked_examples=count[WORKED_EXAMPLE],
                edited=count[EDITED], unverified=count[UNVERIFIED],
                shape_correct=sum(r["shape_correct"] is True for r in rows),
                cause_correct=sum(r["cause_correct"] is True for r in rows))


def score_text(s: dict[str, int], lang: str | None = None) -> str:
    """"attempted 3 of 25, graded 2: 3/4 points (75%)": never a bare 100 %."""
    text = say("attempted", lang, attempted=s["attempted"], experiments=s["experiments"],
               graded=s["graded"])
    if not s["out_of"]:
        return text + say("nothing_graded", lang)
    return text + say("points", lang, points=s["points"], out_of=s["out_of"],
                      share=s["points"] / s["out_of"])


def _total_row(s: dict[str, int], lang: str | None = None) -> dict:
    extras = [f"{s[k]} {label}" for k, label in (
        ("no_prediction", word(NO_PREDICTION, lang)),
        ("not_observed", word(NOT_OBSERVED, lang)),
        ("edited", word(EDITED, lang)), ("unverified", word(UNVERIFIED, lang)),
        ("worked_examples", say("worked_total", lang))) if s[k]]
    return dict(predicted_shape="", observed_shape="", shape_correct=s["shape_correct"],
                predicted_cause="", observed_cause="", cause_correct=s["cause_correct"],
                points=s["points"], out_of=s["out_of"],
                status="; ".join([score_text(s, lang), *extras]), note="")


# --- exports -----------------------------------------------------------------------------

def csv_table(entries: dict, lang: str | None = None) -> str:
    """The worksheet table (with the student's four columns), then the invariant and the
    minutes, one row per experiment."""
    heads = headings(lang)
    frame = pd.DataFrame(table(entries, lang))
    for part in ("invariant", "minutes"):
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


def markdown_document(entries: dict, lang: str | None = None) -> str:
    """The worksheet table; then, if any, the explanations beside the answer key."""
    text = markdown_table(table(entries, lang))
    own = explanations(entries, lang)
    if len(own):
        text += f"\n## {headings(lang)['yours']} / {headings(lang)['key']}\n\n"
        text += markdown_table(own)
    return text


def html_document(entries: dict, lang: str | None = None, title: str = "worksheet") -> str:
    body = html_table(table(entries, lang))
    own = explanations(entries, lang)
    if len(own):
        body += f"<h2>{headings(lang)['yours']} / {headings(lang)['key']}</h2>"
        body += html_table(own)
    return page(title, body, lang)
