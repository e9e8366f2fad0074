"""A mixed group (issue 29): a rocketha broker and an Apache RocketMQ 5.4.0 broker of one name
in controller mode, under RocketMQ 5.4.0's controller, each replicating from the other.

The rocketha broker (a ``rocketha broker`` process) starts first, so the controller elects it
master; the RocketMQ broker of the same cluster and name follows it as a slave and joins its
SyncStateSet. Sync sends are acknowledged, and the slave's commit log is byte for byte the
master's. The rocketha master is SIGKILLed: the controller elects the RocketMQ broker, sends
reach SEND_OK on it, and no acknowledged message is missing from its log. The rocketha broker
restarts on its store, comes back as a slave of the RocketMQ master and catches up byte for
byte. Commit logs are read from their files (``rocketmq.log_messages``), without either
system's code. Run: ``pytest -m interop``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import spawn_rocketha_namesrv, wait_for
from rocketha import Message, MQClientError, Producer, SendStatus

from benches.failover import ROCKETHA_CONF, RochaBroker
from benches.peers.controller import (
    QUIET,
    ControllerModeGroup,
    Controllers,
    GroupBroker,
    GroupState,
    start_controllers,
)
from benches.peers.rocketmq import (
    VERSION_5,
    RocketMQ,
    Unavailable,
    log_end,
    log_messages,
    log_segments,
)

pytestmark = pytest.mark.interop

GROUP = "mixed-a"
TOPIC = "CtlMixed"
QUEUES = 4
#: Both systems' commit log segment: a replica's files are the master's, so they must agree.
SEGMENT = 1 << 20
#: Sync sends in each step.
SENDS = 200
ROCKETHA, JAVA = 0, 1
#: Every send is SEND_OK, the first ones too. rocketha's master used to answer
#: SLAVE_NOT_AVAILABLE for about 4.5 s here: it took the empty RocketMQ slave into its
#: SyncStateSet before the slave's first offset report (which an empty AutoSwitchHAClient sends
#: only after ``haSendHeartbeatInterval``), then refused puts for want of that slave's ack.
#: RocketMQ's master expands the set only on a report, and never answers SLAVE_NOT_AVAILABLE
#: in controller mode; rocketha now does both the same way.


class MixedGroup(ControllerModeGroup[GroupBroker]):
    """Broker 0 is rocketha's (started when constructed), broker 1 Apache RocketMQ's (started
    by :meth:`start`), one group in controller mode."""

    def __init__(self, rmq: RocketMQ, root: Path, controllers: Controllers, namesrv: Any) -> None:
        self.rmq = rmq
        super().__init__(
            root,
            controllers,
            namesrv,
            size=1,
            broker_name=GROUP,
            cluster="MixedCluster",
            mappedFileSizeCommitLog=SEGMENT,
        )
        self.brokers.append(None)

    def spawn(self, index: int) -> GroupBroker:
        home = self.root / f"b{index}"
        if index == ROCKETHA:
            return RochaBroker(home, {**ROCKETHA_CONF, **self.conf})
        broker: GroupBroker = self.rmq.broker(home, **{**QUIET, **self.conf})
        return broker


def log_bytes(store: Path, end: int) -> bytes:
    """The commit log's bytes from offset 0 up to ``end``, from its segment files."""
    out = bytearray()
    for path in log_segments(store):
        start = int(path.name)
        if start >= end:
            break
        assert start == len(out), f"{store}: segment {path.name} after {len(out)} bytes"
        out += path.read_bytes()[: end - start]
    assert len(out) == end, f"{store}: {len(out)} bytes, not {end}"
    return bytes(out)


def assert_same_log(master: Path, replica: Path, what: str) -> int:
    """Waits until ``replica``'s commit log reaches ``master``'s end; checks their bytes up
    to there are the same. That end."""
    end = log_end(master)
    wait_for(lambda: log_end(replica) >= end, timeout=120, what=f"{what} catching up to {end}")
    ours, theirs = log_bytes(master, end), log_bytes(replica, end)
    if ours != theirs:
        at = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        pytest.fail(
            f"{what}: commit logs differ from offset {at} of {end}: master "
            f"{ours[at : at + 32].hex()} replica {theirs[at : at + 32].hex()}"
        )
    return end


def send_all(producer: Producer, prefix: str) -> set[bytes]:
    """:data:`SENDS` sync sends, each SEND_OK; their bodies."""
    acked = set()
    for i in range(SENDS):
        body = f"{prefix}-{i}".encode() * 8
        result = producer.send(Message(TOPIC, body))
        assert result.status == SendStatus.SEND_OK, (prefix, i, result)
        acked.add(body)
    return acked


def bodies(store: Path) -> set[bytes]:
    return {body for _, topic, body in log_messages(store) if topic == TOPIC}


@contextmanager
def mixed_group(rmq: RocketMQ, root: Path) -> Iterator[tuple[Controllers, MixedGroup]]:
    with (
        start_controllers(rmq, root / "ctl", size=1) as controllers,
        spawn_rocketha_namesrv(root / "namesrv.log") as ns,
        MixedGroup(rmq, root / "group", controllers, ns) as group,
    ):
        yield controllers, group


def wait_master(group: MixedGroup, index: int) -> GroupState:
    state = group.wait_formed()
    assert group.master_index(state) == index, state
    return state


# Two RocketMQ JVMs (controller, broker), a rocketha broker and its restart on 2 shared cores.
@pytest.mark.timeout(900)
def test_a_mixed_group_replicates_byte_for_byte_both_ways(workdir: Path) -> None:
    try:
        rmq = RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))
    with mixed_group(rmq, workdir) as (_, group):
        # 1. rocketha is elected master; RocketMQ 5.4.0 follows it into the SyncStateSet.
        wait_master(group, ROCKETHA)
        group.start(JAVA)
        formed = wait_master(group, ROCKETHA)
        assert formed.sync_state_set == set(group.addresses()), formed
        rocha_store, java_store = group.broker(ROCKETHA).store, group.broker(JAVA).store
        group.create_topic(TOPIC, QUEUES)
        group.wait_routed(TOPIC)
        with Producer(group.namesrv.address, "mixed-producer") as producer:
            acked = send_all(producer, "on-rocketha")
            assert_same_log(rocha_store, java_store, "the RocketMQ slave")

            # 2. The rocketha master dies; the controller elects the RocketMQ broker.
            old = group.broker(ROCKETHA).address
            group.kill(ROCKETHA)
            elected = group.wait_new_master(old)
            assert group.master_index(elected) == JAVA, elected
            assert elected.master_epoch > formed.master_epoch

            def sent() -> bool:
                try:
                    return producer.send(Message(TOPIC, b"first")).status == SendStatus.SEND_OK
                except MQClientError:
                    return False

            wait_for(sent, timeout=120, what="a SEND_OK from the RocketMQ master")
            acked |= send_all(producer, "on-rocketmq")
            missing = acked - bodies(java_store)
            assert not missing, f"{len(missing)} of {len(acked)} acknowledged sends lost"

            # 3. rocketha restarts on its store: a slave of the RocketMQ master, caught up.
            group.start(ROCKETHA)
            reformed = group.wait_formed()
            assert group.master_index(reformed) == JAVA, reformed
            acked |= send_all(producer, "both-again")
        assert_same_log(java_store, rocha_store, "the restarted rocketha slave")
        group.stop()
    for store in (java_store, rocha_store):
        missing = acked - bodies(store)
        assert not missing, f"{store}: {len(missing)} of {len(acked)} acknowledged sends lost"
