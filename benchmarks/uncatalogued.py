"""Measure three causes of the course that the catalogue does not reproduce as faults.

The table "Causes of the course not in the catalogue, and why" at the end of
docs/signatures.md (its text is `NOT_REPRODUCED` in benchmarks/signatures.py) cites
this script for three of its rows.  Every run is the lab's own `fl.run` (its loop, its
Monitor, its timing columns); where a row needs a change no recipe field makes (a
hand-written loss, a linear model), `patched_build` swaps that one part of what
`fl.build` returns, and nothing else.

    OMP_NUM_THREADS=1 python benchmarks/uncatalogued.py [--rows logsoftmax,slow,capacity]
        [--seeds 0-4] [--workers 2]

* logsoftmax - a hand-written `log(softmax(x))` against the loop's cross-entropy
  (`log_softmax`).  First the logit gap (largest logit minus the true class's) at which
  `log(softmax)` loses precision and becomes -inf, per dtype, and what CPU autocast
  does with a softmax of float16 logits.  Then, on both baselines and every catalogue
  fault, the largest gaps the lab's runs produce (training batches and validation) and
  whether the same run with the loss written as NLL of `log(softmax)` differs: loss
  curves bitwise equal?  largest difference?  final validation accuracy?  For the
  float16 recipes a third variant writes `log(softmax)` inside the autocast region.
* slow - phenomenon D on the tabular task: batch sizes 1-256 (learning rate 0.1 x
  B/64) and hidden widths 64/1024/4096 (rate 0.1 x 64/width; 4096, about two minutes a
  run, on the first seed only), read through the loop's thread CPU timing columns
  (`t_data`, `t_forward`, `t_backward`, `t_step`): microseconds per step and per
  sample, each segment's share, backward over forward, and final validation accuracy;
  beside them the same readings on both healthy baselines, and the largest layer's
  share of the parameters there and in the zoo's healthy models.  Timing runs one at a
  time (`--workers` is ignored), under both Monitor presets: the full preset's
  optimizer pre-hook copies weights and gradients inside `t_step`.
* capacity - hidden widths 1, 2, 4, 8 against the baseline's 32 on the sequence task,
  and 1, 2, 3 against 64 on the tabular task, with the tabular task's linear ceilings
  (a linear model, and one through a 1-unit linear bottleneck); beside them the
  catalogue's `lr_too_small` and `shuffled_labels` edits on both tasks.  Final training
  loss, validation accuracy, train-validation gap, dead ReLU share, gradient norm and
  update ratio, and what `fl.diagnose` names.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import failurelab as fl
import failurelab.lab.train as lab_train
from failurelab.catalogue.faults import resolve
from failurelab.evidence import quantities as q
from failurelab.evidence.runs import TIMING_COLUMNS
from failurelab.lab.parallel import worker_pool
from failurelab.lab.train import HandWrittenCrossEntropy

TASKS = ("tabular", "sequence")
ROWS = ("logsoftmax", "slow", "capacity")


# --- shared ---------------------------------------------------------------------------

@contextlib.contextmanager
def patched_build(transform):
    """`fl.run` with `transform(parts)` applied to what `fl.build` returns."""
    original = lab_train.build

    def build(recipe, seed=0):
        return transform(original(recipe, seed))

    lab_train.build = build
    try:
        yield
    finally:
        lab_train.build = original


def task_of(name: str) -> str:
    return name if name in TASKS else fl.FAULTS[name].task


def span(values, digits: str = ".3g") -> str:
    """'lo-hi' (or one value) of the finite values, 'n/a' without any."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if not finite:
        return "n/a"
    lo, hi = min(finite), max(finite)
    return f"{lo:{digits}}" if f"{lo:{digits}}" == f"{hi:{digits}}" else \
        f"{lo:{digits}}-{hi:{digits}}"


def table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def run_all(function, jobs: list, workers: int | None) -> list:
    with worker_pool(len(jobs), workers) as pool:
        return list(pool.map(function, jobs))


# --- row 1: hand-written log(softmax) -------------------------------------------------

