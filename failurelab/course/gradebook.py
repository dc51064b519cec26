"""A class gradebook from worksheet files: what an instructor reads before the lecture.

One row per student and one column per experiment (a course key and an older
worksheet's fault name share the fault's column); the totals say how much was attempted
and graded (a blank is never full marks).  Three things are shown and never scored:
entries whose hash chain does not check out (they look edited by hand), observations
of a run that is not the experiment's (another recipe, or trained before the
prediction), and worksheets identical to another student's (the same bytes, or the same
chain of records, time stamps included, which two students cannot write apart).  Per
fault: how often the class mispredicted it and what it was confused with.  A file that is
not a worksheet is listed and skipped, never fatal.  Reading only: no worksheet is
ever written here, and no run is repeated (grading uses what each file recorded).
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..basics.files import check_output
from ..views.tables import export, html_table, page
from . import grading, keys
from .chain import Audit
from .records import Entry, NotAWorksheet
from .worksheet import load

SUFFIXES = (".worksheet.json", ".json")
DUPLICATE = "identical worksheet"  # a grade row's status in a copied worksheet


@dataclass(frozen=True)
class Student:
    name: str  # the file's name without its suffix (with its folder if names repeat)
    path: Path
    entries: dict[str, Entry]
    audit: Audit
    identity: str = ""  # the last link of its chain (its bytes' digest without one)
    duplicates: tuple[str, ...] = ()  # other students whose worksheet is this one

    def grade_rows(self) -> dict[str, dict]:
        """Each experiment's grade row, as `Worksheet.grade` computes it; a duplicate
        worksheet scores nothing."""
        rows = {n: grading.grade_row(e, n, issues=self.audit.of(n))
                for n, e in self.entries.items()}
        if self.duplicates:
            rows = {n: {**r, "shape_correct": None, "cause_correct": None, "points": 0,
                        "out_of": 0, "status": DUPLICATE if r["attempted"] else r["status"]}
                    for n, r in rows.items()}
        return rows


@dataclass(frozen=True)
class Gradebook:
    students: tuple[Student, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, why it was not read)

    def table(self) -> pd.DataFrame:
        """One row per student: each experiment's result, then the totals."""
        names = experiments(self.students)
        rows = {s.name: {**_cells(s), **_totals(s, len(names))} for s in self.students}
        frame = pd.DataFrame.from_dict(rows, orient="index", dtype=object)
        frame.index.name = "student"
        return frame.reindex(columns=[*TOTALS, *names]).fillna("")  # the totals first: read first

    def faults(self) -> pd.DataFrame:
        """Per fault: graded answers, how many were wrong, the commonest wrong guesses."""
        return fault_statistics(self.students)

    def confusions(self) -> pd.DataFrame:
        """(part, truth, predicted) -> how many students confused them: the causes, then
        the shapes, each most first (one group per part, so a page shows it once)."""
        return confusion_counts(self.students)

    def to_csv(self, path: str | os.PathLike) -> list[Path]:
        """The student table at `path` (a .csv); the per-fault tables beside it. Nothing
        is written unless all three paths are safe (see `files.check_output`)."""
        path = self._output(path, (".csv",))
        stem = path.name[: -len(path.suffix)]
        tables = ((self.table(), path),
                  (self.faults(), path.with_name(f"{stem}.faults.csv")),
                  (self.confusions(), path.with_name(f"{stem}.confusions.csv")))
        for _, target in tables:
            self._output(target, (".csv",))
        written = []
        for frame, target in tables:
            buffer = io.StringIO()
            frame.to_csv(buffer, lineterminator="\n")
            export(buffer.getvalue(), target)
            written.append(target)
        return written

    def to_html(self, path: str | os.PathLike | None = None) -> str:
        """One page: the students, the edited-looking entries, the faults, the files
        skipped; every student-written string escaped."""
        return export(page(f"Gradebook: {len(self.students)} worksheets",
                                   _body(self)), self._output(path, (".html", ".htm")))

    def _output(self, path, suffixes) -> Path | None:
        """`path` once it is safe to write: never a worksheet or a file this book read."""
        if path is None:
            return None
        read = [s.path for s in self.students] + [p for p, _ in self.skipped]
        return check_output(path, suffixes, inputs=read, what="gradebook")


TOTALS = ("score", "points", "out_of", "graded", "attempted", "looks edited",
          "run not verified", "duplicate of", "before the chain")


def gradebook(paths) -> Gradebook:
    """Read every worksheet in `paths` (files, or folders searched for *.json)."""
    files, skipped = find(paths)
    read = []
    for path in files:
        try:
            read.append((path, *_graded(path)))
        except NotAWorksheet as err:  # said to the instructor, not to the file's owner
            skipped.append((str(path), f"not a worksheet: {err.reason}"))
        except (OSError, ValueError, RecursionError) as err:
            skipped.append((str(path), " ".join(str(err).split())))
    names = _student_names([p for p, *_ in read])
    same = collections.defaultdict(list)
    for path, sheet, _, identity in read:
        if sheet.entries:
            same[identity].append(names[path])
    students = tuple(Student(names[p], p, sheet.entries, audit, identity,
                             tuple(n for n in same[identity] if n != names[p]))
                     for p, sheet, audit, identity in read)
    return Gradebook(students, tuple(skipped))


