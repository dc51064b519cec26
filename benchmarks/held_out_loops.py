"""Held-out loops: the diagnosis on training loops that set no threshold and shaped no
signature before they were written.

The zoo (`failurelab.zoo`) is the population every threshold is calibrated on and the
development set of the signatures; leave-one-family-out scores hold out one zoo family
at a time, but the families share the zoo's loop, its five optimizers and its habits.
These loops share none of it: optimizers the zoo lacks (Adagrad, Adadelta, NAdam, RAdam,
Adamax, Nesterov SGD), schedules (OneCycle, linear warm-up then cosine, exponential),
architectures (a transformer encoder layer, an LSTM, Conv1d with GroupNorm, a deep
BatchNorm MLP), losses (label smoothing, Huber, L1, multi-label BCE, NLL on
log-softmax) and habits (clipping by value, two param groups, a frozen body, batches of 8
and 256, 1000 steps, a validation loss, mixed precision with a GradScaler).  Each runs
healthy and with every catalogue fault a plain `fl.Monitor` can see, planted the way
users write it.

    python benchmarks/held_out_loops.py [--seeds 2-4] [--workers 2]

History: written with seeds 0-1, which were looked at and changed six signatures (the
commit "Diagnosis: six readings a plain Monitor loop needs ..."); seeds 2 and above
were first measured after those changes.  The mixed-precision plants (`amp_clip`, a
healthy control, and `amp_clip_before_unscale`) were added after the fault
clip_before_unscale had its signature, and first measured on every seed at once;
`log_softmax_fp16` (the cross-entropy written as log(softmax) inside float16 autocast)
likewise after log_softmax_by_hand had its signature; `log_softmax_fp16_scaler` (the
same with a GradScaler) was looked at on seeds 0-4, which gave the fault its second
route, and first measured on seeds 5-9 after it.  The plants of log(softmax) score
runs where nothing went wrong as misses: a latent bug that never reached a 17-unit logit
gap leaves a healthy run, which the diagnosis rightly calls healthy (or, without a
scaler, fp16_no_scaling).  `train_mode_not_restored` (validation every 20 steps in eval
mode, model.train() called once before the loop; the two loops with dropout or
BatchNorm) and `last_layer_optimized` (param groups that keep only the last two tensors)
were added after those faults had their signatures, and first measured on seeds 21-22.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn

import failurelab as fl
from failurelab.lab.parallel import worker_pool


@dataclass(frozen=True)
class Planted:
    """One fault as a user writes it; the defaults are a healthy loop."""

    lr: float = 1.0  # factor on every learning rate (and schedule peak)
    zero_grad: str = "each_step"  # each_step | never | after_backward
    raw_units: bool = False  # every feature its own scale and offset, decades apart
    shuffled: float = 0.0  # share of training rows whose X is shuffled against its y
    nan_rows: bool = False  # NaN in one feature of 2% of the training rows
    softmax: bool = False  # nn.Softmax at the end of a model trained with cross-entropy
    init: float = 1.0  # factor on every weight matrix at initialisation
    loss: str = "mean"  # mean | sum | negated | log_of_softmax (NLL of log(softmax), by hand)
    train_mode: str = "each_step"  # "once": model.train() before the loop only, and a
    #                                 validation with model.eval() every 20 steps
    optimize: str = "all"  # "last_layer": the optimizer's groups keep the last two tensors
    amp: str = ""  # "": float32 | "unscaled": float16 autocast, a GradScaler, the gradient
    #                norm clipped to 1 after unscale_() | "scaled": clipped before it |
    #                "autocast": float16 autocast alone | "scaler": with a GradScaler, no clip


# planted name -> (what it changes, the catalogue fault fl.diagnose should name)
PLANTS = {
    "healthy": (Planted(), None),
    "no_zero_grad": (Planted(zero_grad="never"), "no_zero_grad"),
    "zero_grad_misplaced": (Planted(zero_grad="after_backward"), "zero_grad_misplaced"),
    "lr_x30": (Planted(lr=30.0), "huge_lr"),
    "lr_x300": (Planted(lr=300.0), "huge_lr"),
    "lr_x0.001": (Planted(lr=1e-3), "lr_too_small"),
    "raw_units": (Planted(raw_units=True), "no_input_norm"),
    "labels_shuffled": (Planted(shuffled=1.0), "shuffled_labels"),
    "labels_half_shuffled": (Planted(shuffled=0.5), "shuffled_labels"),
    "nan_rows": (Planted(nan_rows=True), "nan_in_data"),
    "softmax_into_ce": (Planted(softmax=True), "wrong_loss"),
    "init_x10": (Planted(init=10.0), "bad_init"),
    "summed_loss": (Planted(loss="sum"), "summed_loss"),
    "negated_loss": (Planted(loss="negated"), "negated_loss"),
    "amp_clip": (Planted(amp="unscaled"), None),  # mixed precision done right: healthy
    "amp_clip_before_unscale": (Planted(amp="scaled"), "clip_before_unscale"),
    "log_softmax_fp16": (Planted(amp="autocast", loss="log_of_softmax"), "log_softmax_by_hand"),
    "log_softmax_fp16_scaler": (Planted(amp="scaler", loss="log_of_softmax"),
                                "log_softmax_by_hand"),
    "train_mode_not_restored": (Planted(train_mode="once"), "train_mode_not_restored"),
    "last_layer_optimized": (Planted(optimize="last_layer"), "params_not_in_optimizer"),
}


@dataclass
class Loop:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: object
    steps: int = 200
    batch: int = 32
    schedule: object = None
    clip_value: float | None = None
    validate: bool = False
    target: str = "classes"  # classes | multilabel | value


D, K, N_TRAIN, N_VAL = 8, 3, 1024, 256


def _data(seed: int, target: str):
    """A random two-layer teacher of 8 standard-normal features (train, validation)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N_TRAIN + N_VAL, D, generator=g)
    hidden = torch.tanh(X @ torch.randn(D, 16, generator=g) / math.sqrt(D))
    out = hidden @ torch.randn(16, K, generator=g)
    if target == "value":
        y = out[:, :1] + 0.05 * torch.randn(len(X), 1, generator=g)
    elif target == "multilabel":
        y = nn.functional.one_hot(out.argmax(1), K).float()
    else:
        y = out.argmax(1)
    return (X[:N_TRAIN], y[:N_TRAIN]), (X[N_TRAIN:], y[N_TRAIN:])


