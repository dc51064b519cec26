"""Does the LR range test's suggestion train?  Ours beside torch-lr-finder's.

For 20 seeds of each lab task and every zoo family x optimizer (healthy cases), sweep
the rate with `fl.lr_range_test` and with torch-lr-finder (same range: 1e-5 to 10 in
100 steps, its steepest-gradient suggestion), then train a real run at each suggestion:

* lab task: it trains when `fl.diagnose` calls the run healthy (no cause) and the final
  validation accuracy is >= 0.9 (the tuned baselines reach 0.93-1.0);
* zoo family: it trains when the loss is finite and falls by at least half as much as
  at the family's hand-tuned rate (mean of the first 5 steps minus mean of the last
  10 %).  `fl.diagnose`'s shape is shown too, beside the tuned run's, because the
  diagnosis has its own false alarms on loops unlike the lab's.

torch-lr-finder is a benchmark-only dependency (`pip install "failurelab[bench]"`);
without it only our column is filled.

    OMP_NUM_THREADS=1 python benchmarks/lr_range.py [--seeds 20] [--zoo-seeds 1]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import failurelab as fl  # noqa: E402
from failurelab import zoo  # noqa: E402
from failurelab.basics.recipes import TASKS  # noqa: E402
from failurelab.lab import lr_range  # noqa: E402
from failurelab.lab.parallel import worker_pool  # noqa: E402
from failurelab.lab.train import torch_threads  # noqa: E402

try:
    from torch_lr_finder import LRFinder, TrainDataLoaderIter
except ImportError:  # benchmark-only dependency
    LRFinder = TrainDataLoaderIter = None

LAB_MIN_VAL_ACC = 0.9
ZOO_MIN_PROGRESS = 0.5  # share of the hand-tuned rate's loss reduction a run must reach


def theirs(model, optimizer, loss_fn, batches) -> float:
    """torch-lr-finder's suggestion over our range (NaN when it fails or is absent)."""
    if LRFinder is None:
        return math.nan
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    finder = None
    try:
        finder = LRFinder(model, optimizer, loss_fn, device="cpu")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            finder.range_test(batches, start_lr=lr_range.START_LR, end_lr=lr_range.END_LR,
                              num_iter=lr_range.SWEEP_STEPS)
            _, lr = finder.plot(ax=ax, suggest_lr=True)
    except (RuntimeError, ValueError, IndexError):
        lr = math.nan
    finally:
        plt.close(fig)
        if finder is not None:
            finder.reset()
    return float(lr)


class _StepBatches(TrainDataLoaderIter or object):
    """A zoo loop's `next_batch(step)` as the iterator torch-lr-finder asks for."""

    def __init__(self, next_batch):
        self.next_batch, self.step = next_batch, 0

    def __next__(self):
        self.step += 1
        return self.next_batch(self.step - 1)


def lab_row(task: str, seed: int) -> dict:
    ours = fl.lr_range_test(task, seed=seed).suggested_lr
    parts = fl.build(fl.baseline(task), seed)
    with torch_threads(1):
        their = theirs(parts.model, parts.optimizer, parts.loss_fn, parts.train_loader)
    row = dict(suite=task, case=f"{task}/seed{seed}", ours=ours, theirs=their)
    for who in ("ours", "theirs"):
        row[f"{who}_trains"], row[f"{who}_shape"] = _lab_trains(task, seed, row[who])
    return row


def _lab_trains(task: str, seed: int, lr: float) -> tuple[bool | None, str]:
    if not (lr > 0):
        return None, "-"
    run = fl.run(fl.baseline(task).replace(lr=lr), seed=seed)
    d = fl.diagnose(run)
    ok = d.shape == "healthy" and d.top is None and run.summary["final_val_acc"] >= LAB_MIN_VAL_ACC
    return ok, d.shape


