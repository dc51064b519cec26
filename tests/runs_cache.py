"""One cached run per (recipe, seed) per test process: several tests read the same run."""

import functools

import failurelab as fl


@functools.lru_cache(maxsize=None)
def cached_run(recipe: fl.Recipe, seed: int) -> fl.Run:
    return fl.run(recipe, seed=seed)