def thresholds(dtype: torch.dtype) -> tuple[float, ...]:
    """Smallest gap d (in steps of 0.01) between logits [0, -d] in `dtype` at which the
    hand-written loss goes wrong.  When the true class trails (the second): its loss is
    more than 1% off the exact d + log1p(exp(-d)); its gradient with respect to the
    logits is non-finite or more than 1% off the exact softmax - onehot; the loss is
    inf.  When another class trails (the true class is the first): the gradient is
    non-finite (once that class's probability is exactly 0, the backward of `log`
    computes 0 / 0 for it, although the loss never reads it).  `log_softmax` in the
    same dtype stays within 1% of the exact loss throughout."""
    d = torch.arange(0, 130, 0.01, dtype=torch.float64)
    exact = d + torch.log1p(torch.exp(-d))
    exact_grad = torch.stack([torch.sigmoid(d), -torch.sigmoid(d)], -1)  # softmax - onehot
    x = torch.stack([torch.zeros_like(d), -d], -1).to(dtype).requires_grad_()
    hand = -torch.log(torch.softmax(x, -1))[:, 1]
    hand.sum().backward()
    grad, hand = x.grad.double(), hand.detach().double()
    stable = -torch.log_softmax(x.detach(), -1)[:, 1].double()
    assert bool(((stable - exact).abs() <= 0.01 * exact).all())
    loss_off = (hand - exact).abs() > 0.01 * exact
    grad_off = ~torch.isfinite(grad).all(-1) | ((grad - exact_grad).norm(dim=-1)
                                                > 0.01 * exact_grad.norm(dim=-1))
    x = x.detach().requires_grad_()
    (-torch.log(torch.softmax(x, -1))[:, 0]).sum().backward()
    other_nan = ~torch.isfinite(x.grad).all(-1)
    return tuple(float(d[mask][0]) for mask in (loss_off, grad_off, torch.isinf(hand),
                                                 other_nan))


def autocast_softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """What CPU autocast returns for a softmax of `dtype` logits (float32 if the policy
    upcast it, as CUDA's does)."""
    with torch.autocast("cpu", dtype=dtype):
        return torch.softmax(torch.zeros(2, 3, dtype=dtype), -1).dtype


class Gaps:
    """Largest (max logit - true-class logit) and (max - min logit) seen, per split."""

    def __init__(self):
        self.largest = {"train_true": 0.0, "train_spread": 0.0,
                        "val_true": 0.0, "val_spread": 0.0}
        self.train_spreads: list[float] = []  # per training batch (per step at accumulate 1)

    def see(self, logits: torch.Tensor, y: torch.Tensor, split: str) -> None:
        logits = logits.detach().double()
        rows = torch.isfinite(logits).all(-1)  # a row with inf/NaN is a blow-up, not a gap
        if not rows.any():
            return
        logits, y = logits[rows], y[rows]
        top = logits.max(-1).values
        true = (top - logits.gather(1, y[:, None]).squeeze(1)).max()
        spread = (top - logits.min(-1).values).max()
        for key, value in ((f"{split}_true", true), (f"{split}_spread", spread)):
            self.largest[key] = max(self.largest[key], float(value))
        if split == "train":
            self.train_spreads.append(float(spread))


class WrittenLoss(nn.Module):
    """The loop's loss in one of three forms, recording the training gaps it sees.

    "log_softmax": cross_entropy, as `fl.build` makes it.  "log(softmax)": NLL of the
    hand-written log of softmax, on the float32 logits the loop passes.  "autocast":
    the same written inside the autocast region, on the logits in the recipe's dtype
    (the loop's `.float()` of float16 logits is exact, so `.to(dtype)` restores them)."""

    def __init__(self, form: str, recipe, gaps: Gaps):
        super().__init__()
        self.form, self.reduction, self.gaps = form, recipe.loss_reduction, gaps
        self.dtype = getattr(torch, recipe.dtype)
        self.by_hand = HandWrittenCrossEntropy(recipe.loss_reduction)  # the fault's formula

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.gaps.see(logits, y, "train")
        if self.form == "log_softmax":
            return F.cross_entropy(logits, y, reduction=self.reduction)
        if self.form == "log(softmax)":
            return self.by_hand(logits, y)
        with torch.autocast("cpu", dtype=self.dtype):
            return self.by_hand(logits.to(self.dtype), y).float()


def loss_form_run(job) -> dict:
    """One run of `name` on `seed` with the loss written as `form`."""
    name, seed, form = job
    recipe, gaps = resolve(name), Gaps()

    def transform(parts):
        X_val, y_val = parts.val
        parts.loss_fn = WrittenLoss(form, recipe, gaps)

        def validation(module, args, output):  # evaluate() passes parts.val[0] itself
            if args and args[0] is X_val:
                gaps.see(output.float(), y_val, "val")

        parts.model.register_forward_hook(validation)
        return parts

    with patched_build(transform):
        run = fl.run(recipe, seed=seed)
    return dict(name=name, seed=seed, form=form, loss=run.history["loss"].to_numpy(),
                val_acc=q.val_acc_end(run.history), bad=run.first_nonfinite_step,
                fingerprint=run.fingerprint, spreads=gaps.train_spreads, **gaps.largest)


