"""The runs the benchmarks measure: the lab's catalogue and baselines, and the zoo's
plain PyTorch loops, each as a `Record` (family, id, expected answer, history).

Shared by `signatures.py` (calibration and the signature table) and `diagnosis.py`
(blind and leave-one-family-out scores).  Runs go through one worker pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

import failurelab as fl
from failurelab.evidence.quantities import measure
from failurelab.lab.parallel import worker_pool

LAB_TASKS = ("tabular", "sequence")


@dataclass(frozen=True)
class Record:
    family: str  # a zoo family, or "lab-tabular" / "lab-sequence"
    id: str
    expected: str  # "healthy", a catalogue fault name, or "outside"
    seed: int
    history: pd.DataFrame
    values: dict  # every named quantity of the history (measured in the worker)


def _lab(job) -> Record:
    name, seed = job
    recipe = fl.baseline(name) if name in LAB_TASKS else name
    task = name if name in LAB_TASKS else fl.FAULTS[name].task
    history = fl.run(recipe, seed=seed).history
    return Record(f"lab-{task}", f"{name}/seed{seed}",
                  "healthy" if name in LAB_TASKS else name, seed, history, measure(history))


def _zoo(case) -> Record:
    from failurelab import zoo

    history = zoo.run(case)
    return Record(case.family, case.id, case.expected, case.seed, history, measure(history))


def zoo_available() -> bool:
    try:
        from failurelab import zoo  # noqa: F401
    except ImportError:
        return False
    return True


def lab_jobs(seeds, faults=True, healthy=True) -> list:
    names = (list(fl.FAULTS) if faults else []) + (list(LAB_TASKS) if healthy else [])
    return [(n, s) for n in names for s in seeds]


def zoo_cases(seeds, faulty=True, healthy=True) -> list:
    if not zoo_available():
        return []
    from failurelab import zoo

    return zoo.cases(seeds=tuple(seeds), faulty=faulty, healthy=healthy)


def run(lab: list, cases: list, workers: int | None = None) -> list[Record]:
    """Every lab job and zoo case, in parallel (one torch thread per process)."""
    total = len(lab) + len(cases)
    with worker_pool(max(total, 1), workers) as pool:
        return list(pool.map(_lab, lab, chunksize=4)) + list(pool.map(_zoo, cases,
                                                                       chunksize=4))


def healthy_population(zoo_seeds=(0, 1, 2), lab_seeds=range(10),
                       workers: int | None = None) -> list[Record]:
    """Every healthy zoo run and the lab's two baselines: what calibration is set on."""
    return run(lab_jobs(lab_seeds, faults=False), zoo_cases(zoo_seeds, faulty=False),
               workers)
