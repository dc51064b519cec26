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


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_environment_yml_installs_the_lab_extra_exactly():
    project = _project()
    lab = set(project["optional-dependencies"]["lab"])
    core = {r for r in project["dependencies"] if not r.startswith("torch")}
    assert _environment_pip_requirements() == core | lab


def test_the_package_takes_a_torch_range_and_the_lab_extra_pins_the_lab_build():
    from failurelab.basics.build import LAB_TORCH

    project = _project()
    torch_reqs = [r for r in project["dependencies"] if r.startswith("torch")]
    assert torch_reqs and all("==" not in r for r in torch_reqs)  # beside a project's own torch
    assert f"torch=={LAB_TORCH}" in project["optional-dependencies"]["lab"]
    assert f"torch=={LAB_TORCH}" in _environment_pip_requirements()
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def test_another_torch_build_is_said_once_and_the_lab_build_not_at_all(monkeypatch):
    import warnings

    from failurelab.basics import build

    assert build.other_build_note(build.LAB_TORCH + "+cpu") is None
    note = build.other_build_note("2.14.1")
    assert "2.14.1" in note and build.LAB_TORCH in note and "signature" in note
    monkeypatch.setattr(build, "installed_torch", lambda: "2.14.1")
    monkeypatch.setattr(build, "_noticed", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build.notice_other_build()
        build.notice_other_build()
    assert [type(w.message) for w in caught] == [build.OtherBuildWarning]


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

    assert set(fl.__all__) == set(_LAZY) and len(fl.__all__) == len(set(fl.__all__))
    for name in fl.__all__:
        assert getattr(fl, name) is not None, name
    assert callable(fl.mystery) and callable(fl.alerts)  # functions, not their modules
