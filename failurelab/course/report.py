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

from .. import catalogue
from ..basics.files import check_output, check_output_folder
from ..basics.recipes import baseline, diff, format_diff
from ..basics.text import Text, language
from ..catalogue.diagnosis import diagnose
from ..catalogue.fault import COLUMN_NAMES, PHENOMENON_TEXTS, phenomenon
from ..catalogue.faults import SHAPES, Fault, accepted_shapes, get, run
from ..evidence.shapes import name as shape_name
from ..evidence.signatures import Row, side_by_side
from ..lab.parallel import worker_pool
from ..views.tables import html_lang

PLOT_DPI = 100  # 11 x 3.8 inch figures: 1100 px wide, the page's width, ~70 kB each

# Every sentence of the pages, in both languages (the plots have their own, views.plots).
WORDS = {
    "reproduced": Text("reproduced (the {name} run shows its signature, the baseline does "
                       "not)", "已复现（{name} 的运行显示出它的特征，基线没有）"),
    "missed": Text("NOT reproduced (the {name} run misses at least one condition)",
                   "未复现（{name} 的运行至少有一个条件不满足）"),
    "false_alarm": Text("FALSE ALARM (the healthy baseline shows this signature too)",
                        "误报（健康的基线也显示出这个特征）"),
    "title": Text("failurelab: the fault catalogue", "failurelab：故障目录"),
    "intro": Text("{count} faults, each run beside its task's healthy baseline with seed "
                  "{seed}. ✓: the faulty run shows its signature and the baseline does not.",
                  "共 {count} 个故障，每个都与其任务的健康基线 (baseline) 并排运行，种子 (seed) "
                  "为 {seed}。✓：有故障的运行显示出它的特征 (signature)，而基线没有。"),
    "map": Text("Map: loss shape × field phenomenon", "地图：损失曲线形状 × 现场现象"),
    "map_note": Text("Rows: the loss-curve shape each fault's run reads, by the rules "
                     "fl.diagnose names shapes with (a fault's page lists every shape its curve "
                     "can show). Columns: what a practitioner reports from the field (the "
                     "course's phenomena A-D). Faults whose loss looks healthy need a dedicated "
                     "instrument to be seen.",
                     "行：每个故障的运行按 fl.diagnose 命名形状的规则读出的损失曲线形状（故障页面列出它的"
                     "曲线可能呈现的每一种形状）。列：实践者在现场报告的现象（课程中的现象 A-D）。"
                     "损失看起来健康的故障，需要专门的观测仪表才能看出来。"),
    "all": Text("All faults", "全部故障"),
    "no_phenomenon": Text("no field phenomenon", "无现场现象"),
    "loss_shape": Text("loss shape", "损失曲线形状"),
    "check": Text("check", "检验"), "fault": Text("fault", "故障"), "title_col": Text("title", "标题"),
    "family": Text("family", "类别"), "task": Text("task", "任务"),
    "top": Text("diagnosis' top cause", "诊断给出的首要原因"), "none": Text("none", "无"),
    "index": Text("index", "目录"),
    "meta": Text("family {family} · task {task} · loss shape of this run {shape} (this "
                 "fault's curve can read {shapes}) · phenomenon {phenomenon} · changes "
                 "{changes} · seed {seed}",
                 "类别 {family} · 任务 {task} · 这次运行的损失曲线形状 {shape}（这个故障的曲线可能读作 "
                 "{shapes}）· 现场现象 {phenomenon} · 改动 {changes} · 种子 {seed}"),
    "or": Text(" or ", " 或 "),
    "alt": Text("{name}: loss and the instrument that shows the cause, baseline in grey",
                "{name}：损失以及显示原因的仪表，灰色为基线"),
    "measured": Text("Signature: measured", "特征 (signature)：实测"),
    "says": Text("When it fires, the signature says:", "特征成立时，它的结论是："),
    "stop": Text(".", "。"),
    "diagnosis": Text("Diagnosis of the faulty run", "对有故障运行的诊断"),
    **{part: Text(name.en.capitalize(), name.zh) for part, name in COLUMN_NAMES.items()},
    "quantity": Text("quantity", "量"), "threshold": Text("threshold", "阈值"),
    "fault_run": Text("fault run", "故障运行"), "baseline_run": Text("baseline run", "基线运行"),
    "why": Text("why this threshold", "为什么是这个阈值"),
    "legend": Text("✓ the condition holds, ✗ it does not. The signature fires only when "
                   "every condition holds; the baseline may meet some of them, never all.",
                   "✓ 条件成立，✗ 条件不成立。只有每个条件都成立时特征才成立；基线可以满足其中"
                   "一部分，但绝不会全部满足。"),
    "report": Text("failurelab report", "failurelab 报告"),
}


