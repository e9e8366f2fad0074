"""Topics as tables: the table tier's Delta table (:mod:`rocketha.table_tier`) for the history
it holds, read by Spark's own Parquet reader, and the network source for the rest.

>>> df = rocketha.spark.read_topic(spark, "orders", table="/data/tables/rocketha",
...                                namesrvAddr="ns:9876")

The table is read as of one Delta version: its files, and the queue offsets that version's
commits say the table holds. The network source starts every queue exactly there, so each
message is in the DataFrame once, however the table and the log move while the query plans.

Spark reads the snapshot's Parquet files with ``spark.read.parquet`` rather than the Delta
connector: ``delta-spark`` 4.x (the newest on Maven Central is built for Spark 4.2) fails on the
Spark 4.3 rocketha supports (``NoSuchMethodError: LogicalRDD.<init>``), and Iceberg's runtime
stops at Spark 4.1. The file list comes from the Delta log (delta-rs), so files a crashed
writer left behind and no commit names are never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StringType, StructField, StructType

from rocketha.exceptions import ConfigError
from rocketha.spark._arrow import ARROW_SCHEMA, SCHEMA
from rocketha.spark._options import QueueKey, ReadOptions
from rocketha.table_tier import coverage, open_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The table's columns as Spark reads its files: the source's, and the ``day`` partition.
TABLE_SCHEMA = StructType([*SCHEMA.fields, StructField("day", StringType())])


def read_topic(
    spark: SparkSession,
    topics: str | list[str],
    *,
    table: str,
    namesrvAddr: str,
    **options: Any,
) -> DataFrame:
    """``topics`` (a name, comma-separated names, or a list) as one DataFrame: the rows the
    Delta table at ``table`` holds, then the rest of each queue from the brokers through
    ``namesrvAddr``. ``options`` go to the network source (``minPartitions``,
    ``preferSlave``, ``accessKey``, ...); ``startingOffsets`` is this function's to set."""
    names = [t.strip() for t in topics.split(",")] if isinstance(topics, str) else list(topics)
    if not names or not all(names):
        raise ConfigError(f"topics: name at least one topic, got {topics!r}")
    if "startingOffsets" in options:
        raise ConfigError(
            "startingOffsets: read_topic starts each queue where the table ends; read the "
            "source with spark.read.format('rocketha') to choose offsets"
        )
    snapshot = open_table(table)
    tail = (
        spark.read.format("rocketha")
        .options(**{k: str(v) for k, v in options.items()})
        .option("namesrvAddr", namesrvAddr)
        .option("topics", ",".join(names))
    )
    if snapshot is None:
        return tail.load()
    starts: dict[str, dict[str, int]] = {}
    for broker_name, held in coverage(snapshot).items():
        for (topic, queue_id), offset in held.queues.items():
            if topic in names:
                starts.setdefault(topic, {})[f"{broker_name}:{queue_id}"] = offset
    files = snapshot.file_uris(file_pruning_predicate=[("topic", "in", names)])
    tail_df = tail.option("startingOffsets", json.dumps(starts)).load()
    if not files:
        return tail_df
    held_df = (
        spark.read.schema(TABLE_SCHEMA)
        .option("basePath", snapshot.table_uri)
        .parquet(*files)
        .select(*SCHEMA.fieldNames())
    )
    return held_df.unionByName(tail_df)


@dataclass(frozen=True)
class TablePartition(InputPartition):
    """Rows of the table: its files ``files`` (of the table at ``base``), filtered to the
    queue ranges ``bounds``, ``(topic, brokerName, queueId, start, end)``."""

    base: str
    files: tuple[str, ...]
    bounds: tuple[tuple[str, str, int, int, int], ...]


def first_offsets(opts: ReadOptions) -> dict[QueueKey, int]:
    """The first queue offset the table holds of each queue."""
    snapshot = open_table(_table_path(opts))
    if snapshot is None:
        return {}
    return {
        (topic, broker_name, queue_id): offset
        for broker_name, held in coverage(snapshot).items()
        for (topic, queue_id), offset in held.first.items()
    }


def split(
    opts: ReadOptions, starts: dict[QueueKey, int], ends: dict[QueueKey, int]
) -> tuple[list[TablePartition], dict[QueueKey, int]]:
    """Each queue's ``[start, end)`` cut where the table's newest commit ends it: the part
    before as table partitions, and where each queue's read from the log starts. The table
    only grows, so a retried micro-batch, cut at a later commit, reads the same rows."""
    snapshot = open_table(_table_path(opts))
    if snapshot is None:
        return [], starts
    held = coverage(snapshot)
    bounds = []
    log_starts = dict(starts)
    for key, start in sorted(starts.items()):
        topic, broker_name, queue_id = key
        table_end = held[broker_name].queues.get((topic, queue_id)) if broker_name in held else None
        end = ends.get(key)
        if table_end is None or end is None or start >= table_end:
            continue
        cut = min(end, table_end)
        bounds.append((topic, broker_name, queue_id, start, cut))
        log_starts[key] = cut
    if not bounds:
        return [], log_starts
    files = snapshot.file_uris(
        file_pruning_predicate=[("topic", "in", sorted({b[0] for b in bounds}))]
    )
    tasks = max(1, min(len(files), opts.min_partitions))
    parts = [
        TablePartition(_table_path(opts), tuple(files[i::tasks]), tuple(bounds))
        for i in range(tasks)
    ]
    return [p for p in parts if p.files], log_starts


def read_table(part: TablePartition) -> Iterator[pa.RecordBatch]:
    """The partition's rows as the source's Arrow batches (the Parquet decoder's, no Python
    per row)."""
    partitioning = ds.partitioning(
        pa.schema([("topic", pa.string()), ("day", pa.string())]), flavor="hive"
    )
    dataset = ds.dataset(
        list(part.files), format="parquet", partitioning=partitioning, partition_base_dir=part.base
    )
    wanted = None
    for topic, broker_name, queue_id, start, end in part.bounds:
        one = (
            (ds.field("topic") == topic)
            & (ds.field("brokerName") == broker_name)
            & (ds.field("queueId") == queue_id)
            & (ds.field("queueOffset") >= start)
            & (ds.field("queueOffset") < end)
        )
        wanted = one if wanted is None else wanted | one
    for batch in dataset.to_batches(columns=ARROW_SCHEMA.names, filter=wanted):
        if batch.num_rows:
            yield pa.RecordBatch.from_arrays(batch.columns, schema=ARROW_SCHEMA)


def _table_path(opts: ReadOptions) -> str:
    assert opts.table is not None
    return opts.table
