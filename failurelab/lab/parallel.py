"""Worker processes for sweeps: tiny models run fastest one torch thread per process,
with one process per core (two threads per process on two cores were 6-9x slower).

A sweep must also stop when asked: on Ctrl-C (or any error) the pool cancels the jobs
still queued and terminates its workers at once, instead of waiting for every job as
`ProcessPoolExecutor.__exit__` does (60-97 s for `failurelab verify`).  Workers ignore
SIGINT, so the terminal's Ctrl-C reaches only the parent, which stops them all.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor

STOP_GRACE_S = 0.5  # a terminated worker gets this long to exit before it is killed


def usable_cores() -> int:
    """The cores this process may run on (a container or `taskset` may allow fewer than
    the machine has)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def worker_count(jobs: int, workers: int | None = None) -> int:
    """How many workers a pool for `jobs` starts: `workers` (default: one per core), but
    never more than the jobs, nor more than 2 x the cores (more only adds memory: each
    worker holds torch, ~150-300 MB, and competes for the same cores)."""
    cores = usable_cores()
    return max(1, min(workers or cores, jobs, 2 * cores))


class WorkerPool(ProcessPoolExecutor):
    """A ProcessPoolExecutor that, leaving its `with` block by an exception (Ctrl-C's
    KeyboardInterrupt included), stops at once instead of finishing the queue."""

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.shutdown(wait=True)
        else:
            self.stop()
        return False

    def stop(self) -> None:
        """Cancel the queued jobs and end the workers now (SIGTERM, then SIGKILL)."""
        workers = list((getattr(self, "_processes", None) or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for process in workers:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(STOP_GRACE_S)


def worker_pool(jobs: int, workers: int | None = None) -> WorkerPool:
    """A pool of `worker_count(jobs, workers)` processes, each with one torch thread and a
    file-only matplotlib backend."""
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    return WorkerPool(worker_count(jobs, workers), mp_context=context, initializer=_init)


def _init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import matplotlib
    import torch

    matplotlib.use("Agg")
    torch.set_num_threads(1)