def zoo_row(case) -> dict:
    """Both sweeps see the loop without its habits (torch-lr-finder refuses an optimizer
    with a scheduler attached); the runs at the suggestions keep them."""
    plain = dataclasses.replace(case, habits=())
    ours = fl.lr_range_test(zoo.build(plain), seed=case.seed).suggested_lr
    loop = zoo.build(plain)
    with torch_threads(1):
        their = theirs(loop.model, loop.optimizer, loop.loss_fn, _StepBatches(loop.next_batch)) \
            if TrainDataLoaderIter else math.nan
    tuned = zoo.run(case)
    row = dict(suite=case.family, case=case.id, ours=ours, theirs=their,
               tuned=zoo.build(case).lr, tuned_shape=fl.diagnose(tuned).shape)
    for who in ("ours", "theirs"):
        row[f"{who}_trains"], row[f"{who}_shape"] = _zoo_trains(case, row[who], tuned)
    return row


def _zoo_trains(case, lr: float, tuned) -> tuple[bool | None, str]:
    if not (lr > 0):
        return None, "-"
    history = zoo.run(case, lr=lr)
    ok = bool(np.isfinite(history["loss"]).all()) and \
        _progress(history) >= ZOO_MIN_PROGRESS * _progress(tuned)
    return ok, fl.diagnose(history).shape


def _progress(history) -> float:
    loss = history["loss"].to_numpy(float)
    return float(np.mean(loss[:5]) - np.mean(loss[-max(1, len(loss) // 10):]))


def _job(item):
    kind, args = item
    return lab_row(*args) if kind == "lab" else zoo_row(args)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds of each lab task")
    p.add_argument("--zoo-seeds", type=int, default=1, help="seeds of each zoo family x optimizer")
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args(argv)
    if LRFinder is None:
        print("torch-lr-finder is not installed: only our suggestion is measured")
    items = [("lab", (task, s)) for task in TASKS for s in range(args.seeds)]
    items += [("zoo", c) for c in zoo.cases(seeds=tuple(range(args.zoo_seeds)), faulty=False)]
    with worker_pool(len(items), args.workers) as pool:
        rows = list(pool.map(_job, items))
    _print(rows)


def _print(rows) -> None:
    print(f"{'case':44} {'ours':>9} {'trains':>6} {'shape':>11} {'theirs':>9} {'trains':>6} "
          f"{'shape':>11}")
    for r in rows:
        print(f"{r['case']:44} {r['ours']:9.2g} {_yes(r['ours_trains']):>6} {r['ours_shape']:>11} "
              f"{r['theirs']:9.2g} {_yes(r['theirs_trains']):>6} {r['theirs_shape']:>11}")
    print("\ntrains (yes/all) per task or family:")
    print(f"{'suite':12} {'ours':>7} {'theirs':>7} {'ours healthy':>13} {'theirs healthy':>15} "
          f"{'tuned healthy':>14}")
    for suite in dict.fromkeys(r["suite"] for r in rows):
        group = [r for r in rows if r["suite"] == suite]
        n = len(group)
        count = Counter()
        for r in group:
            count["ours"] += r["ours_trains"] is True
            count["theirs"] += r["theirs_trains"] is True
            count["ours_h"] += r["ours_shape"] == "healthy"
            count["theirs_h"] += r["theirs_shape"] == "healthy"
            count["tuned_h"] += r.get("tuned_shape", "healthy") == "healthy"
        print(f"{suite:12} {count['ours']:>3}/{n:<3} {count['theirs']:>3}/{n:<3} "
              f"{count['ours_h']:>9}/{n:<3} {count['theirs_h']:>11}/{n:<3} {count['tuned_h']:>10}/{n:<3}")
    total = len(rows)
    print(f"{'all':12} {sum(r['ours_trains'] is True for r in rows):>3}/{total:<3} "
          f"{sum(r['theirs_trains'] is True for r in rows):>3}/{total:<3}")


def _yes(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


if __name__ == "__main__":
    main()
