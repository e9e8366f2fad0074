"""Spark ingest throughput of the rocketha source against two baselines measured in the same run.

Usage::

    python -m benches.spark_ingest [--messages N] [--body-size B] [--store DIR]

or as the ``spark-ingest`` scenario of ``rocketha bench`` (1,000,000 rows; ``--quick`` 200,000).

Writes N messages (default 5,000,000 of 200 bytes, over 8 topics) into a fresh store, then times
two queries, ``count()`` and a per-topic aggregate (messages and body bytes), these ways:

- ``rocketha``: this source on the store directory (records decoded in Rust into Arrow batches);
- ``network``: this source over the network (``namesrvAddr``): a broker serves the same store,
  executors pull the raw records and decode them with the same decoder; the target is at least
  0.9 of ``rocketha``. The broker is set up as the README advises for one that serves Spark,
  ``maxTransferCountOnMessageInMemory=1024`` (a pull carries up to 256 KiB, not 32 messages);
- ``network 32``: the same against a broker with RocketMQ's defaults (32 messages a pull);
- ``parquet``: Spark reading the same rows from Parquet (written once from this source, untimed);
  the target is at least 0.5 of its rows/s. Its ``count()`` reads only Parquet footers, so that
  ratio is shown but is not comparable;
- ``table + tail``: ``rocketha.spark.read_topic`` (issue 31): the table tier's Delta table,
  written from the store before the run (untimed), read by Spark's Parquet reader, and the 1%
  sent after it over the network from the offsets the table ends at; the target is at least
  0.8 of ``parquet``;
- ``python rows``: a row-at-a-time Python data source yielding tuples from the same store; the
  target is at least 20x it;
- ``arrow ceiling``: a Python data source yielding one prebuilt Arrow batch of this schema over
  and over (no decoding at all): the most any Python data source can deliver here, since every
  batch still crosses from the Python worker into the JVM and becomes rows there.

Each query runs once to warm up (page cache, Python workers), then the best of ``--repeat`` runs
counts. Prints a table of rows/s and the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator

import rocketha.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType
from rocketha import (
    Broker,
    BrokerConfig,
    Message,
    MessageStore,
    NameServer,
    Producer,
    _children,
    _core,
)
from rocketha.spark import BATCH_ROWS, SCHEMA, RangePartition
from rocketha.spark._arrow import to_record_batch
from rocketha.table_tier import TableTier

from benches.common import Figure

TOPICS = [f"topic{i}" for i in range(8)]
SEGMENT = 256 << 20
# Read tasks for both Python sources: two per core, as Parquet gets from its 128 MiB splits.
PARTITIONS = 4


def fill(path: str, messages: int, body_size: int) -> None:
    body = b"x" * body_size
    batch = 10_000
    with MessageStore(path, mapped_file_size_commit_log=SEGMENT) as store:
        for first in range(0, messages, batch):
            n = min(batch, messages - first)
            store.put_batch(
                [
                    Message(TOPICS[i % len(TOPICS)], body, tags="t", queue_id=i % 4)
                    for i in range(first, first + n)
                ]
            )


class RowSource(DataSource):
    """The baseline: the same partitions, but one Python tuple per record."""

    @classmethod
    def name(cls) -> str:
        return "rocketha_rows"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RowReader(self.options["path"])


class RowReader(DataSourceReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> list[InputPartition]:
        store = MessageStore(self.path, mapped_file_size_commit_log=SEGMENT, read_only=True)
        points = _core.split_points(store, store.min_offset, store.max_offset, PARTITIONS)
        return [RangePartition(lo, hi) for lo, hi in itertools.pairwise(points)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from datetime import UTC, datetime

        assert isinstance(partition, RangePartition)
        store = MessageStore(self.path, mapped_file_size_commit_log=SEGMENT, read_only=True)
        for m in store.messages(partition.start):
            if m.commitlog_offset >= partition.end:
                return
            yield (
                m.topic,
                m.queue_id,
                m.queue_offset,
                m.commitlog_offset,
                m.body,
                m.tags,
                " ".join(m.keys) or None,
                m.properties,
                datetime.fromtimestamp(m.born_timestamp / 1000, UTC),
                datetime.fromtimestamp(m.store_timestamp / 1000, UTC),
                m.born_host,
                m.store_host,
                m.msg_id,
                m.flag,
                m.sys_flag,
                m.reconsume_times,
                None,  # brokerName: a store directory does not know it
            )


class CeilingSource(DataSource):
    """Transport only: the first decoded batch, repeated until each partition has its rows."""

    @classmethod
    def name(cls) -> str:
        return "rocketha_ceiling"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return CeilingReader(self.options["path"], int(self.options["rows"]))


class CeilingReader(DataSourceReader):
    def __init__(self, path: str, rows: int) -> None:
        self.path, self.rows = path, rows

    def partitions(self) -> list[InputPartition]:
        share = self.rows // PARTITIONS
        return [InputPartition(share + (i < self.rows % PARTITIONS)) for i in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator:
        store = MessageStore(self.path, mapped_file_size_commit_log=SEGMENT, read_only=True)
        filter_ = _core.RecordFilter()
        reader = _core.ArrowReader(
            store,
            store.min_offset,
            store.max_offset,
            filter_,
            max_rows=BATCH_ROWS,
            max_bytes=1 << 30,
        )
        batch = to_record_batch(reader.next_batch())
        left = partition.value
        while left > 0:
            yield batch.slice(0, min(left, batch.num_rows))
            left -= batch.num_rows


def per_topic(df: DataFrame) -> list:
    return df.groupBy("topic").agg(F.count("*"), F.sum(F.length("body"))).collect()


def timed(run: Callable[[], object], repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` runs, after one warm-up run."""
    run()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        out.append(time.perf_counter() - t)
    return out


