"""The history table: typed columns that read back exactly what a rebuild from the rows
would give, views that never change under the user, alerts on the trailing rows equal
to alerts on the whole history, and the thinning of long runs (`max_rows`)."""

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.evidence.alerts import alerts, rows_read
from failurelab.telemetry import monitor as monitor_module
from failurelab.telemetry import table as table_module
from failurelab.telemetry.monitor import GLOBAL_COLUMNS, STATE_COLUMNS
from failurelab.telemetry.table import MIN_ROWS, Table

NAN = float("nan")


def rebuilt(rows: list[list], columns: list[str]) -> pd.DataFrame:
    """What main's table built from its rows: pandas' own inference, an int64 step."""
    width = len(columns)
    return pd.DataFrame([r + [NAN] * (width - len(r)) for r in rows],
                        columns=columns).astype({"step": "int64"})


class Recorder:
    """Appends synthetic chunks shaped like the Monitor's (ints in the count columns,
    NaN where a step is not observed, an extra column from step 300 on) and keeps the
    rows as lists for the reference."""

    def __init__(self, max_rows=None):
        self.table = Table(list(GLOBAL_COLUMNS) + ["batch_size"], STATE_COLUMNS, max_rows)
        self.rows: list[list] = []

    def chunk(self, k: int, stopped: bool = False) -> None:
        """k more steps, each one's values a function of its step number alone."""
        first, steps = self.table.count, []
        for n in range(first, first + k):
            state = (0.1, 0.0, 0, int(n % 23 == 5), NAN, NAN, NAN, 0.0, NAN, int(n % 8 == 0))
            assert len(state) == len(STATE_COLUMNS)  # the Monitor's own: grows with it
            steps.append(SimpleNamespace(loss=(n * 0.618034) % 1, state=state,
                                         extra={"val_loss": 0.5} if n >= 300 and n % 7 == 0
                                         else {}))
        chunk = self.table.new_rows(steps)
        grad = [1 + (n * 0.4142136) % 1 for n in range(first, first + k)]
        values = {"grad_norm": grad, "update_ratio": grad,
                  "batch_size": [NAN if stopped else 64] * k, "_grad_nonfinite": [0] * k}
        self.table.fill(chunk, steps, values)
        self.table.append(chunk, steps, keep_partials=True)
        self.rows += chunk.rows(len(self.table.columns))

    def reference(self) -> pd.DataFrame:
        return rebuilt(self.rows, self.table.columns)


def test_columns_grow_across_chunk_boundaries_and_read_back_as_a_rebuild():
    rec = Recorder()
    for k in (1, 7, 255, 300, 1, 320, 320, 100):  # capacity 256 -> 512 -> 1024 -> 2048
        rec.chunk(k)
        pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)
    history = rec.table.frame()
    assert history["batch_size"].dtype == np.int64 and history["step"].dtype == np.int64
    assert history["val_loss"].notna().sum() == len(range(301, len(rec.rows), 7))
    rec.chunk(5, stopped=True)  # an instrument stopped: NaN, the column turns float
    pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)
    assert rec.table.frame()["batch_size"].dtype == np.float64


def test_a_history_read_never_changes_and_writing_into_it_changes_nothing_else():
    rec = Recorder()
    rec.chunk(200)
    first = rec.table.frame()
    kept = first.copy(deep=True)
    rec.chunk(200)  # grows the arrays past capacity 256
    rec.chunk(10)
    pd.testing.assert_frame_equal(first, kept, check_exact=True)
    mine = rec.table.frame()
    mine.loc[3, "loss"] = 99.0
    mine["grad_norm"] *= 0
    pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)
    pd.testing.assert_frame_equal(first, kept, check_exact=True)


def test_a_column_added_after_a_read_does_not_open_that_read_to_the_arrays():
    rec = Recorder()
    rec.chunk(10)
    first = rec.table.frame()
    steps = [SimpleNamespace(loss=0.5, state=(0.1, 0.0, 0, 0, NAN, NAN, NAN, 0.0, NAN, 1),
                             extra={"new": 1.0})]
    chunk = rec.table.new_rows(steps)
    rec.table.append(chunk, steps, keep_partials=True)  # no growth, a new column
    rec.rows += chunk.rows(len(rec.table.columns))
    rec.table.frame()  # read again: a frame over the arrays with the new column
    first.loc[0, "loss"] = 99.0
    first["grad_norm"] *= 0
    pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)


