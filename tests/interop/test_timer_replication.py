"""Timer messages (RocketMQ 5's TimerMessageStore) survive a failover, between rocketha and
Apache RocketMQ 5.4.0 both ways, and in controller mode under RocketMQ's controller.

Each case sends :data:`N` messages due :data:`DUE_MS` after their send (``TIMER_DELIVER_MS``,
the Java producer of ``TimerPeer``) to a master with a slave, waits until the slave holds the
master's commit log byte for byte and has synced the master's timer checkpoint (its
``config/timercheck`` says ``masterTimerQueueOffset`` = N and that it placed all N), stops the
master before any message is due, and makes the slave's store a master:

a. A RocketMQ ASYNC_MASTER with a rocketha slave; the slave is restarted on its store as a
   rocketha ASYNC_MASTER (brokerId 0).
b. A rocketha ASYNC_MASTER with a RocketMQ slave (``timerWheelEnable`` its default, true); the
   RocketMQ broker is restarted on its store as an ASYNC_MASTER (brokerId 0). Its
   SlaveSynchronize reaches our master on the master's port less 2 (its VIP channel, see
   :func:`with_vip_channel`), and logs no timer error.
   RocketMQ's slave places a message twice at a sync that lands mid-burst (see
   :func:`syncs_during`), so its promoted broker may deliver that many twice, no more.
c. Two rocketha brokers in controller mode (``enableControllerMode``, RocketMQ's controller):
   the master is SIGKILLed and the controller elects the slave.

The new master delivers every message: the Java consumer gets all N, and the new master's
commit log (read with the harness's own decoder, not rocketha's) holds each exactly once in its
real topic (b: see above), stored not before its ``TIMER_DELIVER_MS``. The old master delivered
none (its log, replicated, holds none in the real topic), so every delivery is the new
master's. Nothing waits on a clock: each step waits on its condition with a bound that only
turns a hang into a failure. Run: ``pytest -m interop tests/interop/test_timer_replication.py``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import BrokerProcess, RemotingSocket, create_topic, wait_for, write_conf

from benches.failover import ROCKETHA_CONF, RochaBrokerGroup
from benches.peers.controller import start_controllers
from benches.peers.rocketmq import (
    VERSION_5,
    JavaBroker,
    LogRecord,
    NameServer,
    RocketMQ,
    TimerReceiver,
    TimerSendRun,
    Unavailable,
    free_ports,
    log_bytes,
    log_end,
    log_records,
    log_segments,
)

pytestmark = pytest.mark.interop

N = 2000
#: How far after its send each message is due: the failover (the slave catching up, its timer
#: sync every 3 s, the master stopped, the new master started) fits well before that.
DUE_MS = 20_000
#: Case b restarts a RocketMQ JVM (its graceful stop, then its boot) before the first is due.
DUE_MS_JAVA = 40_000
SEG = 1 << 20
CLUSTER = "TimerHaCluster"
#: ``TimerCheckpoint``'s fields, in its file's order (seven big-endian longs).
CHECKPOINT_FIELDS = (
    "lastReadTimeMs",
    "lastTimerLogFlushPos",
    "lastTimerQueueOffset",
    "masterTimerQueueOffset",
    "stateVersion",
    "timestamp",
    "counter",
)
GET_ALL_TOPIC_CONFIG = 21
#: A hang's bound for the consumer, not a measurement.
RECEIVE_MS = 180_000


def resolve() -> RocketMQ:
    try:
        return RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))


def timercheck_bytes(store: Path) -> bytes:
    path = store / "config" / "timercheck"
    return path.read_bytes()[:56] if path.exists() else b""


def timercheck(store: Path) -> dict[str, int]:
    """``ROOT/config/timercheck`` as its broker last wrote it (both map it), by field; empty
    while the file is absent."""
    raw = timercheck_bytes(store)
    if len(raw) < 56:
        return {}
    return dict(zip(CHECKPOINT_FIELDS, struct.unpack(">7q", raw), strict=True))


def wait_timer_synced(store: Path, what: str) -> dict[str, int]:
    """Until the slave's checkpoint has the master's enqueue offset (its timer sync) and the
    slave placed every message up to it; that checkpoint."""

    def synced() -> dict[str, int] | None:
        c = timercheck(store)
        ok = c.get("masterTimerQueueOffset") == N and c.get("lastTimerQueueOffset") == N
        return c if ok else None

    try:
        return wait_for(synced, 60, f"{what} to sync the timer checkpoint")
    except AssertionError as e:
        raise AssertionError(f"{e}: its timercheck {timercheck(store)}") from None


def knows_topic(address: str, topic: str) -> bool:
    """The broker's GET_ALL_TOPIC_CONFIG names ``topic`` (a slave copies its master's)."""
    sock = RemotingSocket(address)
    try:
        response, body = sock.invoke(GET_ALL_TOPIC_CONFIG, {})
    finally:
        sock.close()
    return response["code"] == 0 and f'"{topic}"'.encode() in body


def assert_replicated(master: Path, replica: Path, what: str) -> int:
    """Waits until ``replica``'s commit log reaches ``master``'s end; checks they are the same
    bytes from the replica's first segment on. That end."""
    end = log_end(master)
    wait_for(lambda: log_end(replica) >= end, 60, f"{what} to reach {end}")
    assert log_end(replica) == end, f"{what} holds more than its master: {log_end(replica)}"
    start = int(log_segments(replica)[0].name)
    theirs, ours = log_bytes(master, start, end), log_bytes(replica, start, end)
    if theirs != ours:
        at = next(i for i, (a, b) in enumerate(zip(theirs, ours, strict=True)) if a != b)
        pytest.fail(
            f"{what}: commit logs differ at offset {start + at} of [{start}, {end}): master "
            f"{theirs[at : at + 16].hex()} replica {ours[at : at + 16].hex()}"
        )
    return end


