"""Histories from the logs a training job already keeps, and the Monitor's columns
written where engineers already look.

Reading: a TensorBoard event file or run folder (through `tensorboard`'s own event
reader, the optional `logs` extra), a CSV of metrics (Lightning's `CSVLogger`
`metrics.csv`, an exported tracker run) or failurelab's own history CSV.  Logged names
are mapped onto the history's columns by `ALIASES` (`train_loss` -> `loss`, `lr-Adam` ->
`lr`, `grad_2.0_norm_total` -> `grad_norm`, ...); the mapping is kept in
`history.attrs["mapped"]` so a reader sees what each column came from.  Only the loss is
required: the diagnosis then says which signatures the other columns cannot support.

Writing: `write_scalars(history, logger)` puts a history's global columns into a
`torch.utils.tensorboard.SummaryWriter` or any Lightning logger (`log_metrics`).
"""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path

import pandas as pd

from .runs import check_numbers, read_history

# history column -> logged names it accepts, lower-cased, in order of preference
ALIASES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "train_loss", "train/loss", "training_loss", "loss/train",
             "train_loss_step", "train/loss_step", "loss_step", "train/loss_iter"),
    "val_loss": ("val_loss", "valid_loss", "validation_loss", "val/loss", "valid/loss",
                 "loss/val", "loss/valid", "loss/validation", "eval_loss", "eval/loss",
                 "val_loss_epoch"),
    "val_acc": ("val_acc", "val_accuracy", "valid_acc", "validation_accuracy", "val/acc",
                "val/accuracy", "acc/val", "accuracy/val", "eval_accuracy", "eval/accuracy",
                "val_acc_epoch"),
    "lr": ("lr", "learning_rate", "train/lr", "train/learning_rate", "lr-*", "lr/*",
           "learning_rate/*"),
    "grad_norm": ("grad_norm", "grad_2.0_norm_total", "grad_norm_total", "gradient_norm",
                  "train/grad_norm", "grad_norm/total", "grad_norm/all"),
}
EVENT_FILES = "events.out.tfevents.*"
PREFIX = "failurelab/"  # what `write_scalars` puts before each column: read back as it was


def is_log(path: str | Path) -> bool:
    """Whether `path` names a log this module reads (rather than a history object)."""
    return isinstance(path, (str, Path))


def read_log(path: str | Path) -> pd.DataFrame:
    """The history a log holds: one row per logged training step, with `step`, `loss`
    and whatever else `ALIASES` maps; validation values sit on the last training row at
    or before their step.  A clear error when nothing in it can be a training loss."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no log or history at {path}")
    events = _event_files(path)
    if events:
        return _as_history(_read_events(events), path)
    csv = path / "metrics.csv" if path.is_dir() else path
    if path.is_dir() and not csv.exists():
        raise ValueError(f"{path} is a folder with no TensorBoard event file "
                         f"({EVENT_FILES}) and no metrics.csv")
    frame = pd.read_csv(csv) if csv.suffix == ".csv" else None
    if frame is None:
        raise ValueError(f"{path} is neither a CSV file nor a TensorBoard event file")
    check_numbers(frame, csv)  # a cell of text names its file, column and line
    if {"loss", "update_ratio"} <= set(frame.columns):
        return read_history(csv)  # failurelab's own history: every column as saved
    return _as_history(frame, csv)


def write_scalars(history: pd.DataFrame, logger, prefix: str = PREFIX,
                  since: int = -1) -> int:
    """Write the history's global columns (those without a per-layer `/`) for the steps
    after `since` to a SummaryWriter (`add_scalar`) or a Lightning logger
    (`log_metrics`); NaN cells are left out.  Returns the last step written, to pass as
    `since` next time, so a loop can call it every N steps without writing twice."""
    columns = [c for c in history.columns if "/" not in c and c != "step"
               and pd.api.types.is_numeric_dtype(history[c])]
    last = since
    for _, row in history[history["step"] > since].iterrows():
        step = int(row["step"])
        values = {f"{prefix}{c}": float(row[c]) for c in columns if math.isfinite(row[c])}
        if hasattr(logger, "add_scalar"):
            for name, value in values.items():
                logger.add_scalar(name, value, step)
        elif hasattr(logger, "log_metrics"):
            logger.log_metrics(values, step=step)
        else:
            raise TypeError("logger must be a SummaryWriter (add_scalar) or a Lightning "
                            f"logger (log_metrics), got {type(logger).__name__}")
        last = step
    return last


def mapping(names) -> dict[str, str]:
    """History column -> the logged name it is read from: a column `write_scalars`
    wrote is its own; otherwise the first alias that matches."""
    names = [str(n) for n in names]
    found = {n[len(PREFIX):]: n for n in names if n.startswith(PREFIX)}
    lowered = {n.lower(): n for n in names if not n.startswith(PREFIX)}
    for column, patterns in ALIASES.items():
        for pattern in patterns if column not in found else ():
            matches = sorted(n for n in lowered if fnmatch.fnmatchcase(n, pattern))
            if matches:
                found[column] = lowered[matches[0]]
                break
    return found


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if fnmatch.fnmatch(path.name, EVENT_FILES) else []
    return sorted(path.rglob(EVENT_FILES))


def _read_events(files: list[Path]) -> pd.DataFrame:
    """Every scalar of the event files as one frame: a `step` column, one per tag."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise ImportError("reading TensorBoard logs needs the tensorboard package: "
                          "pip install 'failurelab[logs]'") from None
    series = {}
    for file in files:
        reader = event_accumulator.EventAccumulator(
            str(file), size_guidance={event_accumulator.SCALARS: 0})
        reader.Reload()
        for tag in reader.Tags()["scalars"]:
            points = {e.step: e.value for e in reader.Scalars(tag)}
            series.setdefault(tag, {}).update(points)
    frame = pd.DataFrame(series).sort_index()
    return frame.rename_axis("step").reset_index()


def _as_history(frame: pd.DataFrame, source: Path) -> pd.DataFrame:
    """Map logged names onto history columns; rows are the steps with a training loss."""
    found = mapping(c for c in frame.columns if c not in ("step", "epoch"))
    if "loss" not in found:
        raise ValueError(f"{source}: no logged name reads as a training loss "
                         f"(logged: {', '.join(map(str, list(frame.columns)[:10]))}); "
                         f"accepted: {', '.join(ALIASES['loss'])}")
    if "step" not in frame.columns:
        frame = frame.assign(step=range(len(frame)))
    picked = frame[["step", *found.values()]].rename(columns={v: k for k, v in found.items()})
    picked = picked.groupby("step", as_index=False).first()  # one row per step
    train = picked.dropna(subset=["loss"])
    late = [c for c in ("val_loss", "val_acc") if c in picked.columns]
    if late:  # validation logged at its own steps: onto the training row at or before it
        train = _place_validation(train.drop(columns=late), picked, late)
    history = train.reset_index(drop=True)
    history.attrs.update(source=str(source), mapped=found)
    return history


def _place_validation(train: pd.DataFrame, picked: pd.DataFrame, late: list[str]) -> pd.DataFrame:
    """Each validation value on the last training row at or before its step (the first
    row when it came before any)."""
    val = picked.dropna(subset=late, how="all")[["step", *late]]
    rows = train[["step"]].rename(columns={"step": "row"}).assign(step=train["step"])
    placed = pd.merge_asof(val, rows, on="step", direction="backward")
    placed["row"] = placed["row"].fillna(train["step"].iloc[0])
    placed = placed.groupby("row")[late].last()  # two validations on one row: the later
    return train.merge(placed, left_on="step", right_index=True, how="left")
