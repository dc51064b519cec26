"""The offline report: one card per fault, measured beside its healthy baseline.

`build_cards` runs each fault and its task's baseline (in worker processes, like a
sweep), measures every signature condition on both, diagnoses the faulty run and
draws the comparison plot.  `write_report` turns those cards into static HTML: an
index that maps faults by loss shape and field phenomenon, and one page per fault.
The pages are plain HTML with a little inline CSS -- no script, no network -- so a
course can hand them out as a folder or open them from a USB stick.

`measure` and `verdict` are also what `failurelab run` prints, so the terminal and the
report can never disagree about a fault.
"""

from __future__ import annotations

import html
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import matplotlib
import pandas as pd

from . import catalogue
from .diagnosis import diagnose
from .faults import PHENOMENA, SHAPES, Fault, get
from .parallel import worker_pool
from .recipes import baseline, diff, format_diff
from .signatures import Row, side_by_side
from .train import run

PLOT_DPI = 100  # 11 x 3.8 inch figures: 1100 px wide, the page's width, ~70 kB each


@dataclass(frozen=True)
class Card:
    """Everything one fault's page shows, as plain data (it crosses process borders)."""

    name: str
    seed: int
    rows: tuple[Row, ...]
    fired: bool  # the faulty run shows the whole signature
    baseline_fired: bool  # the healthy baseline shows it too: a false alarm
    diagnosis: str  # str(diagnose(faulty run))
    top: str | None  # the diagnosis' best-supported fault
    changed: str  # what the fault changes in the baseline recipe, e.g. "lr: 0.1 → 3"
    image: str  # the comparison plot's file name, relative to the report folder

    @property
    def fault(self) -> Fault:
        return get(self.name)


# --- measuring ------------------------------------------------------------------------

def measure(fault: Fault, faulty: pd.DataFrame, healthy: pd.DataFrame):
    """The signature's conditions on both histories: (rows, fault fired, baseline fired)."""
    return side_by_side(fault.name, fault.signature, faulty, healthy)


def verdict(name: str, fired: bool, baseline_fired: bool) -> str:
    """The check's outcome in one sentence."""
    if fired and not baseline_fired:
        return f"reproduced (the {name} run shows its signature, the baseline does not)"
    if not fired:
        return f"NOT reproduced (the {name} run misses at least one condition)"
    return "FALSE ALARM (the healthy baseline shows this signature too)"


def changed(fault: Fault) -> str:
    """The recipe fields the fault changes, as 'field: before → after'."""
    return format_diff(diff(baseline(fault.task), fault.inject(baseline(fault.task))))


def comparison(name: str, healthy, faulty):
    """The fault's comparison figure: loss, and the instrument that shows its cause."""
    from . import plots

    return plots.compare(healthy, faulty, fault=name)


# --- running (in worker processes) ------------------------------------------------------

def _baseline_job(task: str, seed: int, steps: int | None) -> tuple[str, pd.DataFrame]:
    return task, run(task, seed=seed, steps=steps).history


def _card_job(name: str, seed: int, steps: int | None, healthy: pd.DataFrame,
              out_dir: str) -> Card:
    """Run one fault, measure it against the baseline history, and draw its plot."""
    import matplotlib.pyplot as plt

    fault = get(name)
    faulty = run(name, seed=seed, steps=steps).history
    rows, fired, baseline_fired = measure(fault, faulty, healthy)
    found = diagnose(faulty)
    image = f"{name}.png"
    fig = comparison(name, healthy, faulty)
    fig.savefig(Path(out_dir) / image, dpi=PLOT_DPI)
    plt.close(fig)
    return Card(name, seed, rows, fired, baseline_fired, str(found), found.top,
                changed(fault), image)


