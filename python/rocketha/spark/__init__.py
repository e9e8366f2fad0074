"""Topics as a Spark DataFrame, batch or streaming (PySpark's Python Data Source), read over the
network from the brokers or from any replica's store directory.

>>> import rocketha.spark
>>> rocketha.spark.register(spark)
>>> df = spark.read.format("rocketha").options(namesrvAddr="ns:9876", topics="orders").load()
>>> df = spark.read.format("rocketha").option("topics", "orders").load("/data/store")
>>> stream = spark.readStream.format("rocketha").option("maxOffsetsPerTrigger", 10000).load(path)

Records are decoded in Rust straight into Arrow buffers; no Python runs per row. The schema is
fixed (:data:`SCHEMA`), the same both ways. Options follow Kafka's source:

``namesrvAddr``
    read over the network through these name servers (``;``-separated) instead of a path; see
    :mod:`rocketha.spark._network` for the planning by message queue and ``preferSlave``.
``topics``
    comma-separated topics to read (default for a store: all; required over the network).
``startingOffsets`` / ``endingOffsets``
    ``earliest``, ``latest`` or JSON ``{"topic": {"queueId": queueOffset}}`` for a store,
    ``{"topic": {"brokerName:queueId": queueOffset}}`` over the network (-2 earliest, -1
    latest); queues not named are unbounded. ``endingOffsets`` is exclusive, batch only.
``startingCommitLogOffset`` / ``endingCommitLogOffset``
    a store only: the same on physical commit log offsets (the start must be a record boundary).
``maxOffsetsPerTrigger`` / ``maxBytesPerTrigger``
    streaming admission control: records (or, for a store, record bytes) per micro-batch.
``minPartitions``
    at least this many read tasks; a store is split at segment files and then at record
    boundaries inside them, the network source's queue ranges dealt into tasks of equal
    offset counts (more tasks where one would hold over 200,000 offsets).
``failOnDataLoss``
    ``true`` (default): offsets older than the store's (or queue's) min offset fail; ``false``
    skips ahead.
``preferSlave``
    network only, ``true`` (default): pull from a slave of the group that holds the range.
``groupId``
    network only: a streaming query commits its consumed offsets to this consumer group.
``accessKey`` / ``secretKey``
    network only: the account requests are signed with, for brokers with ``aclEnable=true``.

A store's streaming offset is the commit log offset, ``{"offset": "12345"}``; the network's is
the queue offsets in the JSON offsets' shape. A store being written (or replicated into) is read
up to its last complete record, and a restart from a checkpoint goes on exactly where the last
committed batch ended.

Filters are chosen with options rather than pushed down: ``pushFilters`` returns wrong results in
Spark 4.3.0 when a DataFrame is reused.

A topic's history as a table: with the table tier on (:mod:`rocketha.table_tier`),
``rocketha.spark.read_topic(spark, "orders", table=..., namesrvAddr=...)`` reads what the Delta
table holds with Spark's Parquet reader and the rest from the brokers, each message once.

As a sink, ``df.write.format("rocketha").option("namesrvAddr", ...)`` and ``writeStream`` send
rows into topics over the network (columns ``body``, ``topic``, ``tags``, ``keys``,
``properties``, ``queueId``; at least once): see ``rocketha.spark._sink``.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketha import _core
from rocketha.exceptions import ConfigError
from rocketha.spark._arrow import ARROW_SCHEMA, SCHEMA, to_record_batch
from rocketha.spark._network import NetworkBatchReader, NetworkStreamReader, QueuePartition
from rocketha.spark._options import (
    EARLIEST,
    LATEST,
    DataLossError,
    ReadOptions,
    check_boundary,
    check_start,
    parse,
    queue_bounds,
)
from rocketha.spark._sink import BatchWriter, StreamWriter, parse_write
from rocketha.spark._table import read_topic
from rocketha.store import MessageStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("rocketha.spark")

# One Arrow batch: Spark's default spark.sql.execution.arrow.maxRecordsPerBatch, and a byte cap
# so large bodies do not make one batch hold hundreds of MiB.
BATCH_ROWS = 10_000
BATCH_BYTES = 16 << 20

_NO_LIMIT = (1 << 63) - 1


def register(spark: SparkSession) -> None:
    """Registers the ``rocketha`` format with ``spark``."""
    spark.dataSource.register(RocketHADataSource)


# Read-only handles by (process, path). Spark reuses Python workers across tasks, and opening a
# store maps every segment and scans its tail; a fork gets its own entry (handles refuse to be
# used across a fork).
_stores: dict[tuple[int, str], MessageStore] = {}
_stores_lock = threading.Lock()


def _open(opts: ReadOptions, needed: int = 0) -> MessageStore:
    """A read-only handle on the store, refreshed if it has not seen offset ``needed`` yet."""
    key = (os.getpid(), opts.store_path)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = MessageStore(
                opts.store_path, mapped_file_size_commit_log=opts.mapped_file_size, read_only=True
            )
            _stores[key] = store
    if store.max_offset < needed:
        store.refresh()
    return store


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """The records starting in ``[start, end)`` of the commit log."""

    start: int
    end: int


def _partitions(
    opts: ReadOptions, store: MessageStore, start: int, end: int
) -> list[RangePartition]:
    if start >= end:
        return []
    points = _core.split_points(store, start, end, opts.min_partitions)
    return [RangePartition(lo, hi) for lo, hi in itertools.pairwise(points)]


def _filter(opts: ReadOptions, bounds: list[tuple[str, int, int, int]]) -> _core.RecordFilter:
    return _core.RecordFilter(list(opts.topics) if opts.topics else None, bounds)


def _read(
    opts: ReadOptions, bounds: list[tuple[str, int, int, int]], part: RangePartition
) -> Iterator[pa.RecordBatch]:
    store = _open(opts, part.end)
    start = check_start(opts, store, part.start, "partition start offset")
    if start >= part.end:
        return
    reader = _core.ArrowReader(
        store,
        start,
        part.end,
        _filter(opts, bounds),
        max_rows=BATCH_ROWS,
        max_bytes=BATCH_BYTES,
    )
    while (batch := reader.next_batch()) is not None:
        if batch.num_rows:
            yield to_record_batch(batch)


def _check_schema(schema: StructType | None) -> None:
    if schema is not None and schema != SCHEMA:
        raise ConfigError(f"schema: the rocketha source's schema is fixed: {SCHEMA.simpleString()}")


class RocketHADataSource(DataSource):
    """``spark.read.format("rocketha")`` and ``spark.readStream.format("rocketha")``; as a
    sink, ``df.write.format("rocketha")`` and ``writeStream`` (see :mod:`rocketha.spark._sink`)."""

    @classmethod
    def name(cls) -> str:
        return "rocketha"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        opts = parse(self.options, streaming=False)
        return NetworkBatchReader(opts) if opts.namesrv_addr else BatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        opts = parse(self.options, streaming=True)
        return NetworkStreamReader(opts) if opts.namesrv_addr else StreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(parse_write(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(parse_write(self.options, schema, overwrite))


class BatchReader(DataSourceReader):
    """Plans commit log ranges once, from the store as it is at planning."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        store = _open(opts)
        store.refresh()
        start = opts.starting_commit_log_offset
        if start is None:
            start = store.min_offset
        else:
            check_boundary(store, start, "startingCommitLogOffset")
            start = check_start(opts, store, start, "option startingCommitLogOffset")
        end = store.max_offset
        if opts.ending_commit_log_offset is not None:
            end = min(end, opts.ending_commit_log_offset)
        self.start, self.end = start, max(start, end)
        self.bounds = queue_bounds(opts, store)

    def partitions(self) -> Sequence[InputPartition]:
        return _partitions(self.opts, _open(self.opts), self.start, self.end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            # Spark's stand-in for an empty plan (``InputPartition(None)``): nothing to read.
            return iter(())
        return _read(self.opts, self.bounds, partition)


def _offset(value: int) -> dict[str, str]:
    return {"offset": str(value)}


def _value(offset: dict[str, Any], what: str) -> int:
    try:
        return int(offset["offset"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{what} {offset!r} is not {{'offset': '<commit log offset>'}}") from None


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over commit log offsets; the store is refreshed for each new batch."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        store = _open(opts)
        if opts.starting_commit_log_offset is not None:
            check_boundary(store, opts.starting_commit_log_offset, "startingCommitLogOffset")
        self.bounds = queue_bounds(opts, store)
        # Trigger.AvailableNow: the max offset when the query started; later data waits.
        self.target: int | None = None

    def _latest(self) -> int:
        store = _open(self.opts)
        latest = store.refresh()
        return latest if self.target is None else min(latest, self.target)

    def initialOffset(self) -> dict[str, str]:
        store = _open(self.opts)
        if self.opts.starting_commit_log_offset is not None:
            return _offset(self.opts.starting_commit_log_offset)
        if self.opts.starting == LATEST:
            return _offset(store.refresh())
        assert self.opts.starting == EARLIEST or isinstance(self.opts.starting, dict)
        return _offset(store.min_offset)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = _open(self.opts).refresh()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, str]:
        store = _open(self.opts)
        begin = check_start(self.opts, store, _value(start, "start offset"), "start offset")
        end = self._latest()
        if isinstance(limit, ReadAllAvailable) or begin >= end:
            return _offset(max(begin, end))
        max_rows, max_bytes = _NO_LIMIT, _NO_LIMIT
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            max_bytes = self.opts.max_bytes_per_trigger or _NO_LIMIT
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        filter_ = _filter(self.opts, self.bounds)
        return _offset(
            _core.admit(store, begin, end, filter_, max_rows=max_rows, max_bytes=max_bytes)
        )

    def reportLatestOffset(self) -> dict[str, str]:
        return _offset(self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        store = _open(self.opts)
        first = check_start(self.opts, store, _value(start, "start offset"), "start offset")
        return _partitions(self.opts, store, first, _value(end, "end offset"))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return _read(self.opts, self.bounds, partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to acknowledge: the log is read, never consumed.
        pass


__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA",
    "BatchReader",
    "DataLossError",
    "NetworkBatchReader",
    "NetworkStreamReader",
    "QueuePartition",
    "RangePartition",
    "RocketHADataSource",
    "StreamReader",
    "read_topic",
    "register",
]
