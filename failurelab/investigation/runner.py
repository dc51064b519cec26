"""Run arms: the user's step on the arm's parts, under a Monitor, never raising.

Every arm is run the same way: `torch.manual_seed(seed)` before the model is made, the
parts' batches in order, the user's step, the scheduler stepped once per step when the
factory returned one, one `Monitor.record` per step, one torch thread.  A step that
raises ends that arm (the error is kept); a non-finite loss ends it too (the outcome is
decided: the run broke).  Arms run in worker processes forked from this one, so the
user's closures need no pickling; where fork is unavailable they run one after another
here, and the investigation says so.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd
import torch

from ..telemetry.monitor import Monitor
from .arms import ARMS
from .parts import Parts, build

VALIDATIONS = 10  # validation passes per run (when validation batches and a loss exist)


@dataclass
class ArmRun:
    """What one arm's run left: its history, why it ended early (if it did), its time."""

    name: str
    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    error: str | None = None  # the exception that ended it ("" for none)
    stopped: str | None = None  # "nonfinite" when it ended at a non-finite loss
    seconds: float = 0.0
    skipped: bool = False  # the arm does not apply to these parts
    low_precision: bool = False  # the model's outputs or weights were float16/bfloat16


def run_arm(parts: Parts, name: str) -> ArmRun:
    """One arm, run to its end; never raises because the training went bad, nor because
    the arm cannot read these parts (a batch it cannot take apart: skipped, said why)."""
    try:
        changed = ARMS[name].apply(parts)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the arm does not apply to these parts
        return ArmRun(name, skipped=True, error=f"not applicable: {_said(exc)}")
    if changed is None:
        return ArmRun(name, skipped=True)
    started = time.perf_counter()
    run = ArmRun(name)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(), _autocast(changed.autocast):
            warnings.simplefilter("ignore")
            _train(changed, run)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's parts failed: recorded, not raised
        run.error = _said(exc)
    finally:
        torch.set_num_threads(threads)
    run.seconds = time.perf_counter() - started
    return run


def _train(parts: Parts, run: ArmRun) -> None:
    model, optimizer, scheduler = build(parts)
    every = max(1, parts.steps // VALIDATIONS)
    validate = parts.loss is not None and bool(parts.val_batches)
    watch = model.register_forward_hook(_precision_watch(run))
    run.low_precision = any(p.dtype in _LOWP for p in model.parameters())
    with Monitor(model, optimizer) as monitor:
        try:
            for i, batch in enumerate(parts.batches):
                try:
                    loss = parts.step(model, optimizer, batch)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # noqa: BLE001 - a crashing step ends this arm
                    run.error = _said(exc)
                    break
                if loss is None:
                    run.error = "step returned nothing: it must return the loss"
                    break
                if scheduler is not None:
                    scheduler.step()
                extra = {}
                if validate and (i % every == 0 or i == parts.steps - 1):
                    extra["val_loss"] = _validation_loss(model, parts)
                monitor.record(loss, **extra)
                if not math.isfinite(_number(loss)):
                    run.stopped = "nonfinite"
                    break
        finally:
            watch.remove()
            run.history = monitor.history


_LOWP = (torch.float16, torch.bfloat16)


def _precision_watch(run: ArmRun):
    """A forward hook that notes outputs in float16/bfloat16 (autocast, `.half()`)."""
    def see(module, args, output):
        first = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(first, torch.Tensor) and first.dtype in _LOWP:
            run.low_precision = True
    return see


def _validation_loss(model, parts: Parts) -> float:
    """Mean loss over the validation batches, in eval mode, without gradients; the
    model's mode is put back."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            losses = [_number(parts.loss(model(parts.inputs(b)), parts.targets(b)))
                      for b in parts.val_batches]
    except Exception:  # noqa: BLE001 - a validation that fails is a missing column
        losses = [math.nan]
    finally:
        model.train(was)
    return sum(losses) / len(losses)


def _number(loss) -> float:
    try:
        return float(loss.detach().float()) if isinstance(loss, torch.Tensor) else float(loss)
    except (TypeError, ValueError, RuntimeError):
        return math.nan


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


class _NoAutocast(torch.autocast):
    """torch.autocast, always disabled: the float32 arm's precision."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        super().__init__(device_type, dtype=dtype, enabled=False, cache_enabled=cache_enabled)


@contextmanager
def _autocast(allowed: bool):
    """Leave autocast alone, or disable every `torch.autocast` the step opens."""
    if allowed:
        yield
        return
    saved = torch.autocast, torch.amp.autocast
    torch.autocast = torch.amp.autocast = _NoAutocast
    try:
        yield
    finally:
        torch.autocast, torch.amp.autocast = saved


# --- many arms: forked workers, progress, Ctrl-C ----------------------------------------
_SHARED: Parts | None = None  # the parts the forked workers inherit


def _worker_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    torch.set_num_threads(1)


def _work(name: str) -> ArmRun:
    return run_arm(_SHARED, name)


def parallel_possible() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin"


def run_arms(parts: Parts, names: list[str], workers: int, progress) -> tuple[dict, bool]:
    """({name: ArmRun}, interrupted).  `progress(run)` is called as each arm ends."""
    global _SHARED
    done: dict[str, ArmRun] = {}
    workers = min(workers, len(names))
    try:
        if workers > 1 and parallel_possible():
            _SHARED = parts
            pool = multiprocessing.get_context("fork").Pool(workers, _worker_start)
            try:
                for run in pool.imap_unordered(_work, names):
                    done[run.name] = run
                    progress(run)
                pool.close()
            except KeyboardInterrupt:
                pool.terminate()
                raise
            finally:
                pool.join()
                _SHARED = None
        else:
            for name in names:
                run = run_arm(parts, name)
                done[name] = run
                progress(run)
    except KeyboardInterrupt:
        return done, True
    return done, False


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
