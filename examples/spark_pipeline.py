"""Ingest topics with Spark Structured Streaming: messages and bytes per topic per minute.

Usage::

    python examples/spark_pipeline.py OUT_DIR                                  # a demo cluster
    python examples/spark_pipeline.py OUT_DIR --namesrv HOST:9876 --topics orders,payments
    python examples/spark_pipeline.py OUT_DIR --store STORE_DIR
    ... [--follow] [--max-per-batch N]

By default the topics are read over the network, pulled from the brokers' slaves
(``preferSlave``). Without ``--namesrv`` the example starts what it needs in this process: a
name server and a SYNC_MASTER with its SLAVE (stores in ``OUT_DIR/cluster``), and sends 1,000
messages to ``orders`` and ``payments`` each run. ``--store`` reads a store directory instead (any
replica's; a broker may be writing it, the source opens it read-only).

Each micro-batch's counts, by topic and one-minute window of ``storeTimestamp``, are written as
Parquet to ``OUT_DIR/counts/batch=<id>``; a batch replayed after a crash overwrites its own
directory, so the output holds every message exactly once. A minute spanning several batches
appears in each; sum them when reading::

    spark.read.parquet(f"{OUT_DIR}/counts").groupBy("minute", "topic").sum("messages", "bytes")

The checkpoint lives in ``OUT_DIR/checkpoint``: run again and it continues where it stopped.
Without ``--follow`` the query reads what is there now and exits (Trigger.AvailableNow); with
it, it keeps polling for new messages every 10 seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import rocketha.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rocketha import Broker, BrokerConfig, Message, NameServer, Producer

DEMO_TOPICS = "orders,payments"


def per_topic_minute(df: DataFrame) -> DataFrame:
    return df.groupBy(F.window("storeTimestamp", "1 minute").start.alias("minute"), "topic").agg(
        F.count("*").alias("messages"), F.sum(F.length("body")).alias("bytes")
    )


@contextlib.contextmanager
def demo_cluster(root: str) -> Iterator[str]:
    """A name server and broker-a (SYNC_MASTER + SLAVE serving pulls) on loopback, with 1,000
    new messages per topic; yields the name server's address."""
    with NameServer("127.0.0.1:0") as ns:
        common: dict[str, Any] = dict(
            broker_name="broker-a", listen_port=0, namesrv_addr=ns.listen_address
        )
        master_conf = BrokerConfig(
            broker_role="SYNC_MASTER",
            store_path_root_dir=os.path.join(root, "master"),
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            **common,
        )
        with Broker(master_conf) as master:
            slave_conf = BrokerConfig(
                broker_role="SLAVE",
                broker_id=1,
                store_path_root_dir=os.path.join(root, "slave"),
                ha_master_address=master.ha_address,
                slave_read_enable=True,
                # It serves a new topic once it has its master's config.
                slave_sync_interval=500,
                # Spark reads it: more than RocketMQ's 32 messages a pull (see the README).
                max_transfer_count_on_message_in_memory=1024,
                **common,
            )
            with Broker(slave_conf):
                assert master.ha is not None
                master.ha.wait_for_state(None, "TRANSFER", timeout=60)
                with Producer(ns.listen_address, "pipeline-demo") as producer:
                    for i in range(2000):
                        topic = DEMO_TOPICS.split(",")[i % 2]
                        producer.send(Message(topic, b"x" * (1 + i % 100)))
                yield ns.listen_address


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out_dir")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--namesrv", help="read over the network through this name server")
    source.add_argument("--store", help="read this store directory instead of the network")
    parser.add_argument("--topics", help=f"topics to read (with --namesrv; demo: {DEMO_TOPICS})")
    parser.add_argument("--follow", action="store_true", help="keep running, polling every 10 s")
    parser.add_argument("--max-per-batch", type=int, default=1_000_000, help="maxOffsetsPerTrigger")
    args = parser.parse_args()
    if args.namesrv and not args.topics:
        parser.error("--namesrv needs --topics")

    with contextlib.ExitStack() as stack:
        namesrv = args.namesrv
        if args.store is None and namesrv is None:
            namesrv = stack.enter_context(demo_cluster(os.path.join(args.out_dir, "cluster")))
        run(args, namesrv, args.topics or DEMO_TOPICS)


def run(args: argparse.Namespace, namesrv: str | None, topics: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName("rocketha-pipeline")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    rocketha.spark.register(spark)
    counts_dir = os.path.join(args.out_dir, "counts")

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        per_topic_minute(batch).write.mode("overwrite").parquet(f"{counts_dir}/batch={batch_id}")

    reader = spark.readStream.format("rocketha").option("maxOffsetsPerTrigger", args.max_per_batch)
    if namesrv is not None:
        df = reader.option("namesrvAddr", namesrv).option("topics", topics).load()
    else:
        df = reader.load(args.store)
    stream = df.writeStream.foreachBatch(write_batch).option(
        "checkpointLocation", os.path.join(args.out_dir, "checkpoint")
    )
    trigger = {"processingTime": "10 seconds"} if args.follow else {"availableNow": True}
    query = stream.trigger(**trigger).start()
    query.awaitTermination()

    totals = (
        spark.read.parquet(counts_dir)
        .groupBy("minute", "topic")
        .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
        .orderBy("minute", "topic")
    )
    totals.show(50, truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
