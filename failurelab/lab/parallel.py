"""Worker processes for sweeps: tiny models run fastest one torch thread per process,
with one process per core (two threads per process on two cores were 6-9x slower)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def worker_pool(jobs: int, workers: int | None = None) -> ProcessPoolExecutor:
    """A pool of `workers` (default: one per core, never more than `jobs`) processes,
    each with one torch thread and a file-only matplotlib backend."""
    workers = workers or min(jobs, os.cpu_count() or 1)
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    return ProcessPoolExecutor(max(1, workers), mp_context=context, initializer=_init)


def _init() -> None:
    import matplotlib
    import torch

    matplotlib.use("Agg")
    torch.set_num_threads(1)