def sent_ok(run: TimerSendRun) -> dict[str, int]:
    """Each message id's due time; every send answered SEND_OK."""
    assert run.failures == [], run.failures[:5]
    assert [s.seq for s in run.sent] == list(range(N))
    assert {s.status for s in run.sent} == {"SEND_OK"}
    due = {s.msg_id: s.due_ms for s in run.sent}
    assert len(due) == N
    return due


def delivered(store: Path, topic: str) -> list[LogRecord]:
    return [r for r in log_records(store) if r.topic == topic]


def receive(rmq: RocketMQ, namesrv: str, topic: str, home: Path) -> TimerReceiver:
    """The Java push consumer of a fresh group, from the topic's first offset, until it got
    :data:`N` timer messages (or :data:`RECEIVE_MS`)."""
    with rmq.timer_receiver(
        namesrv, topic, f"{topic}-audit", N, home=home, timeout_ms=RECEIVE_MS
    ) as receiver:
        receiver.wait_ready()
        receiver.finish(RECEIVE_MS / 1000 + 60)
    return receiver


def wait_read_past(store: Path, due: dict[str, int], what: str) -> None:
    """Until the new master's timer read time passed the last due slot: it delivers nothing
    more of these messages, so its log holds every copy it ever will."""
    last = max(due.values())
    wait_for(
        lambda: timercheck(store).get("lastReadTimeMs", 0) > last,
        60,
        f"{what}'s timer to read past {last}",
    )


def check_delivered(
    due: dict[str, int],
    receiver: TimerReceiver,
    store: Path,
    topic: str,
    placed_twice: int = 0,
) -> None:
    """Every message reached the consumer; the new master's log holds each once in ``topic``,
    stored not before its due time, still saying it. ``placed_twice``: at most that many
    messages may be there twice, each copy from a placement of its own (distinct
    ``TIMER_ENQUEUE_MS``; see the RocketMQ slave's case)."""
    got = {g.msg_id: g for g in receiver.got}
    missing = due.keys() - got.keys()
    summary = receiver.summary
    assert not missing, f"{len(missing)} of {N} never received: {sorted(missing)[:5]} {summary}"
    early = [g for g in got.values() if g.lateness_ms < 0]
    assert not early, f"{len(early)} received before their time: {early[:5]}"
    records = delivered(store, topic)
    copies: dict[str, list[LogRecord]] = {}
    for r in records:
        copies.setdefault(r.properties.get("UNIQ_KEY", ""), []).append(r)
    assert copies.keys() == due.keys(), (len(copies), sorted(copies.keys() - due.keys())[:5])
    twice = {k: rs for k, rs in copies.items() if len(rs) > 1}
    placements = {k: {r.properties.get("TIMER_ENQUEUE_MS") for r in rs} for k, rs in twice.items()}
    tolerated = len(twice) <= placed_twice and all(
        len(placements[k]) == len(rs) for k, rs in twice.items()
    )
    assert not twice or tolerated, (
        f"{len(twice)} delivered more than once (placed at {list(placements.items())[:5]}): "
        f"{[[(r.offset, r.store_timestamp) for r in rs] for rs in list(twice.values())[:5]]}"
    )
    for r in records:
        key = r.properties["UNIQ_KEY"]
        assert r.properties.get("TIMER_DELIVER_MS") == str(due[key]), r
        assert r.store_timestamp >= due[key], (
            f"{key} stored {due[key] - r.store_timestamp} ms before its time: {r}"
        )
    # The consumer got each copy the log holds, and no redelivery of its own (a rebalance).
    assert summary["unique"] == N and summary["received"] == len(records), summary