def test_without_copy_on_write_the_history_is_a_copy(monkeypatch):
    monkeypatch.setattr(table_module, "_VIEWS", False)
    rec = Recorder()
    rec.chunk(300)
    history = rec.table.frame()
    history.loc[0, "loss"] = -1.0
    pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)


def test_a_column_of_other_objects_gets_the_dtype_pandas_infers():
    table = Table(["step", "loss", "nonfinite", "flag"] + list(STATE_COLUMNS), STATE_COLUMNS)
    rows = []
    for value in ([1, 0, 1], [True, False, True]):  # ints, then bools: object, as rebuilt
        steps = [SimpleNamespace(loss=0.5, state=(NAN, 0.0, 0, 0, NAN, NAN, NAN, 0.0, NAN, 1),
                                 extra={}) for _ in value]
        chunk = table.new_rows(steps)
        table.fill(chunk, steps, {"flag": value})
        table.append(chunk, steps, keep_partials=False)
        rows += chunk.rows(len(table.columns))
    pd.testing.assert_frame_equal(table.frame(), rebuilt(rows, table.columns), check_exact=True)


def test_a_value_that_is_no_number_becomes_nan_not_an_error_inside_record():
    rec = Recorder()
    rec.chunk(3)
    steps = [SimpleNamespace(loss=0.5, state=(0.1, 0.0, 0, 0, NAN, NAN, NAN, 0.0, NAN, 1),
                             extra={}) for _ in range(2)]
    chunk = rec.table.new_rows(steps)
    rec.table.fill(chunk, steps, {"grad_norm": [1.5, "oops"]})
    rec.table.append(chunk, steps, keep_partials=False)
    assert rec.table.frame()["grad_norm"].tolist()[-2:] == [1.5, pytest.approx(NAN, nan_ok=True)]


def test_the_distributed_merge_rewrites_rows_as_before_and_keeps_earlier_reads():
    rec = Recorder()
    rec.chunk(40)
    local = rec.table.local_rows(["loss", "batch_size", "nonfinite"])
    assert [r["batch_size"] for r in local] == [64] * 40  # ints stay ints, as the rows held
    assert all("_loss_nonfinite" in r for r in local)
    before = rec.table.frame()
    kept = before.copy(deep=True)
    merged = [{"loss": 0.25, "batch_size": 128.0, "ranks": 2.0} for _ in range(40)]
    rec.table.overwrite(merged)
    for row, values in zip(rec.rows, merged, strict=True):
        Table.set(rec.table, row, values)  # main's rank-0 rewrite of its row lists
    pd.testing.assert_frame_equal(rec.table.frame(), rec.reference(), check_exact=True)
    pd.testing.assert_frame_equal(before, kept, check_exact=True)
    with pytest.raises(ValueError, match="merged rows"):
        rec.table.overwrite(merged[:3])


def test_thinning_keeps_the_recent_half_whole_and_every_kth_step_before_it():
    max_rows = MIN_ROWS
    rec = Recorder(max_rows)
    for _ in range(40):
        rec.chunk(320)
        assert rec.table.stored <= max_rows
    held = rec.table.frame()
    thin = rec.table.thinning()
    every, since = thin["every"], thin["before_step"]
    assert every > 1 and every & (every - 1) == 0 and thin["max_rows"] == max_rows
    steps = held["step"].to_numpy()
    expected = [s for s in range(rec.table.count) if s >= since or s % every == 0]
    assert steps.tolist() == expected
    quarter = max_rows // 4
    assert since % quarter == 0 and 2 * quarter <= rec.table.count - since < 3 * quarter
    assert (steps < since).sum() <= quarter
    reference = rec.reference().iloc[expected].reset_index(drop=True)
    pd.testing.assert_frame_equal(held, reference, check_exact=True)
    assert len(rec.table.partials) == len(held)


def test_the_steps_held_depend_on_the_count_alone_not_on_when_history_was_read():
    one, other = Recorder(MIN_ROWS), Recorder(MIN_ROWS)
    for _ in range(18):
        one.chunk(320)
    for k in [1, 319, 320, 5, 315] * 3 + [320] * 9:  # flushes at other moments
        other.chunk(k)
    assert one.table.count == other.table.count
    pd.testing.assert_frame_equal(one.table.frame(), other.table.frame(), check_exact=True)
    assert one.table.thinning() == other.table.thinning()


