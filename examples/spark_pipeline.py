"""Ingest a rocketha store with Spark Structured Streaming: messages and bytes per topic per minute.

Usage::

    python examples/spark_pipeline.py STORE_DIR OUT_DIR [--follow] [--max-per-batch N]

``STORE_DIR`` is any replica's store directory; a broker may be writing it (the source opens it
read-only). Each micro-batch's counts, by topic and one-minute window of ``storeTimestamp``, are
written as Parquet to ``OUT_DIR/counts/batch=<id>``; a batch replayed after a crash overwrites its
own directory, so the output holds every message exactly once. A minute spanning several batches
appears in each; sum them when reading::

    spark.read.parquet(f"{OUT_DIR}/counts").groupBy("minute", "topic").sum("messages", "bytes")

The checkpoint lives in ``OUT_DIR/checkpoint``: run again and it continues where it stopped.
Without ``--follow`` the query reads what is in the store now and exits (Trigger.AvailableNow);
with it, it keeps polling for new messages every 10 seconds.
"""

from __future__ import annotations

import argparse
import os
import sys

import rocketha.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def per_topic_minute(df: DataFrame) -> DataFrame:
    return df.groupBy(F.window("storeTimestamp", "1 minute").start.alias("minute"), "topic").agg(
        F.count("*").alias("messages"), F.sum(F.length("body")).alias("bytes")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("store_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--follow", action="store_true", help="keep running, polling every 10 s")
    parser.add_argument("--max-per-batch", type=int, default=1_000_000, help="maxOffsetsPerTrigger")
    args = parser.parse_args()

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

    stream = (
        spark.readStream.format("rocketha")
        .option("maxOffsetsPerTrigger", args.max_per_batch)
        .load(args.store_dir)
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", os.path.join(args.out_dir, "checkpoint"))
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
