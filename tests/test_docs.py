"""The README and docs/ as a newcomer meets them: short enough to read, and every code
block that is meant to run does.  A block whose info string is exactly `python` is run
as pasted; `python fragment` marks a piece of a larger program (it names your model)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT = 12 * 1024  # bytes: one read in five minutes (issue: README <= 12 KB)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(?P<info>[^\n]*)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE)


def _runnable_blocks():
    for page in PAGES:
        for n, match in enumerate(BLOCK.finditer(page.read_text())):
            if match["info"].strip() == "python":
                yield pytest.param(match["code"], id=f"{page.name}-{n}")


def test_the_readme_is_short_enough_to_read():
    assert len((ROOT / "README.md").read_bytes()) <= README_LIMIT


def test_the_readme_links_only_pages_that_exist():
    links = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", (ROOT / "README.md").read_text())
    assert links and [link for link in links if not (ROOT / link).exists()] == []


@pytest.mark.parametrize("code", list(_runnable_blocks()))
def test_every_runnable_code_block_runs_as_pasted(code, tmp_path):
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_publish_replaces_only_its_own_section():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from publish import replace_section

    page = "intro\n<!-- begin: a -->old a<!-- end: a -->\n<!-- begin: b -->old b<!-- end: b -->\n"
    new = replace_section(page, "a", "<!-- begin: a -->new a<!-- end: a -->")
    assert "new a" in new and "old a" not in new and "old b" in new and new.startswith("intro")
    added = replace_section(page, "c", "<!-- begin: c -->c<!-- end: c -->")
    assert added.endswith("<!-- end: c -->\n") and "old a" in added
