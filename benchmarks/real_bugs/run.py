"""The real-bug corpus: measured harm, and both diagnoses scored against the ground truth.

    python benchmarks/real_bugs/run.py --harm              # buggy vs fixed, seeds 0-2 -> harm.csv
    python benchmarks/real_bugs/run.py                     # passive (and active) diagnosis
    python benchmarks/real_bugs/run.py --split held --markdown TABLE.md
    python benchmarks/real_bugs/run.py --make-split        # once, when the corpus is complete
    python benchmarks/real_bugs/run.py --extend-split      # cases added later join a part

A case is `cases/<name>.py` (see FORMAT.md).  The ground truth is `truth.csv`, written
before either diagnosis ran on the case.  Scoring:
  named          the top cause is one of the accepted faults;
  confident-wrong a cause was named with confidence medium/high and it is not accepted
                 (for an outside-catalogue case or a control: any confident cause);
  missed         everything else (no cause, or a wrong one at low confidence).
A reading is "healthy" when the shape is healthy and no cause is named.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import importlib.util
import math
import random
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
TRUTH = HERE / "truth.csv"
HARM_CSV = HERE / "harm.csv"
SPLIT = HERE / "split.csv"
HARM_SEEDS = (0, 1, 2)
SPLIT_SEED = 2026
HELD_FRACTION = 0.5
CONFIDENT = ("medium", "high")
HIGHER_IS_BETTER = {"val_acc": True, "val_loss": False, "train_loss": False}

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import common  # noqa: E402

# --- the corpus ------------------------------------------------------------------------------

def load_case(name: str):
    """The case module `cases/<name>.py`, imported by path."""
    path = CASES / f"{name}.py"
    if not path.exists():
        raise SystemExit(f"no case named {name!r} (looked for {path})")
    spec = importlib.util.spec_from_file_location(f"real_bug_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def case_names() -> list[str]:
    return sorted(p.stem for p in CASES.glob("*.py") if not p.stem.startswith("_"))


def read_truth() -> dict[str, dict]:
    """case -> {"kind", "accepted" (list of fault names), "note"}."""
    if not TRUTH.exists():
        return {}
    with TRUTH.open(newline="") as f:
        return {row["case"]: dict(kind=row["kind"], note=row["note"],
                                  accepted=[a for a in row["accepted"].split(";") if a])
                for row in csv.DictReader(f)}


def read_split() -> dict[str, str]:
    if not SPLIT.exists():
        return {}
    with SPLIT.open(newline="") as f:
        return {row["case"]: row["part"] for row in csv.DictReader(f)}


def make_split() -> None:
    """Split the corpus once, at random with a fixed seed, into dev and held."""
    if SPLIT.exists():
        raise SystemExit(f"{SPLIT.name} exists; the split is made once and never redrawn")
    names = sorted(read_truth())
    random.Random(SPLIT_SEED).shuffle(names)
    n_held = round(len(names) * HELD_FRACTION)
    held = set(names[:n_held])
    with SPLIT.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "part"])
        for name in sorted(names):
            w.writerow([name, "held" if name in held else "dev"])
    print(f"wrote {SPLIT} ({n_held} held, {len(names) - n_held} dev, seed {SPLIT_SEED})")


def extend_split() -> None:
    """Give the cases that truth.csv has and split.csv lacks a part, at random with the
    same fixed seed, half of them held (an odd one out by a coin flip from the same seeded
    generator); the rows already in split.csv are never redrawn, so a batch of cases added
    after the split moves no case that was already scored."""
    parts = read_split()
    if not parts:
        raise SystemExit(f"no {SPLIT.name} yet: run --make-split first")
    missing = sorted(set(read_truth()) - set(parts))
    if not missing:
        print(f"every case in {TRUTH.name} already has a part in {SPLIT.name}")
        return
    rng = random.Random(SPLIT_SEED)
    rng.shuffle(missing)
    n_held = int(len(missing) * HELD_FRACTION)
    if n_held < len(missing) * HELD_FRACTION and rng.random() < HELD_FRACTION:
        n_held += 1  # an odd batch: its last case is held with probability 1/2, not never
    parts.update({name: "held" if i < n_held else "dev" for i, name in enumerate(missing)})
    with SPLIT.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "part"])
        for name in sorted(parts):
            w.writerow([name, parts[name]])
    print(f"added {len(missing)} case(s) to {SPLIT} ({n_held} held, {len(missing) - n_held} "
          f"dev, seed {SPLIT_SEED}): " + ", ".join(f"{n} {parts[n]}" for n in sorted(missing)))


def select(names: list[str], cases: str | None, part: str) -> list[str]:
    if cases:
        wanted = [c.strip() for c in cases.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in names]
        if unknown:
            raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
        names = wanted
    if part != "all":
        parts = read_split()
        if not parts:
            raise SystemExit("no split.csv yet: run --make-split once the corpus is complete")
        names = [n for n in names if parts.get(n) == part]
    return names


# --- harm --------------------------------------------------------------------------------------

def harm_row(name: str, module, fixed: bool, seed: int) -> dict:
    parts = module.parts(fixed=fixed, seed=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, losses = common.plain_run(parts)
        measured = dict(module.measure(model, parts.get("val_batches") or [], fixed)) \
            if hasattr(module, "measure") else {}
    measured["train_loss"] = common.final_loss(losses)
    return dict(case=name, fixed=int(fixed), seed=seed, steps_run=len(losses),
                seconds=round(time.perf_counter() - t0, 2),
                **{k: measured.get(k, math.nan) for k in ("train_loss", "val_loss", "val_acc")})


def verdict(rows: list[dict], metric: str) -> tuple[bool, str]:
    """Does the fix help beyond the seed spread?  Yes when the worst fixed seed beats
    the best buggy seed on the case's metric (non-finite counts as the worst value)."""
    sign = 1 if HIGHER_IS_BETTER[metric] else -1

    def value(row):
        v = row[metric]
        return sign * v if isinstance(v, float) and math.isfinite(v) else -math.inf

    buggy = [value(r) for r in rows if not r["fixed"]]
    fixed = [value(r) for r in rows if r["fixed"]]
    helps = min(fixed) > max(buggy)

    def show(vals):
        finite = [sign * v for v in vals if math.isfinite(v)]
        nan = len(vals) - len(finite)
        text = (f"{statistics.mean(finite):.4g} [{min(finite):.4g}, {max(finite):.4g}]"
                if finite else "all non-finite")
        return text + (f" ({nan} non-finite)" if nan and finite else "")
    return helps, f"{metric}: buggy {show(buggy)} | fixed {show(fixed)}"