def plain_fingerprint(job) -> str:
    name, seed = job
    return fl.run(name, seed=seed).fingerprint


def _compare(ref: dict, other: dict) -> tuple[bool, float, float]:
    """Bitwise equal?, largest |loss difference| over the steps both ran finitely, and
    |final validation accuracy difference|."""
    a, b = ref["loss"], other["loss"]
    n = min(len(a), len(b))
    both = np.isfinite(a[:n]) & np.isfinite(b[:n])
    diff = float(np.abs(a[:n][both] - b[:n][both]).max()) if both.any() else float("nan")
    same = len(a) == len(b) and np.array_equal(a, b, equal_nan=True)
    return same, diff, abs(ref["val_acc"] - other["val_acc"])


def _first_over(results: list[dict], limit: float) -> str:
    """First training step whose batch spread (max - min logit) exceeds `limit`."""
    firsts = [next((i for i, v in enumerate(r["spreads"]) if v > limit), None)
              for r in results]
    over = [f for f in firsts if f is not None]
    return f"{len(over)}/{len(results)}" + (f" (step {span(over, 'd')})" if over else "")


def _steps(results: list[dict]) -> str:
    bad = [r["bad"] for r in results if r["bad"] is not None]
    return f"{len(bad)}/{len(results)}" + (f" (step {span(bad, 'd')})" if bad else "")


def row_logsoftmax(seeds, workers) -> None:
    limits = {dt: thresholds(dt) for dt in (torch.float32, torch.bfloat16, torch.float16)}
    table("Where the hand-written log(softmax) goes wrong: the gap d between two logits "
          "[0, -d]", ["dtype", "true class trails: loss > 1% off from d",
                      "true class trails: gradient non-finite or > 1% off from d",
                      "true class trails: loss inf from d",
                      "another class trails: gradient NaN from d"],
          [[str(dt).removeprefix("torch."), *(f"{v:.2f}" for v in limit)]
           for dt, limit in limits.items()])
    print(f"\nCPU autocast: softmax of float16 logits returns "
          f"{autocast_softmax_dtype(torch.float16)}, of bfloat16 logits "
          f"{autocast_softmax_dtype(torch.bfloat16)} (torch {torch.__version__})")
    names = list(TASKS) + list(fl.FAULTS)
    jobs = [(n, s, f) for n in names for s in seeds for f in ("log_softmax", "log(softmax)")]
    jobs += [(n, s, "autocast") for n in names if resolve(n).dtype != "float32"
             for s in seeds]
    started = time.perf_counter()
    results = run_all(loss_form_run, jobs, workers)
    plain = run_all(plain_fingerprint, [(n, s) for n in names for s in seeds], workers)
    by = {(r["name"], r["seed"], r["form"]): r for r in results}
    refs = [by[(n, s, "log_softmax")] for n in names for s in seeds]
    untouched = sum(r["fingerprint"] == p for r, p in zip(refs, plain, strict=False))
    print(f"\n{len(results) + len(plain)} runs in {time.perf_counter() - started:.0f} s; "
          f"the gap-recording loss leaves {untouched}/{len(plain)} runs bitwise equal to "
          f"plain fl.run")
    rows = []
    for name in names:
        ref = [by[(name, s, "log_softmax")] for s in seeds]
        for form in ("log(softmax)", "autocast"):
            if (name, seeds[0], form) not in by:
                continue
            other = [by[(name, s, form)] for s in seeds]
            dtype = torch.float16 if form == "autocast" else torch.float32
            compared = [_compare(r, o) for r, o in zip(ref, other, strict=False)]
            rows.append([f"`{name}`" + (" (in autocast)" if form == "autocast" else ""),
                         span([r["train_true"] for r in ref]),
                         span([r["train_spread"] for r in ref]),
                         span([r["val_true"] for r in ref]),
                         span([r["val_spread"] for r in ref]),
                         f"{sum(c[0] for c in compared)}/{len(seeds)}",
                         span([c[1] for c in compared]), span([c[2] for c in compared]),
                         _first_over(ref, limits[dtype][3]), _steps(ref), _steps(other)])
    table(f"Largest logit gaps under the loop's log_softmax (seeds {seeds[0]}-{seeds[-1]}) "
          "and the same runs with log(softmax)",
          ["recipe", "train: max - true", "train: max - min", "val: max - true",
           "val: max - min", "log(softmax) bitwise equal", "max |Δ loss|",
           "|Δ final val acc|", "batch max - min past the NaN gap (float32 104, in "
           "autocast float16 17.3)", "non-finite (log_softmax)",
           "non-finite (log(softmax))"],
          rows)


