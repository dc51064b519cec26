"""Telemetry overhead: the same training loops plain and under `fl.Monitor`.

Two loops: the lab's tiny tabular MLP (SGD, batch 64) and a mid-size CNN (two
conv+BatchNorm blocks and a dense head, ~0.5 M parameters, AdamW, batch 64 of 3x32x32).
For each loop the variants run interleaved (plain, full, economy, plain, ...), so
background load hits all of them alike; each variant's time per step is the median
over the repeats, and the ratio is taken to the plain loop's median.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py [--repeats 9] [--steps 256]

Targets (issue 10), printed beside each ratio: full <= 1.3x on the tiny MLP and
<= 1.05x on the CNN; economy <= 1.05x on both.  The load average is printed before and
after: on a shared machine, ratios measured under load are noisier and usually higher.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

import failurelab as fl


def mlp_parts(steps: int):
    parts = fl.build(fl.baseline("tabular"), seed=0)
    batches = [b for _, b in zip(range(steps), fl.train.endless_batches(parts.train_loader))]
    return parts.model, parts.optimizer, parts.loss_fn, batches


def cnn_parts(steps: int):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 120), nn.ReLU(), nn.Linear(120, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(64, 3, 32, 32, generator=g), torch.randint(0, 10, (64,), generator=g))
            for _ in range(8)]  # a few batches, cycled: the data is not what is measured
    return model, opt, nn.CrossEntropyLoss(), [data[i % 8] for i in range(steps)]


def loop(make, preset: str | None, steps: int) -> float:
    """Seconds per step of one loop, plain or monitored."""
    model, opt, loss_fn, batches = make(steps)
    mon = fl.Monitor(model, opt, preset=preset) if preset else None
    start = time.perf_counter()
    for X, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.record(loss)
    if mon is not None:
        mon.history  # noqa: B018 - the pending statistics are part of the cost
    elapsed = time.perf_counter() - start
    if mon is not None:
        assert len(mon.history) == steps
        mon.close()
    return elapsed / steps


TARGETS = {"mlp": {"full": 1.3, "economy": 1.05}, "cnn": {"full": 1.05, "economy": 1.05}}


def measure(name: str, make, steps: int, repeats: int, targets: dict) -> None:
    variants = {"plain": None, "full": "full", "economy": "economy"}
    times = {v: [] for v in variants}
    loop(make, None, min(steps, 32))  # warm up allocator and kernels
    for _ in range(repeats):
        for variant, preset in variants.items():
            times[variant].append(loop(make, preset, steps))
    medians = {v: statistics.median(t) for v, t in times.items()}
    print(f"{name}: {steps} steps, median of {repeats} interleaved repeats")
    print(f"{'variant':<10}{'µs/step':>10}{'ratio':>8}{'target':>8}")
    for variant in variants:
        ratio = medians[variant] / medians["plain"]
        target = targets.get(variant)
        verdict = "" if target is None else f"{target:>8.2f}  {'met' if ratio <= target else 'MISSED'}"
        print(f"{variant:<10}{medians[variant] * 1e6:>10.1f}{ratio:>8.2f}{verdict}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--cnn-steps", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg(), "\n")
    measure("tiny MLP (tabular baseline)", mlp_parts, args.steps, args.repeats, TARGETS["mlp"])
    measure("mid-size CNN (0.5 M parameters)", cnn_parts, args.cnn_steps, args.repeats,
            TARGETS["cnn"])
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
