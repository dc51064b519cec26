"""Before and after a diagnosis change, on the same histories: the held-out and fresh
loops run once, with this package's Monitor, and each history is diagnosed twice, by
this package and by another copy of it (DIR/failurelab, e.g. `git archive REV
failurelab | tar -x -C DIR`).  Running both codes' loops instead would measure their
telemetry too, and twice the time; on loops whose telemetry did not change this isolates
the diagnosis.

    OMP_NUM_THREADS=1 python benchmarks/before_after.py --against DIR
        [--held-out-seeds 15-16] [--fresh-seeds 46-47] [--workers 2]

Prints, for each set and each code: faults named, healthy runs called healthy, and
confident-wrong answers (a wrong fault named at high or medium confidence); then every
run whose answer changed.
"""

from __future__ import annotations

import argparse
import time
import warnings

import fresh_loops
import held_out_loops
import overhead

import failurelab as fl
from failurelab.lab.parallel import worker_pool


def _answer(d, expected) -> tuple:
    right = d.top == expected and (expected is not None or d.shape == "healthy")
    confident_wrong = d.top is not None and d.top != expected and d.confidence != "low"
    return right, confident_wrong, d.top, d.shape, d.confidence


def _job(case):
    suite, name, plant, seed, folder = case
    module = held_out_loops if suite == "held-out" else fresh_loops
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = module.run(name, plant, seed)
        expected = module.PLANTS[plant][1]
        return (case[:4], expected, _answer(fl.diagnose(history), expected),
                _answer(overhead.other_package(folder).diagnose(history), expected))


def _summary(results, which: int) -> str:
    faulty = [r for r in results if r[1] is not None]
    healthy = [r for r in results if r[1] is None]
    named = sum(r[which][0] for r in faulty)
    called = sum(r[which][0] for r in healthy)
    wrong = sum(r[which][1] for r in results)
    return (f"faults named {named}/{len(faulty)} ({named / max(len(faulty), 1):.1%}), "
            f"healthy called healthy {called}/{len(healthy)}, confident-wrong {wrong}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, metavar="DIR")
    parser.add_argument("--held-out-seeds", default="15-16")
    parser.add_argument("--fresh-seeds", default="46-47")
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    args = parser.parse_args()
    jobs = [("held-out", *case, args.against)
            for case in held_out_loops.cases(fl.parse_seeds(args.held_out_seeds))]
    fresh, _ = fresh_loops.cases(fl.parse_seeds(args.fresh_seeds))
    jobs += [("fresh", *case, args.against) for case in fresh]
    start = time.perf_counter()
    with worker_pool(len(jobs), args.workers) as pool:
        results = list(pool.map(_job, jobs, chunksize=4))
    print(f"{len(results)} histories in {time.perf_counter() - start:.0f} s, each diagnosed "
          f"by this package and by {args.against}\n")
    for suite, seeds in (("held-out", args.held_out_seeds), ("fresh", args.fresh_seeds)):
        rows = [r for r in results if r[0][0] == suite]
        print(f"{suite} loops, seeds {seeds}")
        print(f"  this package: {_summary(rows, 2)}")
        print(f"  {args.against}: {_summary(rows, 3)}")
    changed = [r for r in results if r[2] != r[3]]
    print(f"\n{len(changed)} answers changed (suite, loop, plant, seed: expected; "
          f"other -> this):")
    for (suite, name, plant, seed), expected, now, before in changed:
        print(f"  {suite:8s} {name:22s} {plant:24s} s{seed}: {expected or 'healthy'}; "
              f"{before[2]} {before[3]} ({before[4]}) -> {now[2]} {now[3]} ({now[4]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