# --- row 2: phenomenon D ---------------------------------------------------------------

def timed_run(job) -> dict:
    """Median CPU microseconds per segment and per step, the median share of each
    segment, and the final validation accuracy (the first 20 steps are warm-up)."""
    label, recipe, seed, preset = job
    run = fl.run(recipe, seed=seed, preset=preset)
    h = run.history.iloc[20:]
    total = h[list(TIMING_COLUMNS)].sum(axis=1)
    out = dict(label=label, seed=seed, preset=preset, batch=recipe.batch_size,
               us_step=1e6 * float(total.median()),
               us_sample=1e6 * float(total.median()) / recipe.batch_size,
               val_acc=q.val_acc_end(run.history), steps=len(run.history))
    for column in TIMING_COLUMNS:
        out[column] = 1e6 * float(h[column].median())
        out[f"share_{column}"] = float((h[column] / total.where(total > 0)).median())
    forward = h["t_forward"]
    out["backward_forward"] = float((h["t_backward"] / forward.where(forward > 0)).median())
    return out


def largest_layer_share(model: nn.Module) -> float:
    """The largest module's share of the trainable parameters (its own, not children's)."""
    sizes = [sum(p.numel() for p in m.parameters(recurse=False) if p.requires_grad)
             for m in model.modules()]
    return max(sizes) / sum(sizes)


def zoo_layer_shares() -> dict[str, float]:
    """The largest-layer share of every zoo family's healthy model (seed 0)."""
    try:
        from failurelab import zoo
        from failurelab.zoo.parts import build
    except ImportError:
        return {}
    shares = {}
    for case in zoo.cases(seeds=(0,), faulty=False):
        shares.setdefault(case.family, largest_layer_share(build(case).model))
    return shares


def _segments(results: list[dict]) -> list:
    med = {k: statistics.median(r[k] for r in results)
           for k in ("us_step", "us_sample", *TIMING_COLUMNS,
                     *(f"share_{c}" for c in TIMING_COLUMNS), "backward_forward")}
    return [f"{med['us_step']:.0f}", f"{med['us_sample']:.1f}",
            *(f"{med[f'share_{c}']:.2f}" for c in TIMING_COLUMNS),
            f"{med['backward_forward']:.2f}",
            span([r["val_acc"] for r in results], ".2f")]


def row_slow(seeds) -> None:
    tab = fl.baseline("tabular")
    # The rate scales with the batch (0.1 x B/64) and against the width (0.1 x 64/w): at
    # 0.1 batch 1 and the wide layers did not train (seed 0), and a needless layer is
    # one that costs time without changing the result.
    variants = [(f"batch {b}", tab.replace(batch_size=b, lr=tab.lr * b / 64), seeds)
                for b in (1, 4, 16, 64, 256)]
    variants += [(f"hidden {w}", tab.replace(hidden=w, lr=tab.lr * 64 / w),
                  seeds if w <= 1024 else seeds[:1]) for w in (1024, 4096)]
    variants += [("sequence baseline", fl.baseline("sequence"), seeds)]
    jobs = [(label, recipe, s, preset) for preset in ("full", "economy")
            for label, recipe, own in variants for s in own]
    started = time.perf_counter()
    results = [timed_run(job) for job in jobs]  # one at a time: the timing is the point
    print(f"\n{len(results)} timed runs in {time.perf_counter() - started:.0f} s "
          f"(one process; load average now {', '.join(f'{x:.1f}' for x in _load())})")
    header = ["variant", "lr", "seeds", "µs/step", "µs/sample", "t_data share",
              "t_forward share", "t_backward share", "t_step share", "t_backward / t_forward",
              "final val acc"]
    for preset in ("full", "economy"):
        rows = [[label, f"{recipe.lr:.3g}", ",".join(map(str, own)),
                 *_segments([r for r in results
                             if r["label"] == label and r["preset"] == preset])]
                for label, recipe, own in variants]
        table(f"Tabular task; medians over the seeds of each run's median after 20 warm-up "
              f"steps (CPU time of the loop's thread, Monitor preset {preset!r}); "
              f"accuracy range", header, rows)
    shares = [[label, f"{largest_layer_share(fl.build(recipe).model):.3f}"]
              for label, recipe, _ in variants if label in ("batch 64", "hidden 1024",
                                                            "hidden 4096",
                                                            "sequence baseline")]
    shares += [[f"zoo: {family}", f"{share:.3f}"] for family, share in
               sorted(zoo_layer_shares().items())]
    table("Largest layer's share of the trainable parameters", ["model", "share"], shares)


