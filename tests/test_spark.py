"""The Spark source: every field round-trips, options select exactly, streams resume exactly."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import rocketha.spark
from rocketha import Message, MessageStore

pytestmark = pytest.mark.spark

TOPICS = ("orders", "payments", "audit")


def _message(i: int, rng: random.Random) -> Message:
    properties = {"seq": str(i)} if i % 4 == 0 else None
    return Message(
        TOPICS[i % 3],
        bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400))),
        tags=f"tag{i % 5}" if i % 2 == 0 else None,
        keys=[f"k{i}", f"j{i}"] if i % 3 == 0 else None,
        properties=properties,
        queue_id=i % 4,
        flag=i,
    )


def _fill(store: MessageStore, first: int, count: int) -> list[tuple[Message, object]]:
    rng = random.Random(first)
    out = []
    for i in range(first, first + count):
        m = _message(i, rng)
        out.append((m, store.put(m)))
    return out


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory, spark) -> tuple[Path, list]:
    rocketha.spark.register(spark)
    path = tmp_path_factory.mktemp("store")
    with MessageStore(path, mapped_file_size_commit_log=65536) as store:
        put = _fill(store, 0, 900)
        assert len(store.segments()) >= 3
    return path, put


def _rows(df) -> list:
    return df.selectExpr(
        "*",
        "unix_millis(bornTimestamp) AS bornMs",
        "unix_millis(storeTimestamp) AS storeMs",
    ).collect()


def test_batch_reads_every_record_with_every_field(spark, store_dir) -> None:
    path, put = store_dir
    df = spark.read.format("rocketha").option("minPartitions", 7).load(str(path))
    assert df.rdd.getNumPartitions() >= 7
    rows = sorted(_rows(df), key=lambda r: r.commitLogOffset)
    assert len(rows) == len(put)
    with MessageStore(path, mapped_file_size_commit_log=65536, read_only=True) as store:
        stored = list(store.messages())
    for row, (msg, res), ext in zip(rows, put, stored, strict=True):
        assert row.topic == msg.topic
        assert row.queueId == msg.queue_id
        assert row.queueOffset == res.queue_offset
        assert row.commitLogOffset == res.offset
        assert bytes(row.body) == msg.body
        assert row.tags == msg.tags
        assert row.keys == (" ".join(msg.keys) if msg.keys else None)
        assert row.properties == msg.properties
        assert row.bornMs == ext.born_timestamp
        assert row.storeMs == res.store_timestamp
        assert row.bornHost == ext.born_host == "127.0.0.1:0"
        assert row.storeHost == "127.0.0.1:10911"
        assert row.msgId == res.msg_id
        assert row.flag == msg.flag
        assert row.sysFlag == 0
        assert row.reconsumeTimes == 0


def test_topic_and_offset_options_select_exact_rows(spark, store_dir) -> None:
    path, put = store_dir
    reader = spark.read.format("rocketha").option("path", str(path))

    got = reader.option("topics", "orders, audit").load().select("commitLogOffset").collect()
    want = {r.offset for m, r in put if m.topic in ("orders", "audit")}
    assert {r.commitLogOffset for r in got} == want and len(got) == len(want)

    offsets = {"payments": {"1": 10, "2": 5}}
    ending = {"payments": {"1": 20}}
    got = (
        reader.option("topics", "payments")
        .option("startingOffsets", json.dumps(offsets))
        .option("endingOffsets", json.dumps(ending))
        .load()
        .select("queueId", "queueOffset")
        .collect()
    )
    want = sorted(
        (m.queue_id, r.queue_offset)
        for m, r in put
        if m.topic == "payments"
        and (m.queue_id != 1 or 10 <= r.queue_offset < 20)
        and (m.queue_id != 2 or r.queue_offset >= 5)
    )
    assert sorted((r.queueId, r.queueOffset) for r in got) == want

    start, end = put[100][1].offset, put[700][1].offset
    got = (
        spark.read.format("rocketha")
        .option("startingCommitLogOffset", start)
        .option("endingCommitLogOffset", end)
        .option("minPartitions", 3)
        .load(str(path))
        .select("commitLogOffset")
        .collect()
    )
    assert sorted(r.commitLogOffset for r in got) == [r.offset for _, r in put[100:700]]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"bogus": "1"}, "bogus"),
        ({"startingOffsets": "{not json"}, "startingOffsets"),
        ({"startingOffsets": "latest"}, "startingOffsets"),
        (
            {"startingOffsets": '{"orders": {"0": 9}}', "endingOffsets": '{"orders": {"0": 3}}'},
            "endingOffsets",
        ),
        (
            {"startingCommitLogOffset": "5000", "endingCommitLogOffset": "100"},
            "endingCommitLogOffset",
        ),
        ({"startingCommitLogOffset": "7"}, "startingCommitLogOffset"),
        ({"maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ],
)
def test_bad_options_fail_at_planning_naming_the_option(spark, store_dir, options, named) -> None:
    path, _ = store_dir
    reader = spark.read.format("rocketha")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=named):
        reader.load(str(path)).count()


def test_path_that_is_not_a_store_fails(spark, store_dir, tmp_path) -> None:
    with pytest.raises(Exception, match=r"option path.*not a rocketha store"):
        spark.read.format("rocketha").load(str(tmp_path)).count()


def _run_available_now(spark, path: Path, checkpoint: Path, out: Path, **options) -> list[int]:
    """Runs an availableNow query to completion; returns the input rows of each batch."""
    stream = spark.readStream.format("rocketha")
    for k, v in options.items():
        stream = stream.option(k, v)
    query = (
        stream.load(str(path))
        .select("topic", "commitLogOffset", "queueOffset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_respects_max_offsets_per_trigger(spark, store_dir, tmp_path) -> None:
    path, put = store_dir
    sizes = _run_available_now(
        spark,
        path,
        tmp_path / "ckpt",
        tmp_path / "out",
        topics="orders",
        maxOffsetsPerTrigger=70,
    )
    orders = sum(1 for m, _ in put if m.topic == "orders")
    assert orders == 300
    assert sizes == [70, 70, 70, 70, 20]


def test_restart_on_checkpoint_while_store_grows_reads_each_record_once(spark, tmp_path) -> None:
    rocketha.spark.register(spark)
    path, ckpt, out = tmp_path / "live", tmp_path / "ckpt", tmp_path / "out"
    # The writer keeps the store open (and locked) throughout: readers attach read-only.
    with MessageStore(path, mapped_file_size_commit_log=65536) as store:
        put = _fill(store, 0, 250)
        first = _run_available_now(spark, path, ckpt, out, maxOffsetsPerTrigger=100)
        assert first == [100, 100, 50]
        put += _fill(store, 250, 300)
        second = _run_available_now(spark, path, ckpt, out, maxBytesPerTrigger=40_000)
        assert sum(second) == 300 and len(second) > 1
        put += _fill(store, 550, 10)
        third = _run_available_now(spark, path, ckpt, out)
        assert third == [10]
    rows = spark.read.parquet(str(out)).select("commitLogOffset").collect()
    assert sorted(r.commitLogOffset for r in rows) == [r.offset for _, r in put]


def test_offsets_below_min_offset_fail_or_skip_per_fail_on_data_loss(
    spark, store_dir, tmp_path
) -> None:
    path, put = store_dir
    trimmed = tmp_path / "trimmed"
    shutil.copytree(path, trimmed)
    # What retention does: the oldest segment is gone, the min offset moves up.
    (trimmed / "commitlog" / f"{0:020d}").unlink()
    reader = spark.read.format("rocketha").option("startingCommitLogOffset", 0)
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader.load(str(trimmed)).count()
    got = reader.option("failOnDataLoss", "false").load(str(trimmed)).select("commitLogOffset")
    assert sorted(r.commitLogOffset for r in got.collect()) == [
        r.offset for _, r in put if r.offset >= 65536
    ]


def test_the_spark_extra_pins_what_pyspark_supports() -> None:
    """``pip install rocketha[spark]`` resolves pandas and pyarrow within what this PySpark
    supports: it warns (FutureWarning) about pandas 3 and refuses an old pyarrow."""
    import warnings

    from pyspark.sql.pandas.utils import (
        require_minimum_pandas_version,
        require_minimum_pyarrow_version,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()
        require_minimum_pyarrow_version()
