"""Passive against active: `fl.diagnose` on a run's history beside `fl.investigate` on
the same loop's parts, per zoo family, on the outside-catalogue loops and on healthy
controls.

Every zoo case is run twice over: the passive reading is `fl.diagnose` of `zoo.run`'s
history (the loop with its validation and extra columns), the active one is
`fl.investigate` on the case's parts (`failurelab/zoo/contract.py`: the same loop,
bitwise).  Both read a catalogue calibrated leave-one-family-out, as
`diagnosis.py --zoo` does: thresholds set on the healthy runs of every other zoo
family and the lab's baselines, never on the family scored.  The outside loops
(`outside_loops.py`, no zoo family) read the shipped calibration, which never saw them;
their passive reading is the investigation's own diagnosis of its baseline run.

Right: a catalogue fault named top-1; a healthy control called healthy (passive: no
cause and a healthy shape; active: no cause, confidence not low); a failure outside
the catalogue given no cause.  Confident-wrong: a wrong answer at medium or high
confidence (a cause named, or "healthy" said, that a reader would act on); the headline
also counts wrong causes named at medium or high apart.
Confirmed: a named cause that one of the investigation's experiments confirmed (not a
passive reading kept untested).

    python benchmarks/investigate.py --quick [--seeds 0] [--workers 2]
    python benchmarks/investigate.py --seeds 0-1 --jsonl runs.jsonl
    python benchmarks/investigate.py --from-jsonl runs.jsonl --markdown docs/validation.md

`--quick`: each fault at its mildest severity, two healthy controls per family and
seed, calibration on zoo seed 0 and lab seeds 0-1.  `--jsonl` keeps every result as it
comes (a long run can be read before it ends); `--from-jsonl` prints from one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import outside_loops
import population
from zoo_report import lofo

import failurelab as fl
from failurelab import zoo
from failurelab.zoo.contract import parts as zoo_parts

OUTSIDE = "outside loops"  # the family name of the outside-catalogue loops and controls
CONFIDENT = ("medium", "high")  # the confidences a reader acts on
MARK = ("<!-- investigate:start -->", "<!-- investigate:end -->")


# --- what to run ---------------------------------------------------------------------

def zoo_selection(families, seeds, quick: bool) -> list:
    """The zoo's population (faults at every severity, healthy controls), or in quick
    mode each fault at its mildest severity and two healthy controls per family/seed."""
    cases = zoo.cases(families=families, seeds=tuple(seeds))
    if not quick:
        return cases
    faulty, seen, healthy = [], set(), defaultdict(list)
    for c in cases:
        if c.fault is None:
            healthy[(c.family, c.seed)].append(c)
        elif (c.family, c.seed, c.fault) not in seen:  # the mildest severity comes first
            seen.add((c.family, c.seed, c.fault))
            faulty.append(c)
    controls = []
    for group in healthy.values():
        plain = [c for c in group if "amp" not in c.habits]
        amp = [c for c in group if "amp" in c.habits]
        controls += plain[:1] + (amp[:1] or plain[1:2])
    return faulty + controls


# --- one case, read both ways ----------------------------------------------------------

def _answer(d) -> str:
    return d.top or ("(healthy)" if d.shape == "healthy" else f"(none: {d.shape})")


def _active_answer(inv) -> str:
    if inv.top:
        return inv.top
    return "(healthy)" if inv.healthy else f"(no cause: {inv.shape})"


def right(expected: str, top, called_healthy: bool) -> bool:
    if expected == "healthy":
        return top is None and called_healthy
    if expected == "outside":
        return top is None
    return top == expected


def _confirmed(inv) -> bool:
    return inv.top is not None and any(j.fault == inv.top and j.status == "confirmed"
                                       for j in inv.judgements)


def _deciding(inv) -> str:
    for j in inv.judgements:
        if j.fault == inv.top and j.outcome is not None:
            return f"{j.status}: {j.outcome.effect} = {j.value:.3g}"
    shown = [f"{j.fault} {j.status}" for j in inv.judgements[:4]]
    return "; ".join(shown)


def read_case(family, case_id, expected, kwargs, passive_history, catalogue, workers) -> dict:
    """Both readings of one loop, with the investigation's time."""
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inv = fl.investigate(**kwargs, faults=catalogue, workers=workers, progress=False)
    seconds = time.perf_counter() - started
    passive = inv.diagnosis if passive_history is None else fl.diagnose(passive_history, catalogue)
    return dict(
        family=family, id=case_id, expected=expected,
        passive=_answer(passive), passive_top=passive.top,
        passive_healthy=passive.top is None and passive.shape == "healthy",
        passive_confidence=passive.confidence,
        active=_active_answer(inv), active_top=inv.top, active_healthy=bool(inv.healthy),
        active_confidence=inv.confidence, confirmed=_confirmed(inv),
        arms=[a for a in inv.histories], seconds=round(seconds, 2),
        deciding=_deciding(inv), notes=list(inv.notes))


