"""Fails when the modules of ``rust/core`` or of the Python package depend on each other in a
cycle (``make lint`` runs it).

A module is a top-level item of the crate (``store``, ``ha``, ``remoting``, ...: a file
``src/X.rs`` with its directory ``src/X/``) or of the package (``rocketha.cli``,
``rocketha.spark``, ...). An edge is any ``crate::X`` path in a Rust file, or any import of
``rocketha.X`` in a Python file, a lazy one inside a function included: a late import hides a
cycle, it does not remove it. Tests (``#[cfg(test)]`` files named ``tests.rs`` or under
``tests/``) are left out, since a test may reach across modules.

The crate is also checked file by file: a node is one ``.rs`` file under ``rust/core/src``,
and an edge runs from a file to the file that defines an item it names (a ``use`` that its code
uses, a ``crate::``, ``super::`` or ``self::`` path, a child module's item, a macro in textual
scope). Names are resolved the way rustc does, through re-exports to the defining file, so a
parent that declares ``mod child;`` and re-exports the child's items gets no edge from that
alone, and a child that takes a re-exported name from its parent depends on the file that
defines it, not on the parent. A cycle between files is a child using its parent's items while
the parent uses the child's, or siblings using each other's: the shared item belongs in a
module of its own that both use. What this cannot see: method calls (an ``impl`` in another
file is reached without a path), and whatever a macro's expansion names at its call site.

``python tools/module_cycles.py`` prints each cycle, with the names that make each edge, and
exits 1 if there is one; ``--graph`` prints every edge, the files' with the names.
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


# --- Files: a Rust file's items, and the names its code resolves to ---------------------------


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` turned to spaces, newlines kept (positions stay put)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _clean(text: str) -> str:
    """The code alone: comments and the insides of string and char literals become spaces, so
    a path in a doc comment or a brace in a string is not read as code."""
    out: list[str] = []
    i, n = 0, len(text)

    def skip(to: int) -> None:
        nonlocal i
        out.append(re.sub(r"[^\n]", " ", text[i:to]))
        i = to

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            skip(n if end < 0 else end)
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            skip(j)
        elif raw := re.match(r'b?r(#*)"', text[i : i + 260]):
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                out.append(c)
                i += 1
                continue
            close = '"' + raw.group(1)
            end = text.find(close, i + raw.end())
            out.append(text[i : i + raw.end()])
            i += raw.end()
            skip(n if end < 0 else end)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('"')
            i += 1
            skip(j)
            if i < n:
                out.append('"')
                i += 1
        elif c == "'" and (char := re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x..|.)|[^\\'])'", text[i:])):
            out.append("'")
            i += 1
            skip(i + char.end() - 2)
            out.append("'")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _block_end(text: str, open_at: int) -> int:
    """The position just past the brace that closes the one at ``open_at``."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _item_end(text: str, start: int) -> int:
    """The end of the item starting at ``start``: its ``;``, or its ``{ ... }`` block."""
    depth = 0
    for j in range(start, len(text)):
        c = text[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == ";":
            return j + 1
        elif depth == 0 and c == "{":
            return _block_end(text, j)
    return len(text)


_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def _strip_cfg_test(text: str) -> str:
    """Every ``#[cfg(test)]`` item blanked out: a test may reach across files."""
    while match := _CFG_TEST.search(text):
        text = _blank(text, match.start(), _item_end(text, match.end()))
    return text


_VIS = r"(?:pub(?:\s*\([^)]*\))?\s+)?"
_MOD = re.compile(rf"(?<![\w$]){_VIS}mod\s+(\w+)\s*([;{{])")
_USE = re.compile(rf"(?<![\w$])({_VIS})use\s+([^;]+);")
_ITEM = re.compile(r"(?<![\w$])(fn|struct|enum|union|trait|type|const|static|macro_rules!)\s*(\w+)")
#: What a macro (a ``macro_rules!`` body or a call like ``custom_header! { pub struct X ... }``)
#: declares under a name written out, not a ``$name``.
_MACRO_ITEM = re.compile(r"(?<![\w$])(?:struct|enum|union|trait|type)\s+([A-Za-z_]\w*)")
_MACRO_CALL = re.compile(r"(?<![\w$:.])(\w+)!\s*([({\[])")
_PATH = re.compile(r"(?<![\w$:.'])(\$crate|[A-Za-z_]\w*)((?:::[A-Za-z_]\w*)*)(!(?!=))?")
_KEYWORDS = {"fn", "unsafe", "async", "extern", "mut", "crate", "self", "super"}


def _depths(text: str) -> list[int]:
    """The brace depth at each position of ``text``."""
    depths, depth = [], 0
    for c in text:
        if c == "}":
            depth -= 1
        depths.append(depth)
        if c == "{":
            depth += 1
    return depths


def _use_tree(tree: str) -> list[tuple[list[str], str]]:
    """``a::{self, b::c as d, e::*}`` as ``(path, bound name)`` pairs; a glob binds ``*``."""
    tree = re.sub(r"\s+", " ", tree).strip().removeprefix("::").strip()
    if "{" not in tree:
        if " as " in tree:
            target, alias = tree.split(" as ")
            return [(target.strip().split("::"), alias.strip())]
        parts = [p.strip() for p in tree.split("::")]
        return [(parts[:-1], "*")] if parts[-1] == "*" else [(parts, parts[-1])]
    prefix, _, body = tree.partition("{")
    prefix_parts = [p for p in prefix.strip().rstrip(":").split("::") if p]
    body = body.rstrip().removesuffix("}")
    branches, depth, current = [], 0, ""
    for c in body:
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            branches.append(current)
            current = ""
        else:
            current += c
    branches.append(current)
    found = []
    for branch in filter(str.strip, branches):
        for path, name in _use_tree(branch):
            if path == ["self"]:
                found.append((prefix_parts, name if name != "self" else prefix_parts[-1]))
            else:
                found.append((prefix_parts + path, name))
    return found


class _Module:
    """One module: a file, or a ``mod x { ... }`` inside one."""

    def __init__(self, name: str, file: str, parent: _Module | None) -> None:
        self.name = name
        self.file = file
        self.parent = parent
        self.children: dict[str, _Module] = {}
        self.items: set[str] = set()
        self.macros: set[str] = set()
        #: Name -> the path a ``use`` binds it to; a glob under ``*`` (a list of paths).
        self.imports: dict[str, list[str]] = {}
        self.globs: list[list[str]] = []
        #: The code the module's own names are read from: its uses and inner modules blanked.
        self.code = ""

    def __repr__(self) -> str:
        return f"<mod {self.name} in {self.file}>"


#: What a path names: an item (its file and name), a module, or nothing in this crate.
_Target = tuple[str, str] | _Module | None


class _Crate:
    def __init__(self, root: Path, sources: Iterable[Path]) -> None:
        self.root = root
        self.files: dict[str, str] = {}
        for path in sources:
            rel = path.relative_to(root).as_posix()
            self.files[rel] = _strip_cfg_test(_clean(path.read_text()))
        self.modules: list[_Module] = []
        self.crate = self._load("lib.rs", "crate", None)

    def _child_file(self, parent: _Module, name: str) -> str | None:
        directory = parent.file.removesuffix(".rs")
        if parent.file == "lib.rs" or parent.file.endswith("/mod.rs"):
            directory = parent.file.rpartition("/")[0]
        base = f"{directory}/{name}" if directory else name
        for candidate in (f"{base}.rs", f"{base}/mod.rs"):
            if candidate in self.files:
                return candidate
        return None

    def _load(self, file: str, name: str, parent: _Module | None) -> _Module:
        return self._scan(_Module(name, file, parent), self.files[file])

    def _scan(self, module: _Module, text: str) -> _Module:
        self.modules.append(module)
        depths = _depths(text)
        inline: list[tuple[int, int]] = []
        for match in list(_MOD.finditer(text)):
            if depths[match.start()] != 0:
                continue
            name = match.group(1)
            if match.group(2) == "{":
                # A `mod x { ... }` in this file: its own names, in the same file.
                open_at = match.end() - 1
                end = _block_end(text, open_at)
                inner = " " * (open_at + 1) + text[open_at + 1 : end - 1]
                inline.append((open_at + 1, end - 1))
                child = self._scan(_Module(name, module.file, module), inner)
            elif name in module.children:
                continue  # declared twice under opposite `cfg`s: one file
            elif file := self._child_file(module, name):
                child = self._load(file, name, module)
            else:
                continue  # a test module, left out
            module.children[name] = child
        for start, end in inline:
            text = _blank(text, start, end)
        for match in _USE.finditer(text):
            for path, bound in _use_tree(match.group(2)):
                if bound == "*":
                    module.globs.append(path)
                elif bound != "_":
                    module.imports[bound] = path
            text = _blank(text, match.start(), match.end())
        for match in _ITEM.finditer(text):
            kind, name = match.groups()
            if depths[match.start()] != 0 or name in _KEYWORDS:
                continue
            (module.macros if kind == "macro_rules!" else module.items).add(name)
            if kind == "macro_rules!":
                body = text[match.end() : _item_end(text, match.end())]
                module.items |= set(_MACRO_ITEM.findall(body))
        for match in _MACRO_CALL.finditer(text):
            if depths[match.start()] == 0:
                body = text[match.end() - 1 : _item_end(text, match.end() - 1)]
                module.items |= set(_MACRO_ITEM.findall(body))
        module.code = text
        return module

    def resolve(
        self, module: _Module, path: list[str], seen: frozenset[tuple[int, str]] = frozenset()
    ) -> _Target:
        """The file and name of the item ``path`` names from ``module``, or the module it
        names; None for a name from outside the crate (std, a dependency)."""
        head, rest = path[0], path[1:]
        if head in ("crate", "$crate"):
            return self._walk(self.crate, rest, seen)
        if head == "self":
            return self._walk(module, rest, seen)
        if head == "super":
            while path and path[0] == "super":
                if module.parent is None:
                    return None
                module, path = module.parent, path[1:]
            return self._walk(module, path, seen)
        if self._defines(module, head):
            return self._walk(module, path, seen)
        return None

    def _defines(self, module: _Module, name: str) -> bool:
        return name in module.children or name in module.items or name in module.imports

    def _walk(self, module: _Module, path: list[str], seen: frozenset[tuple[int, str]]) -> _Target:
        if not path:
            return module
        name, rest = path[0], path[1:]
        if name in module.children:
            return self._walk(module.children[name], rest, seen)
        if name in module.items or name in module.macros:
            return module.file, name
        key = (id(module), name)
        if key in seen:
            return None
        if name in module.imports:
            target = self.resolve(module, module.imports[name], seen | {key})
            if isinstance(target, _Module):
                return self._walk(target, rest, seen | {key})
            return target
        for glob in module.globs:
            target = self.resolve(module, glob, seen | {key})
            if isinstance(target, _Module) and (
                self._defines(target, name) or name in target.macros
            ):
                return self._walk(target, path, seen | {key})
        return None

    def _textual_macro(self, module: _Module, name: str) -> _Target:
        """A ``macro_rules!`` of an enclosing module, in scope here without a ``use``."""
        outer = module.parent
        while outer is not None:
            if name in outer.macros:
                return outer.file, name
            outer = outer.parent
        return None

    def references(self, module: _Module) -> Iterable[tuple[str, str]]:
        """(file, name) of each item of another file that ``module``'s code names."""
        for match in _PATH.finditer(module.code):
            head, tail, bang = match.groups()
            path = [head, *filter(None, tail.split("::"))]
            target: _Target = None
            if head in ("crate", "$crate", "self", "super") or self._defines(module, head):
                target = self.resolve(module, path)
            elif bang and not tail:
                target = self._textual_macro(module, head)
            else:
                for glob in module.globs:
                    target = target or self.resolve(module, [*glob, *path])
            if isinstance(target, tuple):
                yield target


def rust_file_graph() -> tuple[Graph, dict[tuple[str, str], set[str]]]:
    """The files of the crate and what each names from the others, with the names."""
    crate = _Crate(CRATE, _rust_sources())
    graph: Graph = {file: set() for file in crate.files}
    names: dict[tuple[str, str], set[str]] = {}
    for module in crate.modules:
        for target, name in crate.references(module):
            if target != module.file:
                graph[module.file].add(target)
                names.setdefault((module.file, target), set()).add(name)
    return graph, names


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
    files, names = rust_file_graph()

    def edge(a: str, b: str) -> str:
        return f"{a} -> {b} ({', '.join(sorted(names[a, b]))})"

    if "--graph" in argv:
        for file in sorted(files):
            print(f"rust/core/src: {file} -> {', '.join(sorted(files[file])) or '-'}")
            for target in sorted(files[file]):
                print(f"  {edge(file, target)}")
    for component in cycles(files):
        failed = True
        edges = [edge(a, b) for a in component for b in sorted(files[a]) if b in component]
        print(f"rust/core/src: file cycle among {', '.join(component)}: {'; '.join(edges)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
