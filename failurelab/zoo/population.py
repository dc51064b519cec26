"""Run many zoo cases in worker processes (one torch thread each) and summarise them."""

from __future__ import annotations

import math
import time

import pandas as pd

from ..lab.parallel import worker_pool
from .cases import Case
from .loop import run


def timed_run(case: Case) -> tuple[pd.DataFrame, float, float]:
    """The history, wall seconds, and CPU seconds of this process (less sensitive to
    other processes sharing the cores)."""
    wall, cpu = time.perf_counter(), time.process_time()
    history = run(case)
    return history, time.perf_counter() - wall, time.process_time() - cpu


def run_population(cases: list[Case], workers: int | None = None) -> list[tuple]:
    """[(case, history, wall s, CPU s)] in the order of `cases`; `workers=1`: in process."""
    if workers == 1 or len(cases) < 2:
        return [(c, *timed_run(c)) for c in cases]
    with worker_pool(len(cases), workers) as pool:
        results = list(pool.map(timed_run, cases, chunksize=4))
    return [(c, *r) for c, r in zip(cases, results, strict=True)]


def summary(case: Case, history: pd.DataFrame, seconds: float, cpu_seconds: float) -> dict:
    """One row: what the case is, how long it took, and how far its loss fell."""
    loss = history["loss"]
    start, end = loss.iloc[:10].mean(), loss.iloc[-10:].mean()
    return dict(id=case.id, family=case.family, optimizer=case.optimizer,
                fault=case.fault or "healthy", severity=case.severity, seed=case.seed,
                expected=case.expected, steps=len(history), seconds=seconds,
                cpu_seconds=cpu_seconds,
                loss_start=start, loss_end=end,
                loss_ratio=end / start if math.isfinite(start) and start > 0 else math.nan,
                nonfinite=bool(history["nonfinite"].sum() > 0), **evidence(history))


def evidence(history: pd.DataFrame) -> dict:
    """Medians of what shows a fault's mechanism, to check it is physically there."""
    def first(prefix):  # worst layer's share at step 0
        cols = [c for c in history.columns if c.startswith(prefix)]
        return float(history[cols].iloc[0].max()) if cols else math.nan

    def median(column):
        return float(history[column].median()) if column in history else math.nan

    return dict(zero_grad_frac=median("zero_grad_frac"), grad_cosine=median("grad_cosine"),
                grad_growth=float(history["grad_norm"].iloc[-1] / history["grad_norm"].iloc[0]),
                update_ratio=median("update_ratio"), input_std_ratio=median("input_std_ratio"),
                input_nonfinite=float(history["input_nonfinite"].sum()),
                output_grad_zero_frac=median("output_grad_zero_frac"),
                saturated_start=first("saturated_frac/"), dead_start=first("dead_frac/"),
                weight_norm_change=float(history["weight_norm"].iloc[-1]
                                         / history["weight_norm"].iloc[0]))
