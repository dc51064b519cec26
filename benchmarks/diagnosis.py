"""Blind diagnosis benchmark: diagnose(...).top against the injected fault.

Runs every fault of the catalogue, and both healthy baselines, on seeds that were never
used to set a threshold (default 100-119), diagnoses each history without telling it
the recipe, and prints the confusion matrix (rows: injected, columns: diagnosed top),
top-1 and top-3 accuracy, the healthy false-alarm rate and the shape agreement; then,
as an anchor, how often AUTOTRAINER/DeepDiagnosis-style rules flag the same runs.

    python benchmarks/diagnosis.py [--seeds 100-119] [--workers 2]
    python benchmarks/diagnosis.py --zoo [--zoo-seeds 0-2]

`--zoo` scores plain PyTorch loops of the zoo instead (see `zoo_report`): every family
with thresholds calibrated without it (leave-one-family-out), healthy false alarms per
family, confident-wrong answers, failures outside the catalogue, and how often each
confidence level was right.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict

import pandas as pd

import failurelab as fl
from failurelab.catalogue.faults import accepted_shapes
from failurelab.lab.parallel import worker_pool


def rule_based(history: pd.DataFrame) -> list[str]:
    """The anchor: AUTOTRAINER / DeepDiagnosis-style rules on the same telemetry.

    vanishing: first/last layer gradient ratio < 1e-3; exploding: non-finite values or
    gradient norm > 1e3; dying ReLU: >= 70% of gradient entries exactly zero; update
    ratio outside [1e-5, 1e-1]; not converging: loss not down by 10%.  They name
    symptom classes, not causes, so the comparison is on detection only.
    """
    h, found = history, []
    weights = [c for c in h.columns if c.startswith("grad_norm/") and c.endswith("weight")]
    if len(weights) >= 2 and (h[weights[0]] / h[weights[-1]]).median() < 1e-3:
        found.append("vanishing")
    if h["nonfinite"].gt(0).any() or h["grad_norm"].gt(1e3).any():
        found.append("exploding")
    if h["zero_grad_frac"].median() >= 0.7:
        found.append("dying_relu")
    ratio = h["update_ratio"].median()
    if not 1e-5 <= ratio <= 1e-1:
        found.append("bad_update_ratio")
    loss = h["loss"].dropna()
    if len(loss) > 10 and loss.iloc[-10:].mean() > 0.9 * loss.iloc[:10].mean():
        found.append("not_converging")
    return found


def _job(args):
    name, seed = args
    recipe = fl.baseline(name) if name in ("tabular", "sequence") else name
    history = fl.run(recipe, seed=seed).history
    d = fl.diagnose(history)
    return (name, seed, d.top, [c[0] for c in d.causes[:3]], d.shape, d.lookalikes,
            rule_based(history))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100-119")
    parser.add_argument("--zoo", action="store_true", help="score the zoo's loops instead")
    parser.add_argument("--zoo-seeds", default="0-2")
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    args = parser.parse_args()
    if args.zoo:
        from zoo_report import zoo_main

        return zoo_main(fl.parse_seeds(args.zoo_seeds), args.workers)
    seeds = fl.parse_seeds(args.seeds)
    names = list(fl.FAULTS) + ["tabular", "sequence"]
    start = time.perf_counter()
    jobs = [(n, s) for n in names for s in seeds]
    with worker_pool(len(jobs), args.workers) as pool:
        results = list(pool.map(_job, jobs))
    seconds = time.perf_counter() - start

    confusion = defaultdict(Counter)
    top1 = top3 = shape_ok = n_faults = false_alarms = n_healthy = 0
    rule_hits = rule_alarms = detected = 0
    missed_by_rules = Counter()
    for name, seed, top, top3_names, shape, _, rules in results:
        confusion[name][top or "(none)"] += 1
        if name in fl.FAULTS:
            n_faults += 1
            top1 += top == name
            top3 += name in top3_names
            detected += top is not None
            rule_hits += bool(rules)
            missed_by_rules[name] += not rules
            shape_ok += shape in accepted_shapes(fl.FAULTS[name])
        else:
            n_healthy += 1
            false_alarms += top is not None
            rule_alarms += bool(rules)
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
    print("\nanchor, rule-based symptom checks on the same telemetry (detection only):")
    print(f"  diagnose detects   {detected}/{n_faults} = {detected / n_faults:.1%} of faulty "
          f"runs, false alarms {false_alarms}/{n_healthy}")
    print(f"  rules detect       {rule_hits}/{n_faults} = {rule_hits / n_faults:.1%}, "
          f"false alarms {rule_alarms}/{n_healthy}")
    print("  faults the rules never flag: " + ", ".join(
        n for n, k in missed_by_rules.items() if k == len(seeds)))
    shapes = pd.crosstab(pd.Series([r[0] for r in results], name="injected"),
                         pd.Series([r[4] for r in results], name="shape"))
    print("\nshapes:\n" + shapes.to_string())
    return 0 if top1 >= 0.95 * n_faults and false_alarms <= 0.05 * n_healthy else 1


if __name__ == "__main__":
    sys.exit(main())
