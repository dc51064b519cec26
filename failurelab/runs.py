"""`Run`: the result of one training run, and saving/loading histories as CSV."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from .recipes import Recipe

TIMING_COLUMNS = ("t_data", "t_forward", "t_backward", "t_step")


@dataclass(frozen=True, eq=False)
class Run:
    """One seeded run: its recipe, its per-step history and what went wrong, if anything."""

    recipe: Recipe
    seed: int
    history: pd.DataFrame
    first_nonfinite_step: int | None  # step of the first NaN/Inf loss; the run stopped there
    wall_time: float  # seconds, including building the parts

    @property
    def diverged(self) -> bool:
        """True when the loss became non-finite (the run stopped early)."""
        return self.first_nonfinite_step is not None

    @cached_property
    def fingerprint(self) -> str:
        """Hex digest of the loss trajectory's bytes: equal seeds give equal digests."""
        losses = self.history["loss"].to_numpy(dtype=np.float64)
        return hashlib.sha256(losses.tobytes()).hexdigest()[:16]

    @cached_property
    def summary(self) -> dict[str, float | int | None]:
        """Scalar facts about the run, for printing, comparing and tables."""
        h = self.history
        finite = h["loss"][np.isfinite(h["loss"])]
        val = h.dropna(subset=["val_acc"]) if "val_acc" in h else h.iloc[:0]
        return {
            "steps_run": len(h),
            "first_loss": _first(finite),
            "final_loss": _last(finite),
            "min_loss": float(finite.min()) if len(finite) else math.nan,
            "final_val_loss": _last(val["val_loss"]) if len(val) else math.nan,
            "final_val_acc": _last(val["val_acc"]) if len(val) else math.nan,
            "best_val_acc": float(val["val_acc"].max()) if len(val) else math.nan,
            "max_grad_norm": float(h["grad_norm"].max()),
            "median_update_ratio": float(h["update_ratio"].median()),
            "first_nonfinite_step": self.first_nonfinite_step,
            "wall_time": self.wall_time,
        }

    def to_csv(self, path: str | Path) -> None:
        """Save the history; read it back with `read_history`."""
        save_history(self.history, path)


def history_of(obj, who: str, accepted: str = "a Run or a history DataFrame") -> pd.DataFrame:
    """The history of a `Run`, or a history DataFrame as it is: what every reader of
    telemetry accepts.  Anything else is a TypeError saying what `who` needs."""
    history = getattr(obj, "history", obj)
    if not isinstance(history, pd.DataFrame):
        raise TypeError(f"{who} needs {accepted}, got {type(obj).__name__}")
    return history


def _first(s: pd.Series) -> float:
    return float(s.iloc[0]) if len(s) else math.nan


def _last(s: pd.Series) -> float:
    return float(s.iloc[-1]) if len(s) else math.nan


def save_history(history: pd.DataFrame, path: str | Path) -> None:
    """Write a history as CSV with full float precision (round-trips exactly)."""
    history.to_csv(path, index=False, float_format="%.17g")


def read_history(path: str | Path) -> pd.DataFrame:
    """Load a history saved by `Run.to_csv`, `Monitor.to_csv` or `save_history`."""
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no history file at {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a history CSV: {err}") from None
    if "loss" not in frame.columns:
        raise ValueError(f"{path} is not a history: it has no 'loss' column "
                         f"(columns: {', '.join(map(str, frame.columns[:8]))}…)")
    return frame
