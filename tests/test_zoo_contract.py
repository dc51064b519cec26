"""The zoo as `fl.investigate`'s parts (failurelab/zoo/contract.py): the contract's parts,
run in a plain loop under `fl.Monitor`, are the zoo's own loop, bitwise.

The cases are the loops where a part could drift from `zoo/loop.py`: dropout (the
training RNG stream), accumulation, clipping and a schedule, a GradScaler with clipping
before unscale, the stale optimizer (built on another model), validation that leaves
the model in eval mode, zero_grad once per epoch, and model.half().  Most are cut to
the first STEPS steps (both loops run the same cut), two fail within a few steps and
are compared with `zoo.run` whole.
"""

import pickle
from dataclasses import replace

import pandas as pd
import pytest
import torch

from failurelab import zoo
from failurelab.lab.train import torch_threads
from failurelab.zoo.contract import parts, run_parts
from failurelab.zoo.loop import train
from failurelab.zoo.parts import build, data_seed

STEPS = 40  # past the first epoch boundary (32 steps) and several validations

CUT = [
    zoo.Case("binary", "adam", seed=2, habits=("val", "clip", "cosine", "accum", "extras")),
    zoo.Case("regressor", "momentum", "dropout_too_strong", 0.75, seed=0,
             habits=("val", "step_lr", "accum")),
    zoo.Case("cnn_bn", "sgd", "clip_before_unscale", 1.0, seed=1, habits=("amp",)),
    zoo.Case("gru", "rmsprop", "stale_optimizer", "rebuilt", seed=0),
    zoo.Case("bag", "adam", "train_mode_not_restored", "each_epoch", seed=0, habits=("val",)),
    zoo.Case("attention", "sgd", "no_zero_grad", "each_epoch", seed=1),
    zoo.Case("resmlp", "sgd", "fp16_no_scaling", "half", seed=0),
]
WHOLE = [  # runs that stop at a non-finite loss within a few steps
    zoo.Case("cnn_bn", "momentum", "nan_in_data", 0.01, seed=0, habits=("val",)),
    zoo.Case("resmlp", "sgd", "deep_unscaled_residual", 8, seed=0, habits=("step_lr", "accum")),
]


def _zoo_cut(case, steps):
    """`zoo.run`'s loop, cut to `steps` steps."""
    with torch_threads(1), torch.random.fork_rng():
        loop = replace(build(case), steps=steps)
        torch.manual_seed(data_seed(case))
        return train(loop)


def _same(a: pd.Series, b: pd.Series):
    assert len(a) == len(b)
    pd.testing.assert_series_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                   check_exact=True)


@pytest.mark.parametrize("case", CUT, ids=lambda c: c.id)
def test_the_parts_run_the_zoos_loop_bitwise(case):
    kwargs = {**parts(case), "steps": STEPS}
    history, _ = run_parts(kwargs)
    _same(history["loss"], _zoo_cut(case, STEPS)["loss"])


@pytest.mark.parametrize("case", WHOLE, ids=lambda c: c.id)
def test_a_failing_run_stops_where_the_zoos_does(case):
    history, _ = run_parts(parts(case))
    expected = zoo.run(case)
    assert len(expected) < 10  # the premise: it fails within a few steps
    _same(history["loss"], expected["loss"])


def test_the_model_comes_from_the_callers_seed_and_the_parts_pickle():
    kwargs = parts(zoo.Case("gru", "adam", "stale_optimizer", "deepcopy", seed=0))
    first = [p.detach().clone() for p in _seeded(kwargs["model"], 3).parameters()]
    again = list(_seeded(kwargs["model"], 3).parameters())
    other = list(_seeded(kwargs["model"], 4).parameters())
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    restored = pickle.loads(pickle.dumps(kwargs))
    model = _seeded(restored["model"], 3)
    optimizer = restored["optimizer"](model)
    held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert not held & {id(p) for p in model.parameters()}  # the stale optimizer survives
    assert len(kwargs["batches"]) == kwargs["steps"]


def test_each_optimizer_is_its_own_run():
    """Two runs through one step function, interleaved, are the runs made alone."""
    case = zoo.Case("cnn_bn", "sgd", habits=("amp",))
    kwargs = {**parts(case), "steps": 5}
    alone, _ = run_parts(kwargs)
    step, losses = kwargs["step"], {0: [], 1: []}
    runs = []
    for _ in range(2):
        model = _seeded(kwargs["model"], kwargs["seed"])
        runs.append((model, kwargs["optimizer"](model)))
    with torch_threads(1):
        for batch in kwargs["batches"][:5]:
            for i, (model, optimizer) in enumerate(runs):
                losses[i].append(step(model, optimizer, batch))
    assert losses[0] == losses[1] == alone["loss"].tolist()


def _seeded(factory, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory()
