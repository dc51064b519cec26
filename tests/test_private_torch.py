"""Each private torch API the Monitor uses can vanish in a later torch: with it removed,
the Monitor still records, and records the same columns (telemetry/private.py)."""

import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.telemetry import private

MISSING = {"_will_engine_execute_node": ("_WILL_EXECUTE", None),
           "_current_graph_task_id": ("_GRAPH_TASK", None),
           "_set_grad_enabled": ("_SET_GRAD", None),
           "_foreach_copy_": ("_FOREACH_COPY", None),
           "_BatchNorm": ("_BATCHNORM_BASE", None),
           "Tensor._nnz": ("_NNZ", "_no_such_method")}


class _Model(nn.Module):
    """The sparse embedding registered last: the parameter whose `.grad` the Monitor
    watches for a forgotten zero_grad is then a sparse one."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                  nn.Dropout(0.1), nn.Linear(16, 3))
        self.embed = nn.Embedding(20, 8, sparse=True)

    def forward(self, idx):
        return self.body(self.embed(idx).flatten(1))


def _history() -> pd.DataFrame:
    """A loop that exercises every private path: BatchNorm and dropout (train mode),
    a sparse embedding under SparseAdam, a dense head under SGD."""
    torch.manual_seed(0)
    model = _Model()
    embed, body = model.embed, model.body
    sparse = torch.optim.SparseAdam(embed.parameters(), lr=0.01)
    dense = torch.optim.SGD(body.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    with fl.Monitor(model, dense) as mon:
        for _ in range(8):
            idx = torch.randint(0, 20, (16, 1), generator=g)
            y = torch.randint(0, 3, (16,), generator=g)
            sparse.zero_grad(set_to_none=False)  # an emptied sparse .grad: _nnz() == 0
            dense.zero_grad()
            nn.functional.cross_entropy(model(idx), y).backward()
            sparse.step()
            dense.step()
            mon.record(0.0)
    assert not mon.stopped
    return mon.history


@pytest.mark.parametrize("name", sorted(MISSING))
def test_the_monitor_records_the_same_without_each_private_api(name, monkeypatch):
    expected = _history()
    attribute, absent = MISSING[name]
    monkeypatch.setattr(private, attribute, absent)
    pd.testing.assert_frame_equal(_history(), expected)


def test_every_private_api_is_listed_and_found_on_the_tested_build():
    assert set(private.AVAILABLE) == set(MISSING)
    assert all(private.AVAILABLE.values())  # else: a fallback runs; say so in the docs


def test_the_loop_above_reaches_every_private_path(monkeypatch):
    calls = dict.fromkeys(("backward_reaches", "in_backward", "copy_without_grad",
                           "is_batchnorm", "sparse_is_empty"), 0)
    for name in calls:
        def spy(*args, _name=name, _real=getattr(private, name)):
            calls[_name] += 1
            return _real(*args)
        monkeypatch.setattr(private, name, spy)
    _history()
    assert all(calls.values()), calls
