"""rocketha's ``ReplicasManager`` against Apache RocketMQ 5.4.0's own controller (issue 29).

Two rocketha stores of one broker group register with a real controller: each claims its
broker id through RocketMQ's identity files, the first is elected master of epoch 1 and the
second told to follow it, as the controller's own state shows. Then the two replicate over
AutoSwitch HA with their epochs: the slave's log and epoch file end identical to the master's.
A restarted manager keeps its id. Run: ``pytest -m interop``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from rocketha import Message, MessageStore, _core

from benches.peers.controller import Controllers, start_controllers
from benches.peers.rocketmq import VERSION_5, RocketMQ

pytestmark = pytest.mark.interop

CLUSTER, GROUP = "RochaCluster", "rocha-ctl"
FAST = {"broker_heartbeat_interval": 200, "sync_broker_metadata_period": 300}


@pytest.fixture(scope="module")
def controllers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controllers]:
    rmq = RocketMQ.resolve(VERSION_5)
    with start_controllers(rmq, tmp_path_factory.mktemp("ctl"), size=1) as ctl:
        yield ctl


class Member:
    """A store, its epochs and its manager, as a broker at ``addr`` would have them."""

    def __init__(self, root: Path, addr: str, controllers: Controllers) -> None:
        self.root, self.addr = root, addr
        self.store = MessageStore(root, mapped_file_size_commit_log=1 << 20)
        self.epochs = _core.EpochFileCache(root / "epochFileCheckpoint")
        config = _core.BrokerConfig(
            controller_addr=controllers.controller_addr,
            broker_cluster_name=CLUSTER,
            broker_name=GROUP,
            **FAST,
        )
        self.manager = _core.ReplicasManager(
            self.store, self.epochs, config, addr, root / "brokerIdentity"
        )
        self.manager.start()

    def decision(self) -> tuple[str, int, str | None, int | None, list[int]]:
        got = wait_for(lambda: self.manager.next_decisions(1.0), what=f"{self.addr}'s role")
        return got[-1]

    def close(self) -> None:
        self.manager.shutdown()
        self.store.close()


def test_members_register_are_elected_and_replicate(
    controllers: Controllers, tmp_path: Path
) -> None:
    a = Member(tmp_path / "a", "127.0.0.1:30911", controllers)
    b = None
    try:
        assert a.decision()[:2] == ("MASTER", 1)
        assert a.manager.state()[:4] == (1, 1, "127.0.0.1:30911", 1)
        assert (tmp_path / "a" / "brokerIdentity").read_text() == f"{CLUSTER}#{GROUP}#1"
        b = Member(tmp_path / "b", "127.0.0.1:30921", controllers)
        assert b.decision()[:4] == ("SLAVE", 1, "127.0.0.1:30911", 1)
        assert b.manager.state()[0] == 2
        state = wait_for(lambda: controllers.group_state(GROUP), what="the group's state")
        assert (state.master_id, state.master_address, state.master_epoch) == (
            1,
            "127.0.0.1:30911",
            1,
        )
        # The master records its epoch and serves AutoSwitch HA; the slave follows it.
        assert a.epochs.append(1, a.store.max_offset)
        master = _core.HAMaster(a.store, "127.0.0.1:0", epochs=a.epochs)
        client = _core.HAClient(
            b.store, f"127.0.0.1:{master.listen_port}", slave_id=2, epochs=b.epochs
        )
        try:
            for i in range(300):
                a.store.put(Message("ctl-topic", bytes([i % 256]) * (i * 13 % 4000)))
            wait_for(lambda: b.store.max_offset == a.store.max_offset, what="the copy")
            assert b.epochs.entries() == a.epochs.entries() == [(1, 0)]
            assert master.connections()[0]["slave_id"] == 2
        finally:
            client.shutdown()
            master.shutdown()
        # A restarted manager keeps the id its identity file holds.
        b.close()
        b = Member(tmp_path / "b", "127.0.0.1:30921", controllers)
        assert b.decision()[:4] == ("SLAVE", 1, "127.0.0.1:30911", 1)
        assert b.manager.state()[0] == 2
    finally:
        a.close()
        if b is not None:
            b.close()