def build_cards(names: Iterable[str], out_dir: str | Path, *, seed: int = 0,
                steps: int | None = None, workers: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[Card]:
    """Run the baselines, then every fault; plots land in `out_dir`. Cards in `names` order.

    One worker process per core, one torch thread each, as in `sweep.verify`."""
    names = [get(n).name for n in names]
    tasks = sorted({get(n).task for n in names})
    total, done = len(tasks) + len(names), 0

    def finished(futures):
        nonlocal done
        for future in as_completed(futures):
            done += 1
            if progress:
                progress(done, total)
            yield future.result()

    with worker_pool(total, workers) as pool:
        healthy = dict(finished([pool.submit(_baseline_job, t, seed, steps) for t in tasks]))
        futures = [pool.submit(_card_job, n, seed, steps, healthy[get(n).task], str(out_dir))
                   for n in names]
        list(finished(futures))
    return [f.result() for f in futures]


def generate(out_dir: str | Path, names: Iterable[str] | None = None, *, seed: int = 0,
             steps: int | None = None, workers: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> Path:
    """Build the cards and write the whole report; returns the path of index.html."""
    matplotlib.use("Agg")  # files only: never open a window
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list(catalogue.FAULTS) if names is None else list(names)
    cards = build_cards(names, out_dir, seed=seed, steps=steps, workers=workers,
                        progress=progress)
    return write_report(out_dir, cards)


# --- HTML ---------------------------------------------------------------------------------

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #222; max-width: 1100px; margin: 1.5em auto; padding: 0 1em; }
h1 { font-size: 1.5em; margin: .2em 0; } h2 { font-size: 1.15em; margin-top: 1.4em; }
a { color: #1a5fb4; } code { font-size: .92em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.map td { min-width: 9em; } .map a { display: block; }
.meta { color: #555; } .why { color: #666; font-size: .88em; }
.ok { color: #1b7a32; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
.off { background: #fbeaea; color: #b3261e; } .nav { margin: .5em 0 1em; }
.sheet { display: grid; grid-template-columns: 1fr 1fr; gap: .4em 1.5em; }
.sheet h3 { font-size: 1em; margin: .6em 0 .1em; } .sheet p { margin: 0; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f6f6f6; padding: .7em; white-space: pre-wrap; font-size: .88em; }
"""

NO_PHENOMENON = "other"


def write_report(out_dir: str | Path, cards: list[Card]) -> Path:
    """Write index.html and one page per card into `out_dir`; returns the index path."""
    out_dir = Path(out_dir)
    for i, card in enumerate(cards):
        before = cards[i - 1].name if i > 0 else None
        after = cards[i + 1].name if i + 1 < len(cards) else None
        (out_dir / page_name(card.name)).write_text(render_card(card, before, after),
                                                    encoding="utf-8")
    index = out_dir / "index.html"
    index.write_text(render_index(cards), encoding="utf-8")
    return index


def page_name(name: str) -> str:
    return f"{name}.html"


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def _e(text) -> str:
    return html.escape(str(text))


def _link(name: str) -> str:
    return f'<a href="{_e(page_name(name))}" title="{_e(get(name).title)}">{_e(name)}</a>'


def _status(card: Card) -> str:
    ok = card.fired and not card.baseline_fired
    return f'<span class="{"ok" if ok else "bad"}">{"✓" if ok else "✗"}</span>'


def render_index(cards: list[Card]) -> str:
    """The map (loss shape x field phenomenon) and a table of every fault."""
    seed = cards[0].seed if cards else 0
    body = ["<h1>failurelab: the fault catalogue</h1>",
            f'<p class="meta">{len(cards)} faults, each run beside its task\'s healthy '
            f"baseline with seed {seed}. ✓: the faulty run shows its signature and the "
            f"baseline does not.</p>", "<h2>Map: loss shape × field phenomenon</h2>",
            '<p class="meta">Rows: the loss-curve shape a fault produces. Columns: what a '
            "practitioner reports from the field (the course's phenomena A-D). Faults "
            "whose loss looks healthy need a dedicated instrument to be seen.</p>",
            _map(cards), "<h2>All faults</h2>", _fault_table(cards)]
    return _page("failurelab report", "\n".join(body))


def _map(cards: list[Card]) -> str:
    columns = [*PHENOMENA, NO_PHENOMENON]
    heads = [f"{k}. {_e(v)}" for k, v in PHENOMENA.items()] + ["no field phenomenon"]
    cells: dict[tuple[str, str], list[str]] = {}
    for card in cards:
        key = (card.fault.shape, card.fault.phenomenon or NO_PHENOMENON)
        cells.setdefault(key, []).append(_link(card.name))
    lines = ['<table class="map"><tr><th>loss shape</th>'
             + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for shape in SHAPES:
        if any(s == shape for s, _ in cells):
            row = "".join(f"<td>{''.join(cells.get((shape, c), []))}</td>" for c in columns)
            lines.append(f"<tr><th>{_e(shape)}</th>{row}</tr>")
    return "\n".join(lines + ["</table>"])


def _fault_table(cards: list[Card]) -> str:
    lines = ["<table><tr><th>check</th><th>fault</th><th>title</th><th>family</th>"
             "<th>task</th><th>diagnosis' top cause</th></tr>"]
    for card in cards:
        f = card.fault
        top = f'<span class="{"" if card.top == card.name else "bad"}">' \
              f'{_e(card.top or "none")}</span>'
        lines.append(f"<tr><td>{_status(card)}</td><td>{_link(card.name)}</td>"
                     f"<td>{_e(f.title)}</td><td>{_e(f.family)}</td><td>{_e(f.task)}</td>"
                     f"<td>{top}</td></tr>")
    return "\n".join(lines + ["</table>"])


def render_card(card: Card, before: str | None = None, after: str | None = None) -> str:
    """One fault's page: plot, worksheet texts, measured signature, diagnosis."""
    f = card.fault
    phenomenon = f"{f.phenomenon}. {PHENOMENA[f.phenomenon]}" if f.phenomenon else "none"
    links = (before and f"← {_link(before)}", '<a href="index.html">index</a>',
             after and f"{_link(after)} →")
    nav = " · ".join(x for x in links if x)
    body = [f'<div class="nav">{nav}</div>',
            f"<h1><code>{_e(card.name)}</code>: {_e(f.title)}</h1>",
            f'<p class="meta">family {_e(f.family)} · task {_e(f.task)} · loss shape '
            f"{_e(f.shape)} · phenomenon {_e(phenomenon)} · changes <code>{_e(card.changed)}"
            f"</code> · seed {card.seed}</p>",
            f'<img src="{_e(card.image)}" alt="{_e(card.name)}: loss and the instrument '
            f'that shows the cause, baseline in grey">',
            _worksheet(f), "<h2>Signature: measured</h2>",
            f"<p>{_status(card)} {_e(verdict(card.name, card.fired, card.baseline_fired))}."
            f" When it fires, the signature says: <em>{_e(f.signature.verdict)}</em></p>",
            _conditions(card), "<h2>Diagnosis of the faulty run</h2>",
            f"<pre>{_e(card.diagnosis)}</pre>", f'<div class="nav">{nav}</div>']
    return _page(f"{card.name} - failurelab", "\n".join(body))


def _worksheet(f: Fault) -> str:
    parts = [("Symptom", f.symptom), ("Cause", f.cause),
             ("Distinguishing experiment", f.experiment), ("Fix", f.fix)]
    return '<div class="sheet">' + "".join(
        f"<div><h3>{_e(h)}</h3><p>{_e(t)}</p></div>" for h, t in parts) + "</div>"


def _conditions(card: Card) -> str:
    lines = ['<table><tr><th>quantity</th><th>threshold</th><th>fault run</th>'
             '<th>baseline run</th><th>why this threshold</th></tr>']
    for r in card.rows:
        lines.append(f"<tr><td>{_e(r.label)}<br><code class=\"why\">{_e(r.quantity)}</code>"
                     f"</td><td class=\"num\">{_e(r.threshold)}</td>"
                     f"{_value(r.fault_value, r.fault_holds, alarm=not r.fault_holds)}"
                     f"{_value(r.baseline_value, r.baseline_holds, alarm=False)}"
                     f"<td class=\"why\">{_e(r.why)}</td></tr>")
    lines.append("</table>")
    lines.append('<p class="why">✓ the condition holds, ✗ it does not. The signature '
                 "fires only when every condition holds; the baseline may meet some of "
                 "them, never all.</p>")
    return "\n".join(lines)


def _value(text: str, holds: bool, alarm: bool) -> str:
    mark = "✓" if holds else "✗"
    return f'<td class="num{" off" if alarm else ""}">{_e(text)} {mark}</td>'
