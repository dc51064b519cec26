"""The fault catalogue: each fault is data, a pure edit of a recipe."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

from .recipes import Recipe, baseline


@dataclass(frozen=True)
class Fault:
    name: str
    title: str
    family: str
    task: str
    symptom: str
    cause: str
    experiment: str
    fix: str
    edit: Callable[[Recipe], Recipe]

    def inject(self, recipe: Recipe) -> Recipe:
        return self.edit(recipe)


FAULTS: dict[str, Fault] = {}


def get(name: str) -> Fault:
    if name not in FAULTS:
        close = difflib.get_close_matches(name, FAULTS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown fault {name!r}.{hint} Known faults: {', '.join(FAULTS)}")
    return FAULTS[name]


def inject(recipe: Recipe, *names: str) -> Recipe:
    for name in names:
        recipe = get(name).inject(recipe)
    return recipe


def resolve(recipe_or_name) -> Recipe:
    if isinstance(recipe_or_name, Recipe):
        return recipe_or_name
    if isinstance(recipe_or_name, str):
        if recipe_or_name in ("tabular", "sequence"):
            return baseline(recipe_or_name)
        fault = get(recipe_or_name)
        return fault.inject(baseline(fault.task))
    raise TypeError(f"expected a Recipe or a fault name, got {type(recipe_or_name).__name__}")