def _graded(path: Path):
    """The sheet and its audit, once everything a gradebook computes works on it: a
    file edited into odd shapes (a list where a name belongs) is refused here, whole."""
    sheet = load(path)
    try:
        audit = sheet.audit()
        student = Student(path.name, path, sheet.entries, audit)
        _cells(student)
        _totals(student, len(sheet.entries))
        fault_statistics([student])
        confusion_counts([student])
        identity = str(sheet.chain[-1]["link"]) if sheet.chain else \
            hashlib.sha256(path.read_bytes()).hexdigest()
    except (TypeError, AttributeError, KeyError, IndexError) as err:
        raise ValueError(f"{path} has entries of unexpected types ({err!r}); it was "
                         f"edited by hand?") from None
    return sheet, audit, identity


def find(paths) -> tuple[list[Path], list[tuple[str, str]]]:
    """The worksheet files named or found in folders (sorted), and the paths missing."""
    files, skipped = [], []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            skipped.append((str(path), "no such file or folder"))
    return list(dict.fromkeys(files)), skipped


def experiments(students) -> list[str]:
    """Every graded experiment any student has (by its fault, where it has one), in
    first-seen order."""
    seen = {}
    for s in students:
        for name in s.entries:
            if not name.startswith(grading.WORKED_EXAMPLE_PREFIX):
                seen.setdefault(keys.label(name), None)
    return list(seen)


def _cells(student: Student) -> dict[str, str]:
    """Each experiment's cell, under its column (`keys.label`)."""
    return {keys.label(name): _cell(row) for name, row in student.grade_rows().items()
            if not name.startswith(grading.WORKED_EXAMPLE_PREFIX)}


def _cell(row: dict) -> str:
    if row["status"] == "graded":
        return f"{row['points']} of {row['out_of']}"
    if row["status"] == grading.NOT_OBSERVED and row["attempted"]:
        return "predicted, not observed"
    return row["status"]


def _totals(student: Student, experiments_in_class: int) -> dict:
    s = grading.summary(student.grade_rows().values())
    edited = [*map(keys.label, student.audit.issues),
              *(["(whole file)"] if student.audit.general else [])]
    unbound = [keys.label(n) for n, r in student.grade_rows().items()
               if r["status"] == grading.UNVERIFIED]
    return {"attempted": f"{s['attempted']} of {experiments_in_class}", "graded": s["graded"],
            "points": s["points"], "out_of": s["out_of"],
            "score": f"{s['points'] / s['out_of']:.0%}" if s["out_of"] else "",
            "looks edited": ", ".join(edited), "run not verified": ", ".join(unbound),
            "duplicate of": ", ".join(student.duplicates),
            "before the chain": ", ".join(map(keys.label, student.audit.unverified))}


def _truths(students):
    """(student, experiment, fault it was, expected shapes, grade row) per graded entry."""
    for s in students:
        if s.duplicates:
            continue
        for name, row in s.grade_rows().items():
            entry = s.entries[name]
            if row["status"] != "graded":
                continue
            fault = entry.truth.fault if entry.truth else keys.fault_of(name) or \
                row["observed_cause"]
            yield s, name, fault, grading.expected(entry, name)["shape"] or (), row


def fault_statistics(students) -> pd.DataFrame:
    tally = collections.defaultdict(lambda: {"graded": 0, "cause wrong": 0, "shape wrong": 0,
                                             "guesses": collections.Counter()})
    for _, _, fault, _, row in _truths(students):
        t = tally[fault or "unexplained"]
        t["graded"] += 1
        t["cause wrong"] += row["cause_correct"] is False
        t["shape wrong"] += row["shape_correct"] is False
        if row["cause_correct"] is False:
            t["guesses"][row["predicted_cause"]] += 1
    rows = {f: {"graded": t["graded"], "cause wrong": t["cause wrong"],
                "shape wrong": t["shape wrong"],
                "mispredicted": f"{(t['cause wrong'] + t['shape wrong']) / (2 * t['graded']):.0%}",
                "wrong causes guessed": ", ".join(f"{g} ({n})" for g, n in
                                                  t["guesses"].most_common(3))}
            for f, t in tally.items()}
    frame = pd.DataFrame.from_dict(rows, orient="index", dtype=object)
    if not len(frame):
        return pd.DataFrame(columns=["graded", "cause wrong", "shape wrong", "mispredicted",
                                     "wrong causes guessed"]).rename_axis("fault")
    order = sorted(rows, key=lambda f: (-(tally[f]["cause wrong"] + tally[f]["shape wrong"])
                                        / tally[f]["graded"], f))
    return frame.loc[order].rename_axis("fault")


