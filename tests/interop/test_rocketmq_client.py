"""The real Apache RocketMQ Java client (``DefaultMQProducer``, 4.9 and 5.x) against rocketha.

a. ``rocketha namesrv``, a rocketha SYNC_MASTER and a rocketha SLAVE that finds its master
   through the name server, as processes: sync, async and batch sends answer SEND_OK, and every
   message is already in the slave's store when the answer comes; oneway sends reach both.
b. A SYNC_MASTER with no slave: a sync send answers SLAVE_NOT_AVAILABLE (a ``SendResult``, not
   an exception) and the message is stored on the master.
c. Mixed name servers: a rocketha broker registered with the Java name server, and a Java
   broker registered with ``rocketha namesrv``; the Java producer finds and uses each.
d. ``mqadmin`` (rocketmq-tools): ``clusterList``, ``updateTopic``, ``topicRoute`` and
   ``brokerStatus`` against ``rocketha namesrv`` and the rocketha brokers.

The rocketha processes are shared by every case of the module (both client versions); the
Java side is ``Peer.java send`` (``benches/peers/rocketmq.py``). Run: ``pytest -m interop``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SEGMENT,
    BrokerProcess,
    RemotingSocket,
    RochaNamesrv,
    runtime_info,
    start_master,
    wait_for,
    write_conf,
)
from rocketha import ConsumeFromWhere, Message, MessageStore, Producer, PullConsumer
from rocketha import NameServer as RochaNameServer

from benches.peers.rocketmq import (
    VERSIONS,
    NameServer,
    RocketMQ,
    SendOutcome,
    Unavailable,
    body,
    log_bytes,
)

pytestmark = pytest.mark.interop

GET_ROUTEINFO_BY_TOPIC = 105
COUNT = 6


def resolve(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


def tag(version: str) -> str:
    return version.replace(".", "")


def stored_bodies(store: Path) -> set[bytes]:
    """What a (live) broker's store holds, opened read-only beside it."""
    with MessageStore(store, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        s.refresh()
        return {m.body for m in s.messages()}


@dataclass(frozen=True)
class Stored:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    uniq_key: str | None
    tags: str | None
    keys: tuple[str, ...]


def stored_messages(store: Path) -> dict[bytes, Stored]:
    """The messages of a store by body (every body the tests send is unique)."""
    with MessageStore(store, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        s.refresh()
        return {
            m.body: Stored(
                m.topic,
                m.queue_id,
                m.queue_offset,
                m.commitlog_offset,
                m.properties.get("UNIQ_KEY"),
                m.tags,
                tuple(m.keys),
            )
            for m in s.messages()
        }


def check_stored(outcomes: list[SendOutcome], topic: str, prefix: str, store: Path) -> None:
    """Each result names where its message is in ``store``: offsetMsgId's commit log offset,
    queue id and offset, msgId the message's UNIQ_KEY; a batch's, one after another."""
    held = stored_messages(store)
    batch = None
    if len(outcomes) == 1 and outcomes[0].seq == -1:
        batch = outcomes[0]
        rows = [
            (seq, msg_id, offset_id, batch.queue_id, batch.queue_offset + seq)
            for seq, (msg_id, offset_id) in enumerate(
                zip(batch.msg_id.split(","), batch.offset_msg_id.split(","), strict=True)
            )
        ]
    else:
        rows = [(o.seq, o.msg_id, o.offset_msg_id, o.queue_id, o.queue_offset) for o in outcomes]
    for seq, msg_id, offset_id, queue_id, queue_offset in rows:
        m = held[f"{prefix}-{seq}".encode()]
        assert m.topic == topic and m.tags == f"t{seq % 3}" and m.keys == (f"k{seq}",), m
        assert m.commit_log_offset == int(offset_id[16:], 16), (seq, offset_id, m)
        assert (m.queue_id, m.queue_offset) == (queue_id, queue_offset), (seq, m)
        # The record (read with the harness's decoder, not rocketha's) holds msgId as its
        # UNIQ_KEY. A 5.x client also gives the batch itself an id, which the broker appends
        # to every message's properties as RocketMQ 5's does (MessageExtEncoder.encodeBatch):
        # read back, that later UNIQ_KEY wins, on a Java broker too.
        record = log_bytes(store, m.commit_log_offset, m.commit_log_offset + 4)
        size = int.from_bytes(record, "big")
        record = log_bytes(store, m.commit_log_offset, m.commit_log_offset + size)
        assert f"UNIQ_KEY\x01{msg_id}\x02".encode() in record, (seq, msg_id, m)
        if batch is None:
            assert m.uniq_key == msg_id, (seq, msg_id, m)


@dataclass
class Cluster:
    master: BrokerProcess
    slave: BrokerProcess | None
    master_store: Path
    slave_store: Path

    @property
    def address(self) -> str:
        return str(self.master.started["listen_address"])


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, rocketha_namesrv: RochaNamesrv
) -> Iterator[Cluster]:
    """A SYNC_MASTER and a SLAVE (no haMasterAddress: the name server gives it) of one name."""
    root = tmp_path_factory.mktemp("cluster")
    master = start_master(root, "javasend-a", rocketha_namesrv.address)
    slave = None
    try:
        slave = BrokerProcess(
            write_conf(
                root / "slave.conf",
                brokerName="javasend-a",
                brokerId=1,
                brokerRole="SLAVE",
                storePathRootDir=root / "slave",
                mappedFileSizeCommitLog=SEGMENT,
                listenPort=0,
                namesrvAddr=rocketha_namesrv.address,
            )
        )
        address = master.started["listen_address"]
        wait_for(
            lambda: int(runtime_info(address).get("haConnectionNum", "0")) >= 1,
            what="the slave to connect to the master",
        )
        yield Cluster(master, slave, root / "javasend-a-master", root / "slave")
    finally:
        if slave is not None:
            slave.kill()
        master.kill()


@pytest.fixture(scope="module")
def lonely_master(
    tmp_path_factory: pytest.TempPathFactory, rocketha_namesrv: RochaNamesrv
) -> Iterator[Cluster]:
    """A SYNC_MASTER no slave ever joins. It offers no TBW102 (autoCreateTopicEnable off), so
    a topic the client creates by sending stays on the cluster's master."""
    root = tmp_path_factory.mktemp("lonely")
    master = start_master(
        root,
        "javasend-alone",
        rocketha_namesrv.address,
        slaveTimeout=1000,
        autoCreateTopicEnable=False,
    )
    try:
        yield Cluster(master, None, root / "javasend-alone-master", root / "none")
    finally:
        master.kill()


def check_results(outcomes: list[SendOutcome], expected: int, per_result: int = 1) -> None:
    """Every outcome SEND_OK with a queue; a batch's ids are its messages', comma-joined."""
    assert [o.error for o in outcomes if o.error] == []
    assert len(outcomes) == expected, outcomes
    for o in outcomes:
        assert o.status == "SEND_OK", o
        assert o.queue_id >= 0 and o.queue_offset >= 0, o
        # The client's unique ids are 32 or 56 hex digits (an IPv4 or IPv6 client address);
        # the broker's offset ids hold an IPv4 store host (8 bytes) and an offset (8).
        for ids, lengths in ((o.msg_id.split(","), {32, 56}), (o.offset_msg_id.split(","), {32})):
            assert len(ids) == per_result and len(set(ids)) == per_result, o
            assert all(len(i) in lengths and int(i, 16) >= 0 for i in ids), o


# -- a. SYNC_MASTER with a slave found through rocketha namesrv -----------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("style", ["sync", "async", "batch"])
def test_send_ok_only_once_the_slave_holds_it(
    version: str,
    style: str,
    cluster: Cluster,
    rocketha_namesrv: RochaNamesrv,
    tmp_path: Path,
) -> None:
    rmq = resolve(version)
    prefix = f"{style}-{tag(version)}"
    topic = f"JavaSend{style.title()}{tag(version)}"
    outcomes = rmq.send(
        rocketha_namesrv.address,
        topic,
        style,
        COUNT,
        prefix,
        home=tmp_path,
        broker=cluster.address,
    )
    if style == "batch":
        check_results(outcomes, 1, per_result=COUNT)
    else:
        check_results(outcomes, COUNT)
        assert len({o.offset_msg_id for o in outcomes}) == COUNT
    # SEND_OK: the slave holds every message already; nothing to wait for.
    on_slave = stored_bodies(cluster.slave_store)
    wanted = {f"{prefix}-{i}".encode() for i in range(COUNT)}
    assert wanted <= on_slave, sorted(wanted - on_slave)
    check_stored(outcomes, topic, prefix, cluster.slave_store)
    check_stored(outcomes, topic, prefix, cluster.master_store)


@pytest.mark.parametrize("version", VERSIONS)
def test_oneway_sends_reach_master_and_slave(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    prefix = f"oneway-{tag(version)}"
    outcomes = rmq.send(
        rocketha_namesrv.address,
        f"JavaSendOneway{tag(version)}",
        "oneway",
        COUNT,
        prefix,
        home=tmp_path,
        broker=cluster.address,
    )
    assert [(o.seq, o.status, o.error) for o in outcomes] == [(i, None, None) for i in range(COUNT)]
    wanted = {f"{prefix}-{i}".encode() for i in range(COUNT)}
    wait_for(lambda: wanted <= stored_bodies(cluster.master_store), what="oneway on the master")
    wait_for(lambda: wanted <= stored_bodies(cluster.slave_store), what="oneway on the slave")


@pytest.mark.parametrize("version", VERSIONS)
def test_topic_created_by_the_first_send(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """No topic made beforehand: the client sends along TBW102's route (autoCreateTopicEnable)
    and the master creates the topic from the send."""
    rmq = resolve(version)
    prefix = f"auto-{tag(version)}"
    outcomes = rmq.send(
        rocketha_namesrv.address,
        f"JavaSendAuto{tag(version)}",
        "sync",
        COUNT,
        prefix,
        home=tmp_path,
    )
    check_results(outcomes, COUNT)
    wanted = {f"{prefix}-{i}".encode() for i in range(COUNT)}
    assert wanted <= stored_bodies(cluster.slave_store)


# -- b. no slave --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("style", ["sync", "async", "batch"])
def test_no_slave_answers_slave_not_available(
    version: str,
    style: str,
    lonely_master: Cluster,
    rocketha_namesrv: RochaNamesrv,
    tmp_path: Path,
) -> None:
    """A SendResult with SLAVE_NOT_AVAILABLE, not an exception (the client does not retry it:
    retryAnotherBrokerWhenNotStoreOK is off), and the message is on the master."""
    rmq = resolve(version)
    prefix = f"alone-{style}-{tag(version)}"
    count = 1 if style == "sync" else 2
    outcomes = rmq.send(
        rocketha_namesrv.address,
        f"JavaSendAlone{style.title()}{tag(version)}",
        style,
        count,
        prefix,
        home=tmp_path,
        broker=lonely_master.address,
    )
    assert [o.error for o in outcomes] == [None] * len(outcomes), outcomes
    assert len(outcomes) == (1 if style == "batch" else count), outcomes
    assert {o.status for o in outcomes} == {"SLAVE_NOT_AVAILABLE"}, outcomes
    wanted = {f"{prefix}-{i}".encode() for i in range(count)}
    assert wanted <= stored_bodies(lonely_master.master_store)
    topic = f"JavaSendAlone{style.title()}{tag(version)}"
    check_stored(outcomes, topic, prefix, lonely_master.master_store)


# -- c. mixed name servers ----------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_rocketha_broker_through_the_java_namesrv(
    version: str, namesrv: NameServer, tmp_path: Path
) -> None:
    """A rocketha ASYNC_MASTER registers with RocketMQ's name server; the Java producer finds
    it there (the topic is created through the Java admin client, then routed)."""
    rmq = resolve(version)
    name = f"rocha-on-java-{tag(version)}"
    # No TBW102 route on the shared name server: other tests' sends must not find this broker.
    broker = start_master(
        tmp_path, name, namesrv.address, brokerRole="ASYNC_MASTER", autoCreateTopicEnable=False
    )
    try:
        prefix = f"mixed-{tag(version)}"
        outcomes = rmq.send(
            namesrv.address,
            f"JavaNsRocha{tag(version)}",
            "sync",
            COUNT,
            prefix,
            home=tmp_path / "client",
            broker=str(broker.started["listen_address"]),
        )
        check_results(outcomes, COUNT)
        wanted = {f"{prefix}-{i}".encode() for i in range(COUNT)}
        assert wanted <= stored_bodies(tmp_path / f"{name}-master")
    finally:
        broker.kill()


@pytest.mark.parametrize("version", VERSIONS)
def test_java_broker_through_rocketha_namesrv(
    version: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """A RocketMQ broker registers with ``rocketha namesrv``; the Java producer finds it there."""
    rmq = resolve(version)
    java = rmq.broker(
        tmp_path / "java",
        brokerName=f"java-on-rocha-{tag(version)}",
        namesrvAddr=rocketha_namesrv.address,
        # No TBW102 route: the name server keeps a killed broker's routes for 2 minutes.
        autoCreateTopicEnable="false",
    )
    try:
        outcomes = rmq.send(
            rocketha_namesrv.address,
            f"RochaNsJava{tag(version)}",
            "sync",
            COUNT,
            f"java-{tag(version)}",
            home=tmp_path / "client",
            broker=java.address,
        )
        check_results(outcomes, COUNT)
    finally:
        java.kill()


# -- d. mqadmin ---------------------------------------------------------------------------------


def exceptions(out: str) -> list[str]:
    return [line for line in out.splitlines() if "Exception" in line]


#: ``clusterList``'s InTPS and OutTPS cells: ``%9.2f(queue size,head wait ms`` (5.x adds
#: ``|ack queue`` before the parenthesis closes).
TPS_CELL = re.compile(r"(\d+\.\d\d)\((\d+),(\d+)ms")


def first_rate(tps: str) -> float:
    """The 10 s figure of a StoreStatsService rate (``"10s 1min 10min"``)."""
    return float(tps.split()[0])


@contextlib.contextmanager
def traffic(namesrv: str, topic: str) -> Iterator[None]:
    """Sends and pulls on ``topic`` in a background thread until the block ends, so the
    sampled rates of the last 10 s are not zero however long a JVM takes to start."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with Producer(namesrv, f"{topic}-producer") as producer:
                # The first send creates the topic; a consumer needs its route.
                producer.send(Message(topic, b"rate"))
                wait_for(lambda: route(namesrv, topic) is not None, what=f"the route of {topic}")
                with PullConsumer(
                    namesrv,
                    f"{topic}-consumer",
                    [topic],
                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                ) as consumer:
                    while not stop.is_set():
                        producer.send(Message(topic, b"rate"))
                        consumer.poll(timeout=0.05)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    assert not errors, errors


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_against_rocketha(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """rocketmq-tools' ``mqadmin`` (``MQAdminStartup``) against ``rocketha namesrv`` and a
    rocketha SYNC_MASTER + SLAVE: ``clusterList`` lists both brokers with their ids, addresses,
    version and, while a producer and a consumer are busy, the master's sampled InTPS and
    OutTPS (StoreStatsService's ``putTps`` and ``getTransferedTps``); ``updateTopic`` creates a
    topic on the master and ``topicRoute`` shows its route through both; ``brokerStatus``
    shows the master's runtime info, the rates included."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    master = cluster.address
    assert cluster.slave is not None
    slave = str(cluster.slave.started["listen_address"])

    with traffic(ns, f"MqadminRates{tag(version)}"):
        # A sample (once a second) taken since the first send and the first pull.
        wait_for(
            lambda: all(
                first_rate(runtime_info(master)[k]) > 0 for k in ("putTps", "getTransferedTps")
            ),
            what="the master's sampled put and get rates",
        )
        out = rmq.mqadmin(tmp_path, "clusterList", "-n", ns)
    lines = [line for line in out.splitlines() if " javasend-a " in line]
    rows = {tuple(line.split()[:5]): TPS_CELL.findall(line) for line in lines}
    assert rows.keys() == {
        ("DefaultCluster", "javasend-a", "0", master, "rocketha"),
        ("DefaultCluster", "javasend-a", "1", slave, "rocketha"),
    }, out
    put, got = rows[("DefaultCluster", "javasend-a", "0", master, "rocketha")]
    assert float(put[0]) > 0 and float(got[0]) > 0, out
    # No thread pool queues: sends and pulls are served as they are read.
    assert put[1:] == got[1:] == ("0", "0"), out
    assert exceptions(out) == [], out

    topic = f"MqadminRoute{tag(version)}"
    out = rmq.mqadmin(tmp_path, "updateTopic", "-b", master, "-t", topic, "-n", ns)
    assert f"create topic to {master} success." in out, out
    # The master registers a new topic with the name server at once, but asynchronously.
    wait_for(lambda: route(ns, topic) is not None, what=f"the route of {topic}")
    out = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
    flat = "".join(out.split())
    assert f'0:"{master}"' in flat and f'1:"{slave}"' in flat, out
    assert '"brokerName":"javasend-a"' in flat and '"writeQueueNums":8' in flat, out
    assert exceptions(out) == [], out

    out = rmq.mqadmin(tmp_path, "brokerStatus", "-b", master, "-n", ns)
    status = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in out.splitlines())
    )
    assert status["brokerName"] == "javasend-a" and status["brokerRole"] == "SYNC_MASTER", out
    assert status["brokerVersionDesc"].startswith("rocketha ") and status["haConnectionNum"] == "1"
    for key in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"):
        assert len([float(r) for r in status[key].split()]) == 3, out
    assert exceptions(out) == [], out


def route(namesrv: str, topic: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC from the name server: the route, or None while it has none."""
    sock = RemotingSocket(namesrv)
    try:
        response, body = sock.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    finally:
        sock.close()
    return json.loads(body) if response["code"] == 0 else None


# -- e. ACL -------------------------------------------------------------------------------------

#: Every topic but ``JavaAclForbidden`` may be published and subscribed; groups may subscribe.
PLAIN_ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - JavaAclForbidden=SUB
"""
NO_PERMISSION = 16


@dataclass
class AclCluster:
    master: Cluster
    #: A name server of its own: on the module's, the other brokers' TBW102 routes would take
    #: the first send of a new topic (and so its route) away from the ACL broker.
    namesrv: str


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    """An ASYNC_MASTER with ``aclEnable=true``, alone with its name server."""
    root = tmp_path_factory.mktemp("acl")
    (root / "plain_acl.yml").write_text(PLAIN_ACL)
    with RochaNameServer("127.0.0.1:0") as ns:
        master = start_master(
            root,
            "javaacl",
            ns.listen_address,
            brokerRole="ASYNC_MASTER",
            aclEnable=True,
            aclPlainFile=root / "plain_acl.yml",
        )
        try:
            yield AclCluster(
                Cluster(master, None, root / "javaacl-master", root / "none"), ns.listen_address
            )
        finally:
            master.kill()


@pytest.mark.parametrize("version", VERSIONS)
def test_acl_client_rpc_hook(version: str, acl_cluster: AclCluster, tmp_path: Path) -> None:
    """The Java client's ``AclClientRPCHook``: the right keys send (SEND_OK) and consume the
    message; a wrong secret key and a topic the account may only subscribe to get
    NO_PERMISSION (``MQBrokerException`` code 16) with the reason, and store nothing."""
    rmq = resolve(version)
    topic = f"JavaAcl{tag(version)}"
    outcomes, received = rmq.acl(
        acl_cluster.namesrv, topic, "JavaAclForbidden", "RocketMQ", "12345678", home=tmp_path
    )
    assert [(o.seq, o.status, o.code) for o in outcomes] == [
        (0, "SEND_OK", None),
        (1, None, NO_PERMISSION),
        (2, None, NO_PERMISSION),
    ], outcomes
    assert outcomes[1].error == "Check signature failed for accessKey=RocketMQ"
    assert outcomes[2].error == (
        "No PUB permission for topic JavaAclForbidden (accessKey=RocketMQ)"
    ), outcomes[2]
    assert [(r.queue_offset, r.body_len) for r in received] == [(0, len(b"acl-0"))], received
    stored = stored_bodies(acl_cluster.master.master_store)
    assert b"acl-0" in stored and not {b"acl-1", b"acl-2"} & stored, stored


def query_on(address: str, topic: str, key: str, *, unique: bool = False) -> list[bytes]:
    """QUERY_MESSAGE straight to one broker: the bodies it answers with."""
    from rocketha.acl import mq_client_api

    api = mq_client_api("127.0.0.1", None)
    try:
        found = api.query_message(
            address,
            topic=topic,
            key=key,
            max_num=32,
            begin=0,
            end=2**63 - 1,
            unique=unique,
            timeout=10.0,
        )
    finally:
        api.close()
    return [m.body for m in found]


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_finds_messages_by_key_and_by_msg_id(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """The Java producer's keys (``k{seq}``) and the msgIds its ``SendResult``s carry (the
    ``UNIQ_KEY``) find their messages: ``mqadmin queryMsgByKey`` (``queryMessage``) and
    ``queryMsgByUniqueKey`` (``viewMessage(topic, msgId)``, which falls back from the offset
    msgId decoding to a unique key query), through the master; and QUERY_MESSAGE asked of the
    slave, whose own index its replication built."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"FindByKey{tag(version)}"
    sent = rmq.produce(ns, topic, 12, [64], home=tmp_path, broker=cluster.address)
    assert [s.status for s in sent] == ["SEND_OK"] * 12

    out = rmq.mqadmin(tmp_path, "queryMsgByKey", "-t", topic, "-k", "k7", "-n", ns)
    assert sent[7].msg_id in out, out
    assert not any(s.msg_id in out for s in sent if s.seq != 7), out

    out = rmq.mqadmin(tmp_path, "queryMsgByUniqueKey", "-t", topic, "-i", sent[3].msg_id, "-n", ns)
    details = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in out.splitlines())
    )
    # 4.9.7 prints the keys as a list, 5.4.0 as the property.
    assert details["Topic"] == topic and details["Keys"].strip("[]") == "k3", out
    assert int(details["Queue Offset"]) == sent[3].queue_offset, out
    assert int(details["CommitLog Offset"]) == sent[3].commit_log_offset, out

    assert cluster.slave is not None
    slave = str(cluster.slave.started["listen_address"])
    wanted = body(5, 64)
    wait_for(lambda: query_on(slave, topic, "k5") == [wanted], what="k5 on the slave")
    assert query_on(slave, topic, sent[5].msg_id, unique=True) == [wanted]
    assert query_on(slave, topic, "k-none") == []


@pytest.mark.parametrize("version", VERSIONS)
def test_admin_code_creates_a_topic_on_the_cluster_and_reads_its_status(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``DefaultMQAdminExt.createTopic("DefaultCluster", topic, 8)``, what applications and test
    harnesses call, finds the cluster's brokers through the topic named after the cluster, as
    with RocketMQ's brokers; ``examineTopicStats`` (GET_TOPIC_STATS_INFO) and ``mqadmin
    topicStatus`` show the new topic's queues, then the offsets a send moved."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"ByCluster{tag(version)}"
    stats = rmq.create_topic(ns, "DefaultCluster", topic, 8, home=tmp_path)
    # Every master of the cluster got it (the module's other masters are in it too).
    assert [s for s in stats if s[0] == "javasend-a"] == [("javasend-a", q, 0, 0) for q in range(8)]
    with Producer(ns, "by-cluster-producer") as producer:
        sent = producer.send(Message(topic, b"counted"))
    out = rmq.mqadmin(tmp_path, "topicStatus", "-t", topic, "-n", ns)
    rows = [row for row in map(str.split, out.splitlines()) if row[:1] == ["javasend-a"]]
    assert len(rows) == 8, out
    assert [r[1:4] for r in rows if r[1] == str(sent.queue_id)] == [
        [str(sent.queue_id), "0", "1"]
    ], out
    assert exceptions(out) == [], out


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_consumer_progress_shows_each_queues_lag(
    version: str, cluster: Cluster, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``mqadmin consumerProgress -g GROUP`` (GET_CONSUME_STATS): per queue, the broker's max
    offset and the group's committed offset; the lag left after the group read ten messages
    and three more were sent is the "Diff Total"."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Progress{tag(version)}", f"progress-{tag(version)}"
    with Producer(ns, f"{group}-producer") as producer:
        for i in range(10):
            producer.send(Message(topic, b"%d" % i))
        with PullConsumer(
            ns, group, [topic], consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        ) as consumer:
            got: list[Any] = []
            wait_for(lambda: got.extend(consumer.poll(0.5)) or len(got) >= 10, what="ten")
            consumer.commit_sync()
        for i in range(3):
            producer.send(Message(topic, b"late %d" % i))
    out = rmq.mqadmin(tmp_path, "consumerProgress", "-g", group, "-n", ns)
    rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
    assert rows and all(r[1] == "javasend-a" for r in rows), out
    assert sum(int(r[3]) for r in rows) == 13, out
    assert sum(int(r[4]) for r in rows) == 10, out
    assert "Diff Total: 3" in out, out
    assert exceptions(out) == [], out
