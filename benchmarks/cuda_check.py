"""The Monitor and the lab's float16 faults on a CUDA GPU: what transfers from the CPU.

One prepared run for a machine with a GPU (issue 10's CUDA checks), a few minutes:

    python benchmarks/cuda_check.py                # needs CUDA; says so and stops without
    python benchmarks/cuda_check.py --device cpu   # every check on the CPU: the script's
                                                   # own test (no syncs there to count)

1. **Copies stay on the device.**  A Monitor on a CUDA model keeps its gradient and
   weight copies on that device.
2. **No sync per step.**  With `torch.cuda.set_sync_debug_mode("warn")` every call that
   waits for the GPU warns.  The monitor reads the loss with its chunk, not with
   `.item()`, and each instrument reads its chunk's statistics in one transfer: at most
   one sync per instrument per chunk of `CHUNK_STEPS` records (plus the losses' and the
   evaluation inputs' own), however many steps a chunk has.  Checked on the CNN and on
   overhead.py's language model, whose logits are read on a sample of rows.
3. **Same numbers.**  The first steps of the same model and batches agree with the CPU
   within float32 summation-order noise (GPU kernels sum in another order).
4. **The float16 faults.**  `fp16_no_scaling`, `fp16_overflow` and `clip_before_unscale`,
   each with and without its fix, trained by the lab's own loop (`fl.run(...,
   device=...)`, CUDA autocast and `torch.amp.GradScaler("cuda")`) on both devices:
   the diagnosis of each, and whether `fl.check` still finds the fault's signature.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import overhead  # benchmarks/, on the path when run as a script
import torch

import failurelab as fl
from failurelab.telemetry.monitor import CHUNK_STEPS

FP16_FAULTS = ("fp16_no_scaling", "fp16_overflow", "clip_before_unscale")
AGREE_STEPS = 8  # later steps drift apart by summation order, as two CPUs' would
AGREE_RTOL = 1e-3  # float32 sums of ~1e5 terms in another order differ by ~1e-5 relative


def moved(parts, device: torch.device, steps: int):
    """overhead.py's loop `parts` (its mid-size CNN, its language model), built on the
    CPU, then moved."""
    model, opt, loss_fn, batches = parts(steps)
    model.to(device)  # in place: the optimizer's parameters move with it
    copies = {id(b): tuple(t.to(device) for t in b) for b in batches}  # a few, cycled
    return model, opt, loss_fn, [copies[id(b)] for b in batches]


def train(device: torch.device, steps: int, monitored: bool, parts=overhead.cnn_parts):
    """(history or None, warnings that name a synchronising call, seconds)."""
    model, opt, loss_fn, batches = moved(parts, device, steps)
    mon = fl.Monitor(model, opt) if monitored else None
    syncing = device.type == "cuda"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if syncing:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("warn")
        start = time.perf_counter()
        # a plain loop reads each loss (`.item()`); the monitor reads them with its chunk
        overhead.train(model, opt, loss_fn, batches, mon, read_loss=True)
        if syncing:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    history = None
    if mon is not None:
        history = mon.history
        buffers = mon._parameters.buffers.rows.device  # private: what check 1 is about
        mon.close()
        history.attrs["buffers"] = str(buffers)
        history.attrs["instruments"] = len(mon._all)
        history.attrs["chunks"] = -(-steps // mon._chunk)  # private: the chunks it computed
    return history, syncs, seconds


def monitor_checks(device: torch.device, steps: int) -> list[tuple[str, str, bool]]:
    plain_history, plain_syncs, plain_s = train(device, steps, monitored=False)
    history, syncs, monitored_s = train(device, steps, monitored=True)
    results = [("copies on the device", history.attrs["buffers"],
                torch.device(history.attrs["buffers"]).type == device.type)]
    # on the CPU nothing is counted (no call waits for a device): the lines still run
    results.append(_syncs("CNN", history, syncs, plain_syncs, steps))
    # logits (16, 64, 2000): read on a sample of rows, whose index is made once
    lm_history, lm_syncs, _ = train(device, steps, True, overhead.lm_parts)
    results.append(_syncs("language model", lm_history, lm_syncs, [], steps))
    results.append(("time, monitored / plain", f"{monitored_s / plain_s:.2f}x "
                    f"({plain_s / steps * 1e3:.2f} ms per plain step)", True))
    reference, _, _ = train(torch.device("cpu"), AGREE_STEPS, monitored=True)
    for column in ("loss", "grad_norm", "update_norm", "input_absmax", "dead_frac/2"):
        mine, cpu = history[column][:AGREE_STEPS], reference[column][:AGREE_STEPS]
        worst = float(((mine - cpu).abs() / cpu.abs().clip(lower=1e-12)).max())
        results.append((f"{column}: first {AGREE_STEPS} steps vs CPU",
                        f"largest relative difference {worst:.1e}", worst <= AGREE_RTOL))
    return results


def _syncs(loop: str, history, syncs, plain_syncs, steps: int) -> tuple[str, str, bool]:
    """At most one sync per instrument per chunk, plus the losses' and the evaluation
    inputs', however many steps a chunk has."""
    chunks = -(-steps // CHUNK_STEPS)  # at most: a large model's chunks are shorter
    chunks = max(chunks, history.attrs.get("chunks", chunks))
    per_chunk = history.attrs["instruments"] + 2
    return (f"syncs in the monitored loop ({loop})",
            f"{len(syncs)} over {steps} steps, {chunks} chunks: {len(syncs) / chunks:.1f} "
            f"per chunk, bound {per_chunk} (the plain loop's loss.item(): {len(plain_syncs)})",
            len(syncs) <= per_chunk * chunks)


def fault_checks(device: torch.device) -> list[tuple[str, str, bool]]:
    """Each float16 fault and its fix on the CPU and on `device`."""
    results = []
    for name in FP16_FAULTS:
        fault = fl.FAULTS[name]
        faulty = fl.inject(fl.baseline(fault.task), name)
        for label, recipe in ((name, faulty), (f"{name}, fixed", fault.apply_fix(faulty))):
            runs = {where: fl.run(recipe, device=where) for where in ("cpu", device)}
            cells = []
            for where, run in runs.items():
                d = fl.diagnose(run.history)
                cells.append(f"{torch.device(where).type}: {d.shape}, top {d.top} "
                             f"({d.confidence})")
            on_device = runs[device]
            if recipe is faulty:
                try:
                    fl.check(on_device, name)
                    ok, found = True, "signature found"
                except AssertionError as error:
                    ok, found = False, f"signature NOT found: {str(error).splitlines()[0]}"
            else:
                top = fl.diagnose(on_device.history).top
                ok, found = top != name, f"top cause {top}"
            results.append((label, "; ".join(cells) + f"; on {device.type}: {found}", ok))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=128)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: nothing checked (--device cpu runs the script's logic)")
        return 0
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    failed = 0
    for title, results in (("Monitor on a model on the device", monitor_checks(device, args.steps)),
                           ("float16 faults, the lab's loop on both devices", fault_checks(device))):
        print(f"\n## {title}\n")
        for check, measured, ok in results:
            failed += not ok
            print(f"- [{'ok' if ok else 'DIFFERS'}] {check}: {measured}")
    print(f"\n{failed} check(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
