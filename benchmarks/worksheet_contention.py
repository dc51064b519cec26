"""Notebooks side by side on one worksheet file: does anything fail or get lost?

Each of P processes does what a course notebook does to `course.worksheet.json` -
open it, predict "no prediction", observe a run, read the names and the table - for K
experiments of its own, all on ONE shared file, while the machine is kept busy.  It
prints the exceptions by type and how many entries survived (P * K expected), then the
same with one file per process, which is how the notebook tests run now (conftest.py).

    PYTHONPATH=. python benchmarks/worksheet_contention.py [--processes 4] [--rounds 20]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import tempfile
import time
import traceback
from pathlib import Path


def notebook(args) -> list[str]:
    """One process's rounds; the exceptions it met, as 'Type: message' lines."""
    path, index, rounds, history = args
    import failurelab as fl

    errors = []
    for k in range(rounds):
        name = f"nb{index}-{k}"
        try:
            ws = fl.Worksheet(path)
            ws.predict(name, shape=None, cause=None, note="")
            ws.observe(name, history)
            assert name in ws.names, f"{name} missing right after observing it"
            ws.table()
        except Exception as err:  # noqa: BLE001 - counting every kind is the point
            line = traceback.format_exception_only(type(err), err)[-1].strip()
            errors.append(line[:200])
    return errors


def measure(shared: bool, processes: int, rounds: int, history) -> None:
    folder = Path(tempfile.mkdtemp(prefix="contention-"))
    paths = [folder / ("course.worksheet.json" if shared else f"nb{i}.worksheet.json")
             for i in range(processes)]
    started = time.perf_counter()
    with mp.get_context("spawn").Pool(processes) as pool:
        results = pool.map(notebook, [(paths[i], i, rounds, history) for i in range(processes)])
    seconds = time.perf_counter() - started
    import failurelab as fl

    kept = sum(len(fl.Worksheet(p).names) for p in set(paths))
    errors = collections.Counter(e.split(":")[0] for r in results for e in r)
    print(f"{'one shared file' if shared else 'one file each  '}: {processes} processes x "
          f"{rounds} experiments in {seconds:.1f} s; entries kept {kept}/{processes * rounds}; "
          f"exceptions {sum(errors.values())} {dict(errors)}")
    for line in sorted({e for r in results for e in r})[:5]:
        print("   ", line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    import failurelab as fl

    history = fl.run("huge_lr", steps=40).history
    print(f"failurelab from {fl.__file__}")
    for shared in (True, False):
        measure(shared, args.processes, args.rounds, history)


if __name__ == "__main__":
    main()
