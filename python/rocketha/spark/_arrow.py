"""Spark's row schema for a commit log record: :data:`rocketha.arrow.ARROW_SCHEMA` as Spark
types. Spark checks every ``pyarrow.RecordBatch`` a Python data source yields against
``to_arrow_schema(schema, timezone="UTC")``; that conversion is checked here, at import, to
give exactly the Arrow schema the decoder's batches have.
"""

from __future__ import annotations

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

from rocketha.arrow import ARROW_SCHEMA, to_record_batch

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
        StructField("brokerName", StringType()),
    ]
)

if to_arrow_schema(SCHEMA, timezone="UTC") != ARROW_SCHEMA:
    raise RuntimeError("rocketha.spark: SCHEMA no longer converts to rocketha.arrow.ARROW_SCHEMA")

__all__ = ["ARROW_SCHEMA", "SCHEMA", "to_record_batch"]
