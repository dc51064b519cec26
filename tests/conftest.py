"""Tiny models are fastest with one torch thread per process; test workers and
notebook kernels inherit this before they import torch."""

import os
import tempfile

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True, scope="session")
def _suite_temporary_folder(tmp_path_factory):
    """Worksheet locks and other temporary files the suite (and the kernels and commands
    it starts) makes go to pytest's own folder, which pytest prunes, instead of piling up
    in the user's temporary folder: hundreds of lock files per run otherwise."""
    folder = tmp_path_factory.mktemp("tmp")
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # forget the cached folder so the new one is read
    yield folder
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved
    tempfile.tempdir = None


@pytest.fixture
def every_forward(monkeypatch):
    """Read every step's forward tensors, as `Monitor(forward_every=1)` does: for the
    tests of each step's arithmetic (the default schedule, one step in
    `monitor.FORWARD_EVERY`, is tested in test_monitor_schedule.py)."""
    from failurelab.telemetry import monitor

    monkeypatch.setattr(monitor, "FORWARD_EVERY", 1)


@pytest.fixture(autouse=True, scope="session")
def _plain_runs_shared_across_the_session(session_runs_folder):
    """`runs_cache.cached_run` shares its runs with the other xdist worker and the
    notebooks' kernels through the session's folder of runs (see tests/runs_cache.py)."""
    import runs_cache

    runs_cache.folder = session_runs_folder
    yield
    runs_cache.folder = None
