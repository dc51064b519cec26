"""The Chinese edition of the notebooks cannot drift from the English one: the same
cells in the same order, the code cells identical character for character, only the
markdown translated.  (Both editions run under `pytest --nbmake notebooks`; a kernel started in
notebooks/zh/ speaks Chinese by itself, see tests/test_text.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ENGLISH = sorted(NOTEBOOKS.glob("*.ipynb"))
CHINESE = sorted((NOTEBOOKS / "zh").glob("*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def test_every_english_notebook_has_a_chinese_edition_and_no_other():
    assert [p.name for p in CHINESE] == [p.name for p in ENGLISH]


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name)
def test_the_code_cells_are_the_english_ones(path):
    english, chinese = _cells(NOTEBOOKS / path.name), _cells(path)
    assert [c["cell_type"] for c in chinese] == [c["cell_type"] for c in english], \
        "the editions must have the same cells in the same order"
    for i, (en, zh) in enumerate(zip(english, chinese, strict=True)):
        if en["cell_type"] == "code":
            assert _source(zh) == _source(en), f"{path.name} cell {i}: code differs"
            assert zh.get("metadata") == en.get("metadata"), f"{path.name} cell {i}"


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name)
def test_every_markdown_cell_is_written_in_chinese(path):
    english = _cells(NOTEBOOKS / path.name)
    for i, (en, zh) in enumerate(zip(english, _cells(path), strict=True)):
        if zh["cell_type"] == "markdown":
            assert CJK.search(_source(zh)), f"{path.name} cell {i} is not translated"
            assert _source(zh) != _source(en), f"{path.name} cell {i}"


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name)
def test_the_chinese_edition_is_committed_without_outputs(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, \
                f"{path.name} cell {i}: clear it (jupyter nbconvert --clear-output --inplace)"
