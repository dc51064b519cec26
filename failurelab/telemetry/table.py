"""The Monitor's history table: one numpy array per column, appended a chunk at a time.

Each instrument hands over {column: one value per step}; the table keeps each such list
as that column of the chunk (a `Chunk`: one list per column while the chunk is
computed, none for a column not filled), then appends the chunk to the columns: arrays
grown by doubling, 8 bytes per column and step (int64 for a column of counts, float64
otherwise, as pandas infers them).  Column by column, not row by row: a chunk of 640
economy rows built as Python row lists cost 7 µs a step of a tiny MLP's loop.  `frame`
is then a view over those arrays, not a rebuild: reading `history` every few steps of a
million-step run costs the same at step 10 and at step 10^6 (a Python list per row cost
~300 B per step and a rebuild at every read).  Under pandas' copy-on-write (pandas >= 3)
a frame handed out never changes and writing into it copies; on older pandas it is a
copy.

Long runs (`max_rows`): the table holds at most `max_rows` rows.  With q = max_rows // 4,
the steps from `since` on are all kept, `since` being the count of steps less 2q to 3q
(a multiple of q: it moves every q steps); before `since` only every `every`-th step is
(step % every == 0, `every` the least power of two that fits them in q rows).  Which
steps are held depends on the number recorded alone, not on when `history` was read
(on every rank alike, for the distributed merge); `thinning()` says which.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

_NAN = float("nan")
MIN_ROWS = 1024  # max_rows' least value: the steps held whole span 2+ economy chunks
_VIEWS = int(pd.__version__.split(".")[0]) >= 3  # copy-on-write: frames may share arrays


def check_max_rows(max_rows) -> int | None:
    """`max_rows` as given, or a one-line error naming what it must be."""
    if max_rows is None:
        return None
    if isinstance(max_rows, bool) or not isinstance(max_rows, int | np.integer) \
            or max_rows < MIN_ROWS:
        raise ValueError(f"max_rows must be None (keep every step) or an int >= {MIN_ROWS}, "
                         f"got {max_rows!r}")
    return int(max_rows)


class Chunk:
    """A chunk's rows while its instruments compute: one sequence of `k` values per
    column (None: not filled, all NaN), the skipped-step flags `fill` reads, and per
    row the sums a distributed merge needs (None: not kept)."""

    __slots__ = ("k", "values", "skipped", "partials")

    def __init__(self, k: int, width: int):
        self.k, self.values = k, [None] * width
        self.skipped: list = [0] * k
        self.partials: list[dict] | None = None

    def column(self, j: int) -> list:
        """Column j as a list that can be written in place (NaN where not filled)."""
        if j >= len(self.values):  # a column added since the chunk was made
            self.values += [None] * (j + 1 - len(self.values))
        held = self.values[j]
        if held is None:
            held = self.values[j] = [_NAN] * self.k
        elif type(held) is not list:
            held = self.values[j] = list(held)
        return held

    def rows(self, width: int) -> list[list]:
        """The chunk as row lists of `width` values (what a rebuild from rows reads)."""
        columns = [[_NAN] * self.k if c is None else list(c) for c in self.values]
        columns += [[_NAN] * self.k] * (width - len(columns))
        return [list(row) for row in zip(*columns, strict=True)]


class Table:
    """`columns` must start with "step" and include "loss", "nonfinite" and every name in
    `state`: the per-record values (`_Step.state`, in that order) that `record` fills
    itself."""

    def __init__(self, columns: list[str], state: tuple[str, ...], max_rows: int | None = None):
        self.max_rows = check_max_rows(max_rows)
        self.columns = list(columns)
        self.index = {c: i for i, c in enumerate(self.columns)}
        self._nonfinite = self.index["nonfinite"]
        self._state = [self.index[c] for c in state]
        self._skipped = state.index("step_skipped")
        self.count = 0  # rows ever appended: the next row's step
        self.stored = 0  # rows held: `count` unless thinned
        self.every, self.since = 1, 0  # before step `since` only every `every`-th is held
        # one array per column, of equal capacity: int64 for a column whose every value
        # is an int, as pandas would infer it, float64 otherwise
        self._data = [np.empty(0) for _ in self.columns]
        # columns whose first value was not a float: the types of all their values,
        # which decide the frame's dtype as pandas would from the values themselves
        self._kinds: dict[int, set] | None = None
        self._raw: dict[int, list] = {}  # such a column once it held neither int nor float
        self.partials: list[dict] = []  # per held row: the sums a distributed merge needs
        self._bases: list[pd.DataFrame] = []  # frames over the current arrays (see `_base`)
        self._layout = 0  # changes with the arrays' set: a new base frame is then due
        self._based = -1  # the layout the newest base frame was made for

    # --- a chunk of rows, while its instruments compute ---------------------------
    def new_rows(self, steps, partials: bool = True) -> Chunk:
        """A chunk for `steps` with the step, the loss and the per-record state filled
        in; `partials`: keep the per-row sums a distributed merge needs."""
        k = len(steps)
        chunk = Chunk(k, len(self.columns))
        losses = [step.loss for step in steps]
        values = chunk.values
        values[0], values[1] = list(range(self.count, self.count + k)), losses
        # the loss's share of non-finite values (the gradients' count is added by `fill`)
        values[self._nonfinite] = [0.0 if math.isfinite(v) else 1.0 for v in losses]
        for j, column in zip(self._state, zip(*[s.state for s in steps], strict=True), strict=True):
            values[j] = column
        chunk.skipped = values[self._state[self._skipped]]
        if partials:
            chunk.partials = [{"_loss_nonfinite": v} for v in values[self._nonfinite]]
        return chunk

    def fill(self, chunk: Chunk, steps, values: dict[str, list], group=None) -> None:
        """One instrument's values for the rows `group` of the chunk (all when None),
        whose steps are `steps`.  A row whose step was skipped (no optimizer step) gets
        no update (NaN, not a tiny one) and its broken gradients are not counted as
        non-finite: they are why the step was skipped."""
        rows = range(chunk.k) if group is None else group
        whole = len(rows) == chunk.k
        bad = values.pop("_grad_nonfinite", None)
        skipped = chunk.skipped if whole else [chunk.skipped[i] for i in rows]
        any_skipped = any(skipped)
        for column, column_values in values.items():
            if column[0] == "_":  # sums for the distributed merge, not columns
                if chunk.partials is not None:
                    for i, value in zip(rows, column_values, strict=True):
                        chunk.partials[i][column] = value
                continue
            j = self.index[column]
            if any_skipped and column.startswith("update_"):
                column_values = [_NAN if skip else value
                                 for skip, value in zip(skipped, column_values, strict=True)]
            if whole:
                if len(column_values) != chunk.k:
                    raise ValueError(f"{len(column_values)} values of {column!r} for {chunk.k} rows")
                chunk.values[j] = column_values
                continue
            held = chunk.column(j)
            for i, value in zip(rows, column_values, strict=True):
                held[i] = value
        if bad is not None:
            held = chunk.column(self._nonfinite)
            for i, skip, count in zip(rows, skipped, bad, strict=True):
                if not skip and count == count:
                    held[i] += count

    def blank(self, chunk: Chunk, columns) -> None:
        """NaN in `columns` of the chunk: an instrument that failed part-way through a
        chunk leaves none of its values there, as its warning says."""
        for j in [self.index[c] for c in columns if c in self.index]:
            chunk.values[j] = None

    def set(self, row: list[float], values: dict[str, float]) -> list[float]:
        """Put `values` into a row list by column name, adding columns not seen before."""
        for key, value in values.items():
            row.extend([_NAN] * (self._column(key) + 1 - len(row)))
            row[self.index[key]] = _NAN if value is None else float(value)
        return row

    def _column(self, key: str) -> int:
        index = self.index.get(key)
        if index is None:
            index = self.index[key] = len(self.columns)
            self.columns.append(key)
            self._data.append(np.full(len(self._data[0]), _NAN))
            self._layout += 1
        return index

    # --- appending and thinning ------------------------------------------------------
    def append(self, chunk: Chunk, steps, keep_partials: bool) -> None:
        """The chunk (with each step's extras) at the end of the columns."""
        for i, step in enumerate(steps):
            if step.extra:
                for key, value in step.extra.items():
                    chunk.column(self._column(key))[i] = _NAN if value is None else float(value)
        width, k = len(self.columns), chunk.k
        values = chunk.values + [None] * (width - len(chunk.values))
        if self._kinds is None:  # the first row decides which columns may not be floats
            self._kinds = {j: set() for j, v in enumerate(values)
                           if v is not None and type(v[0]) is not float}
        for j, kinds in self._kinds.items():
            column = values[j]
            kinds.update([float] if column is None else map(type, column))
            if j in self._raw or not kinds <= {int, float}:
                self._keep_raw(j, [_NAN] * k if column is None else list(column))
            if (kinds == {int}) != (self._data[j].dtype == np.int64):  # first chunk, or
                self._retype(j, np.int64 if kinds == {int} else np.float64)  # a float came
        self._reserve(self.stored + k)
        start, stop = self.stored, self.stored + k
        for data, column in zip(self._data, values, strict=True):
            data[start:stop] = _NAN if column is None else _numbers(column, k)
        self.stored += k
        self.count += k
        if keep_partials and chunk.partials is not None:
            self.partials += chunk.partials
        if self.max_rows is not None:
            quarter = self.max_rows // 4
            since = max(0, (self.count - 2 * quarter) // quarter * quarter)
            if since > self.since:
                self._thin(since)

    def _keep_raw(self, j: int, values: list) -> None:
        """A column with values neither int nor float (pandas then infers its dtype from
        the objects) is kept as objects from then on; its earlier values were ints (in
        an int64 array) or floats."""
        if j not in self._raw:
            self._raw[j] = self._data[j][:self.stored].tolist()
        self._raw[j] += values

    def _retype(self, j: int, dtype) -> None:
        self._data[j] = _resized(self._data[j][:self.stored], len(self._data[j]), dtype)
        self._layout += 1

    def _reserve(self, rows: int) -> None:
        """Room for `rows` rows: new arrays of twice the size (or `max_rows` and a half:
        a thinned table holds `max_rows` and one chunk before it thins)."""
        capacity = len(self._data[0])
        if rows <= capacity:
            return
        grown = max(rows, 2 * capacity, 256)
        if self.max_rows is not None:
            grown = max(rows, min(grown, self.max_rows * 3 // 2))
        self._replace([_resized(c[:self.stored], grown, c.dtype) for c in self._data])

    def _replace(self, data: list[np.ndarray]) -> None:
        """New arrays: frames handed out keep the old ones (never written again)."""
        self._data = data
        self._bases = []
        self._layout += 1

    def _thin(self, since: int) -> None:
        """Keep the steps from `since` on and, before it, every `every`-th step, `every`
        doubled until they fit in max_rows // 4 rows."""
        every = self.every
        while -(-since // every) > self.max_rows // 4:
            every *= 2
        steps = self._data[0][:self.stored]
        keep = (steps >= since) | (steps % every == 0)
        kept = int(keep.sum())
        capacity = len(self._data[0])
        self._replace([_resized(c[:self.stored][keep], capacity, c.dtype) for c in self._data])
        if self.partials:
            self.partials = [p for p, k in zip(self.partials, keep.tolist(), strict=True) if k]
        for j, raw in self._raw.items():
            self._raw[j] = [v for v, k in zip(raw, keep.tolist(), strict=True) if k]
        self.stored, self.every, self.since = kept, every, since

    def thinning(self) -> dict:
        """What a thinned history holds: every step from `before_step` on, and before it
        the steps that are multiples of `every`."""
        return {"max_rows": self.max_rows, "every": self.every, "before_step": self.since}

    # --- reading -------------------------------------------------------------------
    def frame(self, last: int | None = None) -> pd.DataFrame:
        """The held rows (the `last` ones only, when given) as a DataFrame with the types
        pandas would infer from the values: int64 for a column of ints."""
        if not self.stored:
            return pd.DataFrame([], columns=self.columns).astype({"step": "int64"})
        start = 0 if last is None else max(0, self.stored - last)
        frame = self._base().iloc[start:self.stored]
        if not _VIEWS:
            frame = frame.copy()
        for j in self._raw:
            frame[self.columns[j]] = self._values(j, start, self.stored)
        if frame["step"].dtype != np.int64:  # int64 whatever its values (none but ints)
            frame["step"] = self._values(0, start, self.stored)
        return frame

    def _base(self) -> pd.DataFrame:
        """A frame over the whole arrays: the frames handed out are slices of it.  Every
        one made over the current arrays stays referenced, so pandas' copy-on-write
        copies a column before a user's write reaches these arrays."""
        if self._based != self._layout:
            self._bases.append(pd.DataFrame(dict(zip(self.columns, self._data, strict=True)),
                                            copy=False))
            self._based = self._layout
        return self._bases[-1]

    def _values(self, j: int, start: int, stop: int) -> np.ndarray:
        """Column j's values in rows [start, stop) as the dtype its values make."""
        if j in self._raw:
            return pd.DataFrame({0: self._raw[j][start:stop]})[0].to_numpy()
        if j == 0:
            return self._data[j][start:stop].astype(np.int64)
        return self._data[j][start:stop]

    def local_rows(self, columns: list[str]) -> list[dict]:
        """Per held row: its values of `columns` and its partial sums (see distributed)."""
        names = [c for c in columns if c in self.index]
        values = [self._values(self.index[c], 0, self.stored).tolist() for c in names]
        rows = [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)] \
            if names else [{} for _ in range(self.stored)]
        return [{**row, **part} for row, part in zip(rows, self.partials, strict=True)]

    def overwrite(self, merged: list[dict]) -> None:
        """Rank 0's rows rewritten with the merged values (see distributed), in copies of
        the arrays: a history read before keeps what it showed."""
        if len(merged) != self.stored:
            raise ValueError(f"{len(merged)} merged rows for {self.stored} local ones")
        keys = {k for values in merged for k in values}
        for key in keys:
            self._column(key)
        self._replace([c.copy() for c in self._data])
        for j in [self.index[k] for k in keys]:
            if self._data[j].dtype == np.int64:
                self._retype(j, np.float64)
        for i, values in enumerate(merged):
            for key, value in values.items():
                j = self.index[key]
                self._data[j][i] = value = _NAN if value is None else float(value)
                if j in self._kinds:  # a merged value is a float
                    if i == 0:
                        del self._kinds[j]
                        self._raw.pop(j, None)
                    else:
                        self._kinds[j].add(float)
                        if j in self._raw:
                            self._raw[j][i] = value

    def clear(self) -> None:
        """Hold no rows (a rank other than 0 under other_ranks="none")."""
        self._replace([c[:0].copy() for c in self._data])
        self.stored = 0
        self._raw = {}
        self.partials = []


def _resized(values: np.ndarray, capacity: int, dtype) -> np.ndarray:
    """`values` at the start of a new array of `capacity` (NaN after them, or 0 in an
    int column: rows not yet written are never read)."""
    out = np.full(capacity, _NAN) if dtype == np.float64 else np.zeros(capacity, dtype)
    out[:len(values)] = values
    return out


def _numbers(values, k: int) -> np.ndarray:
    """A column's `k` values as float64.  This runs inside `record`: a value that is not
    a number (none of the instruments makes one) becomes NaN rather than an error there."""
    try:
        return np.fromiter(values, np.float64, k)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=np.float64)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return _NAN
