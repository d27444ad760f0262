"""The import graph of the packages (issue 15): no cycles between files, no import of another
package's private names, and the compiler (solver/) never imports the simulator (sim/): the
simulator reaches it only as the timing oracle (hwmodel/oracle.py). Imports inside functions
count; imports under `if TYPE_CHECKING:` do not (they never run)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ir", "hwmodel", "solver", "sim", "pimsat")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> tuple[nx.DiGraph, list[tuple[str, str]]]:
    modules = {_module(p): p for pk in PACKAGES for p in (ROOT / pk).rglob("*.py")}
    g, private = nx.DiGraph(), []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.If)
                and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            ):
                node.body = []
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in PACKAGES:
                        g.add_edge(mod, a.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] not in PACKAGES:
                    continue
                for a in node.names:
                    full = f"{target}.{a.name}"
                    g.add_edge(mod, full if full in modules else target)
                    if a.name.startswith("_") and target.split(".")[0] != mod.split(".")[0]:
                        private.append((mod, full))
    return g, private


def test_no_import_cycles():
    g, _ = _graph()
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_cross_package_private_imports():
    _, private = _graph()
    assert not private


def test_solver_does_not_import_the_simulator():
    g, _ = _graph()
    assert [(a, b) for a, b in g.edges if a.split(".")[0] == "solver" and b.split(".")[0] == "sim"] == []


def test_the_graph_holds_known_edges():
    """The graph is not empty by mistake: it holds a top-level and a late (in-function) import."""
    g, _ = _graph()
    assert g.has_edge("pimsat.pipeline", "solver.task_timing")  # top level
    assert g.has_edge("pimsat.pipeline", "sim.oracle")  # inside _simulator_oracle


def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert exe, "ruff is a dev dependency (pyproject.toml): pip install -e '.[dev]'"
    return [exe]


def test_ruff_lint_and_format_are_clean():
    """The configuration in pyproject.toml, applied once, is kept: `ruff check .` and
    `ruff format --check .` pass."""
    for args in (["check", "--quiet", "."], ["format", "--check", "--quiet", "."]):
        r = subprocess.run(_ruff() + args, cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f"ruff {' '.join(args)}:\n{r.stdout}{r.stderr}"
