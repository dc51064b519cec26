"""Packaging: conda and pip users get the same pins."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _environment_pip_requirements() -> set[str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:")
    reqs = set()
    for line in lines[start + 1:]:
        match = re.match(r"^\s{6}- (.+)$", line)
        if not match:
            break
        reqs.add(match.group(1).strip())
    return reqs - {"-e ."}


def test_environment_yml_pins_exactly_what_pyproject_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = set(project["dependencies"]) | set(project["optional-dependencies"]["lab"])
    assert _environment_pip_requirements() == declared


def test_torch_is_pinned_everywhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
    assert "torch==2.13.0" in _environment_pip_requirements()
    assert "python=3.11" in (ROOT / "environment.yml").read_text()
