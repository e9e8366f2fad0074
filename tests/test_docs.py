"""The documented commands run exactly as documented.

Every ```sh, ```bash and ```python block of ``README.md`` and ``docs/*.md`` runs as a user would
paste it: shell blocks in bash, Python blocks as ``python -`` fed the block, from a fresh
working directory that holds (a link to) the checkout's ``examples/``, and inside a network
namespace the test creates (``unshare -n``, loopback up), so RocketMQ's default ports 9876,
10911 and 10912 are free whatever the host runs, and the host is untouched.

An HTML comment right before a block says how it runs, directives separated by ``;``:

- ``<!-- docs-test: skip (why) -->``: not run; the reason is required and shown as the skip's.
- ``<!-- docs-test: session NAME -->``: the blocks of one file with the same NAME are one
  walkthrough: they run in order in one shell session (shell variables, background servers
  and the working directory carry over); whatever they started in the background is stopped
  at the end. A block without it runs alone.
- ``<!-- docs-test: spark -->``: needs PySpark and Java; the case skips when either is missing.
- ``<!-- docs-test: expect "TEXT" -->``: the case's output (stdout and stderr) must contain TEXT.

A case fails when a command fails (``set -e -o pipefail``), when an expected text is missing,
or when it does not finish within :data:`TIMEOUT`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import default_ports_namespace, namespace_refusal
from rocketha import _children

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"sh", "bash", "python"}
#: Generous: a session starts servers and, for Spark, a JVM, on a shared 2-core machine.
TIMEOUT = 600

#: The README's first two blocks, the repository's contract, open it unchanged (no comment
#: before them), so their reasons are kept here.
SETUP = {
    "pip install . && rocketha demo\n": "the set-up command: builds the Rust extension for "
    "minutes; the suite runs in that install, and tests/test_broker.py runs the demo",
    "make test\n": "the test command: it runs this test",
}

#: Cases that fail because of a known bug, by case id; strict, so a fix makes them fail until
#: the entry is removed.
XFAIL: dict[str, str] = {}

_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
_SKIP = re.compile(r"^skip\s*\((.+)\)$")
_SESSION = re.compile(r"^session\s+([\w-]+)$")
_EXPECT = re.compile(r'^expect\s+"(.+)"$')
_PARTS = re.compile(r'(?:[^;"(]|"[^"]*"|\([^)]*\))+')


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    text: str
    skip: str | None = None
    session: str | None = None
    spark: bool = False
    expect: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _directives(block: Block, marker: str) -> None:
    # Split at the semicolons outside quotes and parentheses (a reason may hold one).
    for part in (p.strip() for p in _PARTS.findall(marker)):
        if m := _SKIP.match(part):
            block.skip = m.group(1).strip()
        elif m := _SESSION.match(part):
            block.session = m.group(1)
        elif part == "spark":
            block.spark = True
        elif m := _EXPECT.match(part):
            block.expect.append(m.group(1))
        else:
            raise ValueError(
                f"{block.where}: unknown docs-test directive {part!r} (skip (why), "
                'session NAME, spark, expect "TEXT")'
            )


def parse(path: Path) -> list[Block]:
    """Every fenced block of ``path`` with the directives of the comment right before it."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    marker: tuple[int, str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := _MARKER.match(line):
            if marker is not None:
                raise ValueError(f"{path.name}:{marker[0]}: a docs-test comment without a block")
            marker = (i + 1, m.group(1))
        elif m := _FENCE.match(line):
            start, lang, body = i + 1, m.group(1), []
            i += 1
            while i < len(lines) and lines[i] != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"{path.name}:{start}: a code block that is never closed")
            block = Block(path, start, lang, "\n".join(body) + "\n")
            if marker is not None:
                _directives(block, marker[1])
                marker = None
            blocks.append(block)
        elif line.strip() and marker is not None:
            raise ValueError(f"{path.name}:{marker[0]}: a docs-test comment not before a block")
        i += 1
    if marker is not None:
        raise ValueError(f"{path.name}:{marker[0]}: a docs-test comment without a block")
    return blocks