def test_ranks_whose_rows_hold_different_steps_are_not_merged():
    same = [[{"step": 0}, {"step": 4}], [{"step": 0}, {"step": 4}, {"step": 5}]]
    monitor_module._same_steps(same)  # a rank that recorded one more step: fine
    with pytest.raises(ValueError, match="row 1 holds different steps"):
        monitor_module._same_steps([[{"step": 0}, {"step": 4}], [{"step": 0}, {"step": 2}]])


@pytest.mark.parametrize("bad", [10, MIN_ROWS - 1, 0, -5, 2048.0, "4096", True])
def test_max_rows_must_be_a_whole_number_of_rows(bad):
    model = nn.Linear(2, 1)
    with pytest.raises(ValueError, match=f"max_rows must be None .* >= {MIN_ROWS}"):
        fl.Monitor(model, torch.optim.SGD(model.parameters(), lr=0.1), max_rows=bad)


def test_alerts_on_the_trailing_rows_equal_alerts_on_the_whole_history():
    rng = np.random.default_rng(1)
    n = 400
    grad = 1 + 0.1 * rng.random(n)
    grad[[150, 300, 399]] = 20.0  # spikes
    loss = 1 + 0.1 * rng.random(n)
    loss[370:] = 0.8  # a plateau
    loss[200] = np.nan
    history = pd.DataFrame({"step": np.arange(n), "loss": loss, "grad_norm": grad,
                            "update_ratio": np.full(n, 1e-3), "nonfinite": np.zeros(n)})
    fired = set()
    for end in (1, 2, 3, 10, 21, 22, 40, 150, 151, 152, 170, 200, 201, 230, 300, 301, 390, 399,
                400):  # around each event, and windows not yet full
        whole = history.iloc[:end]
        for window in (5, 20, 50):
            expected = alerts(whole, window)
            assert alerts(whole.iloc[-rows_read(window):], window) == expected
            fired |= {a.kind for a in expected}
    assert {"grad_spike", "nonfinite", "plateau"} <= fired  # the comparison saw alerts


def _loop(mon, model, opt, steps, lr_jump=None):
    seen = []
    for step in range(steps):
        if step == lr_jump:
            opt.param_groups[0]["lr"] = 50.0
        x = torch.randn(16, 4)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        mon.record(loss, val_loss=float(loss) if step % 10 == 0 else None)
        if step % 7 == 0:
            seen.append((mon.alerts(), alerts(mon.history), mon.alerts(window=5),
                         alerts(mon.history, 5)))
    return seen


@pytest.mark.parametrize("preset", ["full", "economy"])
def test_the_monitor_reads_back_its_rows_and_its_alerts_equal_full_alerts(preset, monkeypatch):
    appended = []
    append = Table.append

    def keep(self, chunk, *args, **kwargs):
        append(self, chunk, *args, **kwargs)
        appended.extend(chunk.rows(len(self.columns)))
    monkeypatch.setattr(Table, "append", keep)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fl.Monitor(model, opt, preset=preset) as mon:
            seen = _loop(mon, model, opt, 90, lr_jump=60)
            history = mon.history
    pd.testing.assert_frame_equal(history, rebuilt(appended, list(history.columns)),
                                  check_exact=True)
    assert all(incremental == whole and short == whole_short
               for incremental, whole, short, whole_short in seen)
    assert any(whole for _, whole, _, _ in seen)  # the lr jump made the loop alert
    assert "thinned" not in history.attrs


def test_a_thinned_monitor_says_so_and_still_alerts_on_whole_recent_steps():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with fl.Monitor(model, opt, preset="economy", max_rows=MIN_ROWS) as mon:
        for _ in range(2 * MIN_ROWS + 100):
            opt.zero_grad()
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            mon.record(loss)
        history = mon.history
        thin = history.attrs["thinned"]
        assert len(history) <= MIN_ROWS and thin["every"] >= 2
        tail = history["step"].to_numpy()[-rows_read(20):]
        assert (np.diff(tail) == 1).all() and tail[-1] == 2 * MIN_ROWS + 99
        assert mon.alerts() == alerts(history)
