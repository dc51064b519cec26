"""Every student-facing text exists in English and Chinese, and the two agree on what
they quote: the same format placeholders, the same numbers, the same code names."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import failurelab
from failurelab.basics.text import ENV, Text, language, placeholders
from failurelab.catalogue import FAULTS, diagnosis
from failurelab.catalogue.fault import PHENOMENON_TEXTS, TEXTS
from failurelab.evidence import shapes
from failurelab.evidence.columns import GROUP

# A code name: an identifier with an underscore, a digit, a call, a dotted path or an
# inner capital (zero_grad, float16, backward(), torch.amp.GradScaler, ReLU).
NAME = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _is_code(token: str) -> bool:
    core = token.removesuffix("()")
    return (token.endswith("()") or "_" in core or any(c.isdigit() for c in core)
            or re.search(r"[a-z][A-Z]", core) is not None
            or re.search(r"[A-Za-z]{2,}\.[A-Za-z]{2,}", core) is not None)


def quoted(text: str) -> tuple[set[str], set[str]]:
    """(numbers, code names) a text quotes; placeholders are left out (compared apart)."""
    text = re.sub(r"\{[^{}]*\}", " ", text)
    names = {t for t in NAME.findall(text) if _is_code(t)}
    return set(NUMBER.findall(NAME.sub(" ", text))), names


def test_quoted_finds_numbers_and_code_names_but_not_words():
    numbers, names = quoted("Divide lr by 10 (to 1e-2): zero_grad() and float16, "
                            "torch.amp.GradScaler, ReLU, e.g. i.i.d. 5,400 weights")
    assert numbers == {"10", "1e-2", "5,400"}
    assert names == {"zero_grad()", "float16", "torch.amp.GradScaler", "ReLU"}


def _texts_in_modules():
    """Every Text the package defines at module level, alone or in a dict or tuple."""
    found = {}
    for info in pkgutil.walk_packages(failurelab.__path__, "failurelab."):
        if info.name.endswith("__main__"):  # runs the command when imported
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional integration (lightning) that is not installed
            continue
        for attr, value in vars(module).items():
            values = value.values() if isinstance(value, dict) else \
                value if isinstance(value, tuple) else (value,)
            for i, v in enumerate(values):
                if isinstance(v, tuple):  # mystery.INSTRUMENTS: (column, Text)
                    v = next((x for x in v if isinstance(x, Text)), None)
                if isinstance(v, Text):
                    found[f"{info.name}.{attr}[{i}]"] = v
    return found


MODULE_TEXTS = _texts_in_modules()


def test_the_modules_define_their_texts_as_text_pairs():
    modules = {key.rsplit(".", 1)[0] for key in MODULE_TEXTS}
    for wanted in ("failurelab.evidence.alerts", "failurelab.catalogue.diagnosis", "failurelab.evidence.shapes",
                   "failurelab.course.grading", "failurelab.course.mystery", "failurelab.course.report",
                   "failurelab.cli", "failurelab.course.experiment", "failurelab.evidence.signatures"):
        assert wanted in modules, f"{wanted} has no Text: were its texts moved?"


@pytest.mark.parametrize("where", sorted(MODULE_TEXTS))
def test_every_text_has_chinese_that_quotes_the_same(where):
    text = MODULE_TEXTS[where]
    assert text.zh.strip(), f"{where}: no Chinese"
    assert placeholders(text.en) == placeholders(text.zh), where
    assert quoted(text.en) == quoted(text.zh), f"{where}: {text.en!r} vs {text.zh!r}"


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_fault_has_its_teaching_texts_in_chinese(name):
    fault = FAULTS[name]
    assert fault.zh is not None, f"{name}: add zh=Chinese(...) beside its English texts"
    for part in TEXTS:
        en, zh = getattr(fault, part), getattr(fault.zh, part)
        assert bool(en) == bool(zh), f"{name}.{part}: English and Chinese disagree on "
        if en:
            assert CJK.search(zh), f"{name}.{part} is not written in Chinese: {zh!r}"
            assert quoted(en) == quoted(zh), f"{name}.{part}: {quoted(en)} vs {quoted(zh)}"
            assert fault.text(part, "zh") == zh and fault.text(part, "en") == en


def test_every_shape_phenomenon_and_next_step_has_chinese():
    assert set(shapes.NAMES) == set(shapes.EXPLANATIONS) == set(shapes.SHAPES)
    assert set(diagnosis.NEXT_STEP) <= set(shapes.SHAPES)
    assert set(PHENOMENON_TEXTS) == {"A", "B", "C", "D"}
    assert set(diagnosis.CONFIDENCE) == {"high", "medium", "low"}
    assert set(diagnosis.GROUP_NAMES) <= set(GROUP)
    assert all(e in shapes.EVIDENCE for e in ("stuck", "healthy", "nonfinite"))


def test_a_text_whose_languages_quote_different_placeholders_is_refused():
    with pytest.raises(ValueError, match="placeholders"):
        Text("step {step}", "第 {steps} 步")


def test_the_language_comes_from_the_argument_then_the_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert language() == "en" and language("zh") == "zh"
    monkeypatch.setenv(ENV, "zh")
    assert language() == "zh" and language("en") == "en"
    monkeypatch.setenv(ENV, "fr")
    with pytest.raises(ValueError, match="FAILURELAB_LANG='fr'.*en, zh"):
        language()
    with pytest.raises(ValueError, match="lang='de'"):
        language("de")


def test_the_answer_key_is_chinese_throughout():
    key = failurelab.answer_key(lang="zh")
    assert list(key.columns)[:4] == ["现象", "可能原因", "区分实验", "修复动作"]
    for name, row in key.iterrows():
        for column, cell in row.items():
            assert cell == "" or CJK.search(cell), f"{name} / {column}: {cell!r}"
    english = failurelab.answer_key()
    assert english.loc["huge_lr", "symptom"] == FAULTS["huge_lr"].symptom


def _stalled_history():
    import numpy as np
    import pandas as pd

    steps = np.arange(60)
    return pd.DataFrame({"step": steps, "loss": 1.1 - 1e-4 * steps,
                         "grad_norm": np.full(60, 0.5), "update_ratio": np.full(60, 1e-6)})


def test_a_diagnosis_in_chinese_words_each_of_its_lines_in_chinese():
    found = failurelab.diagnose(_stalled_history(), lang="zh")
    assert found.shape == "plateau"  # the stored values stay the same in every language
    for line in str(found).splitlines():
        label, _, rest = line.partition("：")
        assert CJK.search(label) and rest, line
    assert str(failurelab.diagnose(_stalled_history(), lang="en")).startswith("shape: plateau")


def test_alerts_follow_the_environment_language(monkeypatch):
    monkeypatch.setenv(ENV, "zh")
    found = {a.kind: str(a) for a in failurelab.alerts(_stalled_history())}
    assert set(found) == {"update_ratio", "plateau"}
    assert all(text.startswith("第 59 步：") and CJK.search(text) for text in found.values())


def test_the_command_line_speaks_the_chosen_language(capsys, monkeypatch):
    from failurelab.cli import main

    monkeypatch.delenv(ENV, raising=False)
    assert main(["list", "--lang", "zh"]) == 0
    listing = capsys.readouterr().out
    assert "学习率大了 30 倍" in listing and "huge_lr" in listing
    monkeypatch.setenv(ENV, "zh")
    assert main(["list"]) == 0 and "名称" in capsys.readouterr().out
    assert main(["list", "--lang", "en"]) == 0
    assert "Learning rate 30x too large" in capsys.readouterr().out
    monkeypatch.setenv(ENV, "klingon")
    assert main(["list"]) == 2
    assert "unknown language in FAILURELAB_LANG='klingon'" in capsys.readouterr().err


def _signatures():
    for name, fault in FAULTS.items():
        for kind, signature in (("signature", fault.signature), ("outcome", fault.outcome),
                                *(("also", s) for s in getattr(fault, "also", ()))):
            yield f"{name}.{kind}", signature


@pytest.mark.parametrize("where,signature", list(_signatures()),
                         ids=[w for w, _ in _signatures()])
def test_every_verdict_and_condition_has_chinese_that_quotes_the_same(where, signature):
    assert CJK.search(signature.verdict_zh), f"{where}: add verdict_zh= beside the verdict"
    assert quoted(signature.verdict) == quoted(signature.verdict_zh), where
    for c in signature.conditions:
        for part in ("label", "why", "suffix"):
            en, zh = getattr(c, part), getattr(c, f"{part}_zh")
            assert bool(en) == bool(zh), f"{where} {c.quantity}: {part}_zh missing"
            if en:
                assert quoted(en) == quoted(zh), f"{where} {c.quantity}.{part}: {en!r}"


# --- a notebook in notebooks/zh/ speaks Chinese by itself (issue 29, item 16) --------------

def test_a_kernel_started_in_notebooks_zh_speaks_chinese_without_the_variable(tmp_path,
                                                                              monkeypatch):
    """Jupyter (and nbmake) start a notebook's kernel in the notebook's folder: there the
    Chinese edition, whose code cells are the English ones, speaks Chinese by itself.
    $FAILURELAB_LANG and an explicit lang= still decide over the folder."""
    from failurelab.catalogue.diagnosis import LINES

    monkeypatch.delenv(ENV, raising=False)
    chinese = tmp_path / "course" / "notebooks" / "zh"
    chinese.mkdir(parents=True)
    monkeypatch.chdir(chinese)
    assert language() == "zh" and LINES["confidence"].say(level="高") == "置信度：高"
    assert language("en") == "en"
    monkeypatch.setenv(ENV, "en")
    assert language() == "en"
    monkeypatch.delenv(ENV)
    for elsewhere in (tmp_path / "course" / "notebooks", tmp_path / "zh"):
        monkeypatch.chdir(elsewhere if elsewhere.exists() else (elsewhere.mkdir() or elsewhere))
        assert language() == "en", elsewhere


def test_a_deleted_working_folder_falls_back_to_english(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    gone = tmp_path / "notebooks" / "zh"
    gone.mkdir(parents=True)
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert language() == "en"


def test_table_headers_are_shown_in_chinese_and_kept_for_code(monkeypatch):
    """A signature or readout table shows its headers in the notebook's language while
    its columns keep their names (code reads table["faulty"] in every language)."""
    from failurelab.views.tables import HEADERS, TextTable

    table = TextTable({"quantity": ["更新比"], "threshold": ["≥ 0.3"], "faulty": ["0.43"],
                       "baseline": ["0.011"]})
    monkeypatch.setenv(ENV, "zh")
    page = table._repr_html_()
    for column in table.columns:
        assert f">{HEADERS[column].zh}</th>" in page
    assert list(table.columns) == ["quantity", "threshold", "faulty", "baseline"]
    monkeypatch.setenv(ENV, "en")
    assert ">threshold</th>" in table._repr_html_()
