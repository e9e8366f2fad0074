"""A commit log record as an Arrow row, and zero-copy wrapping of the batches the Rust decoder
builds (``_core.ArrowReader``). Spark's source yields these batches, and the table tier writes
them; this module needs no PySpark, so a broker writing the table does not load it.

:mod:`rocketha.spark._arrow` checks at import that Spark's schema converts to exactly
:data:`ARROW_SCHEMA` (timestamps ``timestamp[us, tz=UTC]``, the map's entries a non-null struct
of a non-null key and a nullable value), so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from rocketha import _core

_TIMESTAMP = pa.timestamp("us", tz="UTC")

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("commitLogOffset", pa.int64()),
        ("body", pa.binary()),
        ("tags", pa.string()),
        ("keys", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("bornTimestamp", _TIMESTAMP),
        ("storeTimestamp", _TIMESTAMP),
        ("bornHost", pa.string()),
        ("storeHost", pa.string()),
        ("msgId", pa.string()),
        ("flag", pa.int32()),
        ("sysFlag", pa.int32()),
        ("reconsumeTimes", pa.int32()),
        # The broker group the record was read from; null when read from a store directory,
        # which does not know its group's name.
        ("brokerName", pa.string()),
    ]
)


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
