"""The real Apache RocketMQ Java consumers (``DefaultLitePullConsumer`` and
``DefaultMQPushConsumer``, clients 4.9 and 5.x) against a rocketha SYNC_MASTER and its SLAVE
found through ``rocketha namesrv`` (issue 13):

- every message is received exactly once across consumer restarts, each member starting at the
  offsets the last one committed;
- the slave syncs its master's topics and consumer offsets (``slaveSyncInterval``);
- with the master SIGKILLed, a new member reads the rest from the slave (``slaveReadEnable``),
  at the committed offsets, and nothing twice;
- a member that lags (``accessMessageInMemoryMaxRatio`` 0) is sent to the slave and served
  there (the slave's ``msgGetTotalTodayNow``), every message once;
- a running member reads from the slave while the master is dead, and from the master again
  once it is restarted on its store and port.

And bad input on the raw protocol: RocketMQ's codes with remarks naming the field, nothing
changed. Run: ``pytest -m interop``.
"""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import (
    SEGMENT,
    UPDATE_AND_CREATE_TOPIC,
    BrokerProcess,
    RemotingSocket,
    RochaNamesrv,
    ask_json,
    create_topic,
    offsets,
    runtime_info,
    served,
    start_master,
    wait_for,
    write_conf,
)
from rocketha import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer

from benches.peers.rocketmq import VERSIONS, GroupMember, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

PULL_MESSAGE = 11
UPDATE_CONSUMER_OFFSET = 15
GET_ALL_TOPIC_CONFIG = 21
GET_CONSUMER_LIST_BY_GROUP = 38
COUNT = 30
_PAIRS = itertools.count()