def run_zoo(cases, catalogues, workers, emit) -> None:
    for case in cases:
        kwargs = zoo_parts(case)
        emit(read_case(case.family, case.id, case.expected, kwargs, zoo.run(case),
                       catalogues[case.family], workers))


def run_outside(names, seeds, workers, emit) -> None:
    for name in names:
        for seed in seeds:
            for fixed in (False, True):
                expected = "healthy" if fixed else "outside"
                case_id = f"{name}/{'fixed' if fixed else 'buggy'}/seed{seed}"
                emit(read_case(OUTSIDE, case_id, expected, outside_loops.parts(name, fixed, seed),
                               None, fl.FAULTS, workers))


# --- tables ----------------------------------------------------------------------------

def _pct(a, b) -> str:
    return f"{a}/{b} ({a / b:.0%})" if b else "-"


def family_counts(rows) -> dict:
    per = defaultdict(Counter)
    for r in rows:
        c = per[r["family"]]
        kind = r["expected"] if r["expected"] in ("healthy", "outside") else "fault"
        c[kind] += 1
        c["seconds"] += r["seconds"]
        c["n"] += 1
        for side in ("passive", "active"):
            ok = right(r["expected"], r[f"{side}_top"], r[f"{side}_healthy"])
            c[f"{side}_{kind}_right"] += ok
            confident = r[f"{side}_confidence"] in CONFIDENT
            c[f"{side}_conf_wrong"] += (not ok) and confident
            c[f"{side}_conf_wrong_cause"] += (not ok) and confident and r[f"{side}_top"] is not None
            c[f"{side}_outside_named"] += kind == "outside" and r[f"{side}_top"] is not None
    return per


HEADER = ("family", "faults", "passive top-1", "active top-1", "healthy",
          "passive alarms", "active alarms", "outside", "outside named p/a",
          "conf-wrong p/a", "s/case")


def family_table(rows) -> list[list[str]]:
    per = family_counts(rows)
    total = Counter()
    out = []
    for family in sorted(per, key=lambda f: (f == OUTSIDE, f)):
        total.update(per[family])
        out.append(_family_row(family, per[family]))
    out.append(_family_row("ALL", total))
    return out


def _family_row(name, c) -> list[str]:
    return [name, str(c["fault"]), _pct(c["passive_fault_right"], c["fault"]),
            _pct(c["active_fault_right"], c["fault"]), str(c["healthy"]),
            str(c["healthy"] - c["passive_healthy_right"]),
            str(c["healthy"] - c["active_healthy_right"]), str(c["outside"]),
            f"{c['passive_outside_named']}/{c['active_outside_named']}",
            f"{c['passive_conf_wrong']}/{c['active_conf_wrong']}",
            f"{c['seconds'] / c['n']:.0f}" if c["n"] else "-"]


