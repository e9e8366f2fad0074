"""Apache RocketMQ 5.4.0 in controller mode, as a baseline for rocketha's: automatic failover.

A standalone 3-node DLedger controller, the session's name server and three RocketMQ brokers
of one group in controller mode (``allAckInSyncStateSet``). The Java producer sends
synchronously throughout; the master is SIGKILLed, the controller elects a new master from the
SyncStateSet and the producer's sends succeed on it; the killed broker comes back as a slave
and rejoins the SyncStateSet; twice over, the second time after the controller lost its
leader (two nodes of three left). Then the Java consumer reads the topic: every message the
producer was told SEND_OK is there, at the queue offset it was told.

The harness is ``benches/peers/controller.py``. Run: ``pytest -m interop``.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import pytest

from benches.peers.controller import (
    Ack,
    BrokerGroup,
    Controllers,
    GroupState,
    Streamer,
    max_offset,
    start_controllers,
    stream,
)
from benches.peers.rocketmq import VERSION_5, NameServer, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

TOPIC = "CtlFailover"
QUEUES = 4
#: SEND_OK the producer must get between the steps: before a kill, on the new master, and
#: with the restarted broker back in the SyncStateSet.
STEADY = 20


def resolve(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


def fail_over(group: BrokerGroup, producer: Streamer, formed: GroupState) -> GroupState:
    """SIGKILLs the master of a formed group; checks the controller elects another broker of
    its SyncStateSet and the producer's sends succeed there; restarts the killed broker and
    checks it rejoins as a slave. The group formed again."""
    master = group.master_index(formed)
    assert master is not None, formed
    old = group.broker(master).address
    assert formed.sync_state_set == set(group.addresses()), formed

    killed_at = time.time()
    group.kill(master)
    elected = group.wait_new_master(old)
    new_master = elected.master_address
    assert new_master in formed.sync_state_set - {old}, elected
    assert new_master is not None
    assert elected.master_epoch > formed.master_epoch
    on_new = producer.wait_acked(STEADY, after=killed_at, by=new_master)
    # From its first SEND_OK on, the new master stores every acknowledged send.
    later = [a for a in producer.acks if a.ok and a.at > on_new[0].at]
    assert {a.stored_by for a in later} == {new_master}

    group.start(master)
    back = group.broker(master).address
    reformed = group.wait_formed()
    assert reformed.master_address == new_master, reformed
    assert back in reformed.sync_state_set
    routes = group.wait_routed(TOPIC)
    assert routes[0] == new_master
    assert back in {addr for broker_id, addr in routes.items() if broker_id != 0}, routes
    producer.wait_acked(STEADY, after=time.time())
    return reformed


def lose_controller_leader(
    controllers: Controllers, group: BrokerGroup, formed: GroupState
) -> GroupState:
    """SIGKILLs the controller's leader: the other two elect a leader that has the group's
    state as it was, every broker alive (heartbeating to it)."""
    leader = controllers.leader()
    controllers.kill(controllers.addresses.index(leader))
    assert controllers.leader() != leader
    kept = group.wait_formed()
    assert kept.master_address == formed.master_address, kept
    assert kept.sync_state_set == formed.sync_state_set, kept
    assert kept.master_epoch == formed.master_epoch, kept
    return kept


# Eight JVMs start (controllers, brokers, producer, consumer) and two brokers restart on 2
# shared cores: about two minutes, near the suite's 300 s hang guard on a busy machine. Still
# only a hang guard.
@pytest.mark.timeout(900)
def test_failover_keeps_every_acknowledged_message(workdir: Path, namesrv: NameServer) -> None:
    rmq = resolve(VERSION_5)
    with (
        start_controllers(rmq, workdir / "controllers") as controllers,
        BrokerGroup(rmq, workdir / "group", controllers, namesrv, broker_name="ctl-a") as group,
    ):
        formed = group.wait_formed()
        assert len(formed.in_sync) == 3, formed
        assert formed.not_in_sync == ()
        group.create_topic(TOPIC, QUEUES)
        group.wait_routed(TOPIC)

        with stream(rmq, namesrv.address, TOPIC, home=workdir / "producer") as producer:
            producer.wait_acked(STEADY)
            formed = fail_over(group, producer, formed)
            formed = lose_controller_leader(controllers, group, formed)
            formed = fail_over(group, producer, formed)
            producer.stop()

        acked = [a for a in producer.acks if a.ok]
        master = formed.master_address
        assert master is not None
        stored = sum(max_offset(master, TOPIC, q) for q in range(QUEUES))
        assert stored >= len(acked)
        got = rmq.consume(
            namesrv.address, TOPIC, stored, home=workdir / "consumer", group="ctl-consumer"
        )

    assert len(got) == stored
    at = {(m.queue_id, m.queue_offset): m for m in got}

    def lost(a: Ack) -> bool:
        m = at.get((a.queue_id, a.queue_offset))
        body = producer.body(a.seq)
        return m is None or (m.body_len, m.body_crc) != (len(body), zlib.crc32(body))

    missing = [a for a in acked if lost(a)]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged sends lost: {missing[:5]}"
