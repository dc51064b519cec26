"""Plain PyTorch training loops unlike the lab's (other models, data, optimizers,
losses), recorded only through `fl.Monitor`: what an engineer would bring."""

import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import failurelab as fl


def data(n=512, d=8, k=None, seed=0, scale=None):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    w = torch.randn(d, k or 1, generator=g)
    y = (X @ w).argmax(1) if k else (X @ w).squeeze(1) + 0.1 * torch.randn(n, generator=g)
    if scale is not None:
        X = X * scale
    return X, y

def loop(model, opt, loss_fn, X, y, steps=200, batch=32, zero_grad=True, seed=0,
         schedule=None):
    g = torch.Generator().manual_seed(seed)
    with fl.Monitor(model, opt) as mon:
        for step in range(steps):
            idx = torch.randint(0, len(X), (batch,), generator=g)
            if zero_grad:
                opt.zero_grad()
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
            if schedule is not None:
                schedule.step()
            mon.record(loss)
            if not math.isfinite(loss.item()):
                break
    return mon.history

def regression_no_zero_grad(seed=0):
    torch.manual_seed(seed)
    X, y = data(seed=seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return loop(model, opt, lambda out, t: ((out.squeeze(1) - t) ** 2).mean(), X, y, zero_grad=False, seed=seed)

def classifier_huge_lr(seed=0):
    torch.manual_seed(seed)
    X, y = data(d=20, k=4, seed=seed)
    model = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 4))
    opt = torch.optim.SGD(model.parameters(), lr=20.0)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)

def raw_scale_regression(seed=0, lr=0.05):
    """A linear model fitting prices around 100 on unit-scale features: its bias must
    grow 100-fold, so its first steps move the weights by 40-50% of their norm while
    the loss falls from 10^4 to about 1 - large steps that keep their direction."""
    torch.manual_seed(seed)
    X, y = data(d=4, seed=seed)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return loop(model, opt, lambda out, t: ((out.squeeze(1) - t) ** 2).mean(), X,
                100.0 + 10 * y, seed=seed)

def unnormalised_inputs(seed=0):
    torch.manual_seed(seed)
    scale = torch.tensor([3e4, 1.0, 1e-3, 50.0, 1.0, 1.0, 2e3, 1.0])
    X, y = data(k=3, seed=seed, scale=scale)
    X = X + torch.tensor([1e5, 0, 0, 300, 0, 0, 0, 0])
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)

def nan_inputs(seed=0):
    torch.manual_seed(seed)
    X, y = data(k=3, seed=seed)
    X[torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))[:3], 2] = float("nan")
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, steps=300, seed=seed)

def healthy_adam(seed=0):
    torch.manual_seed(seed)
    X, y = data(d=12, k=3, seed=seed, n=1024)
    model = nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, steps=300, seed=seed)


def softmax_into_cross_entropy(seed=0):
    """A classifier that ends in nn.Softmax, trained with CrossEntropyLoss (which applies
    log-softmax itself): the bug of many public Q&A threads."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=4, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)


def softmax_with_its_own_log(seed=0):
    """The same classifier ending in nn.Softmax, trained correctly: the loop takes the
    log of the probabilities itself and hands it to NLLLoss (skorch's classifier loss,
    and much older code), so nothing is applied twice."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=4, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, lambda p, t: F.nll_loss(torch.log(p + 1e-12), t), X, y, seed=seed)


