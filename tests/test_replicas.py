"""The replicas manager's SyncStateSet decisions, on the events the core sends (no controller:
the master's HA side is a stand-in that reports how long ago each slave caught up)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rocketha import BrokerConfig, BrokerRole
from rocketha.replicas import _IDLE_WAIT_S, ReplicasManager


@dataclass
class Master:
    caught_up_ago: dict[int, float]
    acks: dict[int, int] = field(default_factory=dict)
    applied: list[list[int]] = field(default_factory=list)

    def caught_up(self) -> list[tuple[int, float]]:
        return sorted(self.caught_up_ago.items())

    def connections(self) -> list[dict[str, Any]]:
        return [
            {"slave_id": s, "slave_ack_offset": ack, "last_ack_ms": 1}
            for s, ack in self.acks.items()
        ]

    def set_sync_state_set(self, slaves: list[int], all_ack: bool) -> None:
        self.applied.append(slaves)


@dataclass
class HA:
    master: Master


class Native:
    """The controller's side: takes every proposed set as it is."""

    def __init__(self) -> None:
        self.proposed: list[list[int]] = []

    def alter_sync_state_set(self, members: list[int]) -> tuple[list[int], int]:
        self.proposed.append(members)
        return members, len(self.proposed)

    def watch(self, master: Master) -> None:
        pass


class Broker:
    def __init__(self, root: Path, master: Master) -> None:
        self.config = BrokerConfig(
            store_path_root_dir=str(root), ha_max_time_slave_not_catchup=15_000
        )
        self.role = BrokerRole.SYNC_MASTER
        self.ha = HA(master)


@pytest.fixture
def manager(tmp_path: Path) -> tuple[ReplicasManager, Master, Native]:
    master = Master(caught_up_ago={})
    m = ReplicasManager(Broker(tmp_path, master))  # type: ignore[arg-type]
    native = Native()
    m._native = native  # type: ignore[assignment]
    m.broker_id = 1
    return m, master, native


def test_the_next_look_is_when_the_first_member_falls_behind(
    manager: tuple[ReplicasManager, Master, Native],
) -> None:
    m, master, _ = manager
    # Alone, or with members never seen caught up: nothing is due, events wake the manager.
    m.sync_state_set = {1}
    assert m._next_look_in() == _IDLE_WAIT_S
    m.sync_state_set = {1, 2, 3}
    master.caught_up_ago = {2: 5.0, 3: 12.0, 4: 0.0}
    # Member 3 runs out of haMaxTimeSlaveNotCatchup (15 s) first, in 3 s; 4 is no member.
    assert m._next_look_in() == pytest.approx(3.0, abs=0.01)
    # Past it already: look now.
    master.caught_up_ago[3] = 16.0
    assert m._next_look_in() == pytest.approx(0.0, abs=0.01)


def test_a_look_keeps_members_in_sync_and_takes_in_slaves_that_caught_up(
    manager: tuple[ReplicasManager, Master, Native],
) -> None:
    m, master, native = manager
    m.sync_state_set = {1, 2, 3}
    # 2 caught up a moment ago, 3 fell behind 20 s ago, 4 just caught up, 5 never did.
    master.caught_up_ago = {2: 1.0, 3: 20.0, 4: 0.1}
    master.acks = {2: 100, 3: 50, 4: 100, 5: 100}
    m._check_sync_state_set()
    assert native.proposed == [[1, 2, 4]]
    assert m.sync_state_set == {1, 2, 4}
    assert master.applied[-1] == [2, 4]
    # Nothing changed since: no proposal.
    m._check_sync_state_set()
    assert native.proposed == [[1, 2, 4]]
