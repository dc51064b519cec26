"""The `failurelab` command: list, run, verify, diagnose, mystery, report, grade,
investigate.

Thin on purpose: it parses, calls the library and prints.  Every expected user error
(an unknown fault, a missing file, a bad seed range) ends as one line on stderr and
exit status 2, never a traceback; `verify` exits 1 when the lab does not reproduce.
Options are checked before any run starts, so a mistake costs no waiting, and every path
a command writes goes through one guard (`basics.files.check_output`): never an input,
never a worksheet, always a name of the format written.  A long command says what it
does within its first second, shows its progress, and stops on Ctrl-C at once (exit 130).

torch, pandas and matplotlib are imported inside the commands that need them:
`failurelab --help` and a usage error answer at once instead of after seconds of
imports.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import textwrap
import time
import unicodedata
from contextlib import contextmanager, suppress
from pathlib import Path

from .basics.build import notice_other_build
from .basics.files import check_inputs, check_output, check_output_folder
from .basics.recipes import MAX_SEED, MAX_STEPS, TASKS, check_seed, parse_seeds
from .basics.text import ENV, LANGS, Text

PROG = "failurelab"
MYSTERY_SEEDS = 1000  # a blind run without --seed draws its seed from range(1000)


class UserError(Exception):
    """An expected mistake by the user: printed as one line, exit status 2."""


# What the commands print for a student, in both languages (--lang, or $FAILURELAB_LANG).
SAYS = {
    "list_heads": Text("name|family|task|title", "名称|类别|任务|标题"),
    "answer_heads": Text("shape|phenomenon", "曲线形状|现场现象"),
    "answers_hidden": Text("(shapes and field phenomena are the answers to predict: "
                           "{prog} list --answers shows them)",
                           "（曲线形状和现场现象是要预测的答案：{prog} list --answers 会显示它们）"),
    "phenomena": Text("phenomena: ", "现场现象："),
    "run_head": Text("({task} task, seed {seed}, {steps} steps run; baseline {baseline})",
                     "（{task} 任务，种子 {seed}，运行了 {steps} 步；基线 {baseline} 步）"),
    "run_heads": Text("signature condition|threshold", "特征条件|阈值"),
    "baseline": Text("baseline", "基线"),
    "check": Text("check: {verdict}", "检验：{verdict}"),
    "diagnosis_of": Text("diagnosis of the {name} run:", "对 {name} 运行的诊断："),
    "baseline_head": Text("{task} baseline (seed {seed})", "{task} 基线（种子 {seed}）"),
    "measure_heads": Text("measure|value", "度量|数值"),
    "diagnosis": Text("diagnosis:", "诊断："),
    "wrote": Text("wrote {path}", "已写入 {path}"),
    "mystery_head": Text("mystery run, seed {seed} ({task} task): {steps} steps",
                         "神秘运行，种子 {seed}（{task} 任务）：{steps} 步"),
    "readout_heads": Text("instrument|start|middle|end", "仪表|开始|中段|结束"),
    "readout_note": Text("(medians over the steps the diagnosis reads: start = the first "
                         "{start} steps, middle = a tenth of the run around its middle, end = "
                         "the last {end:.0%}; counts of non-finite values are maxima)",
                         "（取诊断所读那些步的中位数：开始 = 最前 {start} 步，中段 = 运行正中的十分之一，"
                         "结束 = 最后 {end:.0%}；非有限值的计数取最大值）"),
    "quantity_heads": Text("quantity|value|measurement", "量|数值|含义"),
    "quantities_note": Text("(every quantity the catalogue's signatures and the loss-curve "
                            "rules read, measured as fl.diagnose measures it; what fault-free "
                            "runs read: docs/signatures.md)",
                            "（目录中各特征和损失曲线规则读取的每一个量，按 fl.diagnose 的方式测量；"
                            "无故障运行的读数见 docs/signatures.md）"),
    "which": Text("Which fault is it? Check with: {prog} mystery --seed {seed} --reveal "
                  "--answer NAME   (names and titles, not the answers: {prog} list)",
                  "是哪一个故障？用下面的命令核对：{prog} mystery --seed {seed} --reveal "
                  "--answer NAME   （故障名称和标题，不含答案：{prog} list）"),
    "report_done": Text("wrote {index} ({count} faults, {seconds:.1f} s)",
                        "已写入 {index}（{count} 个故障，{seconds:.1f} 秒）"),
}


def says(key: str, args, **values) -> str:
    return SAYS[key].say(args.lang, **values)


def heads(key: str, args) -> list[str]:
    return says(key, args).split("|")


# --- list ---------------------------------------------------------------------------------

def cmd_list(args) -> int:
    """Show the fault catalogue as a table (the shapes only with --answers).

    failurelab list
    failurelab list --answers
    """
    from . import catalogue
    from .catalogue.fault import PHENOMENON_TEXTS, accepted_shapes

    rows = [(f.name, f.family, f.task, f.text("title", args.lang))
            for f in catalogue.FAULTS.values()]
    if not args.answers:  # a student solving a mystery reads this list: no answers in it
        print(table(heads("list_heads", args), rows))
        print("\n" + says("answers_hidden", args, prog=PROG))
        return 0
    answers = [(" / ".join(accepted_shapes(f)), f.phenomenon or "-")
               for f in catalogue.FAULTS.values()]
    print(table([*heads("list_heads", args)[:3], *heads("answer_heads", args),
                 heads("list_heads", args)[3]],
                [(*row[:3], *answer, row[3]) for row, answer in zip(rows, answers, strict=True)]))
    print("\n" + says("phenomena", args)
          + "; ".join(f"{k} {v.say(args.lang)}" for k, v in PHENOMENON_TEXTS.items()))
    return 0


# --- run ------------------------------------------------------------------------------------

def cmd_run(args) -> int:
    """Run one fault beside its healthy baseline and check its signature.

    failurelab run huge_lr
    failurelab run no_zero_grad --seed 3 --plot cmp.png --save no_zero_grad.csv
    failurelab run sequence --steps 100
    failurelab run fp16_no_scaling --device cuda
    """
    from .catalogue.diagnosis import diagnose
    from .catalogue.faults import run as train
    from .course.report import comparison, measure, verdict

    if args.name in TASKS:
        return _run_baseline(args)
    fault = fault_named(args.name)
    _check_outputs(args)
    healthy = train(fault.task, seed=args.seed, steps=args.steps, device=args.device)
    faulty = train(fault.name, seed=args.seed, steps=args.steps, device=args.device)
    rows, fired, baseline_fired = measure(fault, faulty.history, healthy.history, args.lang)
    print(f"{fault.name}: {fault.text('title', args.lang)}")
    print(says("run_head", args, task=fault.task, seed=args.seed, steps=len(faulty.history),
               baseline=len(healthy.history)) + "\n")
    print(table((*heads("run_heads", args), fault.name, says("baseline", args)),
                [(r.label, r.threshold, _mark(r.fault_value, r.fault_holds),
                  _mark(r.baseline_value, r.baseline_holds)) for r in rows]))
    print("\n" + says("check", args, verdict=verdict(fault.name, fired, baseline_fired,
                                                     args.lang)))
    print("\n" + says("diagnosis_of", args, name=fault.name))
    print(_indent(str(diagnose(faulty, lang=args.lang))))
    return _save(args, faulty, lambda: comparison(fault.name, healthy, faulty, args.lang))


def _run_baseline(args) -> int:
    from .catalogue.diagnosis import diagnose
    from .catalogue.faults import run as train
    from .views import plots

    _check_outputs(args)
    result = train(args.name, seed=args.seed, steps=args.steps, device=args.device)
    print(says("baseline_head", args, task=args.name, seed=args.seed) + "\n")
    print(table(heads("measure_heads", args), [(k, _num(v)) for k, v in result.summary.items()]))
    print("\n" + says("diagnosis", args))
    print(_indent(str(diagnose(result, lang=args.lang))))
    return _save(args, result, lambda: plots.overview(result))


def _save(args, result, figure) -> int:
    """--plot (drawn only when asked: it is the slow part) and --save."""
    import matplotlib.pyplot as plt

    if args.plot:
        fig = figure()
        _write(lambda: fig.savefig(args.plot, dpi=100), args.plot, "plot")
        plt.close(fig)
    if args.save:
        _write(lambda: result.to_csv(args.save), args.save, "history")
    for path in (args.plot, args.save):
        if path:
            print(says("wrote", args, path=path))
    return 0


# --- verify ---------------------------------------------------------------------------------

def cmd_verify(args) -> int:
    """Check every fault's signature on many seeds; exit 1 unless all reproduce.

    failurelab verify
    failurelab verify --seeds 0-2 --faults huge_lr,nan_in_data
    """
    seeds = seeds_from(args.seeds)
    names = faults_from(args.faults)
    count = len(names) if names is not None else _catalogue_size()
    starting(f"verify: {_many(count, 'fault')} x {_many(len(seeds), 'seed')}, each task's "
             f"baseline beside them; starting")
    from .catalogue.sweep import summary, verify  # torch: only once the options are known to be good

    notice_other_build(sys.stderr)
    started = time.perf_counter()
    with progress_bar("verify", args.workers) as update:
        results = verify(names, seeds, workers=args.workers, progress=update)
    seconds = time.perf_counter() - started
    if names is not None:  # baselines are checked against all their task's signatures
        results = results[results.fault.isin(names)]
    t = summary(results)
    print(table(("fault", "reproduced", "baseline false alarms", "weakest margin", "ok"),
                [(n, f"{int(r.reproduced)}/{int(r.seeds)}", r.false_alarms,
                  f"{r.weakest_margin:.2f}", "yes" if r.ok else "NO")
                 for n, r in t.iterrows()]))
    for line in _failures(results):
        print(line)
    bad = [n for n, ok in t.ok.items() if not ok]
    what = f"{len(t)} faults x {len(seeds)} seeds + baselines in {seconds:.1f} s"
    print(f"\n{what}: " + (f"FAILED {', '.join(bad)}" if bad else
                            "every fault reproduced, no baseline false alarm"))
    return 1 if bad else 0


def _failures(results) -> list[str]:
    """One line per run that spoiled a fault's verdict, with its measurements."""
    lines = []
    missed = results[(results.kind == "fault") & ~results.fired.astype(bool)]
    alarms = results[(results.kind == "baseline") & results.fired.astype(bool)]
    for _, r in missed.iterrows():
        lines.append(f"  {r.fault} seed {r.seed}: not shown - {r.evidence}")
    for _, r in alarms.iterrows():
        lines.append(f"  {r.fault}: {r.task} baseline seed {r.seed} fired - {r.evidence}")
    return ["", "problems:", *lines] if lines else []