def run_harm(names: list[str]) -> None:
    fields = ["case", "fixed", "seed", "steps_run", "seconds", "train_loss", "val_loss",
              "val_acc"]
    old = []
    if HARM_CSV.exists():  # keep the rows of cases not re-measured this time
        with HARM_CSV.open(newline="") as f:
            old = [r for r in csv.DictReader(f) if r["case"] not in names]
    rows = list(old)
    truth = read_truth()
    for name in names:
        module = load_case(name)
        metric = getattr(module, "HARM_METRIC", "train_loss")
        case_rows = [harm_row(name, module, fixed, seed)
                     for fixed in (False, True) for seed in HARM_SEEDS]
        rows += case_rows
        helps, text = verdict(case_rows, metric)
        kind = truth.get(name, {}).get("kind", getattr(module, "KIND", "?"))
        mark = ("fix helps" if helps else "FIX DOES NOT HELP") if kind == "failure" \
            else ("control: fix changes the metric" if helps else "control")
        secs = sum(r["seconds"] for r in case_rows) / len(case_rows)
        print(f"{name:36s} {mark:22s} {text}  ({secs:.1f} s/run)", flush=True)
    with HARM_CSV.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"wrote {HARM_CSV}")


# --- diagnosis ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Crashed:
    """A diagnosis that raised (or a case whose program did): scored "crashed", never
    missed or healthy, and the rest of the corpus still runs."""

    error: str
    shape: str = "crashed"
    top: None = None
    confidence: str = "-"