def _mlp(outputs=K, width=64, act=nn.ReLU, depth=2) -> nn.Sequential:
    layers, w = [], D
    for _ in range(depth):
        layers += [nn.Linear(w, width), act()]
        w = width
    return nn.Sequential(*layers, nn.Linear(w, outputs))


class TokenTransformer(nn.Module):
    """Each feature a token (value times a learned vector, plus its position), one
    encoder layer, mean pooling."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(1, 32)
        self.position = nn.Parameter(torch.randn(D, 32) * 0.5)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, K)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x.unsqueeze(-1)) + self.position).mean(1))


class FeatureLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, 32, batch_first=True)
        self.head = nn.Linear(32, K)

    def forward(self, x):
        return self.head(self.lstm(x.unsqueeze(-1))[0][:, -1])


class GroupNormConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.GELU(),
                                  nn.Conv1d(16, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.head = nn.Linear(16 * D, K)

    def forward(self, x):
        return self.head(self.body(x.unsqueeze(1)).flatten(1))


def _loops(f: float) -> dict:
    """name -> a function building that loop at learning-rate factor `f`."""
    ce, opt = nn.CrossEntropyLoss(), torch.optim

    def adam(m, lr):
        return opt.Adam(m.parameters(), lr=lr * f)

    def momentum(m, lr, **kw):
        return opt.SGD(m.parameters(), lr=lr * f, momentum=0.9, **kw)

    def one_cycle():
        m = _mlp()
        o = momentum(m, 0.1)
        return Loop(m, o, ce, steps=300,
                    schedule=opt.lr_scheduler.OneCycleLR(o, max_lr=0.2 * f, total_steps=300))

    def warmup_cosine():
        m = TokenTransformer()
        o = opt.AdamW(m.parameters(), lr=1e-3 * f, weight_decay=0.05)
        warm = opt.lr_scheduler.LinearLR(o, 0.01, 1.0, total_iters=30)
        cosine = opt.lr_scheduler.CosineAnnealingLR(o, 370)
        return Loop(m, o, ce, steps=400,
                    schedule=opt.lr_scheduler.SequentialLR(o, [warm, cosine], milestones=[30]))

    def exponential():
        m = _mlp()
        o = momentum(m, 0.1)
        return Loop(m, o, ce, schedule=opt.lr_scheduler.ExponentialLR(o, 0.99))

    def param_groups():
        m = _mlp()
        head = list(m[2].parameters()) + list(m[4].parameters())
        return Loop(m, opt.Adam([{"params": m[0].parameters(), "lr": 1e-3 * f},
                                 {"params": head, "lr": 5e-3 * f}]), ce)

    def frozen_body():  # a deliberately frozen body: only the head trains
        m = _mlp()
        for p in list(m[0].parameters()) + list(m[2].parameters()):
            p.requires_grad_(False)
        return Loop(m, opt.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-2 * f), ce)

    def deep_batchnorm():
        m = nn.Sequential(nn.Linear(D, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, K))
        return Loop(m, momentum(m, 0.1, weight_decay=5e-4), ce, validate=True)

    def dropout():
        m = nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, K))
        return Loop(m, adam(m, 3e-3), ce, validate=True)

    def plain(optimizer, lr, act=nn.ReLU, **options):
        def build():
            m = _mlp(act=act)
            return Loop(m, optimizer(m.parameters(), lr=lr * f), ce, **options)
        return build

    def regression(loss, optimizer, lr, act):
        def build():
            m = _mlp(1, act=act)
            return Loop(m, optimizer(m.parameters(), lr=lr * f, **(
                {"momentum": 0.9} if optimizer is opt.SGD else {})), loss, target="value")
        return build

    def model_with(make, lr, loss=ce, **options):
        def build():
            m = make()
            return Loop(m, adam(m, lr), loss, **options)
        return build

    return {
        "adagrad": plain(opt.Adagrad, 0.05),
        "adadelta": plain(opt.Adadelta, 1.0),
        "nadam": plain(opt.NAdam, 3e-3, act=nn.GELU),
        "radam": plain(opt.RAdam, 3e-3, act=nn.SiLU),
        "adamax": plain(opt.Adamax, 5e-3),
        "nesterov": plain(lambda p, lr: opt.SGD(p, lr=lr, momentum=0.9, nesterov=True), 0.05),
        "sgd_plain": plain(opt.SGD, 0.1, steps=300),
        "one_cycle": one_cycle,
        "warmup_cosine": warmup_cosine,
        "exponential": exponential,
        "lstm": model_with(FeatureLSTM, 1e-2, steps=300),
        "conv1d_groupnorm": model_with(GroupNormConv, 3e-3),
        "label_smoothing": model_with(_mlp, 3e-3, nn.CrossEntropyLoss(label_smoothing=0.1)),
        "nll_log_softmax": model_with(lambda: nn.Sequential(_mlp(), nn.LogSoftmax(1)), 3e-3,
                                      nn.NLLLoss()),
        "multilabel_bce": model_with(_mlp, 3e-3, nn.BCEWithLogitsLoss(), target="multilabel"),
        "batch_256": model_with(_mlp, 1e-2, batch=256),
        "batch_8": plain(lambda p, lr: opt.SGD(p, lr=lr, momentum=0.9), 0.02, batch=8, steps=400),
        "clip_value": model_with(_mlp, 3e-3, clip_value=0.1),
        "long_run": plain(lambda p, lr: opt.SGD(p, lr=lr, momentum=0.9), 0.05, steps=1000,
                          validate=True),
        "param_groups": param_groups,
        "frozen_body": frozen_body,
        "deep_batchnorm": deep_batchnorm,
        "dropout": dropout,
        "huber": regression(nn.HuberLoss(), opt.Adam, 3e-3, nn.Tanh),
        "l1_sgd": regression(nn.L1Loss(), opt.SGD, 0.05, nn.ReLU),
    }


LOOPS = tuple(_loops(1.0))
# Plants that need something a loop lacks: a softmax where the loss takes logits of classes.
# Mixed precision in the loops stepped by SGD (plain, Nesterov, scheduled): an adaptive
# optimizer divides by the gradient's own scale and trains through clip_before_unscale.
SGD_LOOPS = ("sgd_plain", "nesterov", "one_cycle", "exponential", "batch_8", "long_run",
             "deep_batchnorm", "l1_sgd")
NEEDS = {"softmax_into_ce": lambda loop, target: target == "classes" and loop != "nll_log_softmax",
         "amp_clip": lambda loop, target: loop in SGD_LOOPS,
         "amp_clip_before_unscale": lambda loop, target: loop in SGD_LOOPS,
         # the hand-written formula replaces a plain cross-entropy; CPU float16 has no LSTM
         "log_softmax_fp16": lambda loop, target: target == "classes" and loop not in (
             "nll_log_softmax", "label_smoothing", "lstm")}
NEEDS["log_softmax_fp16_scaler"] = NEEDS["log_softmax_fp16"]
# eval mode changes only a model with dropout or BatchNorm; a frozen body is no fault
NEEDS["train_mode_not_restored"] = lambda loop, target: loop in ("deep_batchnorm", "dropout")
NEEDS["last_layer_optimized"] = lambda loop, target: loop != "frozen_body"


def _planted(loop: Loop, p: Planted, train, val, g: torch.Generator):
    """The fault written into the data, the model and the loss (the loop does the rest)."""
    (X, y), (Xv, yv) = train, val
    if p.raw_units:
        scale = 10 ** (torch.rand(D, generator=g) * 6 - 2)
        shift = 3 * scale * torch.randn(D, generator=g)
        X, Xv = X * scale + shift, Xv * scale + shift
    if p.shuffled:
        n = int(len(X) * p.shuffled)
        rows = torch.randperm(len(X), generator=g)[:n]
        X = X.clone()
        X[rows] = X[rows[torch.randperm(n, generator=g)]]
    if p.nan_rows:
        X = X.clone()
        X[torch.randperm(len(X), generator=g)[:len(X) // 50], 0] = float("nan")
    if p.softmax:
        loop.model = nn.Sequential(loop.model, nn.Softmax(dim=1))
    if p.optimize == "last_layer":  # param groups listed by hand, the body forgotten
        last = {id(t) for t in list(loop.model.parameters())[-2:]}
        for group in loop.optimizer.param_groups:
            group["params"] = [t for t in group["params"] if id(t) in last]
    if p.init != 1.0:
        with torch.no_grad():
            for w in loop.model.parameters():
                if w.dim() > 1:
                    w.mul_(p.init)
    base = loop.loss_fn
    if p.loss == "sum":
        loop.loss_fn = lambda out, t: base(out, t) * len(t)
    elif p.loss == "negated":
        loop.loss_fn = lambda out, t: -base(out, t)
    return (X, y), (Xv, yv)


def run(name: str, plant: str, seed: int):
    """Monitor.history of loop `name` with `plant` planted, seeded by `seed`."""
    p = PLANTS[plant][0]
    torch.manual_seed(seed)
    loop = _loops(p.lr)[name]()
    train, val = _planted(loop, p, *_data(seed, loop.target), torch.Generator().manual_seed(seed + 77))
    (X, y), model, opt = train, loop.model, loop.optimizer
    order_g = torch.Generator().manual_seed(seed + 1)
    per_epoch = len(X) // loop.batch
    scaler = torch.amp.GradScaler("cpu") if p.amp in ("scaled", "unscaled", "scaler") else None
    validate = loop.validate or p.train_mode == "once"
    model.train()
    with fl.Monitor(model, opt) as mon:
        for step in range(loop.steps):
            if step % per_epoch == 0:
                order = torch.randperm(len(X), generator=order_g)
            rows = order[(step % per_epoch) * loop.batch:(step % per_epoch + 1) * loop.batch]
            if p.train_mode == "each_step":
                model.train()
            if p.zero_grad == "each_step":
                opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16, enabled=bool(p.amp)):
                out = model(X[rows])
                if p.loss == "log_of_softmax":  # inside autocast, as AMP guides place losses
                    loss = nn.functional.nll_loss(torch.log(torch.softmax(out, 1)), y[rows])
            if p.loss != "log_of_softmax":
                loss = loop.loss_fn(out.float(), y[rows])
            (loss if scaler is None else scaler.scale(loss)).backward()
            if p.zero_grad == "after_backward":  # the bug: gradients gone before the step
                opt.zero_grad(set_to_none=loop.clip_value is None)
            if loop.clip_value:
                nn.utils.clip_grad_value_(model.parameters(), loop.clip_value)
            if p.amp == "unscaled":
                scaler.unscale_(opt)
            if p.amp in ("scaled", "unscaled"):  # "scaled", the bug: the clip sees them scaled
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()
            if loop.schedule is not None:
                loop.schedule.step()
            extra = {}
            if validate and (step % 20 == 0 or step == loop.steps - 1):
                model.eval()
                with torch.no_grad():
                    extra["val_loss"] = float(loop.loss_fn(model(val[0]), val[1]))
            mon.record(loss, **extra)
            if not math.isfinite(loss.item()):
                break
    return mon.history


def cases(seeds) -> list[tuple[str, str, int]]:
    targets = {name: _loops(1.0)[name]().target for name in LOOPS}
    return [(name, plant, seed) for plant in PLANTS for name in LOOPS for seed in seeds
            if NEEDS.get(plant, lambda *_: True)(name, targets[name])]


def _job(case):
    name, plant, seed = case
    d = fl.diagnose(run(name, plant, seed))
    expected = PLANTS[plant][1]
    right = d.top == expected and (expected is not None or d.shape == "healthy")
    return case, right, d.top, d.shape, d.confidence, (d.causes[0][2] if d.causes else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="2-4")
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument("--plants", default=None, help="comma-separated (default: all)")
    args = parser.parse_args()
    jobs = cases(fl.parse_seeds(args.seeds))
    if args.plants:
        jobs = [job for job in jobs if job[1] in args.plants.split(",")]
    start = time.perf_counter()
    with worker_pool(len(jobs), args.workers) as pool:
        results = list(pool.map(_job, jobs, chunksize=4))
    print(f"held-out loops, seeds {args.seeds}: {len(LOOPS)} loops, {len(results)} runs in "
          f"{time.perf_counter() - start:.0f} s\n")
    per, levels = Counter(), Counter()
    for (name, plant, seed), right, top, shape, level, why in results:
        per[plant, right] += 1
        levels[level, right] += 1
        if not right:
            print(f"  miss  {plant:20s} {name:17s} seed {seed}: {shape}, named {top} "
                  f"({level}) {why[:90]}")
    print(f"\n{'planted':22s} {'expected':22s} right")
    totals = {True: [0, 0], False: [0, 0]}  # faulty plants / healthy ones: [right, runs]
    for plant, (_, expected) in PLANTS.items():
        right, n = per[plant, True], per[plant, True] + per[plant, False]
        if not n:
            continue
        print(f"{plant:22s} {str(expected or 'healthy'):22s} {right:3d}/{n}")
        total = totals[expected is not None]
        total[0], total[1] = total[0] + right, total[1] + n
    (named, faulty), (healthy, controls) = totals[True], totals[False]
    print(f"\nfaults named {named}/{faulty} = {named / max(faulty, 1):.1%}; "
          f"healthy called healthy {healthy}/{controls}")
    for level in ("high", "medium", "low"):
        right, n = levels[level, True], levels[level, True] + levels[level, False]
        print(f"  {level:6s} right {right}/{n}" + (f" ({right / n:.0%})" if n else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