def resolve(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


@dataclass
class Pair:
    master: BrokerProcess
    slave: BrokerProcess
    name: str
    tmp: Path
    namesrv: str
    keys: dict[str, object]

    @property
    def master_address(self) -> str:
        return str(self.master.started["listen_address"])

    @property
    def slave_address(self) -> str:
        return str(self.slave.started["listen_address"])

    def restart_master(self) -> None:
        """The master again, on its store and its old port (the clients' routes name it
        there)."""
        port = self.master_address.rsplit(":", 1)[1]
        self.master = start_master(
            self.tmp, self.name, self.namesrv, slaveReadEnable=True, listenPort=port, **self.keys
        )
        wait_for(lambda: slave_connected(self.master_address), what="the slave to reconnect")


@contextmanager
def running_pair(tmp_path: Path, namesrv: str, **keys: object) -> Iterator[Pair]:
    """A SYNC_MASTER and a SLAVE with ``slaveReadEnable``, of a name of its own; the slave
    syncs every half second. ``keys`` go to both."""
    name = f"consume-{next(_PAIRS)}"
    master = start_master(tmp_path, name, namesrv, slaveReadEnable=True, **keys)
    slave = None
    pair = None
    try:
        slave = BrokerProcess(
            write_conf(
                tmp_path / "slave.conf",
                brokerName=name,
                brokerId=1,
                brokerRole="SLAVE",
                storePathRootDir=tmp_path / "slave",
                mappedFileSizeCommitLog=SEGMENT,
                listenPort=0,
                namesrvAddr=namesrv,
                slaveReadEnable=True,
                slaveSyncInterval=500,
                **keys,
            )
        )
        wait_for(
            lambda: slave_connected(str(master.started["listen_address"])),
            what="the slave to connect to the master",
        )
        pair = Pair(master, slave, name, tmp_path, namesrv, keys)
        yield pair
    finally:
        if slave is not None:
            slave.kill()
        master.kill()
        if pair is not None:
            pair.master.kill()  # a test may have restarted it


def slave_connected(address: str) -> bool:
    return int(runtime_info(address).get("haConnectionNum", "0")) >= 1


@pytest.fixture
def pair(tmp_path: Path, rocketha_namesrv: RochaNamesrv) -> Iterator[Pair]:
    with running_pair(tmp_path, rocketha_namesrv.address) as p:
        yield p


@pytest.fixture
def slow_pair(tmp_path: Path, rocketha_namesrv: RochaNamesrv) -> Iterator[Pair]:
    """A pair that counts nothing as in memory (``accessMessageInMemoryMaxRatio`` 0): a
    consumer behind the head is sent to the slave."""
    with running_pair(tmp_path, rocketha_namesrv.address, accessMessageInMemoryMaxRatio=0) as p:
        yield p


#: The broker's lock life in ``short_lock_pair``: RocketMQ's 60 s cut by ten.
LOCK_LIFE_MS = 6_000


@pytest.fixture
def short_lock_pair(tmp_path: Path, rocketha_namesrv: RochaNamesrv) -> Iterator[Pair]:
    """A pair whose orderly queue locks outlive their holder's last renewal by
    :data:`LOCK_LIFE_MS`: a test of a member that died waits that, not a minute."""
    keys = {"rebalanceLockMaxLiveTime": LOCK_LIFE_MS}
    with running_pair(tmp_path, rocketha_namesrv.address, **keys) as p:
        yield p


@pytest.mark.parametrize("kind", ["lite", "push"])
@pytest.mark.parametrize("version", VERSIONS)
def test_every_message_once_across_restarts_and_the_masters_death(
    version: str, kind: str, pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Consume{kind.title()}{version.replace('.', '')}"
    group = f"cg-{kind}-{version.replace('.', '')}"
    third = COUNT // 3

    def send(tranche: str, home: str) -> list[str]:
        """A third of the messages: a member can take no more than what is there (a push
        consumer takes all it is given before its shutdown), so each has its share."""
        prefix = f"{topic}{tranche}"
        sent = rmq.send(
            ns, topic, "sync", third, prefix, home=tmp_path / home, broker=pair.master_address
        )
        assert {o.status for o in sent} == {"SEND_OK"}, sent
        return [f"{prefix}-{i}" for i in range(third)]

    # Two members one after the other, the second starting where the first committed: one
    # that started anywhere else would get the first third again, or miss the second.
    wanted: list[str] = []
    bodies: list[str] = []
    for run, tranche in enumerate("ab"):
        wanted += send(tranche, f"p{run}")
        got = rmq.group(ns, topic, group, kind, third, home=tmp_path / f"c{run}")
        bodies += [b for _, _, b in got]
        assert sorted(bodies) == sorted(wanted), f"member {run}: every message once"

    # The slave holds the topic and the committed offsets after its sync.
    wanted += send("c", "p2")
    master_offsets = offsets(pair.master_address, f"{topic}@{group}")
    assert master_offsets, "the members committed to the master"
    wait_for(
        lambda: offsets(pair.slave_address, f"{topic}@{group}") == master_offsets,
        what="the slave to sync the master's offsets",
    )
    slave_topics = ask_json(pair.slave_address, GET_ALL_TOPIC_CONFIG)["topicConfigTable"]
    assert topic in slave_topics

    # The master dies; the next member reads the rest from the slave, from those offsets.
    pair.master.kill()
    rest = rmq.group(ns, topic, group, kind, third, home=tmp_path / "c2")
    bodies += [b for _, _, b in rest]
    assert sorted(bodies) == sorted(wanted), "every message exactly once"


@contextmanager
def paused(member: GroupMember) -> Iterator[None]:
    """The member's JVM stopped: what is sent meanwhile waits for it, more per queue than
    one pull takes (which a held pull woken by the first arrival cannot take either)."""
    member.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        member.proc.send_signal(signal.SIGCONT)


def new_member(
    rmq: RocketMQ, master: str, namesrv: str, topic: str, group: str, kind: str, tmp: Path
) -> GroupMember:
    """A member of a new group on a new, empty topic (4 queues), once a pull of each queue is
    held at the master: it has its offsets (0), and will not ask for them once messages are
    there (a new group then starts past them when they do not count as in memory)."""
    create_topic(master, topic, 4)
    member = rmq.group_member(namesrv, topic, group, kind, home=tmp / "c")
    # A push consumer also pulls its group's retry topic (one queue).
    held = str(4 + (kind == "push"))
    try:
        wait_for(
            lambda: runtime_info(master)["pullRequestsHeld"] == held,
            what="a pull held for each queue",
        )
    except AssertionError:
        member.proc.kill()
        raise
    return member


def bodies_of(member: GroupMember) -> set[str]:
    return {b for _, _, b in member.received}


@pytest.mark.parametrize("kind", ["lite", "push"])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_lagging_consumer_is_served_by_the_slave(
    version: str, kind: str, slow_pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Lag{kind.title()}{version.replace('.', '')}"
    member = new_member(rmq, slow_pair.master_address, ns, topic, f"lag-{kind}", kind, tmp_path)
    count = 200
    wanted = {f"{topic}-{i}" for i in range(count)}
    try:
        with paused(member):
            sent = rmq.send(ns, topic, "sync", count, topic, home=tmp_path / "p")
            assert {o.status for o in sent} == {"SEND_OK"}, sent
        wait_for(lambda: bodies_of(member) >= wanted, what="every message")
    finally:
        got = member.finish()
    assert sorted(b for _, _, b in got) == sorted(wanted), "every message exactly once"
    assert served(slow_pair.slave_address) > 0, "the slave served the lagging consumer"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_running_consumer_reads_from_the_slave_while_the_master_is_dead_then_returns(
    version: str, pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Return{version.replace('.', '')}"
    member = new_member(
        rmq, pair.master_address, ns, topic, f"return-{version.replace('.', '')}", "push", tmp_path
    )
    wanted = {f"{topic}-a-{i}" for i in range(4)}
    try:
        first = rmq.send(ns, topic, "sync", 4, f"{topic}-a", home=tmp_path / "p")
        assert {o.status for o in first} == {"SEND_OK"}, first
        wait_for(lambda: bodies_of(member) >= wanted, what="the first messages")
        # The member cannot read the second batch before the master dies: the slave serves it.
        with paused(member):
            second = rmq.send(ns, topic, "sync", 200, f"{topic}-b", home=tmp_path / "p")
            assert {o.status for o in second} == {"SEND_OK"}, second
            pair.master.kill()
        wanted |= {f"{topic}-b-{i}" for i in range(200)}
        wait_for(
            lambda: bodies_of(member) >= wanted,
            what="the second batch, from the slave",
            timeout=180,
        )
        assert served(pair.slave_address) > 0, "the slave served while the master was dead"

        # A new process counts from 0: what it serves after the restart is the returned
        # consumer's.
        pair.restart_master()
        after: list[str] = []

        def one_more_from_the_master() -> bool:
            after.append(f"{topic}-c-{len(after)}")
            sent = rmq.send(ns, topic, "sync", 1, after[-1], home=tmp_path / "p")
            assert {o.status for o in sent} == {"SEND_OK"}, sent
            wait_for(
                lambda: after[-1] + "-0" in bodies_of(member),
                what=f"{after[-1]} received",
            )
            return served(pair.master_address) > 0

        wait_for(
            one_more_from_the_master, what="a message served by the returned master", timeout=180
        )
    finally:
        got = member.finish()
    bodies = sorted(b for _, _, b in got)
    assert bodies == sorted(wanted | {f"{a}-0" for a in after}), "each message exactly once"


def consumer_ids(address: str, group: str) -> list[str]:
    sock = RemotingSocket(address)
    try:
        response, body = sock.invoke(GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    finally:
        sock.close()
    return list(json.loads(body)["consumerIdList"]) if response["code"] == 0 else []


@pytest.mark.parametrize("kind", ["lite", "push"])
@pytest.mark.parametrize("version", VERSIONS)
def test_two_members_of_a_group_share_its_queues(
    version: str, kind: str, pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """Two members side by side: the second's heartbeat makes the broker notify the group
    (NOTIFY_CONSUMER_IDS_CHANGED), both rebalance, and each message reaches exactly one."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Share{kind.title()}{version.replace('.', '')}"
    group = f"share-{kind}-{version.replace('.', '')}"
    create_topic(pair.master_address, topic, 4)
    members = [rmq.group_member(ns, topic, group, kind, home=tmp_path / f"m{i}") for i in range(2)]
    try:
        wait_for(
            lambda: len(consumer_ids(pair.master_address, group)) == 2,
            what="both members in the group",
        )
        # The first rebalances when told of the second, not at its next 20 s round.
        wait_for(
            lambda: all(m.members_seen == 2 for m in members),
            what="both members to rebalance",
            timeout=15,
        )
        sent = rmq.send(ns, topic, "sync", COUNT, topic, home=tmp_path / "p")
        assert {o.status for o in sent} == {"SEND_OK"}, sent
        wanted = sorted(f"{topic}-{i}" for i in range(COUNT))
        wait_for(
            lambda: {b for m in members for _, _, b in m.received} >= set(wanted),
            what="every message received",
        )
        # And committed, before either member stops: a push member's last commit at shutdown
        # is a oneway that can race a pull of its own still carrying the older offset, and
        # the other member, taking the queue over, would then be given a message again
        # (RocketMQ's at-least-once, whichever broker).
        wait_for(
            lambda: sum((offsets(pair.master_address, f"{topic}@{group}") or {}).values()) == COUNT,
            what="every message committed",
        )
    finally:
        got = [m.finish() for m in members]
    bodies = sorted(b for g in got for _, _, b in g)
    assert bodies == wanted, "each message exactly once"
    assert all(got), f"both members got a share: {[len(g) for g in got]}"


def pull(topic: str, queue_id: int, offset: int, subscription: str = "*") -> dict[str, str]:
    return {
        "consumerGroup": "bad-input",
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",  # FLAG_SUBSCRIPTION
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": subscription,
        "subVersion": "0",
        "expressionType": "TAG",
    }


def test_bad_consumer_requests_name_the_field_and_change_nothing(pair: Pair) -> None:
    topic = "ConsumeBadInput"
    sock = RemotingSocket(pair.master_address)
    try:
        created = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": "2",
            "writeQueueNums": "2",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
        }
        assert sock.invoke(UPDATE_AND_CREATE_TOPIC, created)[0]["code"] == 0
        cases = [
            (pull("NoSuchTopic", 0, 0), 17, "topic[NoSuchTopic]"),
            (pull(topic, 5, 0), 1, "queueId[5] is illegal"),
            (pull(topic, 0, 0, "||"), 23, "(subscription)"),
        ]
        for fields, code, needle in cases:
            response, _ = sock.invoke(PULL_MESSAGE, fields)
            assert response["code"] == code, response
            assert needle in response.get("remark", ""), response
        # An offset past the end: moved (to 0 on an empty queue), not an error.
        response, _ = sock.invoke(PULL_MESSAGE, pull(topic, 0, 99))
        assert response["code"] == 21, response
        assert response["extFields"]["nextBeginOffset"] == "0", response
        commit = {"consumerGroup": "nobody", "topic": topic, "queueId": "0", "commitOffset": "3"}
        response, _ = sock.invoke(UPDATE_CONSUMER_OFFSET, commit)
        assert response["code"] == 26, response
        assert "(consumerGroup)" in response["remark"], response
        assert offsets(pair.master_address, f"{topic}@nobody") is None, "nothing changed"
    finally:
        sock.close()


#: Short delay levels for the retry tests: a failed message waits level ``3 + reconsumeTimes``.
RETRY_LEVELS = [1, 1, 2, 3] + [1] * 14


@pytest.mark.parametrize("version", VERSIONS)
def test_a_java_push_consumer_that_fails_gets_each_message_again_then_the_dlq_has_it(
    version: str, tmp_path: Path, rocketha_namesrv: RochaNamesrv
) -> None:
    """``RECONSUME_LATER`` with ``maxReconsumeTimes`` 2: the client's send-back stores each
    message in ``%RETRY%<group>`` at level 3, then 4, the client gets it again under its own
    topic after each level's delay, and the third failure puts it in ``%DLQ%<group>``; the slave
    syncs both topics and serves the DLQ; ``mqadmin topicList`` lists them."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    levels = " ".join(f"{s}s" for s in RETRY_LEVELS)
    with running_pair(tmp_path, ns, messageDelayLevel=levels) as pair:
        topic, group = f"Fails{rmq.major}", f"fails-{rmq.major}"
        create_topic(pair.master_address, topic)
        bodies = [f"fail-{i}" for i in range(3)]
        with Producer(ns, "fails-producer") as producer:
            for body in bodies:
                producer.send(Message(topic, body.encode()))
        calls = rmq.reconsume(ns, topic, group, 2, 3 * len(bodies), home=tmp_path / "java")
        for body in bodies:
            mine = [c for c in calls if c.body == body]
            assert [c.reconsume_times for c in mine] == [0, 1, 2], calls
            assert {c.topic for c in mine} == {topic}, "the client restores RETRY_TOPIC"
            for (first, then), level in zip(itertools.pairwise(mine), (3, 4), strict=True):
                assert then.at - first.at >= RETRY_LEVELS[level - 1] - 0.05, mine
        dlq, retry = f"%DLQ%{group}", f"%RETRY%{group}"
        wait_for(
            lambda: (
                {dlq, retry}
                <= set(ask_json(pair.slave_address, GET_ALL_TOPIC_CONFIG)["topicConfigTable"])
            ),
            what="the slave's sync of the retry and dead-letter topics",
        )
        pair.master.kill()
        with PullConsumer(
            ns, f"{group}-dlq", [dlq], consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        ) as reader:
            dead: list[MessageExt] = []
            wait_for(
                lambda: dead.extend(reader.poll(0.5)) or len(dead) >= len(bodies),
                what="the dead letters, from the slave",
            )
        assert sorted(m.body.decode() for m in dead) == bodies
        assert {m.properties.get("RETRY_TOPIC") for m in dead} == {topic}
        assert {m.reconsume_times for m in dead} == {3}
        listed = rmq.mqadmin(tmp_path / "admin", "topicList", "-n", ns)
        assert dlq in listed and retry in listed, listed


def in_queue_order(got: list[tuple[int, int, str]]) -> bool:
    """Whether each queue's messages came in offset order, none twice."""
    last: dict[int, int] = {}
    for queue_id, offset, _ in got:
        if offset <= last.get(queue_id, -1):
            return False
        last[queue_id] = offset
    return True


@pytest.mark.parametrize("version", VERSIONS)
def test_orderly_members_take_queues_by_lock_and_keep_each_in_order(
    version: str, pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``MessageListenerOrderly`` members: the first locks every queue on the master
    (LOCK_BATCH_MQ, which rocketha refused before) and consumes them in order; when a second
    member joins, the first gives its share back (UNLOCK_BATCH_MQ) and the second locks it.
    Each member sees each queue in offset order, and every message comes exactly once."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    tag = version.replace(".", "")
    topic, group = f"Orderly{tag}", f"orderly-{tag}"
    create_topic(pair.master_address, topic, 4)
    wanted = sorted(f"{prefix}-{i}" for prefix in (topic, f"{topic}b") for i in range(COUNT))
    first = rmq.group_member(ns, topic, group, "orderly", home=tmp_path / "m0")
    members = [first]
    try:
        sent = rmq.send(ns, topic, "sync", COUNT, topic, home=tmp_path / "p0")
        assert {o.status for o in sent} == {"SEND_OK"}, sent
        wait_for(lambda: len(first.received) >= COUNT, what="the first member's messages")
        members.append(rmq.group_member(ns, topic, group, "orderly", home=tmp_path / "m1"))
        wait_for(
            lambda: all(m.members_seen == 2 for m in members), what="both members to rebalance"
        )
        more = rmq.send(ns, topic, "sync", COUNT, f"{topic}b", home=tmp_path / "p1")
        assert {o.status for o in more} == {"SEND_OK"}, more
        wait_for(
            lambda: {b for m in members for _, _, b in m.received} >= set(wanted),
            what="every message received",
        )
    finally:
        got = [m.finish() for m in members]
    assert all(in_queue_order(g) for g in got), got
    assert got[1], "the second member took queues from the first"
    assert sorted(b for g in got for _, _, b in g) == wanted, "each message exactly once"


def test_an_orderly_member_killed_mid_stream_leaves_its_queues_to_the_other(
    short_lock_pair: Pair, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """Two ``MessageListenerOrderly`` members (5.4.0); one is SIGKILLed while messages flow.
    Its queue locks stay on the master until they expire (``rebalanceLockMaxLiveTime``,
    RocketMQ's ``lockMaxLiveTime``: a member cut off, not dead, may still be consuming), then
    the survivor locks them and reads on from the dead member's last commit. The survivor sees
    each queue in offset order, and no message is lost (those the dead member took but never
    committed come again)."""
    rmq = resolve(VERSIONS[-1])
    ns = rocketha_namesrv.address
    topic, group = "OrderlyKilled", "orderly-killed"
    create_topic(short_lock_pair.master_address, topic, 4)
    # The members renew their locks (rocketmq.client.rebalance.lockInterval) as often, for
    # the lock life, as RocketMQ's: every 20 s of 60.
    renew = [f"-Drocketmq.client.rebalance.lockInterval={LOCK_LIFE_MS // 3}"]
    survivor = rmq.group_member(ns, topic, group, "orderly", home=tmp_path / "m0", jvm=renew)
    doomed = rmq.group_member(ns, topic, group, "orderly", home=tmp_path / "m1", jvm=renew)
    try:
        wait_for(
            lambda: survivor.members_seen == doomed.members_seen == 2,
            what="both members to rebalance",
        )
        sent = rmq.send(ns, topic, "sync", COUNT, topic, home=tmp_path / "p0")
        assert {o.status for o in sent} == {"SEND_OK"}, sent
        wait_for(lambda: doomed.received, what="the doomed member's first message")
        killed = doomed.kill()
        more = rmq.send(ns, topic, "sync", COUNT, f"{topic}b", home=tmp_path / "p1")
        assert {o.status for o in more} == {"SEND_OK"}, more
        wanted = {f"{prefix}-{i}" for prefix in (topic, f"{topic}b") for i in range(COUNT)}
        taken = {b for _, _, b in killed}
        wait_for(
            lambda: (
                {b for _, _, b in survivor.received} | taken >= wanted
                and {q for q, _, b in survivor.received if b.startswith(f"{topic}b")}
                == {0, 1, 2, 3}
            ),
            timeout=240,
            what="the survivor to take the dead member's queues",
        )
    finally:
        got = survivor.finish()
        doomed.kill()
    assert killed and in_queue_order(got), got
