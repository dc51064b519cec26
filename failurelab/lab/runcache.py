"""A folder of finished runs, shared by the notebooks of one verification session.

A run is bitwise reproducible (same recipe, seed, preset, thread count and torch build:
the same history), so the Chinese edition of a notebook need not recompute the runs
its English edition made minutes earlier in another kernel.  The store is off unless
$FAILURELAB_RUN_CACHE names a folder: the root conftest sets it for notebook items only,
to a private folder it creates for the test session and removes afterwards.  Unit
tests never see it, and a student's Jupyter never sets it.

Two rules keep it honest: an entry is served only to a process other than the one that
computed it, and only once per process; a notebook that runs the same recipe twice to
show that it reproduces therefore still trains the second time.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

VARIABLE = "FAILURELAB_RUN_CACHE"
_served: set[str] = set()  # keys this process has already been given from the folder


def key(*parts) -> str:
    """A file name for everything that decides a run (reprs of frozen dataclasses and
    plain values, plus the torch build)."""
    text = repr((parts, _torch_build()))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _torch_build() -> str:
    """The installed torch's version, read from its package metadata: a notebook kernel
    whose runs are all stored never imports torch (about 4 s of CPU per kernel)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # a torch built outside any installer
        import torch

        return str(torch.__version__)


def load(name: str):
    """The run stored under `name` by another process, or None (store off, absent,
    unreadable, computed here, or already served here)."""
    folder = os.environ.get(VARIABLE)
    if not folder or name in _served:
        return None
    try:
        with open(Path(folder) / f"{name}.pickle", "rb") as f:
            writer, run = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError):
        return None
    if writer == os.getpid():
        return None
    _served.add(name)
    return run


def store(name: str, run) -> None:
    """Keep `run` for other processes (atomic rename; a failure only loses the saving)."""
    folder = os.environ.get(VARIABLE)
    if not folder or not Path(folder).is_dir():
        return
    try:
        with tempfile.NamedTemporaryFile("wb", dir=folder, delete=False) as f:
            pickle.dump((os.getpid(), run), f)
        os.replace(f.name, Path(folder) / f"{name}.pickle")
    except OSError:
        pass