def _load() -> tuple:
    try:
        import os
        return os.getloadavg()
    except OSError:
        return ()


# --- row 3: capacity ---------------------------------------------------------------------

def _linear(hidden: int | None):
    """A transform: the tabular model replaced by a linear one (16 -> 3, or through a
    `hidden`-unit linear bottleneck), same seed, optimizer and rate."""

    def transform(parts):
        torch.manual_seed(parts.seed)
        layers = [nn.Linear(16, 3)] if hidden is None else \
            [nn.Linear(16, hidden), nn.Linear(hidden, 3)]
        parts.model = nn.Sequential(*layers)
        r = parts.recipe
        parts.optimizer = torch.optim.SGD(parts.model.parameters(), lr=r.lr,
                                          momentum=r.momentum)
        return parts

    return transform


def capacity_run(job) -> dict:
    label, recipe, seed, linear = job
    with patched_build(_linear(linear[1])) if linear[0] else contextlib.nullcontext():
        run = fl.run(recipe, seed=seed)
    h = run.history
    diagnosis = fl.diagnose(h)
    grad = q._tail(h["grad_norm"])
    return dict(label=label, seed=seed, loss_start=q.loss_start(h), loss_end=q.loss_end(h),
                val_acc=q.val_acc_end(h), gap=q.train_val_acc_gap(h), dead=q.dead_end(h),
                grad_end=float(grad.median()), grad_ratio=float(grad.median() /
                                                                h["grad_norm"].iloc[:10].median()),
                update=q.update_ratio_median(h), progress=q.loss_progress(h),
                shape=diagnosis.shape, top=diagnosis.top or "-")


def row_capacity(seeds, workers) -> None:
    seq, tab = fl.baseline("sequence"), fl.baseline("tabular")
    variants = [(f"sequence hidden {w}", seq.replace(hidden=w), (False, None))
                for w in (1, 2, 4, 8, 32)]
    variants += [("sequence lr x 1e-3", seq.replace(lr=seq.lr * 1e-3), (False, None)),
                 ("sequence labels shuffled", seq.replace(labels="shuffled"), (False, None))]
    variants += [(f"tabular hidden {w}", tab.replace(hidden=w), (False, None))
                 for w in (1, 2, 3, 64)]
    variants += [("tabular linear 16-3", tab, (True, None)),
                 ("tabular linear 16-1-3", tab, (True, 1)),
                 ("tabular lr_too_small", resolve("lr_too_small"), (False, None)),
                 ("tabular shuffled_labels", resolve("shuffled_labels"), (False, None))]
    jobs = [(label, recipe, s, linear) for label, recipe, linear in variants for s in seeds]
    started = time.perf_counter()
    results = run_all(capacity_run, jobs, workers)
    print(f"\n{len(results)} runs in {time.perf_counter() - started:.0f} s")
    rows = []
    for label, _, _ in variants:
        own = [r for r in results if r["label"] == label]
        rows.append([label, span([r["loss_start"] for r in own]),
                     *(", ".join(f"{r[k]:.2f}" for r in own) for k in ("loss_end", "val_acc",
                                                                        "dead")),
                     span([r["gap"] for r in own], ".2f"),
                     span([r["grad_end"] for r in own]), span([r["grad_ratio"] for r in own]),
                     span([r["update"] for r in own]),
                     ", ".join(f"{r['shape']}/{r['top']}" for r in own)])
    table(f"Capacity (seeds {seeds[0]}-{seeds[-1]}; loss and gradient over the last 20% of "
          "the steps; per seed where a list)",
          ["variant", "loss at step 0", "final train loss", "final val acc",
           "dead ReLU share (end)", "train - val acc", "grad norm (end)",
           "grad norm end / start", "update ratio (median)",
           "diagnose: shape/top cause per seed"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS),
                        help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes for the untimed rows (default: one per core)")
    args = parser.parse_args()
    seeds, rows = fl.parse_seeds(args.seeds), args.rows.split(",")
    unknown = set(rows) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    torch.set_num_threads(1)
    if "logsoftmax" in rows:
        row_logsoftmax(seeds, args.workers)
    if "slow" in rows:
        row_slow(seeds)
    if "capacity" in rows:
        row_capacity(seeds, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
