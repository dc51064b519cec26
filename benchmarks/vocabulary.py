"""Write docs/columns.md from the declarations: history columns, quantities, shared
thresholds and live alerts, as the code declares them (nothing here is measured, so
it runs in a second; tests/test_vocabulary.py checks that the page is current).

    python benchmarks/vocabulary.py          # rewrite docs/columns.md
    python benchmarks/vocabulary.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from failurelab.evidence import alerts, columns, quantities, thresholds

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "columns.md"


def _cell(text: str) -> str:
    """Text for a table cell: a "|" would end the cell."""
    return text.replace("|", "\\|")


def _first_sentence(function) -> str:
    doc = " ".join((function.__doc__ or "").split())
    return (doc.split(". ")[0].rstrip(".") + ".") if doc else ""


def _threshold_reasons() -> list[tuple[str, str, str]]:
    """(names, value, reason) for each assignment of thresholds.py, the reason being
    the comment block written above it."""
    source = Path(thresholds.__file__).read_text("utf-8")
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign):
            continue
        comment, i = [], node.lineno - 2
        while i >= 0 and lines[i].startswith("#"):
            comment.insert(0, lines[i].lstrip("# "))
            i -= 1
        names = [t.id for t in ast.walk(node.targets[0]) if isinstance(t, ast.Name)]
        value = ", ".join(f"{getattr(thresholds, n):g}" for n in names)
        out.append((", ".join(f"`{n}`" for n in names), value, " ".join(comment)))
    return out


def render() -> str:
    out = ["# History columns, quantities and shared thresholds\n",
           "Generated from the declarations in `failurelab/evidence/` by "
           "`python benchmarks/vocabulary.py`; do not edit by hand.\n",
           "## Columns\n",
           "A history has one row per recorded step. `fl.Monitor` records the groups of "
           "its preset (`economy` is the cheapest; `full` adds the rest); the *extra* "
           "groups are what the lab's own loop passes to `mon.record(loss, **extra)`, and "
           "your loop may pass the same names. `prefix/` columns are one per module or "
           "parameter tensor.\n",
           "| group | recorded by | columns | what they hold |", "|---|---|---|---|"]
    for g in columns.GROUPS:
        by = f"Monitor ({g.preset})" if g.recorder == columns.MONITOR else "extra"
        out.append(f"| {g.name} | {by} | {', '.join(f'`{c}`' for c in g.columns)} | "
                   f"{_cell(g.meaning)} |")
    out += ["", "## Quantities\n",
            "Each quantity is one function of a history, declared once in "
            "`failurelab/evidence/quantities.py` with the columns it reads (NaN on a "
            "history without them; in parentheses those it also reads where they exist), "
            "its NaN policy, whether it is a yes/no fact, and the "
            "plot that shows it. *Lab only*: it reads an extra column.\n",
            "NaN policies: " + "; ".join(f"*{k}*: {v}" for k, v in
                                          quantities.NAN_POLICIES.items()) + ".\n",
            "| quantity | reads | NaN policy | kind | lab only | plot | what it measures |",
            "|---|---|---|---|---|---|---|"]
    for q in quantities.QUANTITIES.values():
        reads = [f"`{c}`" for c in q.requires] + [f"(`{c}`)" for c in q.optional]
        out.append(f"| `{q.name}` | {', '.join(reads)} | {q.nan} | "
                   f"{'yes/no' if q.binary else 'graded'} | {'yes' if q.lab_only else ''} | "
                   f"`{q.plot}` | {_cell(_first_sentence(q.compute))} |")
    out += ["", "## Shared thresholds\n",
            "Declared once in `failurelab/evidence/thresholds.py`; quantities, shapes, "
            "signatures, alerts and plots read them. A signature condition written with "
            "one of them may be moved by calibration: docs/signatures.md shows the written "
            "and the calibrated value side by side.\n",
            "| name | value | why |", "|---|---|---|"]
    out += [f"| {names} | {value} | {_cell(why)} |" for names, value, why in _threshold_reasons()]
    out += ["", "## Live alerts\n",
            f"`fl.alerts(history)` and `mon.alerts()` evaluate these signatures on the last "
            f"{alerts.WINDOW} steps (the spike also reads the step before them).\n",
            "| alert | kind | conditions |", "|---|---|---|"]
    for rule in alerts.rules():
        conditions = " and ".join(f"{c.text('label')} (`{c.quantity}`) {c.bound()}"
                                  for c in rule.signature.conditions)
        out.append(f"| `{rule.key}` | {alerts.KINDS.get(rule.key, rule.key)} | {conditions} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.read_text("utf-8") if PAGE.exists() else ""
        print("docs/columns.md is " + ("current" if current == page else "out of date"))
        return 0 if current == page else 1
    PAGE.write_text(page, "utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(page)} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