def guarded(diagnosis, *args):
    """`diagnosis(*args)`, or a `Crashed` reading naming what it raised."""
    try:
        return diagnosis(*args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one case's crash is that case's result
        return Crashed(f"{type(exc).__name__}: {exc}".splitlines()[0][:160])


def healthy(reading) -> bool:
    return reading.shape == "healthy" and reading.top is None


def score(reading, accepted: list[str], kind: str) -> str:
    """named / confident-wrong / missed for a failure; healthy / flagged for a control;
    crashed for either when the diagnosis raised."""
    if isinstance(reading, Crashed):
        return "crashed"
    if kind == "control":
        return "healthy" if healthy(reading) else (
            "confident-wrong" if reading.top and reading.confidence in CONFIDENT else "flagged")
    if reading.top is not None and reading.top in accepted:
        return "named"
    if reading.top is not None and reading.confidence in CONFIDENT:
        return "confident-wrong"
    return "missed"


def describe(reading) -> str:
    if reading is None:
        return "-"
    if isinstance(reading, Crashed):
        return f"crashed ({reading.error})"
    top = reading.top or "none"
    return f"{reading.shape}/{top}/{reading.confidence}"


def val_loss_of(parts: dict):
    """The validation yardstick the passive harness records: the user's own loss."""
    loss_fn = parts.get("loss")
    if loss_fn is None or not parts.get("val_batches"):
        return None
    return lambda model, batch: loss_fn(model(batch[0]), batch[1])


def passive(parts: dict):
    import failurelab as fl
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = common.monitored_run(parts, val_loss=val_loss_of(parts))
        return fl.diagnose(history)


def evaluation(module, fixed: bool):
    """The case's own evaluation, `measure(model, val_batches, fixed)`, as the parts'
    `evaluate`: the program's metric as the program computes it (an evaluation bug lives
    there); None for a case without one."""
    measure = getattr(module, "measure", None)
    if measure is None:
        return None
    return lambda model, val_batches: measure(model, val_batches, fixed)


def active(parts: dict, evaluate=None):
    """fl.investigate on the case's parts (and its evaluation), when the installed
    failurelab has it."""
    try:
        import failurelab as fl
        investigate = fl.investigate
    except (ImportError, AttributeError):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if evaluate is not None:
            parts = {**parts, "evaluate": evaluate}
        return investigate(**parts)


def diagnose_case(name: str, truth: dict, with_active: bool) -> dict:
    module = load_case(name)
    row = truth.get(name)
    if row is None:
        raise SystemExit(f"{name} has no row in truth.csv: write the ground truth first")
    t0 = time.perf_counter()
    buggy = guarded(lambda: passive(module.parts(fixed=False, seed=0)))
    t_passive = time.perf_counter() - t0
    fixed_reading = (guarded(lambda: passive(module.parts(fixed=True, seed=0)))
                     if row["kind"] == "failure" else None)
    t1 = time.perf_counter()
    act = guarded(lambda: active(module.parts(fixed=False, seed=0), evaluation(module, False))) \
        if with_active else None
    t_active = time.perf_counter() - t1 if act is not None else math.nan
    return dict(case=name, kind=row["kind"], accepted=";".join(row["accepted"]) or "-",
                passive=describe(buggy), passive_score=score(buggy, row["accepted"], row["kind"]),
                fixed=describe(fixed_reading),
                fixed_healthy=("" if fixed_reading is None else
                               ("yes" if healthy(fixed_reading) else "no")),
                active=describe(act),
                active_score=score(act, row["accepted"], row["kind"]) if act else "-",
                t_passive=t_passive, t_active=t_active)


def group(row: dict) -> str:
    if row["kind"] == "control":
        return "control"
    return "in-catalogue" if row["accepted"] != "-" else "outside"


def totals(rows: list[dict]) -> list[str]:
    if not rows:  # e.g. --cases naming only held cases: the dev part is empty
        return ["no cases"]
    lines = []
    for g in ("in-catalogue", "outside", "control"):
        sub = [r for r in rows if group(r) == g]
        if not sub:
            continue
        for side in ("passive", "active"):
            scores = [r[f"{side}_score"] for r in sub if r[f"{side}_score"] != "-"]
            if not scores:
                continue
            counts = {s: scores.count(s) for s in sorted(set(scores))}
            text = ", ".join(f"{k} {v}" for k, v in counts.items())
            lines.append(f"{g:13s} {side:8s} n={len(scores):2d}: {text}")
    fixed = [r["fixed_healthy"] for r in rows if r["fixed_healthy"]]
    if fixed:
        lines.append(f"fixed programs read healthy: {fixed.count('yes')} of {len(fixed)}")
    t = [r["t_passive"] for r in rows]
    lines.append(f"passive seconds per case (buggy run + diagnose): mean {statistics.mean(t):.1f}, "
                 f"max {max(t):.1f}")
    ta = [r["t_active"] for r in rows if math.isfinite(r["t_active"])]
    if ta:
        lines.append(f"active seconds per case: mean {statistics.mean(ta):.1f}, max {max(ta):.1f}")
    return lines


COLUMNS = ["case", "kind", "accepted", "passive", "passive_score", "fixed", "fixed_healthy",
           "active", "active_score", "t_passive"]


def markdown(rows: list[dict], part: str, command: str, seconds: float) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=HERE).stdout.strip() or "unknown"
    out = [f"Measured {datetime.date.today()} at commit {commit}, split part: {part}; "
           f"`{command}` ({seconds:.0f} s).", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        out.append("| " + " | ".join(f"{r[c]:.1f}" if c == "t_passive" else str(r[c])
                                     for c in COLUMNS) + " |")
    out += ["", "```", *totals(rows), "```", ""]
    return "\n".join(out)


def run_diagnosis(names: list[str], with_active: bool, md: str | None, part: str) -> list[dict]:
    truth = read_truth()
    t0 = time.perf_counter()
    rows = []
    for name in names:
        r = diagnose_case(name, truth, with_active)
        rows.append(r)
        print(f"{name:36s} {r['kind']:8s} accepted={r['accepted']:28s} "
              f"passive={r['passive']:40s} {r['passive_score']:15s} "
              f"fixed={r['fixed']} ({r['fixed_healthy'] or '-'}) "
              f"active={r['active']} {r['active_score']}  {r['t_passive']:.1f}s", flush=True)
    print(*totals(rows), sep="\n")
    if part == "all" and SPLIT.exists():  # both parts of the split, each on its own
        split = read_split()
        for side in ("dev", "held"):
            print(f"\n-- the {side} part --")
            print(*totals([r for r in rows if split.get(r["case"]) == side]), sep="\n")
    if md:
        command = "python benchmarks/real_bugs/run.py " + " ".join(sys.argv[1:])
        Path(md).write_text(markdown(rows, part, command, time.perf_counter() - t0))
        print(f"wrote {md}")
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harm", action="store_true", help="buggy vs fixed on seeds 0-2 -> harm.csv")
    p.add_argument("--make-split", action="store_true", help="split the corpus once (dev/held)")
    p.add_argument("--extend-split", action="store_true",
                   help="give cases added after the split a part, moving no other case")
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--split", default="all", choices=("dev", "held", "all"))
    p.add_argument("--no-active", action="store_true", help="skip fl.investigate")
    p.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    args = p.parse_args(argv)
    if args.make_split:
        return make_split()
    if args.extend_split:
        return extend_split()
    names = select(case_names(), args.cases, args.split)
    if args.harm:
        return run_harm(names)
    run_diagnosis(names, not args.no_active, args.markdown, args.split)


if __name__ == "__main__":
    main()
