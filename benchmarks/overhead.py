"""Telemetry overhead: the same training loops plain and under `fl.Monitor`.

Six loops: the lab's tiny tabular MLP (SGD, batch 64), the same MLP with its activations
written as functions (read at the next Linear layer's input), a mid-size CNN (two
conv+BatchNorm blocks and a dense head, ~0.5 M parameters, AdamW, batch 64 of 3x32x32),
a small causal language model (two pre-norm transformer layers of width 128 over a
vocabulary of 2000, 0.9 M parameters, AdamW, 16 sequences of 64 tokens): its logits,
(16, 64, 2000), are the largest output a user's model is likely to hand the monitor;
the same LM with each batch padded to its own longest sequence (40-64 tokens), as most
text collators do, so that the forward tensors change shape at almost every step; and a
5 M-parameter transformer (five layers of width 256, 8 sequences of 64 tokens), whose
40 MB of weights and gradients are more than the monitor copies every step.
For each loop the variants run interleaved (plain, full, economy, ...; each repeat
starts one variant later), so background load hits all of them alike; each variant's
time per step is the median over the repeats, and its ratio is the median over the
repeats of its time divided by the plain loop's time in the same repeat (`spread`: the
middle half of those per-repeat ratios, 25th to 75th percentile).  Times are the
thread's CPU seconds (one torch thread): on a shared machine the time a loop waits for
a core is not its own; `--wall` times wall-clock seconds.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py [--repeats 9] [--steps 256] [--floor]
        [--against DIR] [--only mlp mlp-functional cnn lm lm-padded transformer] [--no-lm]
        [--wall]

Targets (issue 31), printed beside each ratio: full <= 1.3x on the tiny MLP and <= 1.05x
from 0.5 M parameters up (the CNN, the LMs, the transformer); economy <= 1.05x
everywhere.  The load average is printed before and after: on a shared machine, ratios
measured under load are noisier and usually higher.

`--floor` adds two variants that register the hooks each preset needs with empty
bodies, attached every step (and read the loss as a float, as `record` must): what a
monitor that hooks every step pays before it measures anything.

`--against DIR` adds the presets of another copy of the package, DIR/failurelab (e.g.
`git archive main failurelab | tar -x -C DIR`), to the same interleaved run: on a
shared machine, before and after measured minutes apart differ by more than a change
does, side by side they do not.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

import failurelab as fl
from failurelab.lab.train import endless_batches


def mlp_parts(steps: int):
    parts = fl.build(fl.baseline("tabular"), seed=0)
    batches = [b for _, b in zip(range(steps), endless_batches(parts.train_loader), strict=False)]
    return parts.model, parts.optimizer, parts.loss_fn, batches


class FunctionalMLP(nn.Module):
    """The lab's tabular MLP with its activations written as functions (`torch.sigmoid`,
    `F.relu`), as most hand-written models are: the monitor reads them at the inputs of
    the next Linear layers (`instruments.LayerInput`), the cost issue 31 asked to see."""

    def __init__(self, lab_model: nn.Module):
        super().__init__()
        self.fc1, self.fc2, self.head = lab_model.fc1, lab_model.fc2, lab_model.head
        self.drop = lab_model.drop

    def forward(self, x):
        h = torch.sigmoid(self.fc1(x))
        return self.head(self.drop(nn.functional.relu(self.fc2(h))))


def mlp_functional_parts(steps: int):
    model, opt, loss_fn, batches = mlp_parts(steps)
    return FunctionalMLP(model), opt, loss_fn, batches  # the same parameters and optimizer


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


class CausalLM(nn.Module):
    def __init__(self, vocab=2000, width=128, length=64, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(length, width))
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, tokens):
        length = tokens.shape[1]  # up to `length`: a batch padded to its own longest
        h = self.embed(tokens) + self.position[:length]
        return self.head(self.body(h, mask=self.mask[:length, :length], is_causal=True))


def lm_parts(steps: int, vocab=2000, length=64, shortest=None, width=128, layers=2, batch=16):
    """`shortest`: each batch's length is drawn from shortest..length, as a collator that
    pads each batch to its own longest sequence makes them (the forward tensors change
    shape at almost every step)."""
    torch.manual_seed(0)
    model = CausalLM(vocab, width, length, layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    lengths = (torch.randint(shortest, length + 1, (8,), generator=g).tolist() if shortest
               else [length] * 4)
    data = [(torch.randint(0, vocab, (batch, t), generator=g),
             torch.randint(0, vocab, (batch, t), generator=g)) for t in lengths]
    ce = nn.CrossEntropyLoss()

    def loss_fn(logits, targets):
        return ce(logits.reshape(-1, vocab), targets.reshape(-1))
    return model, opt, loss_fn, [data[i % len(data)] for i in range(steps)]


def lm_padded_parts(steps: int):
    return lm_parts(steps, shortest=40)


def transformer_parts(steps: int):
    """A 5 M-parameter causal transformer (five layers of width 256, vocabulary 2000),
    8 sequences of 64 tokens: 40 MB of weights and gradients, larger than the copies
    the monitor makes every step (`monitor.PARAMETERS_EVERY_STEP`)."""
    return lm_parts(steps, width=256, layers=5, batch=8)


# The thread's CPU seconds: on a shared machine, time spent waiting for a core is not the
# loop's (one thread: OMP_NUM_THREADS=1 and torch.set_num_threads(1)); `--wall` for
# wall-clock seconds.
CLOCK = time.thread_time


def loop(make, preset: str | None, steps: int, other=None) -> float:
    """Seconds per step of one loop: plain, monitored (preset "full" or "economy", or
    "full@other"... for `other`, the --against copy's Monitor), or with empty hooks
    ("floor full"...)."""
    model, opt, loss_fn, batches = make(steps)
    mon = None
    if preset in ("full", "economy"):
        mon = fl.Monitor(model, opt, preset=preset)
    elif preset and preset.endswith("@other"):
        mon = other(model, opt, preset=preset[:-len("@other")])
    handles = empty_hooks(model, opt, preset[len("floor "):]) if preset and not mon else []
    start = CLOCK()
    train(model, opt, loss_fn, batches, mon, read_loss=bool(handles))
    if mon is not None:
        mon.history  # noqa: B018 - the pending statistics are part of the cost
    elapsed = CLOCK() - start
    if mon is not None:
        assert len(mon.history) == steps
        mon.close()
    for handle in handles:
        handle.remove()
    return elapsed / steps


def train(model, opt, loss_fn, batches, mon=None, read_loss: bool = False) -> None:
    """The plain loop, recording each step's loss in `mon` if given (else reading it as a
    float when `read_loss`, as `record` must)."""
    for X, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(X), y)
        loss.backward()
        opt.step()
        if mon is not None:
            mon.record(loss)
        elif read_loss:
            loss.item()


def empty_hooks(model, opt, preset: str) -> list:
    """The hooks `fl.Monitor` registers for `preset`, doing nothing."""
    def nothing(*args):
        return None

    def output_hook(module, args, output):
        output.register_hook(nothing)  # the monitor hooks each step's output tensor

    last = [p for p in model.parameters() if p.requires_grad][-1]
    handles = [opt.register_step_pre_hook(nothing), last.register_hook(nothing)]
    if preset == "full":
        handles += [model.register_forward_pre_hook(nothing, with_kwargs=True),
                    model.register_forward_hook(output_hook)]
        handles += [m.register_forward_hook(nothing) for m in model.modules()
                    if isinstance(m, (nn.Sigmoid, nn.Tanh, nn.ReLU))]
    return handles


# full <= 1.3x on the tiny MLP and <= 1.05x from 0.5 M parameters up; economy <= 1.05x
# everywhere (issue 31)
TARGETS = {"mlp": {"full": 1.3, "economy": 1.05}, "mlp-functional": {"full": 1.3, "economy": 1.05},
           "cnn": {"full": 1.05, "economy": 1.05},
           "lm": {"full": 1.05, "economy": 1.05}, "lm-padded": {"full": 1.05, "economy": 1.05},
           "transformer": {"full": 1.05, "economy": 1.05}}


def other_package(folder: str):
    """DIR/failurelab, imported once as a package of another name (`failurelab_other`),
    beside this one: its own `fl.Monitor`, `fl.diagnose`..., whatever its layout."""
    init = Path(folder) / "failurelab" / "__init__.py"
    loaded = sys.modules.get("failurelab_other")
    if loaded is not None and Path(loaded.__file__) == init:
        return loaded
    spec = importlib.util.spec_from_file_location("failurelab_other", init,
                                                  submodule_search_locations=[str(init.parent)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return package


def measure(name: str, make, steps: int, repeats: int, targets: dict, floor: bool,
            other=None) -> None:
    variants = {"plain": None, "full": "full", "economy": "economy"}
    if other is not None:
        variants.update({"full@other": "full@other", "economy@other": "economy@other"})
    if floor:
        variants.update({"floor full": "floor full", "floor eco": "floor economy"})
    times = {v: [] for v in variants}
    loop(make, None, min(steps, 32))  # warm up allocator and kernels
    order = list(variants)
    for repeat in range(repeats):
        # each repeat starts one variant later, so no variant always runs first (after
        # the previous repeat's last) or last: a position's effect, if any, is shared
        shift = repeat % len(order)
        for variant in order[shift:] + order[:shift]:
            times[variant].append(loop(make, variants[variant], steps, other))
    medians = {v: statistics.median(t) for v, t in times.items()}
    print(f"{name}: {steps} steps, median of {repeats} interleaved repeats")
    print(f"{'variant':<14}{'µs/step':>10}{'ratio':>8}{'spread':>13}{'target':>8}")
    for variant in variants:
        # each repeat's own ratio: the machine's speed drifts between repeats (minutes
        # apart) far more than between the variants of one repeat (seconds apart)
        ratios = [t / p for t, p in zip(times[variant], times["plain"], strict=True)]
        ratio = statistics.median(ratios)
        # the middle half of the repeats' ratios: how far one run's median can be trusted
        low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratio,) * 3
        target = targets.get(variant)
        verdict = "" if target is None else f"{target:>8.2f}  {'met' if ratio <= target else 'MISSED'}"
        print(f"{variant:<14}{medians[variant] * 1e6:>10.1f}{ratio:>8.2f}"
              f"{f'{low:.2f}-{high:.2f}':>13}{verdict}")
    print()


LOOPS = {  # name -> (title, parts, steps argument)
    "mlp": ("tiny MLP (tabular baseline)", mlp_parts, "steps"),
    "mlp-functional": ("the same MLP, its activations written as functions",
                       mlp_functional_parts, "steps"),
    "cnn": ("mid-size CNN (0.5 M parameters)", cnn_parts, "cnn_steps"),
    "lm": ("small causal LM (0.9 M parameters, vocabulary 2000)", lm_parts, "lm_steps"),
    "lm-padded": ("the same LM, each batch padded to its own length (40-64 tokens)",
                  lm_padded_parts, "lm_steps"),
    "transformer": ("5 M-parameter transformer (5 layers of width 256)", transformer_parts,
                    "transformer_steps"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--cnn-steps", type=int, default=64)
    parser.add_argument("--lm-steps", type=int, default=24)
    parser.add_argument("--transformer-steps", type=int, default=16)
    parser.add_argument("--only", nargs="+", choices=list(LOOPS), default=list(LOOPS),
                        help="the loops to time (default: all)")
    parser.add_argument("--no-lm", action="store_true",
                        help="leave the language models and the transformer out")
    parser.add_argument("--wall", action="store_true",
                        help="time wall-clock seconds instead of the thread's CPU seconds")
    parser.add_argument("--floor", action="store_true",
                        help="also time the presets' hooks with empty bodies")
    parser.add_argument("--against", metavar="DIR",
                        help="also time the presets of DIR/failurelab, side by side")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.thread_time
    other = other_package(args.against).Monitor if args.against else None
    if other is not None:
        print("against", sys.modules["failurelab_other"].__file__)
    torch.set_num_threads(1)
    print("clock:", "wall" if args.wall else "the thread's CPU time")
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg(), "\n")
    for name in args.only:
        if args.no_lm and name not in ("mlp", "mlp-functional", "cnn"):
            continue
        title, make, steps = LOOPS[name]
        measure(title, make, getattr(args, steps), args.repeats, TARGETS[name], args.floor, other)
    print("load average (1, 5, 15 min): %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
