"""Global telemetry under `torch.distributed` (DDP): every rank measures, rank 0 merges.

Under DDP the gradients are all-reduced (averaged) before `optimizer.step()` and the
weights stay identical, so each rank's gradient and weight columns already are the
global ones.  What differs per rank is its share of the batch: the loss, the inputs,
the outputs and the activations.  Each rank keeps, per row, the sums those columns are
made of; `Monitor.close()` gathers them once (one `all_gather_object`, the only
collective the monitor ever calls) and rank 0 rewrites its rows as if it had seen the
concatenated batch.  No collective runs inside the training loop, so a rank that
stops early never makes another wait there; it waits in its own `close()` until every
rank has closed.  A row that some ranks never recorded is merged over those that did
(`ranks` says how many).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .probes import spread_ratio

_NAN = float("nan")


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside an initialised process group."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather(rows: list[dict]) -> list[list[dict]]:
    """Every rank's per-row sums, on every rank (a collective: all ranks call it)."""
    out: list = [None] * world()[1]
    torch.distributed.all_gather_object(out, rows)
    return out


def merge(by_rank: list[list[dict]]) -> list[dict[str, float]]:
    """Global column values for each row index, from every rank's per-row sums."""
    merged = []
    for i in range(max(len(rows) for rows in by_rank)):
        parts = [rows[i] for rows in by_rank if i < len(rows)]
        merged.append(_merge_row(parts))
    return merged


def _merge_row(parts: list[dict]) -> dict[str, float]:
    out = {"ranks": float(len(parts))}
    batch = np.array([p.get("batch_size", _NAN) for p in parts], dtype=float)
    weights = batch if np.isfinite(batch).all() and batch.sum() > 0 else np.ones(len(parts))
    losses = np.array([p["loss"] for p in parts])
    out["loss"] = float((losses * weights).sum() / weights.sum())
    out["nonfinite"] = parts[0]["nonfinite"] + sum(p["_loss_nonfinite"] for p in parts[1:])
    for column in ("batch_size", "input_nonfinite", "output_nonfinite"):
        _reduce(out, parts, column, sum)
    for column in ("input_absmax",):
        _reduce(out, parts, column, max)
    _reduce(out, parts, "output_grad_min", min)
    if "_in_fsum" in parts[0]:
        out["input_std_ratio"] = _std_ratio(parts)
    if "_out_n" in parts[0]:
        out["output_std"] = _std(parts, "_out_sum", "_out_sq", "_out_n")
        for column, count in (("output_prob_frac", "_out_rows"),
                              ("output_logprob_frac", "_out_rows"),
                              ("output_grad_zero_frac", "_out_grad_n"),
                              ("output_zero_frac", "_out_n")):
            _weighted(out, parts, column, count)
    for key in parts[0]:
        if key.startswith("_act_n/"):
            _merge_activation(out, parts, key[len("_act_n/"):])
    return out


def _merge_activation(out: dict, parts: list[dict], name: str) -> None:
    n = sum(p[f"_act_n/{name}"] for p in parts)
    out[f"act_mean/{name}"] = sum(p[f"_act_sum/{name}"] for p in parts) / n
    out[f"act_std/{name}"] = _std(parts, f"_act_sum/{name}", f"_act_sq/{name}",
                                  f"_act_n/{name}")
    if any(math.isnan(p[f"_act_failed/{name}"]) for p in parts):  # NaN activations
        kind = "dead_frac" if f"_act_alive/{name}" in parts[0] else "saturated_frac"
        out[f"{kind}/{name}"] = _NAN
    elif f"_act_alive/{name}" in parts[0]:  # ReLU: dead if no sample of any rank fires it
        alive = np.maximum.reduce([p[f"_act_alive/{name}"] for p in parts])
        out[f"dead_frac/{name}"] = float((alive <= 0).mean())
    else:
        units = sum(p[f"_act_n/{name}"] for p in parts)
        out[f"saturated_frac/{name}"] = sum(p[f"_act_failed/{name}"] for p in parts) / units


def _reduce(out, parts, column, how) -> None:
    if column in parts[0]:
        values = [p[column] for p in parts]
        out[column] = _NAN if any(v != v for v in values) else float(how(values))


def _weighted(out, parts, column, count) -> None:
    if column in parts[0]:
        n = np.array([p[count] for p in parts], dtype=float)
        v = np.array([p[column] for p in parts], dtype=float)
        out[column] = float((v * n).sum() / n.sum()) if n.sum() > 0 else _NAN


def _std(parts, total, square, count) -> float:
    n = sum(p[count] for p in parts)
    if not n:
        return _NAN
    mean = sum(p[total] for p in parts) / n
    return math.sqrt(max(sum(p[square] for p in parts) / n - mean * mean, 0.0))


def _std_ratio(parts: list[dict]) -> float:
    """Largest over smallest per-feature std of the concatenated batch, by the rule of
    the single-process column (`probes.spread_ratio`: NaN/Inf entries and constant
    features left out)."""
    if sum(p["batch_size"] for p in parts) < 2:
        return _NAN
    sums = [sum(p[key] for p in parts) for key in ("_in_fsum", "_in_fsq", "_in_fn")]
    return spread_ratio(torch.from_numpy(np.stack(sums).astype(np.float64)))
