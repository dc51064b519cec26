"""How long `failurelab grade` takes for a class: 30 synthetic worksheets, one experiment per fault.

The worksheets are written through the worksheet's own file format and chain (no
training run: observations are drawn from the catalogue), some with a prediction
edited by hand afterwards and one file that is not a worksheet.  Prints the time to
read and grade them and to write the CSV and the HTML page.

    PYTHONPATH=. python benchmarks/gradebook.py [--students 30]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from failurelab import FAULTS
from failurelab.catalogue.faults import SHAPES
from failurelab.course.gradebook import gradebook
from failurelab.course.records import Entry, Observation, Prediction
from failurelab.course.worksheet import Sheet, dump

EXPERIMENTS = list(FAULTS)


def synthetic(path: Path, rng: random.Random, edited: bool) -> None:
    """A worksheet as a student leaves it: most predicted, some right, some observed."""
    sheet = Sheet(started="2026-01-01T09:00:00.000+00:00")
    for k, name in enumerate(EXPERIMENTS):
        entry = sheet.entries.setdefault(name, Entry())
        at = f"2026-01-01T10:{k:02d}:00.000+00:00"
        if rng.random() < 0.8:
            guess = name if rng.random() < 0.6 else rng.choice(EXPERIMENTS)
            entry.prediction = Prediction(rng.choice(SHAPES), guess, "<b>my</b> note", at)
            sheet.write("predict", name, entry.prediction)
        if rng.random() < 0.9:
            f = FAULTS[name]
            entry.observation = Observation(f.shape, name, "evidence", "shape evidence",
                                            "high", (), None, 300,
                                            at.replace(":00.000", ":30.000"), "0" * 16)
            sheet.write("observe", name, entry.observation)
    if edited and sheet.entries[EXPERIMENTS[0]].prediction:
        first = sheet.entries[EXPERIMENTS[0]]
        first.prediction = replace(first.prediction, cause=EXPERIMENTS[0])
    path.write_text(dump(sheet), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gradebook-"))
    rng = random.Random(0)
    for i in range(args.students):
        synthetic(folder / f"student{i:02d}.worksheet.json", rng, edited=i % 7 == 0)
    (folder / "notes.json").write_text(json.dumps({"not": "a worksheet"}), encoding="utf-8")
    started = time.perf_counter()
    book = gradebook([folder])
    read = time.perf_counter() - started
    book.to_csv(folder / "gradebook.csv")
    book.to_html(folder / "gradebook.html")
    total = time.perf_counter() - started
    print(f"{len(book.students)} worksheets x {len(EXPERIMENTS)} experiments "
          f"({len(book.skipped)} file skipped): read and graded in {read:.2f} s, "
          f"with CSV and HTML written {total:.2f} s  ({folder})")


if __name__ == "__main__":
    main()
