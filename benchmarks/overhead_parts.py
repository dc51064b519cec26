"""Where a monitored step's microseconds go: the Monitor's own hooks and `record`, timed
inside the training loop, this package beside another copy (`--against DIR`).

`overhead.py` times whole loops; on a shared machine their ratios spread by +-10% between
repeats, more than the few percent a change to the Monitor moves.  This script times each
call of the Monitor's step pre-hook, its backward hook, its forward hooks and `record`
in the loop itself (wall clock around the call: short calls are rarely preempted) and
takes per-call medians by the step's place in its cycle (10 steps under economy, 8 under
full), so a preempted call or a busy second does not count; a cycle's medians, summed
and divided by its length, are the cost per step.  The `history` read that ends each run
(the pending chunk's statistics and the first frame) is timed in the thread's CPU time
and spread over the run's steps.  The plain loop's median step is the yardstick.  Calls
are wrapped, which adds about 0.3 µs to each, alike for both copies.

    OMP_NUM_THREADS=1 python benchmarks/overhead_parts.py --against DIR
        [--preset economy] [--loop mlp] [--steps 256] [--repeats 11]

This measures the Monitor's own code only: what its copies and hooks do to the cache and
to PyTorch's call paths of the user's own code shows in `overhead.py` alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import overhead  # noqa: E402 - the loops and the second copy's loader

import failurelab as fl  # noqa: E402
from failurelab.telemetry import monitor  # noqa: E402

HOOKS = ("_before_step", "_saw_backward", "_see_input", "_see_output", "record")
CLOCK = time.perf_counter_ns


class Timer:
    """Per-call durations, keyed by (copy, method, the step's place in its cycle)."""

    def __init__(self, cycle: int):
        self.cycle, self.step, self.calls = cycle, 0, {}

    def add(self, key: tuple, ns: int) -> None:
        self.calls.setdefault((*key, self.step % self.cycle), []).append(ns)

    def wrap(self, cls, name: str, tag: str) -> None:
        inner = getattr(cls, name)

        def timed(obj, *args, **kwargs):
            start = CLOCK()
            try:
                return inner(obj, *args, **kwargs)
            finally:
                self.add((tag, name), CLOCK() - start)
        setattr(cls, name, timed)

    def wrap_savers(self, cls, tag: str) -> None:
        """The forward hooks of the activations are closures made per instrument."""
        for name in ("_saver", "_input_saver"):
            if not hasattr(cls, name):
                continue
            make = getattr(cls, name)

            def timed_maker(obj, instrument, make=make):
                hook = make(obj, instrument)

                def timed(*args):
                    start = CLOCK()
                    try:
                        return hook(*args)
                    finally:
                        self.add((tag, "activations"), CLOCK() - start)
                return timed
            setattr(cls, name, timed_maker)

    def per_step(self, tag: str) -> dict[str, float]:
        """µs per step of each method: its per-place medians summed over a cycle."""
        parts: dict[str, dict[int, float]] = {}
        for (t, name, place), ns in self.calls.items():
            if t == tag:
                parts.setdefault(name, {})[place] = statistics.median(ns) / 1e3
        return {name: sum(places.values()) / self.cycle for name, places in parts.items()}


def run(make, steps: int, monitor_class, preset: str, timer: Timer) -> tuple[float, float]:
    """The plain step's median (µs) and the history read's CPU µs (0 without a monitor)."""
    model, opt, loss_fn, batches = make(steps)
    mon = monitor_class(model, opt, preset=preset) if monitor_class else None
    times = []
    for i, (x, y) in enumerate(batches):
        timer.step = i
        start = CLOCK()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.record(loss)
        times.append(CLOCK() - start)
    read = 0.0
    if mon is not None:
        start = time.thread_time_ns()
        mon.history  # noqa: B018 - the pending chunk and the first frame are part of the cost
        read = (time.thread_time_ns() - start) / 1e3
        mon.close()
    return statistics.median(times) / 1e3, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="DIR", required=True)
    parser.add_argument("--preset", choices=("economy", "full"), default="economy")
    parser.add_argument("--loop", choices=list(overhead.LOOPS), default="mlp")
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    torch.set_num_threads(1)
    other = overhead.other_package(args.against)
    __import__("failurelab_other.telemetry.monitor")
    timer = Timer(10 if args.preset == "economy" else 8)
    copies = {"this": (fl.Monitor, monitor.Monitor),
              "against": (other.Monitor, sys.modules["failurelab_other.telemetry.monitor"].Monitor)}
    for tag, (_, cls) in copies.items():
        for name in HOOKS:
            if hasattr(cls, name):
                timer.wrap(cls, name, tag)
        timer.wrap_savers(cls, tag)
    make = overhead.LOOPS[args.loop][1]
    steps = {"plain": [], "this": [], "against": []}
    reads = {"this": [], "against": []}
    run(make, min(args.steps, 32), None, args.preset, timer)  # warm up
    order = list(steps)
    for repeat in range(args.repeats):
        shift = repeat % len(order)
        for tag in order[shift:] + order[:shift]:
            cls = copies[tag][0] if tag in copies else None
            step, read = run(make, args.steps, cls, args.preset, timer)
            steps[tag].append(step)
            if tag in reads:
                reads[tag].append(read)
    plain = statistics.median(steps["plain"])
    print(f"{args.preset} on {args.loop}, {args.steps} steps x {args.repeats} interleaved repeats, "
          f"load {os.getloadavg()[0]:.1f}; plain step: median {plain:.0f} µs")
    for tag in copies:
        parts = timer.per_step(tag)
        parts["history"] = statistics.median(reads[tag]) / args.steps
        total = sum(parts.values())
        print(f"  {tag:<8} " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
              + f"; total {total:.1f} µs a step = {100 * total / plain:.1f}% of a plain step")


if __name__ == "__main__":
    main()
