"""Long runs: a million economy steps in the Monitor's history table, before and after.

The table is driven directly, with rows a real economy Monitor recorded (a tiny MLP,
320 steps: one chunk), replayed chunk by chunk through the table's own calls
(`new_rows`, then the chunk's recorded values in place of `fill`, then `append`), as
`Monitor._flush` makes them.  The Monitor itself is not run a million times: a plain
step of the tiny MLP and `record` take a few hundred microseconds here, so 10^6 real
steps would take five to ten minutes per variant on a shared core, and what is measured
(the table's memory, `history`, `alerts()`, the export) does not depend on where the
rows came from.  `monitor_us_per_step` in the output is what the real loop took.

Each variant runs in its own process (RSS measured cleanly):

* before: main's table (`--before DIR`, DIR/failurelab from `git archive main failurelab
  | tar -x -C DIR`): rows as Python lists, `history` rebuilt at each read; `alerts()`
  as main's `Monitor.alerts` computes it, on the whole rebuilt history;
* after: this tree's table: typed columns, `history` a view, `alerts()` on the rows
  it reads;
* thinned: after, with `max_rows=100_000` (its export, of 100 k rows, is not timed).

Reads of `history` and `alerts()` are timed at checkpoints (median of 3); "after" and
"thinned" also read both every `--every` steps for the whole run (what a loop that
checks alerts as it goes pays); for "before" that loop is extrapolated from the
checkpoints (reading it for real would take hours: that is the quadratic cost).
The export (`save_history`) is timed once at the end; the CSV files of before and
after must be byte-identical.

    OMP_NUM_THREADS=1 python benchmarks/long_run.py --before /tmp/store_before \
        [--steps 1000000] [--every 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = (10_000, 100_000, 250_000, 500_000, 1_000_000)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def recorded_chunk(steps: int = 320) -> tuple[list[list], list]:
    """Rows of a real economy Monitor on the tiny MLP, and its µs per step."""
    import torch
    from torch import nn

    import failurelab as fl

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(steps, 64, 20), torch.randint(0, 2, (steps, 64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mon = fl.Monitor(model, opt, preset="economy")
        start = time.perf_counter()
        for i in range(steps):
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.record(loss)
        history = mon.history
        took = (time.perf_counter() - start) / steps * 1e6
        mon.close()
    return history.astype(object).to_numpy().tolist(), list(history.columns), took


def load_table(root: Path):
    """The `table` module of the package under `root` (it imports only numpy/pandas)."""
    spec = importlib.util.spec_from_file_location(f"table_{abs(hash(root))}",
                                                  root / "failurelab/telemetry/table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_variant(variant: str, before: Path | None, total: int, every: int, out: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from failurelab.evidence.alerts import alerts, rows_read
    from failurelab.evidence.runs import save_history
    from failurelab.telemetry.monitor import STATE_COLUMNS

    template, columns, monitor_us = recorded_chunk()
    table_module = load_table(before if variant == "before" else ROOT)
    state = [columns.index(c) for c in STATE_COLUMNS]
    steps = [SimpleNamespace(loss=row[1], state=tuple(row[j] for j in state), extra={})
             for row in template]
    columnar = hasattr(table_module, "Chunk")
    recorded_columns = [list(column) for column in zip(*template, strict=True)]
    base = rss_mb()
    options = {"max_rows": 100_000} if variant == "thinned" else {}
    table = table_module.Table(columns, STATE_COLUMNS, **options)

    def history():
        frame = table.frame()
        frame.attrs["stopped"] = {}
        if variant == "thinned":
            frame.attrs["thinned"] = table.thinning()
        return frame

    def read_alerts():
        if variant == "before":  # main's Monitor.alerts: the whole history, rebuilt
            return alerts(history(), 20)
        return alerts(table.frame(last=rows_read(20)), 20)

    def timed(fn, repeats=3):
        times = []
        for _ in range(repeats):
            if variant == "before":  # main's table keeps its frame until the next record:
                table._frame = None  # a loop's read always follows new records
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    result = {"variant": variant, "steps": total, "monitor_us_per_step": monitor_us,
              "checkpoints": [], "loop_reads": 0, "loop_read_s": 0.0}
    record_s, done = 0.0, 0
    while done < total:
        start = time.perf_counter()
        if columnar:  # this tree's table: a chunk of columns
            chunk = table.new_rows(steps, partials=False)
            for j, column in enumerate(recorded_columns[2:], start=2):
                chunk.values[j] = column  # what the instruments' `fill` put there
            rows = range(chunk.k)
            table.append(chunk, steps, False)
        else:  # a table of row lists (main's, or this tree's before the Chunk)
            rows, partials = table.new_rows(steps)
            for row, recorded in zip(rows, template, strict=True):
                row[2:] = recorded[2:]  # what the instruments' `fill` put there
            table.append(rows, steps, partials, False)
        record_s += time.perf_counter() - start
        before_done, done = done, done + len(rows)
        if variant != "before" and done // every > before_done // every:
            start = time.perf_counter()
            history()
            read_alerts()
            result["loop_read_s"] += time.perf_counter() - start
            result["loop_reads"] += 1
        for mark in CHECKPOINTS:
            if before_done < mark <= done:
                result["checkpoints"].append({
                    "rows": done, "history_ms": timed(history), "alerts_ms": timed(read_alerts),
                    "rss_mb": rss_mb() - base})
    result["record_s"] = record_s
    result["rss_mb"] = rss_mb() - base
    result["bytes_per_step"] = result["rss_mb"] * 2**20 / total
    frame = history()
    result["history_rows"] = len(frame)
    result["attrs"] = {k: v for k, v in frame.attrs.items() if k != "stopped"}
    if variant == "thinned":
        return result
    path = out / f"{variant}.csv"
    start = time.perf_counter()
    save_history(history(), path)  # Monitor.to_csv: history, then save_history
    result["export_s"] = time.perf_counter() - start
    result["csv_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    path.unlink()
    return result


def extrapolated_loop(checkpoints: list[dict], total: int, every: int) -> float:
    """Seconds a loop reading history and alerts every `every` steps would spend on
    reads, from the checkpoints' per-read times (linear in rows between them)."""
    rows = [0] + [c["rows"] for c in checkpoints]
    cost = [0.0] + [(c["history_ms"] + c["alerts_ms"]) / 1e3 for c in checkpoints]
    spent = 0.0
    for n in range(every, total + 1, every):
        k = next(i for i in range(1, len(rows)) if n <= rows[i] or i == len(rows) - 1)
        share = (n - rows[k - 1]) / (rows[k] - rows[k - 1])
        spent += cost[k - 1] + share * (cost[k] - cost[k - 1])
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="DIR holding main's failurelab/")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("/tmp"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.before, args.steps, args.every,
                                     args.out)))
        return
    variants = (["before"] if args.before else []) + ["after", "thinned"]
    results = []
    for variant in variants:
        command = [sys.executable, __file__, "--variant", variant, "--steps", str(args.steps),
                   "--every", str(args.every)] + (["--before", str(args.before)]
                                                  if args.before else [])
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"{variant} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    report(results, args)


