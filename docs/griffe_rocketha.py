"""Griffe extension for ``make docs``: the docstrings are written for ``help()`` (Sphinx roles,
doctests); this turns them into Markdown the reference renders. A role becomes a link to the
object it names, resolved the way a reader would (the object's class, its module, the
package); a name that resolves nowhere stays a link to nothing, which the strict build
reports, so a renamed class cannot leave a dangling reference behind."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|exc|attr|data|obj):`~?([\w.]+)`")
#: Modules outside rocketha (``logging``) have no page here: they stay code.
MODULE = re.compile(r":mod:`([\w.]+)`")
DOCTEST = re.compile(r"^>>> ")


def _lookup(scope: griffe.Object | griffe.Alias, dotted: str) -> str | None:
    try:
        found = scope[dotted]
    except (KeyError, ValueError, griffe.AliasResolutionError):
        return None
    if scope.is_class and dotted.split(".")[0] not in scope.members:
        # Inherited (from the native base class): rendered on this class, so linked there.
        return f"{scope.path}.{dotted}"
    return str(found.final_target.path if found.is_alias else found.path)


def _resolve(obj: griffe.Object, dotted: str) -> str | None:
    scopes: list[Any] = [obj, obj.parent, obj.module, obj.package]
    for scope in scopes:
        if scope is not None and (path := _lookup(scope, dotted)) is not None:
            return path
    return None


def _fence_doctests(text: str) -> str:
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not DOCTEST.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        out.append("```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append("```")
    return "\n".join(out)


class RocketHADocs(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        pending: list[griffe.Object] = [pkg]
        while pending:
            obj = pending.pop()
            pending.extend(m for m in obj.members.values() if not m.is_alias)
            if obj.docstring is None:
                continue

            def link(match: re.Match[str], obj: griffe.Object = obj) -> str:
                name = match.group(1)
                return f"[`{name}`][{_resolve(obj, name) or name}]"

            text = MODULE.sub(r"`\1`", obj.docstring.value)
            obj.docstring.value = _fence_doctests(ROLE.sub(link, text))
