"""`Run`: the result of one training run, and saving/loading histories as CSV."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..basics.files import check_output
from ..basics.recipes import Recipe
from . import quantities as q

TIMING_COLUMNS = ("t_data", "t_forward", "t_backward", "t_step")


@dataclass(frozen=True, eq=False)
class Run:
    """One seeded run: its recipe, its per-step history and what went wrong, if anything."""

    recipe: Recipe
    seed: int
    history: pd.DataFrame
    first_nonfinite_step: int | None  # step of the first NaN/Inf loss; the run stopped there
    wall_time: float  # seconds, including building the parts
    # UTC ISO time training began: a worksheet accepts a run as evidence for a
    # prediction only if it was trained after it.  Not part of the history or the
    # fingerprint, which depend on the recipe and seed alone.
    trained_at: str = ""

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
        """Scalar facts about the run, for printing, comparing and tables: the same
        named quantities (see `quantities`) that shapes and signatures read."""
        h = self.history
        return {
            "steps_run": len(h),
            "first_loss": q.loss_start(h),
            "final_loss": q.loss_end(h),  # mean over the last 20% of the steps
            "loss_progress": q.loss_progress(h),
            "final_val_loss": q.val_loss_end(h),
            "final_val_acc": q.val_acc_end(h),
            "best_val_acc": q.val_acc_best(h),
            "max_grad_norm": q.grad_norm_max(h),
            "median_update_ratio": q.update_ratio_median(h),
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


def save_history(history: pd.DataFrame, path: str | Path) -> None:
    """Write a history as CSV with full float precision (round-trips exactly); never
    over a worksheet or to a name that is not a .csv."""
    path = check_output(path, (".csv", ".csv.gz"), what="history")
    history.to_csv(path, index=False, float_format="%.17g")


def read_history(path: str | Path) -> pd.DataFrame:
    """Load a history saved by `Run.to_csv`, `Monitor.to_csv` or `save_history`."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give the history's CSV file, e.g. "
                                f"{path / 'run.csv'}")
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no history file at {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a history CSV: {err}") from None
    if "loss" not in frame.columns:
        raise ValueError(f"{path} is not a history: it has no 'loss' column "
                         f"(columns: {', '.join(map(str, frame.columns[:8]))}…)")
    check_numbers(frame, path)
    return frame


def check_numbers(frame: pd.DataFrame, path: Path) -> None:
    """Every number column must hold numbers: the loss, and any column where some cells
    are numbers and others are not (a hand edit or a stray header), named with the
    first bad cell, so the error points at the file and not at a float() deep inside."""
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values):
            continue
        numbers = pd.to_numeric(values, errors="coerce")
        bad = numbers.isna() & values.notna()
        if bad.any() and (column == "loss" or numbers.notna().any()):
            row = int(bad.to_numpy().nonzero()[0][0])
            raise ValueError(f"{path}: column {column!r} holds {values.iloc[row]!r} on line "
                             f"{row + 2}, not a number")
