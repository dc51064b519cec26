"""The diagnosis on the Monitor's default forward schedule: the lab's faults, read both ways.

The lab reads every step's forward tensors (`forward_every=1`); a `Monitor` made with the
default reads them on one step in `monitor.FORWARD_EVERY` (see docs/engineers.md, "What
each preset sees").  This trains each named fault (and the healthy baseline of each
task) twice on the same seed, once each way, and prints what `fl.diagnose` says of
each history and the quantities that read forward columns.  The training is identical
(the hooks only read), so any difference is the schedule's.

    OMP_NUM_THREADS=1 python benchmarks/forward_schedule.py [--seeds 0 1] [FAULT ...]
"""

from __future__ import annotations

import argparse
import math

import failurelab as fl
from failurelab.evidence import quantities as q
from failurelab.lab.train import run
from failurelab.telemetry.monitor import FORWARD_EVERY

# faults read from activations, outputs and inputs, and from the output's gradient (fp16,
# accumulation), a NaN batch, and a padding mask (the sequence task)
FAULTS = ("saturated_sigmoid", "dead_relu", "wrong_loss", "bad_init", "no_input_norm",
          "nan_in_data", "fp16_no_scaling", "accumulation_not_divided", "bad_padding_mask")
QUANTITIES = ("saturation_median", "saturation_start", "dead_start", "dead_end",
              "input_magnitude", "input_scale_spread", "output_scale_start",
              "loss_vs_output_ce", "loss_vs_softmax_twice")


def recipe_of(name: str):
    if name in ("tabular", "sequence"):
        return fl.baseline(name)
    fault = fl.FAULTS[name]
    return fl.inject(fl.baseline(fault.task), name)


def _fmt(v: float) -> str:
    return "nan" if not math.isfinite(v) else f"{v:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("faults", nargs="*", default=[*FAULTS, "tabular", "sequence"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = parser.parse_args()
    agree = total = 0
    for name in args.faults:
        for seed in args.seeds:
            every = run(recipe_of(name), seed=seed, forward_every=1).history
            sampled = run(recipe_of(name), seed=seed, forward_every=FORWARD_EVERY).history
            assert every["loss"].equals(sampled["loss"]), "the hooks changed the training"
            tops = []
            for label, h in (("every step", every), (f"1 in {FORWARD_EVERY}", sampled)):
                d = fl.diagnose(h)
                tops.append(d.top)
                print(f"{name:<18} seed {seed}  {label:<11} shape {d.shape:<11} "
                      f"top {d.top!s:<22} confidence {d.confidence}")
            print("    " + "  ".join(f"{n} {_fmt(getattr(q, n)(every))}/"
                                     f"{_fmt(getattr(q, n)(sampled))}" for n in QUANTITIES))
            agree += tops[0] == tops[1]
            total += 1
    print(f"\nsame top cause on both schedules: {agree}/{total}")


if __name__ == "__main__":
    main()