def many_classes_in_order(seed=0, shuffled=False):
    """100 classes of 32 samples each, stored class by class, one pass in batches of 32
    with Adam (the FGVC-Aircraft report's form; shuffled: the same samples dealt at
    random once)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    y = torch.arange(100).repeat_interleave(32)
    X = torch.randn(100, 64, generator=g)[y] + torch.randn(len(y), 64, generator=g)
    if shuffled:
        order = torch.randperm(len(y), generator=g)
        X, y = X[order], y[order]
    model = nn.Linear(64, 100)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with fl.Monitor(model, opt) as mon:
        for i in range(0, len(y), 32):
            opt.zero_grad()
            loss = F.cross_entropy(model(X[i:i + 32]), y[i:i + 32])
            loss.backward()
            opt.step()
            mon.record(loss)
    return mon.history


class _OneLogit(nn.Module):
    """A binary classifier whose forward may end in torch.sigmoid (a function, not a
    module: nothing but the values shows it)."""

    def __init__(self, squash: bool):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
        self.squash = squash

    def forward(self, x):
        z = self.body(x)[:, 0]
        return torch.sigmoid(z) if self.squash else z


def sigmoid_into_bce_with_logits(seed=0, fixed=False):
    """torch.sigmoid at the end of forward and BCEWithLogitsLoss in the loop: the loss
    applies the sigmoid a second time (fixed: the forward returns the logits)."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=2, seed=seed)
    model = _OneLogit(squash=not fixed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.BCEWithLogitsLoss(), X, y.float(), seed=seed)


def softmax_in_the_loss(seed=0, twice=True, sgd=False):
    """The model returns logits, and the loop applies softmax before CrossEntropyLoss
    (`loss_fn(out.softmax(1), y)`): its outputs alone look right.  `twice=False`: the
    same loop without that softmax.  `sgd`: plain SGD at 0.01, where the doubly squashed
    gradient learns almost nothing in 200 steps (the loss stays near ln 4)."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=4, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = (torch.optim.SGD(model.parameters(), lr=0.01) if sgd
           else torch.optim.Adam(model.parameters(), lr=3e-3))
    ce = nn.CrossEntropyLoss()
    return loop(model, opt, (lambda out, t: ce(out.softmax(1), t)) if twice else ce, X, y,
                seed=seed)


def raw_units(seed=0, standardised=False):
    """Every feature in one raw unit, hundreds to thousands (as years or prices are,
    or pixels 0-255): no spread between features to see, but a fresh model's logits
    come out oversized, as from a 10x initialisation."""
    torch.manual_seed(seed)
    X, y = data(k=3, seed=seed)
    if not standardised:
        X = X * 300 + 1000
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)


def scheduler_per_batch(seed=0):
    """StepLR(step_size=5, gamma=0.5) meant per epoch, stepped every batch: the rate is
    halved every 5 steps and is 1e-6 of itself by step 100."""
    torch.manual_seed(seed)
    X, y = data(k=3, seed=seed)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed, schedule=schedule)


def zero_grad_before_step(seed=0):
    """optimizer.zero_grad() between loss.backward() and optimizer.step()."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=3, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    with fl.Monitor(model, opt) as mon:
        for _ in range(150):
            idx = torch.randint(0, len(X), (32,), generator=g)
            loss = nn.functional.cross_entropy(model(X[idx]), y[idx])
            loss.backward()
            opt.zero_grad()
            opt.step()
            mon.record(loss)
    return mon.history


def margin_loss_float32(seed=0):
    """A healthy float32 classifier under a margin loss: many output gradients are
    exactly 0 (samples beyond the margin) and the rest are +-1/(B*C), powers of two
    that float16 could hold too.  Nothing here is float16."""
    torch.manual_seed(seed)
    X, y = data(d=12, k=4, seed=seed)
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return loop(model, opt, nn.MultiMarginLoss(), X, y, steps=300, seed=seed)


def summed_cross_entropy(seed=0, optimizer="adam"):
    """CrossEntropyLoss(reduction="sum"): under Adam the curve stays healthy (its steps
    do not scale with the gradient), so only the loss's weight on the outputs shows it."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=3, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = (torch.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    return loop(model, opt, nn.CrossEntropyLoss(reduction="sum"), X, y, seed=seed)


def negated_cross_entropy(seed=0):
    """The log-likelihood handed to the minimiser without its minus sign, and no
    validation recorded: only the training loss can show it."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=3, seed=seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, lambda out, t: -nn.functional.cross_entropy(out, t), X, y,
                seed=seed)


