"""The verification session's folder of runs: off unless named, served only across
processes and once each, and bitwise the run that would have been computed."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from failurelab.catalogue.faults import run
from failurelab.lab import runcache

ROOT = Path(__file__).resolve().parents[1]


def test_the_store_is_off_unless_a_folder_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv(runcache.VARIABLE, raising=False)
    runcache.store("k", "a run")
    assert runcache.load("k") is None and not list(tmp_path.iterdir())


def test_a_run_computed_here_is_not_served_back_here(monkeypatch, tmp_path):
    monkeypatch.setenv(runcache.VARIABLE, str(tmp_path))
    first = run("tabular", steps=5)
    assert len(list(tmp_path.glob("*.pickle"))) == 1  # kept for other processes
    again = run("tabular", steps=5)  # trained again, not read back
    assert again is not first and again.fingerprint == first.fingerprint


def test_another_process_entry_is_served_once(monkeypatch, tmp_path):
    monkeypatch.setenv(runcache.VARIABLE, str(tmp_path))
    name = runcache.key("served-once-test")
    (tmp_path / f"{name}.pickle").write_bytes(pickle.dumps((os.getpid() + 1, "stored")))
    assert runcache.load(name) == "stored"
    assert runcache.load(name) is None  # a second request trains for itself


def test_a_notebook_kernel_gets_the_run_another_kernel_computed(tmp_path):
    """Another process reads the stored run: the same history, bit for bit."""
    env = {**os.environ, runcache.VARIABLE: str(tmp_path), "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": "1"}
    script = ("from failurelab.lab import runcache\nfrom failurelab.catalogue.faults import run\n"
              "r = run('huge_lr', steps=20)\nprint(r.fingerprint, len(runcache._served))")
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    assert first[1] == "0" and second[1] == "1"  # computed, then served
    assert first[0] == second[0]
    fresh = run("huge_lr", steps=20)  # here the store is off: trained in this process
    assert fresh.fingerprint == first[0]  # what the store served is what training gives
