"""One run per (recipe, seed) per test session: several tests, both xdist workers and the
notebooks' kernels read the same run.

Within a process the first request trains or loads, later ones get the same object.
Across processes the run goes through the session's folder of runs (the root conftest's,
see `failurelab.lab.runcache`): a run is bitwise reproducible (test_runcache.py checks a
served run against a fresh one), so a seed-0 run that test_faults.py checks and that
notebook 11 plots is trained once per session instead of once in each.  Its rules still
hold: an entry is served only to a process other than the one that trained it, once per
process, so every run is trained at least once in the session, by this code.

Only plain runs come here (no patched module, no monkeypatch): a test that changes how
training works calls `fl.run` itself, and the folder is off for it."""

import functools
import os

import failurelab as fl
from failurelab.lab import runcache

folder: str | None = None  # set by tests/conftest.py for the session


@functools.lru_cache(maxsize=None)
def cached_run(recipe: fl.Recipe, seed: int) -> fl.Run:
    if folder is None:
        return fl.run(recipe, seed=seed)
    previous = os.environ.get(runcache.VARIABLE)
    os.environ[runcache.VARIABLE] = folder
    try:
        return fl.run(recipe, seed=seed)
    finally:
        if previous is None:
            os.environ.pop(runcache.VARIABLE, None)
        else:
            os.environ[runcache.VARIABLE] = previous
