"""Fails when the modules of ``rust/core`` or of the Python package depend on each other in a
cycle (``make lint`` runs it).

A module is a top-level item of the crate (``store``, ``ha``, ``remoting``, ...: a file
``src/X.rs`` with its directory ``src/X/``) or of the package (``rocketha.cli``,
``rocketha.spark``, ...). An edge is any ``crate::X`` path in a Rust file, or any import of
``rocketha.X`` in a Python file, a lazy one inside a function included: a late import hides a
cycle, it does not remove it. Tests (``#[cfg(test)]`` files named ``tests.rs`` or under
``tests/``) are left out, since a test may reach across modules.

``python tools/module_cycles.py`` prints each cycle and exits 1 if there is one;
``--graph`` prints every edge.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CRATE = ROOT / "rust" / "core" / "src"
PACKAGE = ROOT / "python" / "rocketha"

Graph = dict[str, set[str]]

_CRATE_PATH = re.compile(r"\bcrate::(\w+)")
#: `use crate::{a::x, b}`: the names right inside the braces are modules too.
_CRATE_GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)


def _rust_module(path: Path) -> str:
    return path.relative_to(CRATE).parts[0].removesuffix(".rs")


def _rust_sources() -> Iterable[Path]:
    for path in sorted(CRATE.rglob("*.rs")):
        if path.name == "tests.rs" or "tests" in path.relative_to(CRATE).parts[:-1]:
            continue
        yield path


def _strip_tests(text: str) -> str:
    """The file up to its ``#[cfg(test)] mod tests`` block, which stays out of the graph."""
    return text.split("#[cfg(test)]\nmod tests", 1)[0]


def rust_graph() -> Graph:
    modules = {_rust_module(p) for p in _rust_sources()} - {"lib"}
    graph: Graph = {m: set() for m in modules}
    for path in _rust_sources():
        me = _rust_module(path)
        if me == "lib":
            continue
        text = _strip_tests(path.read_text())
        used = set(_CRATE_PATH.findall(text))
        for group in _CRATE_GROUP.findall(text):
            used |= {part.strip().split("::")[0] for part in group.split(",")}
        graph[me] |= {m for m in used if m in modules and m != me}
    return graph


def _python_module(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def python_graph() -> Graph:
    sources = sorted(PACKAGE.rglob("*.py"))
    modules = {_python_module(p) for p in sources} - {"__init__", "__main__"}
    graph: Graph = {m: set() for m in modules}
    for path in sources:
        me = _python_module(path)
        if me not in graph:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.level:
                    continue  # inside a subpackage: its own business
                if node.module == "rocketha":
                    targets = [alias.name for alias in node.names]
                elif node.module.startswith("rocketha."):
                    targets = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                targets = [n.split(".")[1] for n in names if n.startswith("rocketha.")]
            graph[me] |= {t for t in targets if t in modules and t != me}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    failed = False
    for name, graph in (("rust/core", rust_graph()), ("python/rocketha", python_graph())):
        if "--graph" in argv:
            for module in sorted(graph):
                print(f"{name}: {module} -> {', '.join(sorted(graph[module])) or '-'}")
        for component in cycles(graph):
            failed = True
            edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]
            print(f"{name}: dependency cycle among {', '.join(component)}: {'; '.join(edges)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
