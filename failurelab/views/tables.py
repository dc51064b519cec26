"""Tables that show their text whole: wrapped, left-aligned, escaped.

The worksheet's cells are sentences (a symptom, a cause, a fix).  pandas' default view
cuts them at 50 characters and right-aligns them, which hides the course's content, so
worksheet and grade tables are a `TextTable`: an ordinary DataFrame whose notebook view
is a plain HTML table with every cell whole.  Student text is escaped wherever it is
shown, because an instructor opens the page.
"""

from __future__ import annotations

import html
import math
import os
import shutil
import textwrap

import pandas as pd

from ..basics.text import Text, language

CELL = ("text-align:left;vertical-align:top;white-space:pre-wrap;overflow-wrap:anywhere;"
        "padding:4px 8px;border-bottom:1px solid #ddd;min-width:4em;max-width:28em")
HEAD = CELL + ";font-weight:600;background:#f3f3f3;border-bottom:2px solid #999"
LONG = 120  # characters: a paragraph, not a label, which keeps LONG_WIDTH (see _width)
LONG_WIDTH = ";min-width:13em"
MEDIUM = 40  # characters: a sentence, which keeps MEDIUM_WIDTH
MEDIUM_WIDTH = ";min-width:8em"
SHORT = 24  # characters: a label, broken at spaces only ("曲线形状 ✓，原因 ✗", not 曲线形|状)
SHORT_BREAKS = ";word-break:keep-all"
# A compact table (a gradebook: many short columns) reads its headers upwards.
COMPACT_CELL = ("text-align:left;vertical-align:top;white-space:nowrap;padding:3px 6px;"
                "border-bottom:1px solid #ddd")
COMPACT_HEAD = (COMPACT_CELL + ";font-weight:600;background:#f3f3f3;vertical-align:bottom;"
                "border-bottom:2px solid #999;writing-mode:vertical-rl;transform:rotate(180deg)")

STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table.failurelab { border-collapse: collapse; font-size: 13px; margin: 0.5em 0; }
p.note { color: #555; max-width: 60em; }
</style>"""


# Column names the course's tables show, as a Chinese reader sees them; the DataFrame
# keeps its names, so code reads table["faulty"] in every language.
HEADERS = {"quantity": Text("quantity", "量"), "threshold": Text("threshold", "阈值"),
           "faulty": Text("faulty", "有故障的运行"), "baseline": Text("baseline", "基线"),
           "instrument": Text("instrument", "仪表"), "start": Text("start", "开始"),
           "middle": Text("middle", "中段"), "end": Text("end", "结束"),
           "measurement": Text("measurement", "含义"), "value": Text("value", "数值")}


def header(name, lang: str | None = None) -> str:
    """A column's name as shown in `lang`: its HEADERS text, else the name itself."""
    text = HEADERS.get(str(name))
    return str(name) if text is None else text.say(lang)


class TextTable(pd.DataFrame):
    """A DataFrame shown whole in a notebook: every cell wrapped and left-aligned."""

    @property
    def _constructor(self):
        return TextTable

    def _repr_html_(self) -> str:
        return html_table(self)

    def __repr__(self) -> str:
        return plain_text(self)

    __str__ = __repr__


def plain_text(frame: pd.DataFrame, width: int | None = None) -> str:
    """`frame` for a terminal, never cut with "...": pandas' own layout when every line
    fits `width` (the terminal's), else one block per row, each cell wrapped."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    with pd.option_context("display.max_colwidth", None, "display.max_columns", None,
                           "display.max_rows", None, "display.width", None):
        whole = pd.DataFrame(frame).to_string()
    cells = [v for row in frame.itertuples(index=False) for v in row]
    multiline = any(isinstance(v, str) and "\n" in v for v in cells)
    if not multiline and max(map(len, whole.splitlines()), default=0) <= width:
        return whole
    label = max((len(str(c)) for c in frame.columns), default=0)
    blocks, previous = [], object()
    for name, row in zip(frame.index, frame.itertuples(index=False), strict=True):
        same = name == previous  # a long table's next row of the same experiment
        previous = name
        lines = [] if same else [f"{frame.index.name}: {name}" if frame.index.name
                                 else str(name)]
        for column, value in zip(frame.columns, row, strict=True):
            text = _plain_cell(value)
            if not text:
                continue
            wrapped = [piece for para in text.splitlines() for piece in
                       textwrap.wrap(para, max(width - label - 4, 20)) or [""]]
            lines += [f"  {str(column) if i == 0 else '':<{label}}  {piece}"
                      for i, piece in enumerate(wrapped)]
        blocks.append(("\n" if same else "\n\n") + "\n".join(lines))
    return "".join(blocks).lstrip("\n")


def _plain_cell(value) -> str:
    """A cell as plain text: "" for None and NaN."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, tuple):
        return " / ".join(map(str, value))
    return str(value)


def html_table(frame: pd.DataFrame, caption: str | None = None, *, compact: bool = False,
               cell_css=None) -> str:
    """`frame` as an HTML table: index and cells left-aligned, wrapped, escaped.

    `compact`: short cells on one line under upright-reading vertical headers (many
    narrow columns); `cell_css(value)` may add a style to a cell (e.g. a colour)."""
    cell, head = (COMPACT_CELL, COMPACT_HEAD) if compact else (CELL, HEAD)
    index_name = "" if frame.index.name is None else str(frame.index.name)
    heads = [f'<th style="{HEAD if i == 0 else head}">{_escape(header(c))}</th>'
             for i, c in enumerate([index_name, *frame.columns])]
    rows, previous = [], object()
    for label, row in zip(frame.index, frame.itertuples(index=False), strict=True):
        group = "" if label == previous else ";border-top:1px solid #999"  # a new experiment
        cells = "".join(f'<td style="{cell}{group}{_width(v, compact)}'
                        f'{";" + cell_css(v) if cell_css else ""}">{_escape(v)}</td>'
                        for v in row)
        shown = "" if label == previous else _escape(label)  # a repeated label shows once
        rows.append(f'<tr><th style="{cell}{group};font-weight:600;white-space:nowrap">'
                    f"{shown}</th>{cells}</tr>")
        previous = label
    top = f"<caption style=\"text-align:left\">{_escape(caption)}</caption>" if caption else ""
    table = '<table class="failurelab" style="border-collapse:collapse;table-layout:auto">'
    return (f'{table}{top}<thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _width(value, compact: bool) -> str:
    """A paragraph-long cell keeps a readable width: squeezed to the table's share of the
    page it became a column one word wide, many times taller than the other cells (a
    wide table scrolls sideways in a notebook instead); a sentence keeps a few words a
    line; a label breaks only between its words, in Chinese too."""
    if compact or not isinstance(value, str):
        return ""
    if len(value) > LONG:
        return LONG_WIDTH
    return MEDIUM_WIDTH if len(value) > MEDIUM else SHORT_BREAKS if len(value) <= SHORT else ""


def page(title: str, body: str, lang: str | None = None) -> str:
    """A whole HTML page: escaped title, the tables' style, and `body` (already HTML)."""
    return (f'<!DOCTYPE html>\n<html lang="{html_lang(lang)}"><head><meta charset="utf-8">'
            f"<title>{_escape(title)}</title>{STYLE}</head>\n<body>\n"
            f"<h1>{_escape(title)}</h1>\n{body}\n</body></html>\n")


def html_lang(lang: str | None = None) -> str:
    """The page's `lang` attribute, so browsers pick CJK fonts for Chinese pages."""
    return "zh-CN" if language(lang) == "zh" else "en"


def _escape(value) -> str:
    return html.escape(_plain_cell(value))


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no `tabulate` dependency)."""
    header = [frame.index.name or "", *map(str, frame.columns)]
    body = [[str(i), *row] for i, row in zip(frame.index, frame.itertuples(index=False), strict=True)]
    lines = [header, ["---"] * len(header), *body]
    return "".join("| " + " | ".join(_md_cell(c) for c in line) + " |\n" for line in lines)


def _md_cell(value) -> str:
    if value is None or isinstance(value, float) and math.isnan(value):
        return ""
    return str(value).replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def export(text: str, path: str | os.PathLike | None) -> str:
    if path is not None:
        with open(path, "w", encoding="utf-8", newline="") as out:
            out.write(text)
    return text
