"""Tiny models are fastest with one torch thread per process; test workers and
notebook kernels inherit this before they import torch."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402 - after the environment above, which torch reads on import


@pytest.fixture
def every_forward(monkeypatch):
    """Read every step's forward tensors, as `Monitor(forward_every=1)` does: for the
    tests of each step's arithmetic (the default schedule, one step in
    `monitor.FORWARD_EVERY`, is tested in test_monitor_schedule.py)."""
    from failurelab.telemetry import monitor

    monkeypatch.setattr(monitor, "FORWARD_EVERY", 1)