def verdict_table(rows) -> list[list[str]]:
    """Per cause the investigation named: how often, how often an experiment confirmed
    it, how often it was right."""
    per = defaultdict(Counter)
    for r in rows:
        if r["active_top"] is None:
            continue
        c = per[r["active_top"]]
        c["n"] += 1
        c["confirmed"] += r["confirmed"]
        c["right"] += r["active_top"] == r["expected"]
    out = [[name, str(c["n"]), _pct(c["confirmed"], c["n"]), _pct(c["right"], c["n"])]
           for name, c in sorted(per.items(), key=lambda kv: -kv[1]["n"])]
    n = sum(c["n"] for c in per.values())
    out.append(["ALL", str(n), _pct(sum(c["confirmed"] for c in per.values()), n),
                _pct(sum(c["right"] for c in per.values()), n)])
    return out


def outside_table(rows) -> list[list[str]]:
    return [[r["id"], r["expected"], f"{r['passive']} ({r['passive_confidence']})",
             f"{r['active']} ({r['active_confidence']})"]
            for r in rows if r["family"] == OUTSIDE]


def wrong_rows(rows, side="active") -> list[list[str]]:
    return [[r["id"], r["expected"], f"{r[side]} ({r[f'{side}_confidence']})",
             r["deciding"] if side == "active" else ""]
            for r in rows if not right(r["expected"], r[f"{side}_top"], r[f"{side}_healthy"])]


def text_table(header, body) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=True)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) for row in [header, *body]]
    return "\n".join(lines)


