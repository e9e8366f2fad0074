"""Spark ingest throughput of the rocketha source against two baselines measured in the same run.

Usage::

    python benches/spark_ingest.py [--messages N] [--body-size B] [--store DIR]

Writes N messages (default 5,000,000 of 200 bytes, over 8 topics) into a fresh store, then times
two queries, ``count()`` and a per-topic aggregate (messages and body bytes), three ways:

- ``rocketha``: this source (records decoded in Rust into Arrow batches);
- ``parquet``: Spark reading the same rows from Parquet (written once from this source, untimed);
  the target is at least 0.5 of its rows/s. Its ``count()`` reads only Parquet footers, so that
  ratio is shown but is not comparable;
- ``python rows``: a row-at-a-time Python data source yielding tuples from the same store; the
  target is at least 20x it.

Each query runs once to warm up (page cache, Python workers), then the best of ``--repeat`` runs
counts. Prints a table of rows/s and the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import rocketha.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType
from rocketha import Message, MessageStore, _core
from rocketha.spark import SCHEMA, RangePartition

TOPICS = [f"topic{i}" for i in range(8)]
SEGMENT = 256 << 20
# Read tasks for both Python sources: two per core, as Parquet gets from its 128 MiB splits.
PARTITIONS = 4


def fill(path: str, messages: int, body_size: int) -> None:
    body = b"x" * body_size
    batch = 10_000
    with MessageStore(path, mapped_file_size=SEGMENT) as store:
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
        store = MessageStore(self.path, mapped_file_size=SEGMENT, read_only=True)
        points = _core.split_points(store, store.min_offset, store.max_offset, PARTITIONS)
        return [RangePartition(lo, hi) for lo, hi in itertools.pairwise(points)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from datetime import UTC, datetime

        assert isinstance(partition, RangePartition)
        store = MessageStore(self.path, mapped_file_size=SEGMENT, read_only=True)
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
            )


def per_topic(df: DataFrame) -> list:
    return df.groupBy("topic").agg(F.count("*"), F.sum(F.length("body"))).collect()


def timed(run: Callable[[], object], repeat: int) -> float:
    run()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=5_000_000)
    parser.add_argument("--body-size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--store", help="reuse or create the store here (default: a temp dir)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="rocketha-bench-")
    store_dir = args.store or os.path.join(work, "store")
    if not os.path.isdir(os.path.join(store_dir, "commitlog")):
        t = time.perf_counter()
        fill(store_dir, args.messages, args.body_size)
        print(f"wrote {args.messages:,} messages in {time.perf_counter() - t:.1f} s")

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
    rocketha.spark.register(spark)
    spark.dataSource.register(RowSource)
    ours = spark.read.format("rocketha").option("minPartitions", PARTITIONS).load(store_dir)
    rows = ours.count()
    parquet_dir = os.path.join(work, "parquet")
    ours.write.parquet(parquet_dir)
    parquet = spark.read.parquet(parquet_dir)
    python_rows = spark.read.format("rocketha_rows").load(store_dir)

    results: dict[tuple[str, str], float] = {}
    for name, df in (("rocketha", ours), ("parquet", parquet), ("python rows", python_rows)):
        repeat = 1 if name == "python rows" else args.repeat
        results[name, "count"] = rows / timed(df.count, repeat)
        results[name, "per-topic"] = rows / timed(lambda df=df: per_topic(df), repeat)

    print(f"\n{rows:,} rows of {args.body_size}-byte bodies, local[2]")
    print(
        f"{'query':<10} {'rocketha rows/s':>16} {'parquet rows/s':>15} {'python rows/s':>14}"
        f" {'vs parquet':>11} {'vs python':>10}"
    )
    for query in ("count", "per-topic"):
        ours_rate = results["rocketha", query]
        pq, py = results["parquet", query], results["python rows", query]
        print(
            f"{query:<10} {ours_rate:>16,.0f} {pq:>15,.0f} {py:>14,.0f}"
            f" {ours_rate / pq:>10.2f}x {ours_rate / py:>9.1f}x"
        )
    print(
        "targets: >= 0.5x parquet (per-topic; parquet's count() reads only footers), "
        ">= 20x python rows"
    )
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