def rocketha_broker(conf: Path, **keys: Any) -> BrokerProcess:
    """A ``rocketha broker`` process on ports of its own (a master's HA port too)."""
    ports = {"listenPort": 0, "haListenAddress": "127.0.0.1", "haListenPort": 0}
    return BrokerProcess(write_conf(conf, mappedFileSizeCommitLog=SEG, **{**ports, **keys}))


# -- a. RocketMQ master -> rocketha slave, promoted --------------------------------------------


@pytest.mark.timeout(900)
def test_rocketha_slave_of_rocketmq_delivers_its_timers_as_master(
    workdir: Path, namesrv: NameServer
) -> None:
    rmq = resolve()
    name, topic = "timer-ha-a", "TimerHaA"
    store = workdir / "rocketha"
    ours = {"brokerName": name, "brokerClusterName": CLUSTER, "storePathRootDir": store}
    ours["namesrvAddr"] = namesrv.address
    java = rmq.broker(
        workdir / "java-master",
        namesrv,
        brokerName=name,
        brokerClusterName=CLUSTER,
        # RocketMQ answers SYSTEM_BUSY (TIMEOUT_CLEAN_QUEUE) to a send that waited 200 ms in
        # its queue, which a loaded 2-core machine reaches: this test is not about that.
        waitTimeMillsInSendQueue=5000,
    )
    procs: list[BrokerProcess] = []
    try:
        # Before the slave: its first sync copies the topic, so promoted it routes it.
        create_topic(java.address, topic)
        slave = rocketha_broker(
            workdir / "slave.conf",
            **ours,
            brokerId=1,
            brokerRole="SLAVE",
            haMasterAddress=java.ha_address,
        )
        procs.append(slave)
        slave_addr = str(slave.started["listen_address"])
        wait_for(lambda: knows_topic(slave_addr, topic), 60, "the slave to copy the topic")
        run = rmq.timer_send(
            namesrv.address, topic, N, home=workdir / "send", at_ms=DUE_MS, broker=java.address
        )
        due = sent_ok(run)
        first = min(due.values())
        assert_replicated(java.store, store, "the rocketha slave")
        wait_timer_synced(store, "the rocketha slave")
        assert delivered(store, topic) == [], "the RocketMQ master delivered some already"

        java.kill()
        slave.stop()
        master = rocketha_broker(
            workdir / "promoted.conf", **ours, brokerId=0, brokerRole="ASYNC_MASTER"
        )
        procs.append(master)
        up = time.time() * 1000
        assert up < first, f"the failover ended {up - first:.0f} ms after the first was due"
        receiver = receive(rmq, namesrv.address, topic, workdir / "receive")
        wait_read_past(store, due, "the promoted rocketha master")
    finally:
        java.kill()
        for p in procs:
            p.kill()
    check_delivered(due, receiver, store, topic)


# -- b. rocketha master -> RocketMQ slave, promoted --------------------------------------------


def with_vip_channel(master: Callable[[int], BrokerProcess]) -> BrokerProcess:
    """A rocketha master on port P whose P - 2 is free for its VIP channel. RocketMQ's slave
    sends every ``SlaveSynchronize`` request (topics, offsets, GET_TIMER_CHECK_POINT,
    GET_TIMER_METRICS) to its master's VIP channel, ``MixAll.brokerVIPChannel``: the master's
    address with its port less 2, where RocketMQ's broker (its fast remoting server) and
    rocketha's listen too."""
    return master(free_ports(3) + 2)


def timer_sync_complaints(java: JavaBroker) -> list[str]:
    """The errors RocketMQ logged naming its timer: SlaveSynchronize's ``syncTimerCheckPoint
    Exception`` / ``syncTimerMetrics Exception``, or its timer store's. (Its other syncs are
    not this test's: see the report of GET_ALL_CONSUMER_OFFSET and request code 402.)"""
    return [
        line
        for line in java.logs().splitlines()
        if "timer" in line.lower() and (" ERROR " in line or "Exception" in line)
    ]


