"""Texts in the lab's two languages, each written beside its translation.

A student-facing sentence is a `Text(en, zh)` at the place that uses it, never a key
into a separate file that can fall behind.  Which language is spoken comes from one
`lang` argument; where a function is not given one, from the environment variable
FAILURELAB_LANG (how the CLI chooses), else from the folder the process runs in (a
Jupyter kernel starts in its notebook's folder, so a notebook in notebooks/zh/ speaks
Chinese by itself, with code cells identical to the English ones), else English.

    NO_ANSWER = Text("No answer was given.", "没有作答。")
    NO_ANSWER.say(lang)                                    # -> str
    STEP = Text("step {step}: {message}", "第 {step} 步：{message}")
    STEP.say(lang, step=3, message="...")                  # str.format placeholders

Both languages must quote the same placeholders (checked when the Text is made) and
the same numbers and code names (checked by tests/test_text.py).
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path

LANGS = ("en", "zh")
ENV = "FAILURELAB_LANG"  # the language when no lang= is given: "en" (default) or "zh"
FOLDERS = {("notebooks", "zh"): "zh"}  # (parent, folder) of the working directory -> language


def language(lang: str | None = None) -> str:
    """The language to speak: `lang`, else $FAILURELAB_LANG, else the working folder's
    (notebooks/zh/ -> Chinese), else English."""
    chosen = lang if lang is not None else (os.environ.get(ENV) or folder_language())
    chosen = chosen.strip().lower() if isinstance(chosen, str) else chosen
    if chosen not in LANGS:
        where = f"{ENV}={chosen!r}" if lang is None else f"lang={lang!r}"
        raise ValueError(f"unknown language in {where}; choose one of {', '.join(LANGS)}")
    return chosen


def folder_language() -> str:
    """The language of the folder the process runs in: "zh" in a notebooks/zh folder
    (where Jupyter starts a Chinese notebook's kernel), else "en"."""
    try:
        here = Path.cwd()
    except OSError:  # the working directory was deleted
        return "en"
    return FOLDERS.get((here.parent.name, here.name), "en")


def placeholders(template: str) -> tuple[str, ...]:
    """The str.format fields a template quotes, sorted: "{a:.2f} {b}" -> ("a", "b")."""
    return tuple(sorted({field for _, field, _, _ in string.Formatter().parse(template)
                         if field is not None}))


@dataclass(frozen=True)
class Text:
    """One sentence (or label) in English and Chinese; a `str.format` template."""

    en: str
    zh: str

    def __post_init__(self):
        if placeholders(self.en) != placeholders(self.zh):
            raise ValueError(f"the translations quote different placeholders: "
                             f"{placeholders(self.en)} vs {placeholders(self.zh)} in "
                             f"{self.en!r}")

    def pick(self, lang: str | None = None) -> str:
        """The template itself, unformatted."""
        return self.zh if language(lang) == "zh" else self.en

    def say(self, lang: str | None = None, **values) -> str:
        """The text in `lang`, its placeholders filled from `values`."""
        template = self.pick(lang)
        return template.format(**values) if values or placeholders(template) else template


def say(texts: dict, key, lang: str | None = None, **values) -> str:
    """`texts[key].say(lang, ...)`, or `str(key)` for a key without a text."""
    text = texts.get(key)
    return str(key) if text is None else text.say(lang, **values)