# --- diagnose -------------------------------------------------------------------------------

def cmd_diagnose(args) -> int:
    """Diagnose a saved history, or a log the job already keeps.

    failurelab diagnose my_run.csv                 # Run.to_csv / Monitor.to_csv
    failurelab diagnose runs/exp1                  # a TensorBoard run folder or event file
    failurelab diagnose lightning_logs/version_0   # Lightning's CSVLogger (metrics.csv)
    """
    from .catalogue.diagnosis import diagnose
    from .evidence.logs import read_log

    try:
        history = read_log(args.history)
        mapped = history.attrs.get("mapped")
        if mapped:
            print("read: " + ", ".join(f"{col} <- {name}" for col, name in mapped.items()))
        print(diagnose(history, lang=args.lang))
    except (FileNotFoundError, IsADirectoryError, PermissionError, ValueError,
            ImportError) as err:
        raise UserError(_one_line(err)) from None
    return 0


# --- mystery --------------------------------------------------------------------------------

def cmd_mystery(args) -> int:
    """A blind run: read the telemetry, name the fault, then reveal it.

    failurelab mystery --seed 7
    failurelab mystery --seed 7 --reveal --answer huge_lr
    """
    from .course.mystery import mystery, reveal

    if args.answer is not None and not args.reveal:
        raise UserError("--answer needs --reveal (e.g. --seed 7 --reveal --answer huge_lr)")
    if args.reveal:
        if args.seed is None:
            raise UserError("--reveal needs --seed S: the seed the blind run printed")
        if args.answer is not None:
            fault_named(args.answer)
        result = reveal(args.seed, answer=args.answer)
        print(result.text(args.lang))
        return 1 if args.answer is not None and not result.correct else 0
    seed = args.seed if args.seed is not None else secrets.randbelow(MYSTERY_SEEDS)
    m = mystery(seed)
    # Telemetry only: the shape is the student's to name (see mystery.INSTRUMENTS).
    print(says("mystery_head", args, seed=m.seed, task=m.task, steps=len(m.history)) + "\n")
    print(mystery_text(m, args.lang))
    print("\n" + says("which", args, prog=PROG, seed=m.seed))
    return 0


