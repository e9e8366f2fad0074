"""Spark's row schema for a commit log record, and zero-copy wrapping of Rust-built buffers.

Spark checks every ``pyarrow.RecordBatch`` a Python data source yields against
``to_arrow_schema(schema, timezone="UTC")``; the Arrow schema here comes from that same function,
so the two cannot drift apart (timestamps are ``timestamp[us, tz=UTC]``, the map's entries are a
non-null struct of a non-null key and a nullable value).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketha import _core

SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("queueId", IntegerType()),
        StructField("queueOffset", LongType()),
        StructField("commitLogOffset", LongType()),
        StructField("body", BinaryType()),
        StructField("tags", StringType()),
        StructField("keys", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("bornTimestamp", TimestampType()),
        StructField("storeTimestamp", TimestampType()),
        StructField("bornHost", StringType()),
        StructField("storeHost", StringType()),
        StructField("msgId", StringType()),
        StructField("flag", IntegerType()),
        StructField("sysFlag", IntegerType()),
        StructField("reconsumeTimes", IntegerType()),
        # The broker group the record was read from; null when read from a store directory,
        # which does not know its group's name.
        StructField("brokerName", StringType()),
    ]
)

ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")


def to_record_batch(batch: _core.ColumnarBatch, broker_name: str | None = None) -> pa.RecordBatch:
    """Wraps the batch's buffers (in ``rocketha_core::arrow::ColumnBatch::buffers`` order) and
    adds the constant ``brokerName`` column."""
    buffers: Iterator[pa.Buffer] = iter(pa.py_buffer(b) for b in batch.buffers())

    def validity() -> pa.Buffer | None:
        # An empty bitmap means the column has no nulls.
        b = next(buffers)
        return b if b.size else None

    rows = batch.num_rows
    columns = []
    for field in list(ARROW_SCHEMA)[:-1]:
        kind = field.type
        if isinstance(kind, pa.MapType):
            valid, offsets = validity(), next(buffers)
            entries = batch.property_entries
            keys = pa.Array.from_buffers(
                kind.key_type, entries, [None, next(buffers), next(buffers)]
            )
            values = pa.Array.from_buffers(
                kind.item_type, entries, [validity(), next(buffers), next(buffers)]
            )
            pairs = pa.StructArray.from_arrays(
                [keys, values], fields=[kind.key_field, kind.item_field]
            )
            columns.append(pa.Array.from_buffers(kind, rows, [valid, offsets], children=[pairs]))
        elif kind in (pa.string(), pa.binary()):
            columns.append(
                pa.Array.from_buffers(kind, rows, [validity(), next(buffers), next(buffers)])
            )
        else:
            columns.append(pa.Array.from_buffers(kind, rows, [validity(), next(buffers)]))
    columns.append(pa.repeat(pa.scalar(broker_name, pa.string()), rows))
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
