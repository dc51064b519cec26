"""`diagnosis.py --zoo`: the diagnosis on plain PyTorch loops the lab never saw.

Each family is scored with thresholds calibrated on the healthy runs of every *other*
family and the lab's baselines (leave-one-family-out), so no threshold saw the loops
it is judged on; the same scores with the shipped calibration are printed beside.
An answer is right when it names the planted fault; for a healthy run, when it names
no cause and calls the curve healthy; for a failure outside the catalogue, when it
names no cause.  Confident-wrong: a wrong answer given with high confidence.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import population

import failurelab as fl
from failurelab.catalogue import PHYSICAL
from failurelab.catalogue.calibration import calibrate, route_ranges

LEVELS = ("high", "medium", "low")


def right(expected: str, d) -> bool:
    if expected == "healthy":
        return d.top is None and d.shape == "healthy"
    if expected == "outside":
        return d.top is None
    return d.top == expected


def lofo(records, healthy) -> dict:
    """{family: the catalogue calibrated on every healthy run outside that family}."""
    out = {}
    for family in sorted({r.family for r in records}):
        routes = route_ranges(PHYSICAL, [r.values for r in healthy if r.family != family])
        out[family] = calibrate(PHYSICAL, routes)
    return out


def _diagnoses(records, catalogues):
    return [(r, fl.diagnose(r.history, catalogues[r.family])) for r in records]


def table(results) -> tuple[list[str], dict]:
    per = defaultdict(Counter)
    for r, d in results:
        c = per[r.family]
        kind = r.expected if r.expected in ("healthy", "outside") else "fault"
        c[kind] += 1
        c[kind + "_right"] += right(r.expected, d)
        if kind == "fault":
            c["top3"] += r.expected in [name for name, _, _ in d.causes[:3]]
        c["confident_wrong"] += d.confidence == "high" and not right(r.expected, d)
        c[kind + "_confident_wrong"] += d.confidence == "high" and not right(r.expected, d)
    lines = [f"{'family':18s} {'faults':>6s} {'top-1':>7s} {'top-3':>7s} "
             f"{'healthy':>7s} {'alarms':>6s} {'outside':>7s} {'conf-wrong':>10s}"]
    total = Counter()
    for family, c in sorted(per.items()):
        total.update(c)
        lines.append(_row(family, c))
    lines.append(_row("ALL", total))
    return lines, total


def _pct(a, b) -> str:
    return f"{a / b:.0%}" if b else "-"


def _row(name, c) -> str:
    return (f"{name:18s} {c['fault']:6d} {_pct(c['fault_right'], c['fault']):>7s} "
            f"{_pct(c['top3'], c['fault']):>7s} {c['healthy']:7d} "
            f"{c['healthy'] - c['healthy_right']:6d} {c['outside']:7d} "
            f"{c['confident_wrong']:10d}")


def confusion(results) -> list[str]:
    rows = defaultdict(Counter)
    for r, d in results:
        answer = d.top or ("(healthy)" if d.shape == "healthy" else f"(none: {d.shape})")
        rows[r.expected][answer] += 1
    return [f"  {expected:24s} " + ", ".join(f"{k} {v}" for k, v in c.most_common())
            for expected, c in sorted(rows.items())]


def levels(results) -> list[str]:
    out = []
    for level in LEVELS:
        hits = [right(r.expected, d) for r, d in results if d.confidence == level]
        named = [right(r.expected, d) for r, d in results
                 if d.confidence == level and d.top is not None]
        out.append(f"  {level:6s} {sum(hits)}/{len(hits)} right ({_pct(sum(hits), len(hits))})"
                   f"; when a cause is named {sum(named)}/{len(named)} "
                   f"({_pct(sum(named), len(named))})")
    return out


def zoo_main(seeds, workers) -> int:
    if not population.zoo_available():
        print("failurelab.zoo is not available on this branch")
        return 2
    start = time.perf_counter()
    records = population.run(population.lab_jobs(range(10), faults=False),
                             population.zoo_cases(seeds), workers)
    healthy = [r for r in records if r.expected == "healthy"]
    zoo = [r for r in records if not r.family.startswith("lab-")]
    lofo_results = _diagnoses(zoo, lofo(zoo, healthy))
    shipped = {f: fl.FAULTS for f in {r.family for r in zoo}}
    shipped_results = _diagnoses(zoo, shipped)
    seconds = time.perf_counter() - start
    print(f"zoo seeds {seeds[0]}-{seeds[-1]}: {len(zoo)} zoo runs (+{len(records) - len(zoo)} "
          f"lab baselines for calibration) in {seconds:.0f} s\n")
    print("leave-one-family-out calibration (thresholds never saw the family scored):")
    lines, lofo_total = table(lofo_results)
    print("\n".join(lines))
    print("\nshipped calibration (every healthy run, all families):")
    lines, _ = table(shipped_results)
    print("\n".join(lines))
    print("\nconfusion, leave-one-family-out (expected -> answer):")
    print("\n".join(confusion(lofo_results)))
    print("\nconfidence levels, leave-one-family-out: how often the answer was right")
    print("\n".join(levels(lofo_results)))
    t = lofo_total
    n_all = t["fault"] + t["outside"] + t["healthy"]
    print(f"\nLOFO top-1 on catalogue faults {t['fault_right']}/{t['fault']} = "
          f"{_pct(t['fault_right'], t['fault'])}; healthy false alarms "
          f"{t['healthy'] - t['healthy_right']}/{t['healthy']}; confident-wrong "
          f"{t['confident_wrong']}/{n_all} = {_pct(t['confident_wrong'], n_all)} overall, "
          f"{t['outside_confident_wrong']}/{t['outside']} outside the catalogue")
    ok = (t["fault_right"] >= 0.9 * t["fault"] and t["healthy"] == t["healthy_right"]
          and t["confident_wrong"] <= 0.02 * n_all and not t["outside_confident_wrong"])
    return 0 if ok else 1
