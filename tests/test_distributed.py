"""DDP on 2 gloo CPU processes: rank 0's history equals one process on the whole batch."""

import math
import pickle
import socket
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import failurelab as fl

STEPS, BATCH, TIMEOUT_S = 40, 12, 120  # 40 steps: across a chunk boundary (32)
SCALE = torch.tensor([1.0, 20.0, 0.05, 1.0, 3.0, 1.0])
GLOBAL_COLUMNS = ["loss", "grad_norm", "weight_norm", "update_norm", "update_ratio",
                  "grad_cosine", "nonfinite", "zero_grad_frac", "grad_norm/0.weight",
                  "input_absmax", "input_std_ratio", "input_nonfinite", "batch_size",
                  "output_std", "output_prob_frac", "output_nonfinite", "act_mean/1",
                  "act_std/1", "saturated_frac/1", "act_mean/3", "act_std/3", "dead_frac/3"]


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Sigmoid(), nn.Linear(8, 8), nn.ReLU(),
                         nn.Linear(8, 3))


def _batch(step):
    """The global batch of one step (both ranks' halves)."""
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(2 * BATCH, 6, generator=g) * SCALE
    if step == 24:  # the last step both ranks run: a NaN input in rank 0's half
        x[3, 1] = float("nan")
    return x, torch.randint(0, 3, (2 * BATCH,), generator=g)


def _train(model, opt, mon, steps, part=None):
    for step in range(steps):
        x, y = _batch(step)
        if part is not None:
            x, y = x[part * BATCH:(part + 1) * BATCH], y[part * BATCH:(part + 1) * BATCH]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mon.record(loss)


def _worker(rank, port, out, steps_by_rank):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    try:
        model = _model()
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        mon = fl.Monitor(model, opt, other_ranks="none")
        with torch.distributed.algorithms.join.Join([ddp]):  # uneven steps are allowed
            _train(ddp, opt, mon, steps_by_rank[rank], part=rank)
        mon.close()  # every rank, after the Join block: the one collective
        with open(f"{out}.{rank}", "wb") as f:
            pickle.dump(mon.history, f)
    finally:
        dist.destroy_process_group()


def _spawn(tmp_path, steps_by_rank):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "history")
    ctx = mp.spawn(_worker, args=(port, out, steps_by_rank), nprocs=2, join=False)
    deadline = time.monotonic() + TIMEOUT_S
    while not ctx.join(timeout=max(deadline - time.monotonic(), 0.1)):  # one exit at a time
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.terminate()
            pytest.fail(f"the DDP processes did not finish within {TIMEOUT_S} s (deadlock?)")
    return [pickle.load(open(f"{out}.{rank}", "rb")) for rank in (0, 1)]


def _single_process(steps):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fl.Monitor(model, opt) as mon:
        _train(model, opt, mon, steps)
    return mon.history


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built in")
def test_rank0_holds_the_global_columns_and_early_stop_does_not_deadlock(tmp_path):
    rank0, rank1 = _spawn(tmp_path, {0: STEPS, 1: 25})  # rank 1 stops early
    single = _single_process(STEPS)
    assert len(rank1) == 0  # other_ranks="none": only rank 0 keeps a history
    assert len(rank0) == STEPS
    assert rank0["ranks"].tolist() == [2.0] * 25 + [1.0] * (STEPS - 25)
    both = slice(0, 25)  # steps both ranks ran: the concatenated batch
    for column in GLOBAL_COLUMNS:
        got = rank0[column].iloc[both].to_numpy()
        want = single[column].iloc[both].to_numpy()
        assert np.isnan(got).tolist() == np.isnan(want).tolist(), column
        ok = ~np.isnan(want)
        assert got[ok] == pytest.approx(want[ok], rel=1e-4, abs=1e-6), column
    assert rank0["input_nonfinite"].iloc[24] == 1 and rank0["nonfinite"].iloc[24] > 1
    assert rank0["input_nonfinite"].iloc[:24].sum() == 0
    read = rank0["batch_size"].dropna()  # the steps the forward schedule reads
    assert read.iloc[0] == 2 * BATCH and read.index[-1] >= 25 and read.iloc[-1] == BATCH
    assert rank0["grad_norm"].iloc[:24].map(math.isfinite).all()


@pytest.mark.parametrize("nan", [False, True])
def test_merged_input_std_ratio_follows_the_single_process_rule(nan):
    """The input sums two ranks keep merge into the std ratio one process reads on the
    concatenated batch, a constant feature (left out) and a NaN entry included."""
    from failurelab.telemetry import distributed, instruments

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(12, 4, generator=gen) * torch.tensor([1.0, 20.0, 0.5, 0.0]) + 3
    if nan:
        x[2, 1] = float("nan")
    inputs = instruments.Inputs()
    inputs.partials = True
    single = inputs.compute([x])["input_std_ratio"][0]
    parts = []
    for half in (x[:5], x[5:]):
        values = inputs.compute([half])
        parts.append({k: v[0] for k, v in values.items()} | {"loss": 0.0, "nonfinite": 0,
                                                                "_loss_nonfinite": 0})
    merged = distributed.merge([[parts[0]], [parts[1]]])[0]["input_std_ratio"]
    assert math.isfinite(single) and merged == pytest.approx(single, rel=1e-5)
