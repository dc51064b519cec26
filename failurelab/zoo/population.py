"""Run many zoo cases in worker processes (one torch thread each) and summarise them."""

from __future__ import annotations

import math
import time

import pandas as pd

from ..parallel import worker_pool
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
    return [(c, *r) for c, r in zip(cases, results)]


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
                nonfinite=bool(history["nonfinite"].sum() > 0))
