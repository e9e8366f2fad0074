"""The Spark source over the network: the same rows as a store read, served by the slave, and
Kafka's offset options, data loss rule and exact streaming restarts."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import rocketha.spark
from helpers import (
    RemotingSocket,
    broker_pair,
    create_topic,
    routed,
    served,
    topic_brokers,
    wait_for,
)
from rocketha import Broker, BrokerConfig, Message, MessageExt, MessageStore, NameServer, Producer
from rocketha._core import MQClientAPI, RecordFilter
from rocketha.exceptions import ConfigError
from rocketha.spark._network import QueueState, partitions
from rocketha.spark._options import parse
from test_acl import GOOD, PLAIN_ACL, acl_config

pytestmark = pytest.mark.spark

TOPICS = ("orders", "payments")
#: ``ResponseCode.TOPIC_NOT_EXIST``.
TOPIC_NOT_EXIST = 17
#: ``RequestCode.PULL_MESSAGE``.
PULL_MESSAGE = 11


def _produce(
    namesrv: str, slave: Broker, first: int, count: int, topics: tuple[str, ...] = TOPICS
) -> None:
    """Sends ``count`` messages over ``topics`` and waits until ``slave`` serves the topics."""
    with Producer(namesrv, "spark-network-test") as producer:
        for i in range(first, first + count):
            producer.send(
                Message(
                    topics[i % len(topics)],
                    f"body-{i}".encode() * (1 + i % 7),
                    tags=f"tag{i % 3}" if i % 2 else None,
                    keys=[f"k{i}"] if i % 3 == 0 else None,
                    properties={"seq": str(i)},
                )
            )
    _wait_served(slave, topics)


def _wait_served(slave: Broker, topics: tuple[str, ...]) -> None:
    """Until ``slave`` serves pulls of ``topics``: it learns a new topic from its master's
    config (SlaveSynchronize)."""
    api = MQClientAPI()

    def served(topic: str) -> bool:
        _rows, _next, refused = api.pull_range(
            slave.listen_address,
            consumer_group="spark-network-test",
            topic=topic,
            queue_id=0,
            queue_offset=0,
            end=1,
            max_msg_nums=1,
            window=1,
            max_rows=1,
            sys_flag=0x4,
            subscription="*",
            filter=RecordFilter(),
            timeout=5.0,
        )
        return refused is None or refused[0] != TOPIC_NOT_EXIST

    try:
        for topic in topics:
            wait_for(lambda t=topic: served(t), what=f"the slave to serve {topic}")
    finally:
        api.close()


def _pulled(broker: Broker) -> int:
    return served(broker.listen_address)


def _network(spark: Any, namesrv: str, **options: Any) -> Any:
    reader = spark.read.format("rocketha").option("namesrvAddr", namesrv)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=lambda r: r[3])


def test_network_rows_equal_the_store_rows_and_the_slave_serves_them(
    spark: Any, spark_cluster: Any
) -> None:
    namesrv, master, slave = spark_cluster
    _produce(namesrv, slave, 0, 400)
    topics = ",".join(TOPICS)
    local = (
        spark.read.format("rocketha")
        .option("topics", topics)
        .load(master.config.store_path_root_dir)
    )
    net = _network(spark, namesrv, topics=topics, minPartitions=12)
    assert net.rdd.getNumPartitions() == 12
    columns = [c for c in local.columns if c != "brokerName"]
    want = _sorted(local.select(columns).collect())
    assert len(want) == 400
    before = (_pulled(master), _pulled(slave))
    got = net.collect()
    assert _sorted([r[: len(columns)] for r in got]) == want
    assert {r.brokerName for r in got} == {"broker-a"}
    assert local.select("brokerName").distinct().collect()[0].brokerName is None
    # The slave served every row; the master answered offset queries only.
    assert (_pulled(master), _pulled(slave)) == (before[0], before[1] + 400)
    # preferSlave=false reads the master.
    assert _network(spark, namesrv, topics="orders", preferSlave="false").count() == 200
    assert (_pulled(master), _pulled(slave)) == (before[0] + 200, before[1] + 400)


def test_starting_and_ending_offsets_select_queue_ranges(spark: Any, spark_cluster: Any) -> None:
    namesrv, _master, slave = spark_cluster
    _produce(namesrv, slave, 0, 80, topics=("orders",))
    df = _network(
        spark,
        namesrv,
        topics="orders",
        startingOffsets=json.dumps({"orders": {"broker-a:0": 5, "broker-a:1": -2}}),
        endingOffsets=json.dumps({"orders": {"broker-a:0": 9, "broker-a:2": 3}}),
    )
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    want = [(0, o) for o in range(5, 9)] + [(1, o) for o in range(20)]
    want += [(2, o) for o in range(3)] + [(3, o) for o in range(20)]
    assert got == sorted(want)
    # Big records: the broker answers a pull of 32 with what fits 256 KiB, the reader asks
    # again for the rest of each window.
    with Producer(namesrv, "spark-network-test") as producer:
        big = [Message("big", bytes([i]) * 30_000) for i in range(20)]
        producer.send_batch(big, queue_id=0)
    _wait_served(slave, ("big",))
    rows = _network(spark, namesrv, topics="big").select("queueOffset", "body").collect()
    assert sorted((r.queueOffset, r.body) for r in rows) == [
        (i, bytes([i]) * 30_000) for i in range(20)
    ]
    # What only the name server can tell is wrong fails at planning too, named.
    with pytest.raises(Exception, match="nosuchtopic"):
        _network(spark, namesrv, topics="nosuchtopic").count()
    wrong = json.dumps({"orders": {"broker-z:0": 1}})
    with pytest.raises(Exception, match="broker-z:0"):
        _network(spark, namesrv, topics="orders", startingOffsets=wrong).count()


def _records(body: bytes) -> int:
    """Records in a pull answer's body (each opens with its TOTALSIZE)."""
    count = at = 0
    while at < len(body):
        at += struct.unpack_from(">i", body, at)[0]
        count += 1
    return count


