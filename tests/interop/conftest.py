"""Fixtures of the interop tests: the pinned Apache RocketMQ versions and one shared name
server. The harness lives in ``benches/peers/rocketmq.py`` (benches use it too)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benches.peers.rocketmq import (  # noqa: E402
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
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NameServer]:
    """One name server (the newest pinned version) for every test: brokers of both versions
    register with it under names of their own."""
    try:
        rmq = RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))
    with rmq.namesrv(tmp_path_factory.mktemp("namesrv")) as ns:
        yield ns
