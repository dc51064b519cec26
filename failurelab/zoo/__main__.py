"""`python -m failurelab.zoo`: run the zoo's population in parallel and summarise it.

    python -m failurelab.zoo --seeds 0,1,2 --workers 2 --out zoo.csv
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from ..basics.files import check_output
from .cases import cases
from .families import FAMILIES
from .population import run_population, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m failurelab.zoo", description=__doc__)
    parser.add_argument("--families", default=None,
                        help=f"comma-separated, from {', '.join(FAMILIES)} (default: all)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--healthy-only", action="store_true")
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument("--out", default=None, help="write the per-case summary as CSV")
    args = parser.parse_args(argv)
    try:
        seeds = tuple(int(s) for s in args.seeds.split(","))
        families = args.families.split(",") if args.families else None
        population = cases(families, seeds, faulty=not args.healthy_only)
        if args.out:
            check_output(args.out, (".csv",), what="summary")  # before the runs, not after
    except ValueError as error:
        parser.error(str(error))
    started = time.perf_counter()
    results = run_population(population, args.workers)
    wall = time.perf_counter() - started
    table = pd.DataFrame([summary(*r) for r in results])
    if args.out:
        table.to_csv(args.out, index=False)
    healthy = table[table.fault == "healthy"]
    print(f"{len(table)} cases ({len(healthy)} healthy) in {wall:.1f} s wall; "
          f"a run: median {table.seconds.median():.2f} s wall, "
          f"{table.cpu_seconds.median():.2f} s CPU; slowest {table.seconds.max():.2f} s wall")
    print("healthy loss ratio (last 10 / first 10 steps), worst per family:")
    print(healthy.groupby("family").loss_ratio.agg(["max", "median"]).round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
