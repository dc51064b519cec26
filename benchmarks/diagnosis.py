"""Blind diagnosis benchmark: diagnose(...).top against the injected fault.

Runs every fault of the catalogue, and both healthy baselines, on seeds that were never
used to set a threshold (default 100-119), diagnoses each history without telling it
the recipe, and prints the confusion matrix (rows: injected, columns: diagnosed top),
top-1 and top-3 accuracy, the healthy false-alarm rate and the shape agreement.

    python benchmarks/diagnosis.py [--seeds 100-119] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor

import pandas as pd

import failurelab as fl


def _job(args):
    name, seed = args
    import torch

    torch.set_num_threads(1)
    recipe = fl.baseline(name) if name in ("tabular", "sequence") else name
    d = fl.diagnose(fl.run(recipe, seed=seed))
    return name, seed, d.top, [c[0] for c in d.causes[:3]], d.shape, d.lookalikes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100-119")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    seeds = fl.parse_seeds(args.seeds)
    names = list(fl.FAULTS) + ["tabular", "sequence"]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_job, [(n, s) for n in names for s in seeds]))
    seconds = time.perf_counter() - start

    confusion = defaultdict(Counter)
    top1 = top3 = shape_ok = n_faults = false_alarms = n_healthy = 0
    for name, seed, top, top3_names, shape, _ in results:
        confusion[name][top or "(none)"] += 1
        if name in fl.FAULTS:
            n_faults += 1
            top1 += top == name
            top3 += name in top3_names
            shape_ok += shape in (fl.FAULTS[name].shape, *fl.FAULTS[name].other_shapes)
        else:
            n_healthy += 1
            false_alarms += top is not None
    print(f"seeds {args.seeds}: {len(results)} runs in {seconds:.1f} s\n")
    print("confusion (injected -> diagnosed top, counts over seeds):")
    for name in names:
        row = ", ".join(f"{k} {v}" for k, v in confusion[name].most_common())
        print(f"  {name:24s} {row}")
    print(f"\ntop-1 accuracy  {top1}/{n_faults} = {top1 / n_faults:.1%}")
    print(f"top-3 accuracy  {top3}/{n_faults} = {top3 / n_faults:.1%}")
    print(f"shape agreement {shape_ok}/{n_faults} = {shape_ok / n_faults:.1%}")
    print(f"healthy false alarms {false_alarms}/{n_healthy} = "
          f"{false_alarms / n_healthy:.1%}")
    shapes = pd.crosstab(pd.Series([r[0] for r in results], name="injected"),
                         pd.Series([r[4] for r in results], name="shape"))
    print("\nshapes:\n" + shapes.to_string())
    return 0 if top1 >= 0.95 * n_faults and false_alarms <= 0.05 * n_healthy else 1


if __name__ == "__main__":
    sys.exit(main())
