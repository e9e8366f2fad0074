"""The Spark sink: DataFrames written into topics over the network, batch and streaming, to a
SYNC_MASTER whose slave must hold every row before the write succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rocketha.spark
from helpers import SEGMENT, wait_for
from rocketha import Broker, BrokerConfig, MessageStore, NameServer

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster(tmp_path: Path, spark: Any) -> Iterator[tuple[str, Broker, Broker]]:
    """A name server, a SYNC_MASTER and its SLAVE, in this process; Spark's Python workers
    reach them over loopback like remote executors would."""
    rocketha.spark.register(spark)
    with NameServer("127.0.0.1:0") as ns:
        common: dict[str, Any] = dict(
            broker_name="broker-a",
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            namesrv_addr=ns.listen_address,
        )
        master_conf = BrokerConfig(
            broker_role="SYNC_MASTER",
            store_path_root_dir=str(tmp_path / "master"),
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            **common,
        )
        with Broker(master_conf) as master:
            slave_conf = BrokerConfig(
                broker_role="SLAVE",
                broker_id=1,
                store_path_root_dir=str(tmp_path / "slave"),
                ha_master_address=master.ha_address,
                **common,
            )
            with Broker(slave_conf) as slave:
                assert master.ha is not None
                assert master.ha.wait_for_state(None, "TRANSFER", timeout=60)
                yield ns.listen_address, master, slave


def _stored(broker: Broker) -> list[Any]:
    with MessageStore(broker.config.store_path_root_dir, read_only=True) as store:
        return [m for m in store.messages() if not m.topic.startswith(("TBW102", "RMQ_SYS"))]


def test_a_dataframe_lands_in_its_topics_with_every_field(spark: Any, cluster: Any) -> None:
    namesrv, master, slave = cluster
    rows = [
        (
            f"body-{i}".encode(),
            "Even" if i % 2 == 0 else None,
            f"t{i % 3}",
            [f"k{i}"],
            {"i": str(i)},
        )
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows,
        "body binary, topic string, tags string, keys array<string>, properties map<string,string>",
    ).repartition(3)
    (
        df.write.format("rocketha")
        .option("namesrvAddr", namesrv)
        .option("topic", "Odd")
        .option("batchSize", 16)
        .mode("append")
        .save()
    )
    # SEND_OK from a SYNC_MASTER: the slave holds every row once the write returned.
    for broker in (master, slave):
        stored = _stored(broker)
        assert len(stored) == 300
        by_body = {m.body: m for m in stored}
        for i in range(300):
            m = by_body[f"body-{i}".encode()]
            assert m.topic == ("Odd" if i % 2 else "Even")
            assert (m.tags, m.keys, m.properties["i"]) == (f"t{i % 3}", [f"k{i}"], str(i))


def test_a_stream_is_written_micro_batch_by_micro_batch(
    spark: Any, cluster: Any, tmp_path: Path
) -> None:
    namesrv, master, _slave = cluster
    source = tmp_path / "source"
    with MessageStore(source, mapped_file_size_commit_log=SEGMENT) as store:
        store.put_batch([rocketha.Message("In", b"in-%d" % i) for i in range(120)])
    query = (
        spark.readStream.format("rocketha")
        .option("maxOffsetsPerTrigger", 50)
        .load(str(source))
        .selectExpr("body", "'Copied' AS topic")
        .writeStream.format("rocketha")
        .option("namesrvAddr", namesrv)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    assert sorted(m.body for m in _stored(master)) == sorted(b"in-%d" % i for i in range(120))
    assert {m.topic for m in _stored(master)} == {"Copied"}


@pytest.mark.parametrize(
    "columns, options, named",
    [
        ("body binary, extra string", {"topic": "T"}, "column extra"),
        ("payload binary", {"topic": "T"}, "column body"),
        ("body binary, tags int", {"topic": "T"}, "column tags"),
        ("body binary", {}, "option topic"),
        ("body binary", {"topic": "T", "batchSize": "0"}, "option batchSize"),
        ("body binary", {"topic": "T", "acks": "all"}, "unknown option(s) acks"),
        ("body binary", {"topic": "T", "accessKey": "RocketMQ"}, "accessKey and secretKey"),
    ],
)
def test_bad_columns_and_options_fail_before_any_task_naming_them(
    spark: Any, cluster: Any, columns: str, options: dict[str, str], named: str
) -> None:
    namesrv, master, _slave = cluster
    df = spark.createDataFrame([], columns)
    writer = df.write.format("rocketha").option("namesrvAddr", namesrv).options(**options)
    with pytest.raises(Exception, match=named.replace("(", r"\(").replace(")", r"\)")):
        writer.mode("append").save()
    with pytest.raises(Exception, match="mode overwrite"):
        df.write.format("rocketha").option("namesrvAddr", namesrv).mode("overwrite").save()
    assert _stored(master) == []


def test_without_the_slave_the_write_fails_rather_than_claim_replication(
    spark: Any, cluster: Any
) -> None:
    namesrv, master, slave = cluster
    slave.shutdown()
    wait_for(lambda: master.ha is not None and not master.ha.connections(), 60, "no slave")
    df = spark.createDataFrame([(b"x",)], "body binary")
    with pytest.raises(Exception, match=r"SLAVE_NOT_AVAILABLE|FLUSH_SLAVE_TIMEOUT"):
        df.write.format("rocketha").option("namesrvAddr", namesrv).option("topic", "T").mode(
            "append"
        ).save()
