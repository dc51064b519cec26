"""Telemetry overhead: the same tiny training loop plain and under `fl.Monitor`.

Variants run interleaved (plain, full, economy, plain, ...) and each keeps the minimum
over the repeats, so background load hits all of them alike.  Prints time per step and
the ratio to the plain loop, then the wall time of one baseline run per task.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py [--repeats 7] [--steps 300]

Targets (issue 2): full ≤ 1.5×, economy ≤ 1.1× the plain loop; a tabular baseline run
≤ 0.5 s and a sequence run ≤ 2 s.
"""

from __future__ import annotations

import argparse
import time

import torch

import failurelab as fl


def loop(preset: str | None, steps: int, seed: int = 0) -> float:
    """Seconds per step of a plain SGD loop over the lab's tabular MLP parts."""
    parts = fl.build(fl.baseline("tabular"), seed=seed)
    model, opt, loss_fn = parts.model, parts.optimizer, parts.loss_fn
    batches = [b for _, b in zip(range(steps), fl.train.endless_batches(parts.train_loader))]
    mon = fl.Monitor(model, opt, preset=preset) if preset else None
    start = time.perf_counter()
    for X, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.record(loss)
    elapsed = time.perf_counter() - start
    if mon is not None:
        assert len(mon.history) == steps
        mon.close()
    return elapsed / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {"plain": None, "full": "full", "economy": "economy"}
    best = {name: float("inf") for name in variants}
    loop(None, 50)  # warm up allocator and kernels
    for _ in range(args.repeats):
        for name, preset in variants.items():
            best[name] = min(best[name], loop(preset, args.steps))
    print(f"tiny MLP loop, {args.steps} steps, min of {args.repeats} interleaved repeats")
    print(f"{'variant':<10}{'µs/step':>10}{'ratio':>8}")
    for name in variants:
        print(f"{name:<10}{best[name] * 1e6:>10.1f}{best[name] / best['plain']:>8.2f}")
    print()
    for task in ("tabular", "sequence"):
        times = [fl.run(task, seed=s).wall_time for s in range(args.repeats)]
        print(f"baseline run, {task:<9} min {min(times):.3f} s   median "
              f"{sorted(times)[len(times) // 2]:.3f} s")


if __name__ == "__main__":
    main()