def _w(key: str, lang: str | None = None, **values) -> str:
    return WORDS[key].say(lang, **values)


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
    lang: str = "en"  # the language of the rows, the diagnosis and the page
    shape: str = ""  # the loss-curve shape the faulty run's telemetry reads (diagnose)

    @property
    def read_shape(self) -> str:
        """The shape the telemetry read; the documented one for a card made without it."""
        return self.shape or self.fault.shape

    @property
    def fault(self) -> Fault:
        return get(self.name)


# --- measuring ------------------------------------------------------------------------

def measure(fault: Fault, faulty: pd.DataFrame, healthy: pd.DataFrame,
            lang: str | None = None):
    """The signature's conditions on both histories: (rows, fault fired, baseline fired)."""
    return side_by_side(fault.name, fault.signature, faulty, healthy, lang)


def verdict(name: str, fired: bool, baseline_fired: bool, lang: str | None = None) -> str:
    """The check's outcome in one sentence."""
    if fired and not baseline_fired:
        return _w("reproduced", lang, name=name)
    if not fired:
        return _w("missed", lang, name=name)
    return _w("false_alarm", lang)


def changed(fault: Fault) -> str:
    """The recipe fields the fault changes, as 'field: before → after'."""
    return format_diff(diff(baseline(fault.task), fault.inject(baseline(fault.task))))


def comparison(name: str, healthy, faulty, lang: str | None = None):
    """The fault's comparison figure: loss, and the instrument that shows its cause,
    labelled in `lang` (English where no CJK font is installed)."""
    from ..views import plots

    with plots.speaking(lang):
        return plots.compare(healthy, faulty, fault=name)


# --- running (in worker processes) ------------------------------------------------------

def _baseline_job(task: str, seed: int, steps: int | None) -> tuple[str, pd.DataFrame]:
    return task, run(task, seed=seed, steps=steps).history


def _card_job(name: str, seed: int, steps: int | None, healthy: pd.DataFrame,
              out_dir: str, lang: str = "en") -> Card:
    """Run one fault, measure it against the baseline history, and draw its plot."""
    import matplotlib.pyplot as plt

    fault = get(name)
    faulty = run(name, seed=seed, steps=steps).history
    rows, fired, baseline_fired = measure(fault, faulty, healthy, lang)
    found = diagnose(faulty, lang=lang)
    image = f"{name}.png"
    fig = comparison(name, healthy, faulty, lang)
    fig.savefig(check_output(Path(out_dir) / image, (".png",), what="plot"), dpi=PLOT_DPI)
    plt.close(fig)
    return Card(name, seed, rows, fired, baseline_fired, str(found), found.top,
                changed(fault), image, lang, found.shape)


def build_cards(names: Iterable[str], out_dir: str | Path, *, seed: int = 0,
                steps: int | None = None, workers: int | None = None,
                progress: Callable[[int, int], None] | None = None,
                lang: str | None = None) -> list[Card]:
    """Run the baselines, then every fault; plots land in `out_dir`. Cards in `names` order.

    One worker process per core, one torch thread each, as in `sweep.verify`."""
    names, lang = [get(n).name for n in names], language(lang)
    tasks = sorted({get(n).task for n in names})
    total, done = len(tasks) + len(names), 0

    def finished(futures):
        nonlocal done
        for future in as_completed(futures):
            done += 1
            if progress:
                progress(done, total)
            yield future.result()

    with worker_pool(total, workers) as pool:  # stops at once on Ctrl-C
        baselines = [pool.submit(_baseline_job, t, seed, steps) for t in tasks]
        if progress:
            progress(0, total)  # the workers are starting: say so before any finishes
        healthy = dict(finished(baselines))
        futures = [pool.submit(_card_job, n, seed, steps, healthy[get(n).task], str(out_dir),
                               lang)
                   for n in names]
        list(finished(futures))
    return [f.result() for f in futures]


