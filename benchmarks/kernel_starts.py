"""Notebook kernels started side by side, as `pytest -n 2 --nbmake` starts them.

Each of P processes starts N kernels one after another through nbclient (what nbmake
calls), runs one cell that imports failurelab, and records how long the start took and
how it failed, if it did.  Optionally one core is kept busy by a plain busy loop.
Prints failures by message and the start-up times (median, max) against nbclient's
60 s start-up limit.

    PYTHONPATH=. python benchmarks/kernel_starts.py [--processes 2] [--starts 20] [--busy]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import statistics
import time


def starts(count: int) -> list[tuple[float, str]]:
    import nbformat
    from nbclient import NotebookClient

    out = []
    for _ in range(count):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import failurelab")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        started = time.perf_counter()
        try:
            NotebookClient(nb, timeout=300).execute()
            error = ""
        except Exception as err:  # noqa: BLE001 - counting every kind is the point
            error = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
        out.append((time.perf_counter() - started, error))
    return out


def busy(stop) -> None:
    while not stop.is_set():
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    loop = ctx.Process(target=busy, args=(stop,)) if args.busy else None
    if loop:
        loop.start()
    try:
        with ctx.Pool(args.processes) as pool:
            results = [r for rs in pool.map(starts, [args.starts] * args.processes) for r in rs]
    finally:
        if loop:
            stop.set()
            loop.join()
    seconds = [s for s, _ in results]
    errors = collections.Counter(e for _, e in results if e)
    print(f"{len(results)} kernel starts ({args.processes} side by side"
          f"{', one core busy' if args.busy else ''}): {sum(errors.values())} failed; "
          f"start + one cell: median {statistics.median(seconds):.1f} s, max "
          f"{max(seconds):.1f} s (nbclient's start-up limit: 60 s)")
    for error, n in errors.most_common():
        print(f"  {n} x {error}")


if __name__ == "__main__":
    main()