def syncs_during(run: TimerSendRun) -> int:
    """How many of RocketMQ's slave's timer syncs (every 3 s) can land while the sends go on,
    each letting it place one message twice. Its ``TimerMessageStore.enqueue`` hands a unit
    to the put service before it checks ``isRunningEnqueue`` (a slave's bound,
    ``currQueueOffset >= masterTimerQueueOffset``) and then returns without moving
    ``currQueueOffset`` past it: the unit at the master's offset is placed, and placed again
    once the next sync raises that offset, whichever system the master is. Promoted, the
    broker delivers both placements: at least once."""
    seconds = (run.summary["last_ms"] - run.summary["first_ms"]) / 1000
    return int(seconds // 3) + 2


@pytest.mark.timeout(900)
def test_rocketmq_slave_of_rocketha_delivers_its_timers_as_master(
    workdir: Path, namesrv: NameServer
) -> None:
    rmq = resolve()
    name, topic = "timer-ha-b", "TimerHaB"
    ours = workdir / "rocketha"
    master = with_vip_channel(
        lambda port: rocketha_broker(
            workdir / "master.conf",
            brokerName=name,
            brokerClusterName=CLUSTER,
            brokerRole="ASYNC_MASTER",
            storePathRootDir=ours,
            namesrvAddr=namesrv.address,
            listenPort=port,
        )
    )
    address = str(master.started["listen_address"])
    java_conf = {"brokerName": name, "brokerClusterName": CLUSTER}
    java: JavaBroker | None = None
    try:
        create_topic(address, topic)
        ha = f"127.0.0.1:{master.started['ha_listen_port']}"
        home = workdir / "java"
        java = rmq.broker(
            home, namesrv, **java_conf, brokerRole="SLAVE", brokerId=1, haMasterAddress=ha
        )
        slave = java
        wait_for(lambda: knows_topic(slave.address, topic), 60, "the slave to copy the topic")
        run = rmq.timer_send(
            namesrv.address, topic, N, home=workdir / "send", at_ms=DUE_MS_JAVA, broker=address
        )
        due = sent_ok(run)
        first = min(due.values())
        assert_replicated(ours, java.store, "the RocketMQ slave")
        wait_timer_synced(java.store, "the RocketMQ slave")
        assert delivered(java.store, topic) == [], "the rocketha master delivered some already"
        ours_check, theirs_check = timercheck_bytes(ours), timercheck_bytes(java.store)
        complaints = timer_sync_complaints(java)

        master.kill()
        java.stop()
        store = java.store
        java = rmq.broker(
            home,
            namesrv,
            **java_conf,
            brokerRole="ASYNC_MASTER",
            brokerId=0,
            storePathRootDir=store,
        )
        up = time.time() * 1000
        assert up < first, f"the failover ended {up - first:.0f} ms after the first was due"
        receiver = receive(rmq, namesrv.address, topic, workdir / "receive")
        wait_read_past(store, due, "the promoted RocketMQ master")
    finally:
        master.kill()
        if java is not None:
            java.kill()
    assert complaints == [], complaints[:20]
    try:
        check_delivered(due, receiver, store, topic, placed_twice=syncs_during(run))
    except AssertionError as e:
        raise AssertionError(
            f"{e}\ntimercheck at the failover: rocketha's {ours_check.hex()}, RocketMQ's "
            f"{theirs_check.hex()}; RocketMQ's now {timercheck(store)}"
        ) from None


# -- c. controller mode: the slave elected -----------------------------------------------------


@pytest.mark.timeout(900)
def test_controller_elected_slave_delivers_the_pending_timers(
    workdir: Path, namesrv: NameServer
) -> None:
    rmq = resolve()
    topic = "TimerHaC"
    with (
        start_controllers(rmq, workdir / "ctl", size=1) as controllers,
        RochaBrokerGroup(
            workdir / "group",
            controllers,
            namesrv,
            size=2,
            broker_name="timer-ha-c",
            cluster=CLUSTER,
            **{**ROCKETHA_CONF, "mappedFileSizeCommitLog": SEG},
        ) as group,
    ):
        formed = group.wait_formed()
        old = group.master_index(formed)
        assert old is not None, formed
        new = 1 - old
        group.create_topic(topic)
        group.wait_routed(topic)
        run = rmq.timer_send(namesrv.address, topic, N, home=workdir / "send", at_ms=DUE_MS)
        due = sent_ok(run)
        first = min(due.values())
        old_store, store = group.broker(old).store, group.broker(new).store
        assert_replicated(old_store, store, "the slave")
        wait_timer_synced(store, "the slave")
        assert delivered(store, topic) == [], "the master delivered some already"

        old_address = group.broker(old).address
        group.kill(old)
        elected = group.wait_new_master(old_address)
        assert group.master_index(elected) == new, elected
        up = time.time() * 1000
        assert up < first, f"the election ended {up - first:.0f} ms after the first was due"
        receiver = receive(rmq, namesrv.address, topic, workdir / "receive")
        wait_read_past(store, due, "the elected master")
    check_delivered(due, receiver, store, topic)