@dataclass
class Case:
    id: str
    blocks: list[Block]

    @property
    def skip(self) -> str | None:
        return self.blocks[0].skip


def cases() -> list[Case]:
    """One case per block that runs alone or is skipped, one per session of a file."""
    out: list[Case] = []
    sessions: dict[str, Case] = {}
    for path in DOCS:
        blocks = parse(path)
        if path.name == "README.md":
            for block in blocks[: len(SETUP)]:
                block.skip = SETUP.get(block.text)
        for block in blocks:
            if block.lang not in RUN_LANGS:
                continue
            if block.skip is not None or block.session is None:
                out.append(Case(block.where, [block]))
                continue
            key = f"{path.relative_to(ROOT)}::{block.session}"
            if key not in sessions:
                sessions[key] = Case(key, [])
                out.append(sessions[key])
            sessions[key].blocks.append(block)
    return out


def script(case: Case) -> str:
    """The blocks as one bash session: a failed command fails it, and whatever it started in
    the background is stopped when it ends, however it ends."""
    parts = [
        "set -e -o pipefail",
        # SIGTERM first (the servers flush and exit 0), then wait for each.
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT",
    ]
    for block in case.blocks:
        parts.append(f"echo {shlex.quote(f'### docs-test: {block.where}')} >&2")
        if block.lang == "python":
            parts.append(f"python - <<'DOCS_TEST_PYTHON'\n{block.text}DOCS_TEST_PYTHON")
        else:
            parts.append(block.text)
    return "\n".join(parts) + "\n"


def _env(home: Path) -> dict[str, str]:
    """The user's environment, with this interpreter's ``python`` and ``rocketha`` first on
    PATH and a HOME of the case's own (RocketMQ's default store is ``~/store``); settings that
    would point the commands elsewhere are dropped."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"NAMESRV_ADDR", "ROCKETMQ_HOME", "ROCKETHA_SECRET_KEY", "PYTHONSTARTUP"}
    }
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["HOME"] = str(home)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _logs(cwd: Path) -> str:
    """The servers' logs the session wrote, for a failure's message."""
    out = []
    for log in sorted(cwd.glob("*.log")):
        text = log.read_text(errors="replace")
        out.append(f"--- {log.name} (last 3000 characters)\n{text[-3000:]}")
    return "\n".join(out)


CASES = cases()


def _param(case: Case) -> object:
    marks = []
    if case.id in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[case.id]))
    if any(b.spark for b in case.blocks):
        marks.append(pytest.mark.spark)
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.timeout(TIMEOUT + 60)
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_documented_commands(case: Case, tmp_path: Path) -> None:
    if case.skip is not None:
        pytest.skip(f"not run: {case.skip}")
    if any(b.spark for b in case.blocks):
        if importlib.util.find_spec("pyspark") is None:
            pytest.skip("needs pyspark (the spark extra)")
        if shutil.which("java") is None:
            pytest.skip("needs Java for PySpark")
    refusal = namespace_refusal()
    if refusal is not None:
        pytest.skip(refusal)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "script.sh").write_text(script(case))
    proc = _children.spawn(
        default_ports_namespace("bash", "../script.sh"),
        cwd=cwd,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        # Every server of the session dies with the namespace.
        _children.kill(proc)
        output, _ = proc.communicate()
        pytest.fail(f"{case.id}: not done in {TIMEOUT} s\n{output[-6000:]}\n{_logs(cwd)}")
    missing = [text for text in (t for b in case.blocks for t in b.expect) if text not in output]
    assert proc.returncode == 0 and not missing, (
        f"{case.id}: exit status {proc.returncode}"
        + (f", output lacks {missing}" if missing else "")
        + f"\n{output[-6000:]}\n{_logs(cwd)}"
    )


def test_markers() -> None:
    """Every document parses, and skipped blocks are few and each says why."""
    skipped = [c for c in CASES if c.skip is not None]
    assert all(c.skip for c in skipped)
    assert [c.skip for c in CASES[: len(SETUP)]] == list(SETUP.values()), "the README's opening"
    assert len(skipped) <= 6, [c.id for c in skipped]
    assert any(c.id == "README.md::walkthrough" for c in CASES)