def mystery_text(m, lang: str | None = None) -> str:
    """The blind run's readout as printed: the instruments over time, then every
    quantity a signature reads (what makes the mystery solvable, tests/test_mystery.py)."""
    from .evidence.quantities import LATE, MIN_WINDOW

    def say(key, **values):
        return SAYS[key].say(lang, **values)
    over_time = table(say("readout_heads").split("|"),
                      [(r.instrument, *map(_num, (r.start, r.middle, r.end)))
                       for r in m.readout(lang).itertuples()])
    measured = table(say("quantity_heads").split("|"),
                     [(r.quantity, _num(r.value), r.measurement)
                      for r in m.measurements(lang).itertuples()])
    notes = [_wrapped(say("readout_note", start=MIN_WINDOW, end=LATE)),
             _wrapped(say("quantities_note"))]
    return "\n".join([over_time, notes[0], "", measured, notes[1]])


def _wrapped(text: str, width: int = 88) -> str:
    """A note wrapped for a terminal (Chinese has no spaces: it is left whole)."""
    return textwrap.fill(text, width) if " " in text else text


# --- report ---------------------------------------------------------------------------------

def cmd_report(args) -> int:
    """Write an offline HTML gallery: a map of the faults and one page each.

    failurelab report --out lab-report
    failurelab report --out r --seed 1 --faults huge_lr,dead_relu
    """
    from . import catalogue
    from .course import report

    names = faults_from(args.faults) or list(catalogue.FAULTS)
    started = time.perf_counter()
    _guarded(check_output_folder, args.out, what="report")
    starting(f"report: {_many(len(names), 'fault')} beside their baselines, into {args.out}; "
             f"starting")
    with progress_bar("report", args.workers) as update:
        index = _guarded(report.generate, args.out, names, seed=args.seed, steps=args.steps,
                         workers=args.workers, progress=update, lang=args.lang)
    print(says("report_done", args, index=index, count=len(names),
               seconds=time.perf_counter() - started))
    return 0