def test_a_brokers_transfer_limit_bounds_its_pulls_and_the_source_reads_past_it(
    spark: Any, tmp_path: Path
) -> None:
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"),
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        max_transfer_count_on_message_in_memory=3,
    )
    rocketha.spark.register(spark)
    with NameServer("127.0.0.1:0") as ns:
        config.namesrv_addr = ns.listen_address
        with Broker(config) as broker, Producer(ns.listen_address, "transfer-test") as producer:
            producer.send_batch([Message("few", b"m%d" % i) for i in range(50)], queue_id=0)
            wait_for(lambda: routed(ns.listen_address, "few"), what="the topic's route")
            sock = RemotingSocket(broker.listen_address)
            try:
                response, body = sock.invoke(
                    PULL_MESSAGE,
                    {
                        "consumerGroup": "transfer-test",
                        "topic": "few",
                        "queueId": "0",
                        "queueOffset": "0",
                        "maxMsgNums": "32",
                        "sysFlag": "4",
                        "commitOffset": "0",
                        "suspendTimeoutMillis": "0",
                        "subscription": "*",
                        "subVersion": "0",
                    },
                )
            finally:
                sock.close()
            assert (response["code"], _records(body)) == (0, 3)
            rows = _network(spark, ns.listen_address, topics="few").select("body").collect()
            assert sorted(r.body for r in rows) == sorted(b"m%d" % i for i in range(50))