SOURCES = ("rocketha", "network", "network 32", "parquet", "python rows", "arrow ceiling")
#: ``maxTransferCountOnMessageInMemory`` of the broker each network source reads from (None:
#: RocketMQ's default, 32).
TRANSFER_COUNT = {"network": 1024, "network 32": None}
QUERIES = ("count", "per-topic")


def measure(
    messages: int, body_size: int, repeat: int, store: str | None = None
) -> tuple[int, dict[tuple[str, str], list[float]]]:
    """Rows in the store, and rows/s of every repetition per (source, query)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = str(_children.run_dir("bench-spark-ingest"))
    store_dir = store or os.path.join(work, "store")
    if not os.path.isdir(os.path.join(store_dir, "commitlog")):
        fill(store_dir, messages, body_size)
    table_dir = os.path.join(work, "table")
    with MessageStore(store_dir, mapped_file_size_commit_log=SEGMENT) as store:
        # What the table tier of the broker serving the store writes (broker-a, its default).
        TableTier(store, "broker-a", TOPICS, table_dir, tail_age=0).write_once()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketha-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with NameServer("127.0.0.1:0") as ns:
            # The broker knows a topic once a producer sent to it: one more message each.
            with (
                Broker(serving(store_dir, ns.listen_address)) as broker,
                Producer(ns.listen_address, "bench") as producer,
            ):
                for topic in TOPICS:
                    producer.send(Message(topic, b"x" * body_size, tags="t"))
                # The tail the table does not hold yet: 1% more, as a table tier that is
                # tableTierTailAge behind leaves it.
                for first in range(0, messages // 100, 1000):
                    broker.put_batch(
                        [
                            Message(
                                TOPICS[i % len(TOPICS)], b"x" * body_size, tags="t", queue_id=i % 4
                            )
                            for i in range(first, first + 1000)
                        ]
                    )
            return measure_sources(
                spark, work, store_dir, ns.listen_address, repeat, body_size, table_dir
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def serving(store_dir: str, namesrv: str, transfer_count: int | None = None) -> BrokerConfig:
    """An ASYNC_MASTER on the filled store: what the network source reads."""
    config = BrokerConfig(
        store_path_root_dir=store_dir,
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        namesrv_addr=namesrv,
    )
    if transfer_count is not None:
        config.max_transfer_count_on_message_in_memory = transfer_count
    return config


def measure_sources(
    spark: SparkSession,
    work: str,
    store_dir: str,
    namesrv: str,
    repeat: int,
    body_size: int,
    table_dir: str,
) -> tuple[int, dict[tuple[str, str], list[float]]]:
    rocketha.spark.register(spark)
    spark.dataSource.register(RowSource)
    spark.dataSource.register(CeilingSource)
    ours = spark.read.format("rocketha").option("minPartitions", PARTITIONS).load(store_dir)
    rows = ours.count()
    parquet_dir = os.path.join(work, "parquet")
    ours.write.parquet(parquet_dir)
    frames = {
        "rocketha": ours,
        "parquet": spark.read.parquet(parquet_dir),
        "python rows": spark.read.format("rocketha_rows").load(store_dir),
        "arrow ceiling": spark.read.format("rocketha_ceiling").option("rows", rows).load(store_dir),
    }
    network = (
        spark.read.format("rocketha")
        .option("minPartitions", PARTITIONS)
        .option("namesrvAddr", namesrv)
        .option("topics", ",".join(TOPICS))
    )
    results: dict[tuple[str, str], list[float]] = {}

    def time_queries(name: str, df: DataFrame) -> None:
        n = 1 if name == "python rows" else repeat
        results[name, "count"] = [rows / t for t in timed(df.count, n)]
        results[name, "per-topic"] = [rows / t for t in timed(lambda: per_topic(df), n)]

    for name, df in frames.items():
        time_queries(name, df)
    for name, count in TRANSFER_COUNT.items():
        # One broker at a time serves the store (it locks it).
        with Broker(serving(store_dir, namesrv, count)):
            time_queries(name, network.load())
            if name == "network":
                # The tail's default planning: one task per 200,000 offsets, not PARTITIONS
                # tasks of a few hundred rows each.
                tables = rocketha.spark.read_topic(
                    spark, TOPICS, table=table_dir, namesrvAddr=namesrv
                )
                if tables.count() != rows:
                    raise RuntimeError(f"table + tail: {tables.count()} rows, the store {rows}")
                time_queries("table + tail", tables)
    results.update(measure_sink(spark, work, rows // 5, body_size, repeat))
    return rows, results


def measure_sink(
    spark: SparkSession, work: str, rows: int, body_size: int, repeat: int
) -> dict[tuple[str, str], list[float]]:
    """Rows/s into one ASYNC_MASTER: through the sink (``df.write.format("rocketha")``, Spark's
    Python workers sending over loopback) and, as the baseline, ``put_batch`` of the same
    messages in this process (no network, no Spark)."""
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            store_path_root_dir=os.path.join(work, "sink-broker"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Broker(config) as broker:
            df = spark.range(rows).selectExpr(
                f"CAST(repeat('x', {body_size}) AS BINARY) AS body", "'SinkBench' AS topic"
            )
            df = df.repartition(PARTITIONS).cache()
            df.count()
            write = df.write.format("rocketha").option("namesrvAddr", ns.listen_address)
            sink = [rows / t for t in timed(lambda: write.mode("append").save(), repeat)]
            msgs = [Message("PutBench", b"x" * body_size) for _ in range(rows)]

            def put_all() -> None:
                # The sink's default batch: 128 messages a request.
                for first in range(0, rows, 128):
                    broker.put_batch(msgs[first : first + 128])

            put = [rows / t for t in timed(put_all, repeat)]
            df.unpersist()
    return {("sink", "write"): sink, ("put_batch", "write"): put}


def run(quick: bool, runs: int) -> list[Figure]:
    """The harness scenario: our rows/s beside Parquet and the row-at-a-time Python source."""
    rows, results = measure(200_000 if quick else 1_000_000, 200, max(1, runs))
    figures = []
    for query in QUERIES:
        for baseline, target in (
            ("parquet", ">= 0.5"),
            ("python rows", ">= 20"),
            ("arrow ceiling", None),
        ):
            figures.append(
                Figure(
                    "spark-ingest",
                    f"{query}, {rows:,} rows vs {baseline}",
                    "rows/s",
                    results["rocketha", query],
                    baseline,
                    results[baseline, query],
                    target=target,
                )
            )
        for network, baseline, target in (
            ("network", "rocketha", ">= 0.9"),
            ("network", "parquet", None),
            ("network 32", "rocketha", None),
        ):
            broker = (
                "maxTransferCountOnMessageInMemory=1024" if network == "network" else "defaults"
            )
            figures.append(
                Figure(
                    "spark-ingest",
                    f"{query} over the network (broker {broker}), {rows:,} rows vs "
                    + ("the store directory" if baseline == "rocketha" else baseline),
                    "rows/s",
                    results[network, query],
                    baseline,
                    results[baseline, query],
                    target=target,
                )
            )
    for query in QUERIES:
        for baseline, target in (("parquet", ">= 0.8"), ("rocketha", None)):
            figures.append(
                Figure(
                    "spark-ingest",
                    f"{query}, table + tail (read_topic: 99% Delta table, 1% over the network), "
                    f"{rows:,} rows vs "
                    + ("the store directory" if baseline == "rocketha" else baseline),
                    "rows/s",
                    results["table + tail", query],
                    baseline,
                    results[baseline, query],
                    target=target,
                )
            )
    figures.append(
        Figure(
            "spark-ingest",
            f"sink write, {rows // 5:,} rows vs put_batch in-process",
            "rows/s",
            results["sink", "write"],
            "put_batch",
            results["put_batch", "write"],
        )
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=5_000_000)
    parser.add_argument("--body-size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--store", help="reuse or create the store here (default: a temp dir)")
    args = parser.parse_args()
    rows, results = measure(args.messages, args.body_size, args.repeat, args.store)
    best = {key: max(rates) for key, rates in results.items()}
    print(f"\n{rows:,} rows of {args.body_size}-byte bodies, local[2]")
    print(f"{'rows/s':>42}")
    header = ["query", *SOURCES]
    print(
        "".join(h.rjust(14) for h in header)
        + "  net/local  net 32/local  vs parquet  vs python  vs ceiling  net/parquet"
    )
    for query in QUERIES:
        ours_rate, net, net32, parquet, python_rows, ceiling = (
            best[name, query] for name in SOURCES
        )
        print(
            f"{query:>14}"
            + "".join(f"{best[name, query]:>14,.0f}" for name in SOURCES)
            + f"{net / ours_rate:>10.2f}x{net32 / ours_rate:>13.2f}x{ours_rate / parquet:>11.2f}x"
            + f"{ours_rate / python_rows:>10.1f}x{ours_rate / ceiling:>10.2f}x"
            + f"{net / parquet:>12.2f}x"
        )
    for query in QUERIES:
        tables = best["table + tail", query]
        ratio = tables / best["parquet", query]
        print(f"{query:>14} table + tail {tables:>14,.0f} rows/s, {ratio:.2f}x parquet")
    print(
        "targets: >= 0.5x parquet (per-topic; parquet's count() reads only footers and its "
        "aggregate only the two columns it needs), >= 20x python rows, network >= 0.9x local"
    )


if __name__ == "__main__":
    main()
