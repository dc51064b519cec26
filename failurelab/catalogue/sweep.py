"""Sweeps: every fault's signature over many seeds, in parallel worker processes.

`verify` is what `failurelab verify`, the published signature table and the catalogue
benchmark run: each fault's run must show its signature, and each task's healthy
baseline must show none.  Tiny models run fastest one torch thread per process, so a
sweep uses one worker process per core (`parallel`: capped by the jobs, stopped at once
by Ctrl-C).
"""

from __future__ import annotations

import time
from concurrent.futures import as_completed
from typing import Callable, Iterable

import pandas as pd

from ..basics.recipes import baseline
from ..lab.parallel import worker_pool
from ..lab.train import run
from . import FAULTS
from .faults import get

COLUMNS = ["kind", "fault", "task", "seed", "fired", "score", "evidence", "values",
           "wall_time"]


def _job(kind: str, name: str, seed: int, against: tuple[str, ...] = ()) -> list[dict]:
    """One run; for a fault its own signature, for a baseline every signature in `against`
    that belongs to its task."""
    if kind == "fault":
        fault = get(name)
        result = run(fault.inject(baseline(fault.task)), seed=seed)
        checked = [fault]
    else:
        result = run(baseline(name), seed=seed)
        checked = [get(n) for n in against if get(n).task == name]
    cache: dict[str, float] = {}
    rows = []
    for fault in checked:
        ev = fault.evidence(result.history, cache)
        rows.append(dict(kind=kind, fault=fault.name, task=fault.task, seed=seed,
                         fired=ev.fired, score=ev.score, evidence=ev.sentence,
                         values=ev.values, wall_time=result.wall_time))
    return rows


def verify(faults: Iterable[str] | None = None, seeds: Iterable[int] = range(10), *,
           workers: int | None = None,
           progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Run every fault (default: the whole catalogue) and its task's baseline per seed.

    Returns one row per fault run (`kind="fault"`: did its signature fire?) and one per
    baseline run and signature of that task (`kind="baseline"`: it must not fire).
    `progress(done, total)` is called once the runs are queued (done=0), then as each
    finishes.
    """
    names = list(faults) if faults is not None else list(FAULTS)
    for name in names:
        get(name)  # unknown names fail before any work starts
    seeds = list(seeds)
    tasks = sorted({get(n).task for n in names})
    jobs = [("fault", n, s) for n in names for s in seeds]
    jobs += [("baseline", t, s, tuple(names)) for t in tasks for s in seeds]
    progress = progress or (lambda done, total: None)
    rows: list[dict] = []
    if workers == 1:
        progress(0, len(jobs))
        for i, job in enumerate(jobs):
            rows += _job(*job)
            progress(i + 1, len(jobs))
    else:
        with worker_pool(len(jobs), workers) as pool:  # stops at once on Ctrl-C
            futures = [pool.submit(_job, *job) for job in jobs]
            progress(0, len(jobs))  # the workers are starting: say so before any finishes
            for i, future in enumerate(as_completed(futures)):
                rows += future.result()
                progress(i + 1, len(jobs))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["kind", "fault", "seed"], ignore_index=True)


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Per fault: seeds reproduced, baseline false alarms, weakest margin, run time."""
    faults = results[results.kind == "fault"].groupby("fault", sort=False)
    base = results[results.kind == "baseline"].groupby("fault")
    table = pd.DataFrame({
        "reproduced": faults.fired.sum().astype(int),
        "seeds": faults.seed.count(),
        "weakest_margin": faults.score.min(),
        "false_alarms": base.fired.sum().astype(int),
        "seconds": faults.wall_time.sum(),
    })
    order = [n for n in FAULTS if n in table.index]
    table = table.loc[order]
    table["ok"] = (table.reproduced == table.seeds) & (table.false_alarms == 0)
    return table


def timed_verify(**kwargs) -> tuple[pd.DataFrame, float]:
    """`verify` and its wall time in seconds."""
    start = time.perf_counter()
    results = verify(**kwargs)
    return results, time.perf_counter() - start
