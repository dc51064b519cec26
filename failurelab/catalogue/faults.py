"""The catalogue's face: look a fault up by name, inject it, resolve a recipe, run it
(`fl.run`), check a run against a signature.  `Fault` itself is defined in `fault` and
re-exported here.

Names are resolved here, not in the lab's loop: the loop trains recipes and knows no
faults, so `lab` sits below the catalogue."""

from __future__ import annotations

import difflib

from ..basics.recipes import Recipe, baseline
from ..evidence.runs import history_of
from ..evidence.signatures import Evidence
from . import FAULTS
from .fault import FAMILIES, PHENOMENA, SHAPES, Fault, accepted_shapes

__all__ = ["FAMILIES", "FAULTS", "PHENOMENA", "SHAPES", "Fault", "accepted_shapes", "check", "get",
           "inject", "lr_range_test", "resolve", "run"]


def get(name: str) -> Fault:
    """The fault called `name`; a KeyError lists the known ones and the closest match."""
    if not isinstance(name, str) or name not in FAULTS:
        close = difflib.get_close_matches(str(name).lower(), FAULTS, n=1)  # names are lower case
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown fault {name!r}.{hint} Known faults: {', '.join(FAULTS)}")
    return FAULTS[name]


def inject(recipe: Recipe, *names: str) -> Recipe:
    """A new recipe with the named faults applied, in order (the recipe is unchanged)."""
    for name in names:
        recipe = get(name).inject(recipe)
    return recipe


def resolve(recipe_or_name: Recipe | str) -> Recipe:
    """A recipe as is, a task name's baseline, or a fault injected into its baseline."""
    if isinstance(recipe_or_name, Recipe):
        return recipe_or_name
    if isinstance(recipe_or_name, str):
        if recipe_or_name in ("tabular", "sequence"):
            return baseline(recipe_or_name)
        fault = get(recipe_or_name)
        return fault.inject(baseline(fault.task))
    raise TypeError(f"expected a Recipe or a fault name, got {type(recipe_or_name).__name__}")


def run(recipe_or_name: Recipe | str, *, seed: int = 0, steps: int | None = None,
        preset: str = "full", threads: int = 1, device="cpu"):
    """`fl.run`: train a recipe, a task's baseline or a fault injected into it (see
    `lab.train.run`).  A verification session's notebooks share finished runs through
    `lab.runcache`; that store is off unless $FAILURELAB_RUN_CACHE names a folder."""
    from ..basics.recipes import check_seed
    from ..lab import runcache

    recipe = resolve(recipe_or_name)
    if steps is not None:
        recipe = recipe.replace(steps=steps)
    check_seed(seed)
    if device != "cpu":  # torch says whether another device is usable ("cpu" always is)
        from ..lab.train import usable_device

        device = usable_device(device)
    stored = runcache.key(recipe, seed, preset, threads, str(device))
    done = runcache.load(stored)  # a verification session's notebooks share runs
    if done is None:
        from ..lab.train import run as train  # torch: only when a run is trained

        done = train(recipe, seed=seed, preset=preset, threads=threads, device=device)
        runcache.store(stored, done)
    return done


def lr_range_test(recipe_or_parts, seed: int = 0, **options):
    """`fl.lr_range_test`: the lab's LR range test (`lab.lr_range`), which also takes a
    fault or task name here."""
    from ..lab.lr_range import lr_range_test as sweep

    if isinstance(recipe_or_parts, str):
        recipe_or_parts = resolve(recipe_or_parts)
    return sweep(recipe_or_parts, seed, **options)


def check(run_or_history, name: str) -> Evidence:
    """Assert that a run shows the documented signature of fault `name`.

    Raises AssertionError quoting every measured quantity against its threshold when it
    does not; returns the evidence when it does.
    """
    fault = get(name)
    evidence = fault.evidence(history_of(run_or_history, "check"))
    if not evidence.fired:
        raise AssertionError(f"{name}: signature not shown: {evidence.sentence}")
    return evidence