def report(results: list[dict], args) -> None:
    print(f"{args.steps:,} economy steps (tiny MLP rows; the real Monitor took "
          f"{results[0]['monitor_us_per_step']:.0f} us/step incl. the training step)")
    print(f"{'variant':8} {'rows':>9} {'history ms':>11} {'alerts ms':>10} {'RSS MB':>8}")
    for r in results:
        for c in r["checkpoints"]:
            print(f"{r['variant']:8} {c['rows']:>9,} {c['history_ms']:>11.2f} "
                  f"{c['alerts_ms']:>10.2f} {c['rss_mb']:>8.1f}")
    print()
    for r in results:
        loop = (f"{r['loop_read_s']:.1f} s measured ({r['loop_reads']} reads)"
                if r["loop_reads"] else
                f"~{extrapolated_loop(r['checkpoints'], args.steps, args.every):.0f} s "
                f"extrapolated")
        print(f"{r['variant']}: recording {r['record_s']:.1f} s; memory {r['rss_mb']:.0f} MB "
              f"= {r['bytes_per_step']:.0f} B/step; history holds {r['history_rows']:,} rows "
              f"{r['attrs'] or ''}; history+alerts every {args.every} steps: {loop}; "
              + (f"export {r['export_s']:.1f} s (csv {r['csv_sha256']})" if "export_s" in r
                 else "export not timed"))
    shas = {r["variant"]: r["csv_sha256"] for r in results if r["variant"] != "thinned"}
    if len(shas) == 2:
        print("before and after CSV identical:", len(set(shas.values())) == 1)


if __name__ == "__main__":
    main()
