"""rocketha's slave on Apache RocketMQ 5.4.0's AutoSwitch HA (issue 29): a master in
controller mode (elected by RocketMQ's own controller) takes rocketha's client as a slave.

The client says its controller broker id in RocketMQ's 16-byte handshake, takes the master's
epoch entries, and copies the log byte for byte from the epoch-labelled 36-byte frames; its
epoch file ends identical, text and CRC, to the one the master wrote. A master whose log is of
another history is refused and nothing is written. Run: ``pytest -m interop``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from rocketha import Message, MessageStore, _core

from benches.peers.controller import BrokerGroup, start_controllers
from benches.peers.rocketmq import VERSION_5, NameServer, RocketMQ, log_bytes, log_end

pytestmark = pytest.mark.interop

TOPIC = "autoswitch-interop"
#: The harness's commit log segment size: a copy must cut its files where the master did.
SEGMENT = 1 << 20


@pytest.fixture(scope="module")
def master(
    tmp_path_factory: pytest.TempPathFactory, namesrv: NameServer
) -> Iterator[tuple[BrokerGroup, Path]]:
    """One Apache RocketMQ 5.4.0 broker in controller mode, elected master by a one-node
    RocketMQ controller, holding 800 messages sent by the Java producer: more than its first
    1 MiB segment, so the copy crosses its end (BLANK padding) into the next."""
    root = tmp_path_factory.mktemp("autoswitch")
    rmq = RocketMQ.resolve(VERSION_5)
    with (
        start_controllers(rmq, root / "ctl", size=1) as controllers,
        BrokerGroup(rmq, root / "group", controllers, namesrv, size=1) as group,
    ):
        group.wait_formed()
        broker = group.broker(0)
        sent = rmq.produce(
            namesrv.address, TOPIC, 800, [100, 3000], home=root, broker=broker.address
        )
        assert [s.status for s in sent] == ["SEND_OK"] * 800
        yield group, root


def copy(group: BrokerGroup, store_dir: Path, slave_id: int, epoch_file: Path) -> None:
    broker = group.broker(0)
    store = MessageStore(store_dir, mapped_file_size_commit_log=SEGMENT)
    client = _core.HAClient(
        store,
        f"127.0.0.1:{broker.ha_port}",
        slave_id=slave_id,
        epochs=_core.EpochFileCache(epoch_file),
    )
    try:
        end = log_end(broker.store)
        wait_for(lambda: store.max_offset >= end, what="the copy of the master's log")
        assert store.max_offset == end
        assert client.confirm_offset == end
        assert log_bytes(store_dir, 0, end) == log_bytes(broker.store, 0, end)
    finally:
        client.shutdown()
        store.close()


def test_a_rocketha_slave_copies_a_rocketmq_controller_mode_master(
    master: tuple[BrokerGroup, Path], tmp_path: Path
) -> None:
    group, _ = master
    epoch_file = tmp_path / "store" / "epochFileCheckpoint"
    copy(group, tmp_path / "store", 7, epoch_file)
    ours = epoch_file.read_text()
    assert ours == (group.broker(0).store / "epochFileCheckpoint").read_text()
    assert ours.splitlines()[2:] == ["1-0"], ours
    assert log_end(tmp_path / "store") > SEGMENT


def test_a_log_of_another_history_is_refused_and_kept(
    master: tuple[BrokerGroup, Path], tmp_path: Path
) -> None:
    group, _ = master
    store_dir = tmp_path / "store"
    (store_dir).mkdir()
    # Epoch 9 from offset 0: a history the master never had.
    (store_dir / "epochFileCheckpoint").write_text("1\n0\n9-0\n")
    store = MessageStore(store_dir, mapped_file_size_commit_log=SEGMENT)
    store.put(Message("other", b"x" * 100))
    before = store.max_offset
    client = _core.HAClient(
        store,
        f"127.0.0.1:{group.broker(0).ha_port}",
        slave_id=8,
        epochs=_core.EpochFileCache(store_dir / "epochFileCheckpoint"),
    )
    try:
        refused = wait_for(
            lambda: next((e for e in client.next_events(1.0) if e[3]), None),
            what="the refusal",
        )
        assert "is in master" in refused[2] and "[(9, 0)]" in refused[2], refused
        assert store.max_offset == before
    finally:
        client.shutdown()
        store.close()