def one_cycle(seed=0, factor=1.0):
    """SGD under OneCycleLR: the first steps run at max_lr / 25 and the peak comes at 30%
    of the run, so an oversized max_lr shows only after the warm-up."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=3, seed=seed)
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2 * factor, total_steps=300)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, steps=300, seed=seed, schedule=schedule)


def radam_raw_inputs(seed=0):
    """Inputs in raw units under RAdam: the gradients are huge, so the adaptive step per
    unit of gradient shrinks by itself while the learning rate stays where it was set."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 77)
    X, y = data(k=3, seed=seed)
    X = X * 10 ** (torch.rand(X.shape[1], generator=g) * 6 - 2)
    model = nn.Sequential(nn.Linear(8, 64), nn.SiLU(), nn.Linear(64, 3))
    opt = torch.optim.RAdam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)


def _validated(seed, scale_val):
    """A GELU classifier on raw features standardised with the training statistics;
    every 20 steps it scores a validation split under model.eval() and no_grad,
    standardised the same way (`scale_val`) or left in raw units, and passes nothing
    but the loss to the monitor."""
    torch.manual_seed(seed)
    X, y = data(n=640, d=6, k=3, seed=seed, scale=torch.tensor([5e3, 1.0, 0.01, 20.0, 1.0, 1.0]))
    X = X + torch.tensor([2e4, 0, 0, 40, 0, 0])
    X, y, X_val, y_val = X[:512], y[:512], X[512:], y[512:]
    mean, std = X.mean(0), X.std(0)
    X = (X - mean) / std
    X_val = (X_val - mean) / std if scale_val else X_val
    model = nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    with fl.Monitor(model, opt) as mon:
        for step in range(200):
            idx = torch.randint(0, len(X), (32,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
            if step % 20 == 19:
                model.eval()
                with torch.no_grad():
                    model(X_val).argmax(1).eq(y_val).float().mean()
                model.train()
            mon.record(loss)
    return mon.history


def validation_in_raw_units(seed=0):
    return _validated(seed, scale_val=False)


def validation_standardised(seed=0):
    return _validated(seed, scale_val=True)


def beside_plain(run):
    """`run(monitored)` -> (per-step reference dicts with a "loss", the monitor or None):
    run it plain, then monitored with every MonitorWarning an error; assert the monitor
    left the losses bit-identical.  Returns the monitored run's references, monitor and
    history."""
    import warnings

    plain, _ = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fl.MonitorWarning)
        ref, mon = run(True)
        history = mon.history
    assert [r["loss"] for r in ref] == [r["loss"] for r in plain]  # the loop is untouched
    return ref, mon, history


def validated_classifier(seed=0, mixup=None, noisy=0.0):
    """A SiLU MLP on 4 Gaussian classes under AdamW, validated every 20 steps on clean
    hard labels; trained with Beta(mixup, mixup) mixup and its two-label loss, or with a
    share `noisy` of its training labels replaced at random."""
    g = torch.Generator().manual_seed(seed)
    centres = 2.0 * torch.randn(4, 12, generator=g)
    y = torch.randint(0, 4, (2560,), generator=g)
    X = centres[y] + 1.5 * torch.randn(2560, 12, generator=g)
    (X, y), (Xv, yv) = (X[:2048], y[:2048].clone()), (X[2048:], y[2048:])
    flip = torch.rand(2048, generator=g) < noisy
    y[flip] = torch.randint(0, 4, (int(flip.sum()),), generator=g)
    torch.manual_seed(seed)  # the model, and mixup's Beta draws
    model = nn.Sequential(nn.Linear(12, 64), nn.SiLU(), nn.Linear(64, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ce, beta = nn.functional.cross_entropy, mixup and torch.distributions.Beta(mixup, mixup)
    with fl.Monitor(model, opt) as mon:
        for step in range(300):
            idx = torch.randint(0, 2048, (64,), generator=g)
            xb, yb = X[idx], y[idx]
            opt.zero_grad()
            if beta:
                lam, other = float(beta.sample()), torch.randperm(64, generator=g)
                out = model(lam * xb + (1 - lam) * xb[other])
                loss = lam * ce(out, yb) + (1 - lam) * ce(out, yb[other])
            else:
                loss = ce(model(xb), yb)
            loss.backward()
            opt.step()
            extra = {}
            if step % 20 == 0 or step == 299:
                with torch.no_grad():
                    extra["val_loss"] = float(ce(model.eval()(Xv), yv))
                model.train()
            mon.record(loss, **extra)
    return mon.history


def relu_on_logits(seed=0, fixed=False):
    """A classifier whose last Linear layer is followed by a ReLU, as its hidden layers
    are, trained with CrossEntropyLoss: no logit can go below 0 (the PyTorch quickstart
    shipped this).  `fixed=True`: the same loop without that ReLU."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=4, seed=seed)
    layers = [nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4)] + ([] if fixed else [nn.ReLU()])
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)


class _ReluInForward(nn.Module):
    """Linear-ReLU-Linear, the last Linear's output passed through F.relu in forward
    (no module to see) unless `fixed`."""

    def __init__(self, d, out, fixed):
        super().__init__()
        self.hidden, self.head, self.fixed = nn.Linear(d, 32), nn.Linear(32, out), fixed

    def forward(self, x):
        z = self.head(F.relu(self.hidden(x)))
        return z if self.fixed else F.relu(z)


def functional_relu_on_logits(seed=0, fixed=False, binary=False):
    """`return F.relu(self.head(x))` under a loss on logits: CrossEntropyLoss over 4
    classes, or (`binary`) BCEWithLogitsLoss on one logit, whose negatives then cannot
    get a probability below one half.  `fixed=True`: the same loop without the ReLU."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=2 if binary else 4, seed=seed)
    model = _ReluInForward(10, 1 if binary else 4, fixed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    if binary:
        return loop(model, opt, lambda z, t: F.binary_cross_entropy_with_logits(
            z.squeeze(1), t.float()), X, y, seed=seed)
    return loop(model, opt, nn.CrossEntropyLoss(), X, y, seed=seed)


def relu_count_regression(seed=0):
    """A regression whose targets are non-negative amounts, its output through F.relu
    on purpose (an amount is never below 0), fitted with MSE: a clipped output the
    targets do not need below 0."""
    torch.manual_seed(seed)
    X, y = data(d=10, seed=seed)
    model = _ReluInForward(10, 1, fixed=False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return loop(model, opt, lambda out, t: ((out.squeeze(1) - t) ** 2).mean(), X, y.clamp(min=0),
                seed=seed)


def sigmoid_regression(seed=0):
    """A regression head ending in nn.Sigmoid, whose output stays in (0, 1), fitted with
    MSE to targets around 50."""
    torch.manual_seed(seed)
    X, y = data(d=6, seed=seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1), nn.Sigmoid())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return loop(model, opt, lambda out, t: ((out.squeeze(1) - t) ** 2).mean(), X, 50 + 5 * y,
                seed=seed)


def softmax_one_unit(seed=0):
    """A binary classifier whose single output unit goes through softmax, exp(z)/exp(z)
    = 1 for every input, trained with BCELoss on that 'probability'."""
    torch.manual_seed(seed)
    X, y = data(d=8, k=2, seed=seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Softmax(dim=1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return loop(model, opt, lambda p, t: nn.functional.binary_cross_entropy(p.squeeze(1), t.float()),
                X, y, seed=seed)


def relu_probabilities(seed=0):
    """A ReLU output read as probabilities by a hand-written categorical cross-entropy
    (each score over its row's sum, as Keras' loss does): a row clipped to 0 is 0/0."""
    torch.manual_seed(seed)
    X, y = data(d=10, k=3, seed=seed)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3), nn.ReLU())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def loss_fn(out, t):
        p = (out / out.sum(1, keepdim=True)).clamp(1e-7, 1 - 1e-7)
        return -p.gather(1, t[:, None]).log().mean()
    return loop(model, opt, loss_fn, X, y, steps=50, seed=seed)


def broadcast_mse(seed=0, optimizer="adam", fixed=False):
    """MSELoss of (B, 1) outputs against (B,) targets: every output is compared with
    every target of its batch (torch warns, the loop runs on); `fixed` squeezes the
    output first."""
    torch.manual_seed(seed)
    X, y = data(d=6, seed=seed)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = (torch.optim.Adam(model.parameters(), lr=1e-2) if optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "a target size ... different"
        return loop(model, opt, lambda out, t: F.mse_loss(out.squeeze(1) if fixed else out, t),
                    X, y, seed=seed)


def gru_regression_no_zero_grad(seed=0):
    """A GRU regressing a class index from a noisy sine, zero_grad forgotten under
    momentum: the loss grows by tens of orders of magnitude over many steps, and late in
    the run the outputs dwarf their targets (the gradient is then affine in the output,
    as under a broadcast MSE, although every output has its own target)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (512,), generator=g)
    t = torch.linspace(0, 6.28, 32)
    X = torch.sin(t * (y[:, None] + 1)) + 0.5 * torch.randn(512, 32, generator=g)

    class GRURegression(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(1, 32, batch_first=True)
            self.head = nn.Linear(32, 1)

        def forward(self, x):
            out, _ = self.rnn(x.unsqueeze(-1))
            return self.head(out[:, -1]).squeeze(-1)

    model = GRURegression()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return loop(model, opt, F.mse_loss, X, y.float(), steps=150, zero_grad=False, seed=seed)


def unsquared_regression(seed=0):
    """A regressor trained and validated on (pred - y).mean(), the square forgotten: the
    loss falls without bound as the outputs run negative, on held-out rows as on the
    training batches (more so: they are read in eval mode after the step)."""
    X, y = data(n=640, seed=seed)
    (X, y), (Xv, yv) = (X[:512], y[:512]), (X[512:], y[512:])
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed)
    with fl.Monitor(model, opt) as mon:
        for step in range(200):
            idx = torch.randint(0, 512, (256,), generator=g)
            opt.zero_grad()
            loss = (model(X[idx]).squeeze(1) - y[idx]).mean()
            loss.backward()
            opt.step()
            extra = {}
            if step % 20 == 19:
                with torch.no_grad():
                    extra["val_loss"] = float((model(Xv).squeeze(1) - yv).mean())
            mon.record(loss, **extra)
    return mon.history


def raw_pixels_sigmoid(seed=0, scaled=False):
    """Pixels in 0-255 into an MLP with sigmoid outputs, trained with a clipped
    cross-entropy on the renormalised sigmoids (Keras' categorical cross-entropy, as a
    port writes it), SGD at 0.1: the fresh model's sigmoids start pinned at their bounds
    and the clip cuts their gradient.  `scaled=True`: the pixels divided by 255."""
    g = torch.Generator().manual_seed(seed)
    strokes = (torch.rand(10, 196, generator=g) < 0.2).float()
    y = torch.randint(0, 10, (2048,), generator=g)
    X = ((strokes[y] * 0.8 + 0.35 * torch.randn(2048, 196, generator=g)).clamp(0, 1) * 255).round()
    if scaled:
        X = X / 255
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(196, 50), nn.ReLU(), nn.Linear(50, 10), nn.Sigmoid())

    def clipped_cross_entropy(p, labels):
        p = (p / p.sum(1, keepdim=True)).clamp(1e-7, 1 - 1e-7)
        return -p.log().gather(1, labels[:, None]).mean()

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return loop(model, opt, clipped_cross_entropy, X, y, steps=150, seed=seed)
