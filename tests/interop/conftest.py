"""Fixtures of the interop tests: the pinned Apache RocketMQ versions and one shared name
server. The harness lives in ``benches/peers/rocketmq.py`` (benches use it too)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import RochaNamesrv, spawn_rocketha_namesrv
from rocketha import _children

from benches.peers.rocketmq import (
    VERSION_5,
    NameServer,
    RocketMQ,
    Unavailable,
    missing_tools,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    why = missing_tools()
    for item in items:
        if "interop" in item.keywords and why:
            item.add_marker(pytest.mark.skip(reason=f"Apache RocketMQ interop {why}"))


@pytest.fixture(scope="session")
def interop_root() -> Iterator[Path]:
    """Stores, logs and homes of every RocketMQ process of the session, removed at the end
    whatever happened (set ROCKETHA_KEEP_INTEROP=1 to keep them for a post-mortem). Under the
    runs' root, so a session killed before its teardown has them removed by the next run."""
    if os.environ.get("ROCKETHA_KEEP_INTEROP"):
        root = Path(tempfile.mkdtemp(prefix="rocketha-interop-"))
    else:
        root = _children.run_dir("interop")
    yield root
    if os.environ.get("ROCKETHA_KEEP_INTEROP"):
        print(f"\ninterop files kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def workdir(interop_root: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory of this test's own, removed when it ends (unless ROCKETHA_KEEP_INTEROP)."""
    path = Path(tempfile.mkdtemp(prefix=f"{request.node.name[:60]}-", dir=interop_root))
    yield path
    if not os.environ.get("ROCKETHA_KEEP_INTEROP"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def namesrv(interop_root: Path) -> Iterator[NameServer]:
    """One name server (the newest pinned version) for every test: brokers of both versions
    register with it under names of their own."""
    try:
        rmq = RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))
    ns = rmq.namesrv(interop_root / "namesrv")
    try:
        yield ns
    finally:
        ns.kill()  # it keeps no state worth a graceful (5 s or more) shutdown


@pytest.fixture(scope="module")
def rocketha_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RochaNamesrv]:
    """``rocketha namesrv`` for the module's tests."""
    with spawn_rocketha_namesrv(tmp_path_factory.mktemp("namesrv") / "namesrv.log") as ns:
        yield ns
