"""The figures issue 25 measures the house by, printed for ``rust/core`` (tests left out) and
``python/rocketha``: files over 800 lines, functions over 80 lines, and ``pub`` against
``pub(crate)`` items in the core.

``python tools/house_metrics.py [ROOT]`` (ROOT defaults to this checkout).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

LONG_FILE = 800
LONG_FUNCTION = 80

_FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|async\s+|unsafe\s+)*fn\s+(\w+)")
_PUB = re.compile(r"^\s*pub\s+(?:fn|struct|enum|trait|type|const|static|mod|use|unsafe|async)\b")
_PUB_CRATE = re.compile(r"^\s*pub\(crate\)\s")


def _is_test(path: Path, crate: Path) -> bool:
    parts = path.relative_to(crate).parts
    return path.name == "tests.rs" or "tests" in parts[:-1]


def _rust_functions(text: str) -> list[tuple[str, int]]:
    """(name, lines) of every fn with a body, by brace counting from its signature."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = _FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, start, j, opened = 0, i, i, False
        while j < len(lines):
            code = lines[j].split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth <= 0:
                break
            if not opened and code.rstrip().endswith(";"):
                break  # a declaration without a body
            j += 1
        if opened:
            out.append((m.group(2), j - start + 1))
        i = j + 1 if opened else i + 1
    return out


def rust(root: Path) -> dict[str, object]:
    crate = root / "rust" / "core" / "src"
    files = [p for p in sorted(crate.rglob("*.rs")) if not _is_test(p, crate)]
    long_files, long_fns, pub, pub_crate = [], [], 0, 0
    for path in files:
        text = path.read_text().split("#[cfg(test)]\nmod tests", 1)[0]
        n = text.count("\n")
        if n > LONG_FILE:
            long_files.append((str(path.relative_to(root)), n))
        for name, length in _rust_functions(text):
            if length > LONG_FUNCTION:
                long_fns.append((f"{path.relative_to(crate)}::{name}", length))
        for line in text.split("\n"):
            pub += bool(_PUB.match(line))
            pub_crate += bool(_PUB_CRATE.match(line))
    return {
        "long_files": long_files,
        "long_functions": long_fns,
        "pub": pub,
        "pub_crate": pub_crate,
    }


def python(root: Path) -> dict[str, object]:
    package = root / "python" / "rocketha"
    long_files, long_fns = [], []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LONG_FILE:
            long_files.append((str(path.relative_to(root)), text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONG_FUNCTION:
                    long_fns.append((f"{path.relative_to(package)}::{node.name}", length))
    return {"long_files": long_files, "long_functions": long_fns}


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1]
    for name, figures in (("rust/core", rust(root)), ("python/rocketha", python(root))):
        print(f"== {name}")
        for key, value in figures.items():
            if isinstance(value, list):
                print(f"{key}: {len(value)}")
                for item, n in sorted(value, key=lambda x: -x[1]):
                    print(f"    {n:5} {item}")
            else:
                print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