def generate(out_dir: str | Path, names: Iterable[str] | None = None, *, seed: int = 0,
             steps: int | None = None, workers: int | None = None,
             progress: Callable[[int, int], None] | None = None,
             lang: str | None = None) -> Path:
    """Build the cards and write the whole report in `lang`; returns index.html's path."""
    matplotlib.use("Agg")  # files only: never open a window
    out_dir = check_output_folder(out_dir, what="report")  # before any run, not after
    names = list(catalogue.FAULTS) if names is None else list(names)
    cards = build_cards(names, out_dir, seed=seed, steps=steps, workers=workers,
                        progress=progress, lang=lang)
    return write_report(out_dir, cards)


# --- HTML ---------------------------------------------------------------------------------

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans CJK SC",
       "PingFang SC", "Microsoft YaHei", sans-serif;
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
        page = check_output(out_dir / page_name(card.name), (".html",), what="report page")
        page.write_text(render_card(card, before, after), encoding="utf-8")
    index = check_output(out_dir / "index.html", (".html",), what="report")
    index.write_text(render_index(cards, cards[0].lang if cards else None), encoding="utf-8")
    return index


def page_name(name: str) -> str:
    return f"{name}.html"


def _page(title: str, body: str, lang: str | None = None) -> str:
    return (f'<!DOCTYPE html>\n<html lang="{html_lang(lang)}"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def _e(text) -> str:
    return html.escape(str(text))


def _link(name: str, lang: str | None = None) -> str:
    title = get(name).text("title", lang)
    return f'<a href="{_e(page_name(name))}" title="{_e(title)}">{_e(name)}</a>'


def _status(card: Card) -> str:
    ok = card.fired and not card.baseline_fired
    return f'<span class="{"ok" if ok else "bad"}">{"✓" if ok else "✗"}</span>'


def render_index(cards: list[Card], lang: str | None = None) -> str:
    """The map (loss shape x field phenomenon) and a table of every fault."""
    seed = cards[0].seed if cards else 0
    body = [f"<h1>{_e(_w('title', lang))}</h1>",
            f'<p class="meta">{_e(_w("intro", lang, count=len(cards), seed=seed))}</p>',
            f"<h2>{_e(_w('map', lang))}</h2>",
            f'<p class="meta">{_e(_w("map_note", lang))}</p>',
            _map(cards, lang), f"<h2>{_e(_w('all', lang))}</h2>", _fault_table(cards, lang)]
    return _page(_w("report", lang), "\n".join(body), lang)


def _map(cards: list[Card], lang: str | None = None) -> str:
    columns = [*PHENOMENON_TEXTS, NO_PHENOMENON]
    heads = [f"{k}. {_e(v.say(lang))}" for k, v in PHENOMENON_TEXTS.items()]
    heads.append(_e(_w("no_phenomenon", lang)))
    cells: dict[tuple[str, str], list[str]] = {}
    for card in cards:
        key = (card.read_shape, card.fault.phenomenon or NO_PHENOMENON)
        cells.setdefault(key, []).append(_link(card.name, lang))
    lines = [f'<table class="map"><tr><th>{_e(_w("loss_shape", lang))}</th>'
             + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for shape in SHAPES:
        if any(s == shape for s, _ in cells):
            row = "".join(f"<td>{''.join(cells.get((shape, c), []))}</td>" for c in columns)
            lines.append(f"<tr><th>{_e(shape_name(shape, lang))}</th>{row}</tr>")
    return "\n".join(lines + ["</table>"])


def _fault_table(cards: list[Card], lang: str | None = None) -> str:
    heads = ("check", "fault", "title_col", "family", "task", "top")
    lines = ["<table><tr>" + "".join(f"<th>{_e(_w(h, lang))}</th>" for h in heads) + "</tr>"]
    for card in cards:
        f = card.fault
        top = f'<span class="{"" if card.top == card.name else "bad"}">' \
              f'{_e(card.top or _w("none", lang))}</span>'
        lines.append(f"<tr><td>{_status(card)}</td><td>{_link(card.name, lang)}</td>"
                     f"<td>{_e(f.text('title', lang))}</td><td>{_e(f.family)}</td>"
                     f"<td>{_e(f.task)}</td><td>{top}</td></tr>")
    return "\n".join(lines + ["</table>"])


def render_card(card: Card, before: str | None = None, after: str | None = None) -> str:
    """One fault's page: plot, worksheet texts, measured signature, diagnosis."""
    f, lang = card.fault, card.lang
    links = (before and f"← {_link(before, lang)}",
             f'<a href="index.html">{_e(_w("index", lang))}</a>',
             after and f"{_link(after, lang)} →")
    nav = " · ".join(x for x in links if x)
    meta = _w("meta", lang, family=_e(f.family), task=_e(f.task),
              shape=_e(shape_name(card.read_shape, lang)),
              shapes=_e(_w("or", lang).join(shape_name(s, lang) for s in accepted_shapes(f))),
              phenomenon=_e(phenomenon(f.phenomenon, lang) or _w("none", lang)),
              changes=f"<code>{_e(card.changed)}</code>", seed=card.seed)
    body = [f'<div class="nav">{nav}</div>',
            f"<h1><code>{_e(card.name)}</code>: {_e(f.text('title', lang))}</h1>",
            f'<p class="meta">{meta}</p>',
            f'<img src="{_e(card.image)}" alt="{_e(_w("alt", lang, name=card.name))}">',
            _worksheet(f, lang), f"<h2>{_e(_w('measured', lang))}</h2>",
            f"<p>{_status(card)} "
            f"{_e(verdict(card.name, card.fired, card.baseline_fired, lang))}"
            f"{_e(_w('stop', lang))} {_e(_w('says', lang))} "
            f"<em>{_e(f.signature.says(lang))}</em></p>",
            _conditions(card), f"<h2>{_e(_w('diagnosis', lang))}</h2>",
            f"<pre>{_e(card.diagnosis)}</pre>", f'<div class="nav">{nav}</div>']
    return _page(f"{card.name} - failurelab", "\n".join(body), lang)


def _worksheet(f: Fault, lang: str | None = None) -> str:
    parts = [(_w(part, lang), f.text(part, lang))
             for part in ("symptom", "cause", "experiment", "fix")]
    return '<div class="sheet">' + "".join(
        f"<div><h3>{_e(h)}</h3><p>{_e(t)}</p></div>" for h, t in parts) + "</div>"


def _conditions(card: Card) -> str:
    heads = ("quantity", "threshold", "fault_run", "baseline_run", "why")
    lines = ["<table><tr>" + "".join(f"<th>{_e(_w(h, card.lang))}</th>" for h in heads)
             + "</tr>"]
    for r in card.rows:
        lines.append(f"<tr><td>{_e(r.label)}<br><code class=\"why\">{_e(r.quantity)}</code>"
                     f"</td><td class=\"num\">{_e(r.threshold)}</td>"
                     f"{_value(r.fault_value, r.fault_holds, alarm=not r.fault_holds)}"
                     f"{_value(r.baseline_value, r.baseline_holds, alarm=False)}"
                     f"<td class=\"why\">{_e(r.why)}</td></tr>")
    lines.append("</table>")
    lines.append(f'<p class="why">{_e(_w("legend", card.lang))}</p>')
    return "\n".join(lines)


def _value(text: str, holds: bool, alarm: bool) -> str:
    mark = "✓" if holds else "✗"
    return f'<td class="num{" off" if alarm else ""}">{_e(text)} {mark}</td>'
