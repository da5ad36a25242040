"""The layers: the core (`stapel/`) stands alone; `app/` and `workers/` stand on it side by side."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = ("stapel", "app", "workers", "autoscaler", "stapel_cli", "training", "bench")


def imports_of(path: Path) -> set[str]:
    """Return the modules a file imports (absolute names, any depth in the file)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("stapel", ("flask", "app", "workers", "autoscaler")),
        ("app", ("workers", "autoscaler")),
        ("workers", ("app", "autoscaler")),
        ("autoscaler", ("app",)),
    ],
)
def test_layer_imports_only_what_it_stands_on(package, forbidden):
    offenders = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in package_files(package)
        for name in imports_of(path)
        if name.split(".")[0] in forbidden
    }
    assert not offenders


@pytest.mark.process
def test_importing_the_whole_core_loads_no_flask():
    modules = [module_name(p) for p in package_files("stapel")]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('flask', 'app', 'workers'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def _graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    names = {module_name(p): p for pkg in packages for p in package_files(pkg)}
    return {
        name: {n for n in imports_of(path) if n in names and n != name}
        for name, path in names.items()
    }


def test_no_import_cycle_between_our_modules():
    graph = _graph(TOP[:4])
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycle.extend([*trail, node, nxt])
                return True
            if nxt not in state and visit(nxt, [*trail, node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if node not in state and visit(node, []):
            break
    assert not cycle, " -> ".join(cycle)
