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


def test_the_readme_names_every_fault_and_every_notebook():
    import failurelab as fl

    readme = (ROOT / "README.md").read_text()
    assert [name for name in fl.FAULTS if name not in readme] == []
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks and [n for n in notebooks if f"`{n}`" not in readme] == []


def test_the_readme_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().replace(" --quiet", "")
    for command in ('.venv/bin/pip install -e ".[lab]"', ".venv/bin/failurelab verify",
                    "OMP_NUM_THREADS=1 .venv/bin/python -m pytest -n 2 -rf --nbmake-timeout=600 tests "
                    "--nbmake notebooks"):
        assert command in readme and command in ci


def test_every_public_name_resolves_and_the_lazy_table_matches_all():
    import failurelab as fl
    from failurelab import _LAZY

    eager = {"Alert", "alerts", "Mystery", "Reveal", "mystery", "reveal"}
    assert set(fl.__all__) == set(_LAZY) | eager and len(fl.__all__) == len(set(fl.__all__))
    for name in fl.__all__:
        assert getattr(fl, name) is not None, name
    assert callable(fl.mystery) and callable(fl.alerts)  # functions, not their modules