# --- grade ----------------------------------------------------------------------------------

def cmd_grade(args) -> int:
    """Grade a class: one row per worksheet, per-fault statistics, edited-looking entries.

    failurelab grade submissions/ --out gradebook.csv
    failurelab grade alice.worksheet.json bob.worksheet.json --out gradebook.html
    """
    from .course.gradebook import gradebook  # reads JSON only: no run, no torch work

    _guarded(check_inputs, args.paths, "worksheet or folder")
    if args.out is not None:  # before reading the class: a wrong --out costs nothing
        suffixes = (".csv", ".html", ".htm")
        _guarded(check_output, args.out, suffixes, inputs=args.paths, what="gradebook")
    book = gradebook(args.paths)
    for path, why in book.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    if not book.students:
        raise UserError(f"no worksheet to grade in {', '.join(args.paths)}"
                        + (f" ({len(book.skipped)} files skipped)" if book.skipped else
                           " (no *.json file found)"))
    if args.out is None:
        print(book.table().to_string())
    elif args.out.lower().endswith((".html", ".htm")):
        _write(lambda: book.to_html(args.out), args.out, "gradebook")
        print(f"wrote {args.out} ({len(book.students)} worksheets)")
    else:
        written = []
        _write(lambda: written.extend(book.to_csv(args.out)), args.out, "gradebook")
        print(f"wrote {', '.join(map(str, written))} ({len(book.students)} worksheets)")
    return 0


