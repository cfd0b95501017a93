"""Fail when the project's modules import each other in a circle.

    python scripts/import_cycles.py        (run by `make lint`)

The graph holds every module of the packages that pyproject.toml's ``[tool.importlinter]``
names as ``root_packages``, with an edge for each import of another project module written
anywhere in a module: at the top, inside a function (an import moved there to dodge a
circle still counts), in a ``try``, and under ``if TYPE_CHECKING:`` too (a type-only import
still ties the two modules together: mypy reads them as one, and the guard is only there
because the import would fail at run time).

``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg`` (its
``__init__``): a package whose ``__init__`` imports a submodule that imports back from the
``__init__`` is a circle too. The parent packages that Python runs before a submodule are
not edges: only what a module names.

Every strongly connected component of more than one module is a circle; each is printed
with the imports that close it (file and line), and the exit status is 1.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: Path
    line: int


def project_modules(root: Path, packages: list[str]) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` file under the root packages."""
    modules: dict[str, Path] = {}
    for package in packages:
        base = root / package.replace(".", "/")
        if not (base / "__init__.py").is_file():
            raise SystemExit(
                f"{base}: root package {package!r} (pyproject.toml [tool.importlinter]) has no __init__.py"
            )
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a project module (``a.b.func`` → ``a.b``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def module_edges(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Edge]:
    """The imports of other project modules in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        else:
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.append(submodule if submodule in modules else _known(base, modules))
        for target in dict.fromkeys(targets):  # one edge per statement and target
            if target is not None and target != name:
                yield Edge(name, target, path, node.lineno)


def import_graph(root: Path, packages: list[str]) -> dict[str, list[Edge]]:
    modules = project_modules(root, packages)
    return {name: list(module_edges(name, path, modules)) for name, path in modules.items()}


def circles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph.get(node, []):
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def report(graph: dict[str, list[Edge]], found: list[list[str]], root: Path) -> str:
    lines = [f"{len(found)} import circle(s) between project modules:"]
    for number, component in enumerate(found, 1):
        members = set(component)
        lines.append(f"\n{number}. {', '.join(component)}")
        for name in component:
            for edge in graph[name]:
                if edge.target in members:
                    lines.append(f"   {edge.source} -> {edge.target}  ({edge.path.relative_to(root)}:{edge.line})")
    return "\n".join(lines)


def main(root: Path = ROOT) -> int:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    packages = config["tool"]["importlinter"]["root_packages"]
    graph = import_graph(root, packages)
    found = circles(graph)
    if found:
        print(report(graph, found, root), file=sys.stderr)
        return 1
    edges = sum(len(edges) for edges in graph.values())
    print(f"no import circle: {len(graph)} modules, {edges} imports between them ({', '.join(packages)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
