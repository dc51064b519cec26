"""Every private torch API the Monitor leans on, in one place.

The package takes a torch range, so no private name is load-bearing: each is looked up
once, by feature (not by version), and each has a fallback built from public API that
keeps the Monitor's columns right, at worst less detailed or a little slower.  Tests
remove each one in turn (tests/test_private_torch.py).  `AVAILABLE` says which were found.

* `_will_engine_execute_node`: does the running backward reach a parameter's `.grad`?
  Without it every backward through the output counts (an input-gradient penalty then
  counts twice: `output_backwards` over-counts, as it did before the query was used).
* `_current_graph_task_id`: is a backward running now (a forward recomputed inside one
  is activation checkpointing, not a new micro-batch)?  Without it: never (each
  recomputed forward is then read as another forward).
* `_set_grad_enabled`: autograd off around the snapshot copy, a microsecond cheaper per
  step than `torch.no_grad()`, which is the fallback.
* `_foreach_copy_`: one fused copy of many small tensors; fallback: copy one by one.
* `_BatchNorm`: the base of BatchNorm1d/2d/3d and SyncBatchNorm; fallback: those four.
* `Tensor._nnz`: stored entries of a sparse gradient; fallback: the coalesced values'
  count (public, one coalesce more).
"""

from __future__ import annotations

import torch
from torch import nn

_WILL_EXECUTE = getattr(torch._C, "_will_engine_execute_node", None)
_GRAPH_TASK = getattr(torch._C, "_current_graph_task_id", None)  # -1 outside backward
_SET_GRAD = getattr(torch._C, "_set_grad_enabled", None)
_FOREACH_COPY = getattr(torch, "_foreach_copy_", None)
_BATCHNORM_BASE = getattr(getattr(nn.modules, "batchnorm", None), "_BatchNorm", None)
_PUBLIC_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
_NNZ = "_nnz"

AVAILABLE = {"_will_engine_execute_node": _WILL_EXECUTE is not None,
             "_current_graph_task_id": _GRAPH_TASK is not None,
             "_set_grad_enabled": _SET_GRAD is not None,
             "_foreach_copy_": _FOREACH_COPY is not None,
             "_BatchNorm": _BATCHNORM_BASE is not None,
             "Tensor._nnz": hasattr(torch.Tensor, _NNZ)}


def backward_reaches(accumulators) -> bool:
    """Will the backward pass now running add to any of these gradient accumulators?
    True where torch cannot say (count it, the conservative reading)."""
    if not accumulators or _WILL_EXECUTE is None:
        return True
    try:
        return any(_WILL_EXECUTE(a) for a in accumulators)
    except (RuntimeError, TypeError):  # autograd.grad with respect to the parameters
        return True


def in_backward() -> bool:
    """Is the autograd engine running a backward pass now (False where torch cannot say)?"""
    return _GRAPH_TASK is not None and _GRAPH_TASK() != -1


def copy_without_grad(rows: list[torch.Tensor], tensors: list[torch.Tensor]) -> None:
    """Copy `tensors` into `rows` with autograd off (the weights require grad)."""
    if _SET_GRAD is None:
        with torch.no_grad():
            _copy(rows, tensors)
        return
    enabled = torch.is_grad_enabled()
    _SET_GRAD(False)
    try:
        _copy(rows, tensors)
    finally:
        _SET_GRAD(enabled)


def _copy(rows, tensors) -> None:
    if _FOREACH_COPY is not None:
        _FOREACH_COPY(rows, tensors)
    else:
        for row, tensor in zip(rows, tensors, strict=True):
            row.copy_(tensor)


def is_batchnorm(module: nn.Module) -> bool:
    """A BatchNorm layer of any dimension, SyncBatchNorm included."""
    return isinstance(module, _BATCHNORM_BASE or _PUBLIC_BATCHNORMS)


def sparse_is_empty(grad: torch.Tensor) -> bool:
    """Does this sparse gradient store no entries?"""
    nnz = getattr(grad, _NNZ, None)
    if nnz is not None:
        return nnz() == 0
    return grad.coalesce().values().numel() == 0