# --- shared helpers -----------------------------------------------------------------------------

def fault_named(name: str):
    """The fault, or a UserError naming the closest match (the catalogue's own message)."""
    from .catalogue.faults import get

    try:
        return get(name)
    except KeyError as err:
        raise UserError(err.args[0]) from None


def faults_from(text: str | None) -> list[str] | None:
    """'a,b' -> validated names; None when not given (meaning: the whole catalogue)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--faults needs at least one name, e.g. --faults huge_lr,nan_in_data")
    return list(dict.fromkeys(fault_named(n).name for n in names))


def seeds_from(text: str) -> list[int]:
    try:
        return parse_seeds(text)
    except ValueError as err:
        raise UserError(str(err)) from None


PROGRESS_EVERY_S = 10.0  # off a terminal: a progress line at most this often, not per run


def starting(line: str) -> None:
    """The first thing a long command says, within its first second, before torch is
    imported: a newcomer must never wonder whether it hung."""
    print(f"{line} (Ctrl-C stops it)", file=sys.stderr, flush=True)


@contextmanager
def progress_bar(desc: str, workers: int | None = None):
    """Progress fed by `progress(done, total)` callbacks, on stderr.  `done=0` (the runs
    are queued, the workers starting) prints a line saying how many runs on how many
    processes.  Then, on a terminal, a tqdm bar; elsewhere (a pipe, a log, or CI=1, which
    turns bars off) a line at the first finished run, every 10 s and at the end."""
    from tqdm import tqdm

    from .lab.parallel import worker_count

    bar_allowed = sys.stderr.isatty() and not os.environ.get("CI")
    started, bar, said_at = time.monotonic(), None, None

    def line(text: str) -> None:
        print(f"{desc}: {text}", file=sys.stderr, flush=True)

    def update(done: int, total: int) -> None:
        nonlocal bar, said_at
        now = time.monotonic()
        if done == 0:
            processes = 1 if workers == 1 else worker_count(total, workers)
            line(f"0/{total} runs, {_many(processes, 'worker process', 'es')}")
            if bar_allowed:
                bar = tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False)
        elif bar is not None:
            bar.update(done - bar.n)
        elif said_at is None or now - said_at >= PROGRESS_EVERY_S or done == total:
            line(f"{done}/{total} runs, {now - started:.0f} s")
            said_at = now
    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def table(headers, rows) -> str:
    """Left-aligned columns, two spaces apart, under a dashed rule (Chinese characters
    take two columns of a terminal)."""
    rows = [tuple(str(c) for c in r) for r in rows]
    widths = [max(_width(str(h)), *(_width(r[i]) for r in rows)) if rows else _width(str(h))
              for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths, strict=False)).rstrip()
    return "\n".join([line(map(str, headers)), line("-" * w for w in widths),
                      *(line(r) for r in rows)])


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _mark(value: str, holds: bool) -> str:
    return f"{value} {'✓' if holds else '✗'}"


def _num(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _language(lang: str | None) -> str:
    from .basics.text import language

    try:
        return language(lang)
    except ValueError as err:
        raise UserError(str(err)) from None


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())


def _guarded(action, *args, **kwargs):
    """`action(...)`, with a refused path or a file system error as one line (exit 2)."""
    from .basics.files import OutputRefused

    try:
        return action(*args, **kwargs)
    except (OutputRefused, OSError) as err:
        raise UserError(_one_line(err)) from None


def _many(count: int, noun: str, plural: str = "s") -> str:
    return f"{count} {noun}{plural if count != 1 else ''}"


def _catalogue_size() -> int:
    from . import catalogue

    return len(catalogue.FAULTS)


def _write(save, path: str, what: str) -> None:
    from .basics.files import OutputRefused

    try:
        save()
    except OutputRefused as err:  # already says what it could not write, and why
        raise UserError(_one_line(err)) from None
    except (OSError, ValueError) as err:
        raise UserError(f"cannot write the {what} to {path}: {_one_line(err)}") from None


def _leave_now(status: int) -> None:
    """Exit without the interpreter's teardown: once torch is loaded it took 2.7-3.2 s
    on a busy 2-core machine (0.14 s this way), and Ctrl-C must stop within 2 s.  Nothing
    is left half-written: every file a command writes is complete or untouched."""
    with suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


# --- the parser ---------------------------------------------------------------------------------

def _whole(text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, "
                                         f"got {value}")
    return value


def _device(text: str):
    """A device this machine can train on (torch is imported only when one is named)."""
    from .lab.train import usable_device

    try:
        return usable_device(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _seed(text: str) -> int:
    """A seed the lab can use (0 to 2**63 - 1), checked before anything runs."""
    try:
        return check_seed(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed: a whole number from 0 to "
                                         f"2**63 - 1 ({MAX_SEED}), got {text!r}") from None


def _steps(text: str) -> int:
    return _whole(text, 1, MAX_STEPS)


def _workers(text: str) -> int:
    return _whole(text, 1, 1024)


def _check_outputs(args) -> None:
    """--plot and --save, refused before the run rather than after it."""
    from matplotlib.backend_bases import FigureCanvasBase

    if args.plot:
        images = sorted(f".{kind}" for kind in FigureCanvasBase.get_supported_filetypes())
        _guarded(check_output, args.plot, images, what="plot")
    if args.save:
        _guarded(check_output, args.save, (".csv", ".csv.gz"), what="history")


# --- investigate ----------------------------------------------------------------------------

def cmd_investigate(args) -> int:
    """Run the distinguishing experiments on your own loop, defined as parts in a file.

    failurelab investigate my_loop.py:parts      # parts() returns fl.investigate's keywords
    failurelab investigate my_loop.py:parts --html investigation.html --steps 100
    """
    from .investigation import PartsError, investigate

    if args.html:
        _guarded(check_output, args.html, (".html", ".htm"), what="investigation page")
    parts = _load_parts(args.target)
    if args.steps is not None:
        parts["steps"] = args.steps
    try:
        found = investigate(**parts, workers=args.workers, lang=args.lang)
    except (PartsError, TypeError) as err:
        raise UserError(_one_line(err)) from None
    print(found.text(args.lang))
    if args.html:
        found.to_html(args.html)
        print(SAYS["wrote"].say(args.lang, path=args.html))
    return 0


def _load_parts(target: str) -> dict:
    """FILE.py:FUNCTION -> the dict of keyword arguments FUNCTION() returns."""
    import importlib.util

    path, sep, function = target.rpartition(":")
    if not sep or not path.endswith(".py") or not function.isidentifier():
        raise UserError(f"expected FILE.py:FUNCTION, got {target!r}")
    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).resolve().parent))  # its own imports, as when run
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - the user's file failed: one line says where
        raise UserError(f"{path} failed to import: {type(err).__name__}: {err}") from None
    finally:
        sys.path.pop(0)
    make = getattr(module, function, None)
    if not callable(make):
        raise UserError(f"{path} defines no function {function!r}")
    try:
        parts = make()
    except Exception as err:  # noqa: BLE001
        raise UserError(f"{function}() failed: {type(err).__name__}: {err}") from None
    if not isinstance(parts, dict):
        raise UserError(f"{function}() must return a dict of fl.investigate's keyword "
                        f"arguments, got {type(parts).__name__}")
    return parts


def _investigate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="FILE.py:FUNCTION",
                   help="a function returning fl.investigate's keyword arguments")
    p.add_argument("--steps", type=_steps, help="steps per run (default: the parts' own)")
    p.add_argument("--workers", type=_workers, help="worker processes (default: up to 4)")
    p.add_argument("--html", metavar="FILE", help="also write the report with its plots here")


# The handlers' docstrings are their help: a one-line description, then examples.
COMMANDS = {"list": cmd_list, "run": cmd_run, "verify": cmd_verify, "diagnose": cmd_diagnose,
            "mystery": cmd_mystery, "report": cmd_report, "grade": cmd_grade,
            "investigate": cmd_investigate}


class _Parser(argparse.ArgumentParser):
    """argparse, except that a command line without a command says what the commands
    are (and which option it did not know), instead of "arguments are required"."""

    given: list[str] = []  # the command line, set by `main`

    def error(self, message: str):
        if "required: COMMAND" in message:
            unknown = [a for a in self.given if a.startswith("-")]
            message = (f"unrecognized option {' '.join(unknown)}; " if unknown else "") + \
                f"give a command first: {', '.join(COMMANDS)} (e.g. {PROG} list; " \
                f"{PROG} COMMAND --help)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="Reproducible training-failure experiments on tiny PyTorch "
                               "models.", epilog=f"run '{PROG} COMMAND --help' for examples")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {}
    for name, handler in COMMANDS.items():
        summary, _, examples = handler.__doc__.partition("\n")
        p = sub.add_parser(name, help=summary, description=summary,
                           epilog="examples:\n" + textwrap.indent(
                               textwrap.dedent(examples).strip(), "  "),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(handler=handler, parser=p)
        p.add_argument("--lang", choices=LANGS, default=None,
                       help=f"language of what is printed (default: ${ENV}, else en)")
        parsers[name] = p
    _add_options(parsers)
    return parser


def _add_options(p: dict[str, argparse.ArgumentParser]) -> None:
    p["run"].add_argument("name", metavar="NAME",
                          help="a fault name (see 'failurelab list'), or 'tabular' / "
                               "'sequence' for a healthy baseline alone")
    p["run"].add_argument("--seed", type=_seed, default=0, help="default: 0")
    p["run"].add_argument("--steps", type=_steps, help="optimizer steps (default: the "
                                                          "recipe's, 300)")
    p["run"].add_argument("--device", type=_device, default="cpu",
                          help="train on this device, e.g. cuda (default: cpu)")
    p["run"].add_argument("--plot", metavar="PNG", help="write the comparison plot here")
    p["run"].add_argument("--save", metavar="CSV", help="write the faulty run's history here")
    p["verify"].add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,7 (default: 0-9)")
    for name in ("verify", "report"):
        p[name].add_argument("--faults", metavar="A,B", help="comma-separated fault names "
                                                             "(default: all)")
        p[name].add_argument("--workers", type=_workers,
                             help="worker processes (default: one per core)")
    p["list"].add_argument("--answers", action="store_true",
                           help="also show each fault's loss-curve shapes and field "
                                "phenomenon (the answers a student predicts)")
    p["diagnose"].add_argument("history", metavar="HISTORY_OR_LOG")
    _investigate_options(p["investigate"])
    p["mystery"].add_argument("--seed", type=_seed,
                              help="which mystery (default: a random one, printed)")
    p["mystery"].add_argument("--reveal", action="store_true",
                              help="name the fault (and grade --answer)")
    p["mystery"].add_argument("--answer", metavar="NAME", help="your guess, graded by "
                                                               "--reveal (exit 1 if wrong)")
    p["report"].add_argument("--out", required=True, metavar="DIR",
                             help="folder for index.html, the pages and the plots")
    p["report"].add_argument("--seed", type=_seed, default=0, help="default: 0")
    p["report"].add_argument("--steps", type=_steps, help="optimizer steps per run "
                                                             "(default: the recipe's)")
    p["grade"].add_argument("paths", nargs="+", metavar="PATH",
                            help="worksheet files, or folders searched for *.json")
    p["grade"].add_argument("--out", metavar="FILE", help="gradebook.csv (with .faults.csv "
                            "and .confusions.csv beside it) or gradebook.html; default: print")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.given = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the subcommand, so its usage line is the one shown
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        args.lang = _language(args.lang)
        return args.handler(args)
    except UserError as err:
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the worker pool has already stopped (lab/parallel.py)
        print(f"{PROG} {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        if argv is None:  # the command line itself, not a caller in Python: leave now
            _leave_now(130)
        return 130
    except BrokenPipeError:  # e.g. `failurelab list | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