def md_table(header, body) -> str:
    esc = [[str(x).replace("|", "\\|") for x in row] for row in [header, *body]]
    return "\n".join(["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in esc[1:]])


def sections(rows) -> list[tuple[str, tuple, list]]:
    return [
        ("Per family (zoo: leave-one-family-out calibration; outside loops: shipped)",
         HEADER, family_table(rows)),
        ("Outside-catalogue loops (buggy) and their fixed versions (healthy controls)",
         ("loop", "expected", "passive", "active"), outside_table(rows)),
        ("Causes investigate named: share an experiment confirmed, share right",
         ("named cause", "times", "confirmed", "right"), verdict_table(rows)),
        ("What investigate got wrong", ("case", "expected", "answer", "evidence"),
         wrong_rows(rows)),
    ]


def headline(rows) -> str:
    c = Counter()
    for counts in family_counts(rows).values():
        c.update(counts)
    named = [r for r in rows if r["active_top"] is not None]
    return (f"catalogue faults named top-1: passive {_pct(c['passive_fault_right'], c['fault'])}, "
            f"active {_pct(c['active_fault_right'], c['fault'])}; healthy false alarms: passive "
            f"{c['healthy'] - c['passive_healthy_right']}/{c['healthy']}, active "
            f"{c['healthy'] - c['active_healthy_right']}/{c['healthy']}; outside given a cause: "
            f"passive {c['passive_outside_named']}/{c['outside']}, active "
            f"{c['active_outside_named']}/{c['outside']}; confident-wrong (medium/high): "
            f"passive {c['passive_conf_wrong']}/{c['n']}, active {c['active_conf_wrong']}/{c['n']}, "
            f"of them a wrong cause named: passive {c['passive_conf_wrong_cause']}, active "
            f"{c['active_conf_wrong_cause']}; named causes an experiment confirmed "
            f"{_pct(sum(r['confirmed'] for r in named), len(named))}; "
            f"{c['seconds'] / max(c['n'], 1):.0f} s per investigation, the longest "
            f"{max((r['seconds'] for r in rows), default=0):.0f} s")


def print_report(rows) -> None:
    for title, header, body in sections(rows):
        print(f"\n{title}:")
        print(text_table(header, body) if body else "  (none)")
    print("\n" + headline(rows))


def markdown(rows, command: str) -> str:
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if _git("status", "--porcelain") else ""
    date = datetime.date.today().isoformat()
    parts = [MARK[0], "## investigate: passive against active", "",
             f"Measured {date} at commit `{commit}`{dirty} with `{command}`.", "",
             headline(rows) + ".", ""]
    for title, header, body in sections(rows):
        parts += [f"### {title}", "", md_table(header, body) if body else "(none)", ""]
    parts.append(MARK[1])
    return "\n".join(parts)


def write_markdown(path: Path, section: str) -> None:
    """Replace the investigate section of `path` (between its markers), or append it."""
    old = path.read_text("utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(MARK[0]) + ".*?" + re.escape(MARK[1]), re.S)
    new = pattern.sub(lambda _: section, old) if pattern.search(old) else (
        old.rstrip() + ("\n\n" if old.strip() else "") + section + "\n")
    path.write_text(new, "utf-8")


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --- main ------------------------------------------------------------------------------

def catalogues_for(families, calibration: str, calib_seeds, lab_seeds, workers) -> dict:
    if calibration == "shipped":
        return {f: fl.FAULTS for f in families}
    healthy = population.healthy_population(calib_seeds, lab_seeds, workers)
    zoo_healthy = [r for r in healthy if not r.family.startswith("lab-")]
    by_family = lofo(zoo_healthy, healthy)
    return {f: by_family[f] for f in families}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0", help="zoo seeds scored")
    parser.add_argument("--families", default=None, help="comma-separated zoo families")
    parser.add_argument("--faults", default=None, help="comma-separated zoo faults")
    parser.add_argument("--outside-seeds", default="0")
    parser.add_argument("--no-zoo", action="store_true")
    parser.add_argument("--no-outside", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--calibration", choices=("lofo", "shipped"), default="lofo")
    parser.add_argument("--calib-seeds", default=None, help="default 0-2 (quick: 0)")
    parser.add_argument("--lab-seeds", default=None, help="default 0-9 (quick: 0-1)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jsonl", type=Path, default=None, help="append each result here")
    parser.add_argument("--from-jsonl", type=Path, default=None, help="print from these results")
    parser.add_argument("--markdown", type=Path, default=None,
                        help="write the section 'investigate' into this file")
    args = parser.parse_args()
    command = "python benchmarks/investigate.py " + " ".join(sys.argv[1:])
    if args.from_jsonl:
        rows = [json.loads(line) for line in args.from_jsonl.read_text().splitlines() if line]
    else:
        rows = collect(args)
    print_report(rows)
    if args.markdown:
        write_markdown(args.markdown, markdown(rows, command))
        print(f"\nwrote the section 'investigate' of {args.markdown}")
    return 0


def collect(args) -> list[dict]:
    families = args.families.split(",") if args.families else list(zoo.FAMILIES)
    calib = fl.parse_seeds(args.calib_seeds or ("0" if args.quick else "0-2"))
    lab = fl.parse_seeds(args.lab_seeds or ("0-1" if args.quick else "0-9"))
    rows: list[dict] = []
    sink = args.jsonl.open("a") if args.jsonl else None

    def emit(row):
        rows.append(row)
        ok = right(row["expected"], row["active_top"], row["active_healthy"])
        print(f"{row['id']:58s} expected {row['expected']:24s} passive {row['passive']:24s} "
              f"active {row['active']} ({row['active_confidence']}) {'' if ok else 'WRONG'} "
              f"{row['seconds']:.0f}s", flush=True)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

    started = time.perf_counter()
    if not args.no_zoo:
        cases = zoo_selection(families, fl.parse_seeds(args.seeds), args.quick)
        if args.faults:
            wanted = set(args.faults.split(","))
            cases = [c for c in cases if c.fault is None or c.fault in wanted]
        catalogues = catalogues_for(families, args.calibration, calib, lab, args.workers)
        print(f"{len(cases)} zoo cases, calibration {args.calibration} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
        run_zoo(cases, catalogues, args.workers, emit)
    if not args.no_outside:
        run_outside(list(outside_loops.LOOPS), fl.parse_seeds(args.outside_seeds),
                    args.workers, emit)
    if sink:
        sink.close()
    print(f"\n{len(rows)} loops read both ways in {time.perf_counter() - started:.0f} s")
    return rows


if __name__ == "__main__":
    sys.exit(main())