def confusion_counts(students) -> pd.DataFrame:
    counts = collections.Counter()
    for _, _, fault, shapes, row in _truths(students):
        if row["shape_correct"] is False:
            counts[("shape", " or ".join(shapes), row["predicted_shape"])] += 1
        if row["cause_correct"] is False:
            counts[("cause", fault or "unexplained", row["predicted_cause"])] += 1
    rows = [(part, truth, guess, n) for (part, truth, guess), n in
            sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1:]))]
    return pd.DataFrame(rows, columns=["part", "truth", "predicted", "students"]).set_index(
        "part")


def _student_names(paths: list[Path]) -> dict[Path, str]:
    """File names without the suffix; the folder too where two files share a name."""
    def stem(p: Path) -> str:
        for suffix in SUFFIXES:
            if p.name.endswith(suffix) and len(p.name) > len(suffix):
                return p.name[: -len(suffix)]
        return p.name
    counts = collections.Counter(stem(p) for p in paths)
    return {p: stem(p) if counts[stem(p)] == 1 else f"{p.parent.name}/{stem(p)}"
            for p in paths}


def _body(book: Gradebook) -> str:
    parts = ['<p class="note">One row per worksheet, one column per experiment. "2/2": '
             'shape and cause right; "blank": observed without a prediction; "not run": '
             'predicted, not observed yet. Shown and not scored, outlined in red: '
             '"edited", an entry that does not match its hash chain; "unverified", an '
             'observation of a run that is not the experiment\'s (another recipe, or '
             'trained before the prediction); "copy", a worksheet identical to another '
             'student\'s '
             '(see "duplicate of"). Mysteries are graded against their reveal. Points '
             'count graded experiments only.</p>',
             html_table(_short(book.table()), compact=True, cell_css=_colour)]
    edited = [(s.name, _named(name), "; ".join(issues)) for s in book.students
              for name, issues in [*s.audit.issues.items(),
                                   *((("(whole file)", s.audit.general),) if s.audit.general
                                     else ())]]
    unbound = [(s.name, _named(name), row["note"]) for s in book.students
               for name, row in s.grade_rows().items() if row["status"] == grading.UNVERIFIED]
    copies = [(s.name, ", ".join(s.duplicates)) for s in book.students if s.duplicates]
    for title, rows, columns in (
            ("Entries that look edited by hand", edited,
             ["experiment", "what does not check out"]),
            ("Observations not verified (another recipe, or trained before the prediction)",
             unbound, ["experiment", "why"])):
        if rows:
            parts += [f"<h2>{title}: not scored</h2>", html_table(pd.DataFrame(
                [r[1:] for r in rows], index=pd.Index([r[0] for r in rows], name="student"),
                columns=columns))]
    if copies:
        parts += ["<h2>Identical worksheets: not scored</h2>", html_table(pd.DataFrame(
            [c for _, c in copies], index=pd.Index([s for s, _ in copies], name="student"),
            columns=["identical to"]))]
    parts += ["<h2>Faults the class mispredicted most</h2>", html_table(book.faults()),
              "<h2>What was confused with what</h2>", html_table(book.confusions())]
    if book.skipped:
        parts += ["<h2>Files skipped</h2>", html_table(pd.DataFrame(
            [why for _, why in book.skipped], index=pd.Index([p for p, _ in book.skipped],
                                                              name="file"),
            columns=["why"]))]
    return "\n".join(parts)


def _named(name: str) -> str:
    """"no_zero_grad (01-1)": the column's name, and the key the student used."""
    return name if keys.label(name) == name else f"{keys.label(name)} ({name})"


SHORT = {"no prediction": "blank", "predicted, not observed": "not run",
         "not observed": "not run", grading.WORKED_EXAMPLE: "example",
         grading.EDITED: "edited", grading.UNVERIFIED: "unverified", DUPLICATE: "copy"}
COLOURS = {"2": "background:#dff0d8", "1": "background:#fcf8e3", "0": "background:#f2dede"}
NOT_SCORED = ("edited", "unverified", "copy")  # the page's cells that are shown, not scored
OUTLINE = "outline:2px solid #b00;outline-offset:-2px"


def _short(table: pd.DataFrame) -> pd.DataFrame:
    """The page's cells: "2/2" for "2 of 2", "blank" for "no prediction"."""
    def short(value):
        if not isinstance(value, str):
            return value
        text = value.replace(" of ", "/")
        return SHORT.get(text, text)
    names = experiments_in(table)
    return table.assign(**{n: table[n].map(short) for n in names})


def experiments_in(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in TOTALS]


def _colour(value) -> str:
    text = str(value)
    colour = COLOURS.get(text[0], "") if "/" in text and text[0].isdigit() else ""
    return OUTLINE if text in NOT_SCORED else colour
