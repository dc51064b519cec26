"""The package's layout: wings by concern, each importing only the floors below it.

Read from the source with `ast` (no module is imported, so no torch): every import of a
failurelab module, at the top of a file or inside a function, is an arrow, and every
arrow between two wings must point down.  A module at the top level of the package
that is not one of its doors has no floor, and fails here: put it in a wing.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "failurelab"

# wing -> floor: a wing may import the wings on lower floors, never its own floor's
# neighbours or anything above.  The doors (the package's face, the command, the
# Lightning callback) sit on top and may import anything.
FLOORS = {"basics": 1, "evidence": 2, "telemetry": 3, "catalogue": 3, "views": 4, "lab": 5,
          "investigation": 5, "zoo": 6, "course": 6}
DOORS = {"__init__", "__main__", "cli", "lightning"}
TOP = 7
TORCH_FREE = {"basics", "evidence"}  # what `import failurelab` reaches must not need torch


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path):
    """(imported failurelab module, line) for every import in one module, lazy ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno


def _floor(module: str) -> tuple[str, int]:
    parts = module.split(".")
    if len(parts) == 1:
        return "failurelab", TOP
    if len(parts) == 2 and parts[1] in DOORS:
        return parts[1], TOP
    return parts[1], FLOORS.get(parts[1], 0)


def test_every_module_lives_in_a_wing_or_is_a_door():
    homeless = [m for m in MODULES if _floor(m)[1] == 0]
    assert homeless == [], f"put these in a wing (and give a new wing a floor): {homeless}"


def test_every_wing_imports_only_the_floors_below_it():
    upward = []
    for name, path in MODULES.items():
        wing, floor = _floor(name)
        for target, line in _imports(name, path):
            if target.split(".")[0] != "failurelab":
                continue
            other, other_floor = _floor(target)
            if other != wing and floor != TOP and other_floor >= floor:
                upward.append(f"{name}:{line} imports {target} ({wing} {floor} -> {other} {other_floor})")
    assert upward == []


def test_no_module_imports_itself_through_others():
    graph = {name: {t for t, _ in _imports(name, path) if t in MODULES and t != name}
             for name, path in MODULES.items()}
    cycles, done = [], set()

    def visit(node, stack):
        if node in stack:
            cycles.append(" -> ".join(stack[stack.index(node):] + [node]))
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, stack + [node])
        done.add(node)

    for name in sorted(graph):
        visit(name, [])
    assert cycles == []


def test_the_floors_under_import_failurelab_never_import_torch():
    heavy = [f"{name}:{line}" for name, path in MODULES.items() if _floor(name)[0] in TORCH_FREE
             for target, line in _imports(name, path) if target.split(".")[0] in ("torch", "matplotlib")]
    assert heavy == []