def test_the_source_signs_for_a_broker_with_acl(spark: Any, tmp_path: Path) -> None:
    """``accessKey``/``secretKey`` sign the planning's queries and the executors' pulls; a wrong
    secret fails the read with the broker's reason."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PLAIN_ACL)
    rocketha.spark.register(spark)
    with NameServer("127.0.0.1:0") as ns:
        config = acl_config(tmp_path, ns.listen_address, acl_enable=True, acl_plain_file=acl)
        with Broker(config), Producer(ns.listen_address, "p", credentials=GOOD) as producer:
            for i in range(20):
                wait_for(lambda i=i: producer.send(Message("topicB", b"b%d" % i)), what="a send")
            wait_for(lambda: routed(ns.listen_address, "topicB"), what="the topic's route")
            keys = {"topics": "topicB", "accessKey": GOOD.access_key}
            rows = _network(spark, ns.listen_address, secretKey=GOOD.secret_key, **keys).collect()
            assert sorted(r.body for r in rows) == sorted(b"b%d" % i for i in range(20))
            with pytest.raises(Exception, match="Check signature failed for accessKey=RocketMQ"):
                _network(spark, ns.listen_address, secretKey="not-the-secret", **keys).count()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topics": "orders", "startingOffsets": '{"orders": {"0": 1}}'}, "brokerName:queueId"),
        ({"topics": "orders", "startingCommitLogOffset": "0"}, "startingCommitLogOffset"),
        ({"topics": "orders", "preferSlave": "sometimes"}, "preferSlave"),
        ({}, "option topics: required"),
        ({"topics": "orders", "path": "/tmp"}, "not both"),
        ({"topics": "orders", "accessKey": "RocketMQ"}, "accessKey and secretKey"),
    ],
)
def test_bad_network_options_fail_naming_the_option(options: dict[str, str], named: str) -> None:
    # Spark hands a source its options with lower-case keys; nothing is contacted yet.
    given = {k.lower(): v for k, v in {"namesrvAddr": "127.0.0.1:9", **options}.items()}
    with pytest.raises(ConfigError, match=named):
        parse(given, streaming=False)


@pytest.mark.parametrize(
    ("sizes", "min_partitions", "tasks"),
    [([10, 1000, 5], 4, 4), ([3] * 32, 1, 1), ([450_000, 50_000], 1, 3), ([2], 8, 2)],
)
def test_queue_ranges_are_dealt_into_even_tasks(
    sizes: list[int], min_partitions: int, tasks: int
) -> None:
    """Many small queues share a task, a big one spans several; every offset is read once."""
    opts = parse(
        {"namesrvaddr": "127.0.0.1:9", "topics": "t", "minpartitions": str(min_partitions)},
        streaming=False,
    )
    addrs = ((0, "127.0.0.1:1"),)
    state = {("t", "b", q): QueueState(7, 7 + n, addrs) for q, n in enumerate(sizes)}
    ends = {key: s.max_offset for key, s in state.items()}
    parts = partitions(opts, state, {}, ends)
    assert len(parts) == tasks
    counts = [sum(r.end - r.start for r in p.ranges) for p in parts]
    assert max(counts) - min(counts) <= 1, counts
    read = sorted((r.queue_id, o) for p in parts for r in p.ranges for o in range(r.start, r.end))
    assert read == sorted((q, o) for q, n in enumerate(sizes) for o in range(7, 7 + n))


def test_offsets_below_a_queues_min_fail_or_skip_per_fail_on_data_loss(
    spark: Any, spark_cluster: Any
) -> None:
    namesrv, master, slave = spark_cluster
    _produce(namesrv, slave, 0, 1200, topics=("orders",))
    master.store.clean_now()
    api = MQClientAPI()
    floor = api.get_min_offset(master.listen_address, "orders", 0, 5.0)
    api.close()
    assert floor > 0
    start = json.dumps({"orders": {"broker-a:0": 0}})
    with pytest.raises(Exception, match=rf"orders@broker-a:0 start offset 0.*min offset {floor}"):
        _network(spark, namesrv, topics="orders", startingOffsets=start).count()
    df = _network(spark, namesrv, topics="orders", startingOffsets=start, failOnDataLoss="false")
    got = df.where("queueId = 0").select("queueOffset").collect()
    assert sorted(r.queueOffset for r in got) == list(range(floor, 300))


def _available_now(spark: Any, namesrv: str, ckpt: Path, out: Path, **options: Any) -> list[int]:
    stream = spark.readStream.format("rocketha").option("namesrvAddr", namesrv)
    for k, v in options.items():
        stream = stream.option(k, v)
    query = (
        stream.load()
        .select("topic", "queueId", "queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_stream_restarts_from_its_checkpoint_and_commits_the_group(
    spark: Any, spark_cluster: Any, tmp_path: Path
) -> None:
    namesrv, master, slave = spark_cluster
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    _produce(namesrv, slave, 0, 200)
    opts = {"topics": ",".join(TOPICS), "groupId": "spark-orders"}
    first = _available_now(spark, namesrv, ckpt, out, maxOffsetsPerTrigger=120, **opts)
    # Each queue gets its share of 120 rounded down (Kafka's rateLimit): how the producer
    # spread the messages decides the exact sizes.
    assert sum(first) == 200 and len(first) >= 2 and max(first) <= 120
    _produce(namesrv, slave, 200, 60)
    assert _available_now(spark, namesrv, ckpt, out, **opts) == [60]
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.body for r in rows) == sorted(
        f"body-{i}".encode() * (1 + i % 7) for i in range(260)
    )
    # Spark commits a micro-batch's offsets when it plans the next one: the group holds the
    # first run's ends (200 messages), the second run's wait for the query to go on.
    api = MQClientAPI()
    try:
        committed = [
            api.query_consumer_offset(master.listen_address, "spark-orders", topic, queue_id, 5.0)
            for topic in TOPICS
            for queue_id in range(4)
        ]
    finally:
        api.close()
    assert sum(c or 0 for c in committed) == 200


def test_one_job_reads_two_broker_groups_from_their_slaves_and_writes_an_aggregate_back(
    spark: Any, tmp_path: Path
) -> None:
    """One name server, broker-a and broker-b each a SYNC_MASTER and its SLAVE, a topic over
    both groups: the job reads it from both slaves and sends per-user counts into another."""
    rocketha.spark.register(spark)
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master_a, slave_a),
        broker_pair(tmp_path, "broker-b", ns.listen_address) as (master_b, slave_b),
    ):
        namesrv = ns.listen_address
        for master in (master_a, master_b):
            create_topic(master.listen_address, "clicks")
            create_topic(master.listen_address, "clicks-per-user")
        wait_for(lambda: topic_brokers(namesrv, "clicks") == 2, what="clicks in both groups")
        with Producer(namesrv, "clicks-producer") as producer:
            for i in range(300):
                producer.send(Message("clicks", b"click", keys=[f"user{i % 7}"]))
        for slave in (slave_a, slave_b):
            _wait_served(slave, ("clicks",))
        brokers = (master_a, slave_a, master_b, slave_b)
        before = [_pulled(b) for b in brokers]
        (
            _network(spark, namesrv, topics="clicks")
            .groupBy("keys")
            .count()
            .selectExpr("CAST(count AS STRING) AS body", "keys", "'clicks-per-user' AS topic")
            .write.format("rocketha")
            .option("namesrvAddr", namesrv)
            .mode("append")
            .save()
        )
        # Each slave served its group's share of the 300 clicks; the masters none.
        served_by = [_pulled(b) - n for b, n in zip(brokers, before, strict=True)]
        assert served_by[0] == served_by[2] == 0
        assert served_by[1] > 0 and served_by[3] > 0 and served_by[1] + served_by[3] == 300
        got = {
            m.keys[0]: int(m.body)
            for master in (master_a, master_b)
            for m in _stored(master, "clicks-per-user")
        }
        assert got == {f"user{u}": len(range(u, 300, 7)) for u in range(7)}


def _stored(broker: Broker, topic: str) -> list[MessageExt]:
    with MessageStore(broker.config.store_path_root_dir, read_only=True) as store:
        return [m for m in store.messages() if m.topic == topic]
