"""Regenerate docs/signatures.md: every signature quantity, measured over seeds 0-9 on
the faulty runs and on the healthy baseline, beside its threshold and its reason.

Also prints the wall time of the whole catalogue x 10 seeds (target: <= 60 s on 2
cores) and exits non-zero if any fault failed to reproduce or any baseline tripped a
signature.

    python benchmarks/signatures.py [--seeds 0-9] [--out docs/signatures.md]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import failurelab as fl
from failurelab.signatures import fmt
from failurelab.sweep import summary, timed_verify

HEADER = """# Signatures: measured ranges

Regenerate with `python benchmarks/signatures.py` (seeds {seeds}; {runs} runs took
{seconds:.0f} s on {workers} worker processes). For every fault, each condition of its
signature is shown with its threshold, the range measured on the faulty runs, and the
range measured on the healthy baseline of the same task. A signature fires only when
all of its conditions hold. "n/a" means the quantity needs columns that run lacks
(for example, a run that stopped at its first NaN loss has no smoothed curve).

"""


def _range(values: list[float]) -> str:
    finite = [v for v in values if v == v]
    if not finite:
        return "n/a"
    lo, hi = min(finite), max(finite)
    return fmt(lo) if lo == hi else f"{fmt(lo)} .. {fmt(hi)}"


def render(results, seeds: str, seconds: float, workers: int) -> str:
    out = [HEADER.format(seeds=seeds, runs=results.groupby(["kind", "fault", "seed"]).ngroups,
                         seconds=seconds, workers=workers)]
    table = summary(results)
    out.append("| fault | reproduced | baseline false alarms | weakest margin |\n"
               "|---|---|---|---|")
    for name, row in table.iterrows():
        out.append(f"| `{name}` | {row.reproduced}/{row.seeds} | {row.false_alarms} | "
                   f"{row.weakest_margin:.2f} |")
    out.append("\nMargins are in decades for ratios and in the condition's unit otherwise; "
               "0 is the threshold.\n")
    for name, fault in fl.FAULTS.items():
        mine = results[(results.kind == "fault") & (results.fault == name)]
        base = results[(results.kind == "baseline") & (results.fault == name)]
        out.append(f"## `{name}` ({fault.task}): {fault.title}\n\n"
                   f"Verdict when it fires: {fault.signature.verdict.rstrip('.?!')}"
                   f"{'?' if fault.signature.verdict.endswith('?') else '.'}\n\n"
                   "| quantity | threshold | fault, seeds | baseline, seeds | why |\n"
                   "|---|---|---|---|---|")
        for c in fault.signature.conditions:
            sign = "≥" if c.above else "≤"
            f_vals = [v[c.quantity] for v in mine["values"]]
            b_vals = [v[c.quantity] for v in base["values"]]
            out.append(f"| {c.label} (`{c.quantity}`) | {sign} {fmt(c.threshold)} | "
                       f"{_range(f_vals)} | {_range(b_vals)} | {c.why} |")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,7")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1]
                                             / "docs" / "signatures.md"))
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    seeds = fl.parse_seeds(args.seeds)
    results, seconds = timed_verify(seeds=seeds, workers=args.workers)
    workers = args.workers or min(len(results), os.cpu_count() or 1)
    Path(args.out).write_text(render(results, args.seeds, seconds, workers))
    table = summary(results)
    print(table.to_string())
    print(f"\ncatalogue: {len(fl.FAULTS)} faults x {len(seeds)} seeds + baselines in "
          f"{seconds:.1f} s (target <= 60 s on 2 cores); wrote {args.out}")
    return 0 if table.ok.all() else 1


if __name__ == "__main__":
    sys.exit(main())
