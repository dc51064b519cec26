"""The Monitor's history table: rows of floats filled by column name.

Each instrument hands over {column: one value per step}; the table puts each value in
its column, extends the columns for the loop's own extras, and builds the DataFrame.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

_NAN = float("nan")


class Table:
    """`columns` must include "step", "loss", "nonfinite" and every name in `state`:
    the per-record values (`_Step.state`, in that order) that `record` fills itself."""

    def __init__(self, columns: list[str], state: tuple[str, ...]):
        self.columns = list(columns)
        self.index = {c: i for i, c in enumerate(self.columns)}
        self._nonfinite = self.index["nonfinite"]
        self._state = [self.index[c] for c in state]
        self._skipped = state.index("step_skipped")
        self.rows: list[list[float]] = []
        self.partials: list[dict] = []  # per row: the sums a distributed merge needs
        self._frame: pd.DataFrame | None = None

    def new_rows(self, steps) -> tuple[list[list[float]], list[dict]]:
        """Rows for `steps` with the loss and the per-record state filled in."""
        rows = []
        for i, step in enumerate(steps):
            row = [_NAN] * len(self.columns)
            row[0], row[1] = len(self.rows) + i, step.loss
            row[self._nonfinite] = 0.0 if math.isfinite(step.loss) else 1.0  # the loss's share
            for j, value in zip(self._state, step.state, strict=True):
                row[j] = value
            rows.append(row)
        return rows, [{"_loss_nonfinite": row[self._nonfinite]} for row in rows]

    def fill(self, rows, steps, values: dict[str, list], partials: list[dict]) -> None:
        """One instrument's values.  A row whose step was skipped (no optimizer step)
        gets no update (NaN, not a tiny one) and its broken gradients are not counted
        as non-finite: they are why the step was skipped."""
        bad = values.pop("_grad_nonfinite", None)
        skipped = [step.state[self._skipped] for step in steps]
        any_skipped = any(skipped)
        for column, column_values in values.items():
            if column[0] == "_":  # sums for the distributed merge, not columns
                for part, value in zip(partials, column_values, strict=True):
                    part[column] = value
                continue
            j = self.index[column]
            if any_skipped and column.startswith("update_"):
                for row, skip, value in zip(rows, skipped, column_values, strict=True):
                    row[j] = _NAN if skip else value
            else:
                for row, value in zip(rows, column_values, strict=True):
                    row[j] = value
        if bad is not None:
            for row, skip, count in zip(rows, skipped, bad, strict=True):
                if not skip and count == count:
                    row[self._nonfinite] += count

    def blank(self, rows, columns) -> None:
        """NaN in `columns` of `rows`: an instrument that failed part-way through a
        chunk leaves none of its values there, as its warning says."""
        for j in [self.index[c] for c in columns if c in self.index]:
            for row in rows:
                row[j] = _NAN

    def append(self, rows, steps, partials, keep_partials: bool) -> None:
        for row, step in zip(rows, steps, strict=True):
            self.rows.append(self.set(row, step.extra))
        if keep_partials:
            self.partials += partials
        self._frame = None

    def set(self, row: list[float], values: dict[str, float]) -> list[float]:
        """Put `values` into `row` by column name, adding columns not seen before."""
        for key, value in values.items():
            index = self.index.get(key)
            if index is None:
                index = self.index[key] = len(self.columns)
                self.columns.append(key)
            row.extend([_NAN] * (index + 1 - len(row)))
            row[index] = _NAN if value is None else float(value)
        self._frame = None
        return row

    def value(self, row: list[float], column: str) -> float:
        j = self.index.get(column, len(row))
        return row[j] if j < len(row) else _NAN

    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            width = len(self.columns)
            rows = [r + [_NAN] * (width - len(r)) for r in self.rows]
            if rows:
                self._frame = _frame(rows, self.columns)
            else:
                self._frame = pd.DataFrame(rows, columns=self.columns).astype({"step": "int64"})
        return self._frame.copy()


def _frame(rows: list[list], columns: list[str]) -> pd.DataFrame:
    """`pd.DataFrame(rows, columns=columns)` with an int64 step, many times faster.

    The rows hold ints (counts) and floats; pandas infers each column's type value by
    value: int64 where every value is an int, float64 otherwise.  Only a column whose
    first value is not a float can be int64, so only those are looked at (and left to
    pandas' own inference if they hold anything but ints and floats)."""
    array = np.array(rows, dtype=np.float64)
    data = dict(zip(columns, array.T, strict=True))
    for j, value in enumerate(rows[0]):
        if type(value) is not float:
            values = [r[j] for r in rows]
            kinds = set(map(type, values))
            if kinds == {int}:
                data[columns[j]] = np.array(values, dtype=np.int64)
            elif not kinds <= {int, float}:
                data[columns[j]] = pd.DataFrame({0: values})[0].to_numpy()
    data["step"] = data["step"].astype(np.int64)  # not DataFrame.astype: 10 ms, by column
    return pd.DataFrame(data)
