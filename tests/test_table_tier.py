"""The table tier (issue 31): chosen topics written from the commit log into a Delta table,
sealed segments first and the tail once old enough, each row once across restarts and a
SIGKILL mid-write; retention waits for the table; bad config is refused naming the key; and
Spark reads a topic through table + log, each message once while producers keep sending."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from helpers import SEGMENT, broker_pair, wait_for
from rocketha import BrokerConfig, ConfigError, Message, MessageStore, NameServer, Producer
from rocketha.table_tier import TableTier, coverage, open_table
from test_spark_network import _available_now

deltalake = pytest.importorskip("deltalake")

EVERY_HOUR = ";".join(str(h) for h in range(24))


def open_store(path: Path) -> MessageStore:
    """64 KiB segments; retention of anything over a millisecond old when a test asks."""
    return MessageStore(
        path,
        mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=50 * 20,
        delete_when=EVERY_HOUR,
        file_reserved_time=1,
        file_reserved_time_unit_ms=1,
        clean_resource_interval=3_600_000,
    )


def fill(store: MessageStore, count: int, topics: tuple[str, ...] = ("T", "U")) -> None:
    for first in range(0, count, 500):
        store.put_batch(
            [
                Message(topics[i % len(topics)], f"m{i}".encode() * 20, queue_id=i % 3)
                for i in range(first, min(count, first + 500))
            ]
        )


def table_rows(path: Path) -> list[tuple[str, int, int]]:
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table(
        columns=["topic", "queueId", "queueOffset"]
    )
    return sorted(zip(*t.to_pydict().values(), strict=True))


def expected(store: MessageStore, topic: str, below: int | None = None) -> list:
    return sorted(
        (m.topic, m.queue_id, m.queue_offset)
        for m in store.messages()
        if m.topic == topic and (below is None or m.commitlog_offset < below)
    )


def test_sealed_segments_then_the_old_tail_each_row_once(tmp_path: Path) -> None:
    table = tmp_path / "table"
    with open_store(tmp_path / "store") as store:
        fill(store, 3000)
        sealed = store.segments()[-1][1]
        tier = TableTier(store, "b", ["T"], str(table), tail_age=3600)
        written = tier.write_once()
        assert table_rows(table) == expected(store, "T", below=sealed)
        assert written == len(table_rows(table))
        held = coverage(deltalake.DeltaTable(str(table)))["b"]
        assert held.end == tier.covered.end <= sealed
        # The next queue offset of each queue: one past the last row the table holds.
        for queue_id in range(3):
            rows = [o for t, q, o in table_rows(table) if q == queue_id]
            assert held.queues[("T", queue_id)] == max(rows) + 1
        assert tier.write_once() == 0, "nothing new: nothing written twice"
        # The tail once it is old enough (an hour later).
        tier.write_once(now=time.time() + 7200)
        assert table_rows(table) == expected(store, "T")
        # Columns as the Spark source's, and the day partition from the store time.
        t = deltalake.DeltaTable(str(table)).to_pyarrow_table()
        assert t.column("brokerName").unique().to_pylist() == ["b"]
        assert set(t.column("day").to_pylist()) == set(
            pc.strftime(t.column("storeTimestamp"), format="%Y-%m-%d").to_pylist()
        )
        assert t.column("body")[0].as_py().startswith(b"m")
        # A new writer (a restart) goes on from the table's last commit.
        fill(store, 600)
        again = TableTier(store, "b", ["T"], str(table), tail_age=0)
        assert again.covered.end == tier.covered.end
        again.write_once()
        rows = table_rows(table)
        assert rows == expected(store, "T") and len(rows) == len(set(rows))


WRITER = textwrap.dedent(
    """
    import sys, rocketha.table_tier as tt
    from rocketha import MessageStore
    tt.COMMIT_ROWS = 200
    with MessageStore(sys.argv[1], mapped_file_size_commit_log={segment}) as store:
        tier = tt.TableTier(store, "b", ["T"], sys.argv[2], tail_age=0)
        print("STARTED", flush=True)
        tier.write_once()
    """
)


def test_a_writer_killed_mid_write_leaves_a_consistent_table_and_resumes(tmp_path: Path) -> None:
    store_dir, table = tmp_path / "store", tmp_path / "table"
    with open_store(store_dir) as store:
        fill(store, 6000)
    script = WRITER.format(segment=SEGMENT)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(store_dir), str(table)], stdout=subprocess.PIPE
    )
    try:
        wait_for(lambda: open_table(str(table)) is not None, what="the first commit")
        wait_for(lambda: deltalake.DeltaTable(str(table)).version() >= 2, what="more commits")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    # Whatever the kill interrupted, the table is its last commit: rows and coverage agree.
    snapshot = deltalake.DeltaTable(str(table))
    held = coverage(snapshot)["b"]
    rows = table_rows(table)
    assert len(rows) == len(set(rows))
    with open_store(store_dir) as store:
        assert rows == expected(store, "T", below=held.end)
        TableTier(store, "b", ["T"], str(table), tail_age=0).write_once()
        rows = table_rows(table)
        assert rows == expected(store, "T") and len(rows) == len(set(rows))


def test_retention_waits_for_the_table(tmp_path: Path) -> None:
    with open_store(tmp_path / "store") as store:
        fill(store, 4000, topics=("T",))
        tier = TableTier(store, "b", ["T"], str(tmp_path / "table"), tail_age=3600)
        past = time.time() - 60
        for path, _, _ in store.segments():
            os.utime(path, (past, past))
        assert store.clean_now()[1] == [], "nothing in the table yet: nothing deleted"
        store.set_fake_disk_used_ratio(0.87)  # past diskSpaceCleanForciblyRatio
        assert store.clean_now()[1] == [], "not even forcibly"
        store.set_fake_disk_used_ratio(None)
        segments = len(store.segments())
        tier.write_once()
        # The sealed segments are in the table: they go (deleteFileBatchMax, 10, a pass), the
        # one being written stays.
        assert len(store.clean_now()[1] + store.clean_now()[1]) == segments - 1
        assert store.min_offset == tier.covered.end
        # Every record the log dropped is in the table.
        held = {(t, q, o) for t, q, o in table_rows(tmp_path / "table")}
        assert all(
            (m.topic, m.queue_id, m.queue_offset) in held
            for m in store.messages()
            if m.commitlog_offset < tier.covered.end
        )


def test_bad_table_config_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tableTierPath"):
        BrokerConfig(table_tier_topics="T").native()
    with pytest.raises(ConfigError, match="tableTierTopics"):
        BrokerConfig(table_tier_path=str(tmp_path)).native()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with open_store(tmp_path / "store") as store:
        with pytest.raises(ConfigError, match=r"tableTierPath=.*file.*not a writable directory"):
            TableTier(store, "b", ["T"], str(blocker / "table"))
        fill(store, 100)
        assert store.max_offset > 0, "the log is untouched"


@pytest.mark.spark
def test_spark_reads_table_and_tail_each_message_once_while_producers_send(
    tmp_path: Path, spark: object
) -> None:
    """1,000,000 messages, the slave's table tier holding all but the last ones; a Spark job
    over table + log while a producer keeps sending counts each message once, every queue
    contiguous from 0 across the seam."""
    import rocketha.spark
    from pyspark.sql import functions as F

    table = tmp_path / "table"
    with NameServer("127.0.0.1:0") as ns:
        tier = dict(
            table_tier_topics="Orders",
            table_tier_path=str(table),
            # Written when the test says (write_once), not by the thread's timer.
            table_tier_interval=3_600_000,
            table_tier_tail_age=0,
        )
        with broker_pair(tmp_path, "tables", ns.listen_address, **tier) as (master, slave):
            for first in range(0, 1_000_000, 10_000):
                master.put_batch(
                    [
                        Message("Orders", b"x" * 100, queue_id=i % 4)
                        for i in range(first, first + 10_000)
                    ]
                )
            wait_for(lambda: slave.max_offset == master.max_offset, what="the slave to catch up")
            assert slave.table_tier is not None
            slave.table_tier.write_once()
            with Producer(ns.listen_address, "tables-test") as producer:
                producer.send(Message("Orders", b"after the table"))
                sending = threading.Event()

                def keep_sending() -> None:
                    while not sending.is_set():
                        producer.send(Message("Orders", b"live"))

                sender = threading.Thread(target=keep_sending)
                sender.start()
                try:
                    rocketha.spark.register(spark)
                    df = rocketha.spark.read_topic(
                        spark, "Orders", table=str(table), namesrvAddr=ns.listen_address
                    )
                    per_queue = (
                        df.groupBy("brokerName", "queueId")
                        .agg(
                            F.count("*").alias("n"),
                            F.countDistinct("queueOffset").alias("distinct"),
                            F.min("queueOffset").alias("lo"),
                            F.max("queueOffset").alias("hi"),
                        )
                        .collect()
                    )
                finally:
                    sending.set()
                    sender.join()
    held = coverage(deltalake.DeltaTable(str(table)))["tables"]
    assert sum(held.queues.values()) == 1_000_000
    total = 0
    for row in per_queue:
        assert row["n"] == row["distinct"] == row["hi"] + 1, row
        assert row["lo"] == 0 and row["hi"] + 1 >= held.queues[("Orders", row["queueId"])]
        total += row["n"]
    assert total > 1_000_000, "the tail past the table was read too"


@pytest.mark.spark
def test_a_stream_starts_from_the_table_and_continues_from_the_log(
    tmp_path: Path, spark: object
) -> None:
    """``readStream`` with ``table``: the first micro-batch takes what the table holds, then the
    log's rows past it; a restart from the checkpoint goes on from there, each row once."""
    import rocketha.spark

    table, out, ckpt = tmp_path / "table", tmp_path / "out", tmp_path / "ckpt"
    with NameServer("127.0.0.1:0") as ns:
        tier = dict(
            table_tier_topics="Flow",
            table_tier_path=str(table),
            table_tier_interval=3_600_000,
            table_tier_tail_age=3_600_000,
            # Retention of anything the table holds, when the test says (clean_now).
            mapped_file_size_consume_queue=50 * 20,
            delete_when=";".join(str(h) for h in range(24)),
            file_reserved_time=1,
            file_reserved_time_unit_ms=1,
            clean_resource_interval=3_600_000,
        )
        with (
            broker_pair(tmp_path, "flow", ns.listen_address, **tier) as (master, slave),
            Producer(ns.listen_address, "flow-test") as producer,
        ):
            for i in range(400):
                producer.send(Message("Flow", f"m{i}".encode() * 100))
            wait_for(lambda: slave.max_offset == master.max_offset, what="the slave")
            assert slave.table_tier is not None
            assert slave.table_tier.write_once() > 0, "sealed segments into the table"
            assert slave.table_tier.covered.end < slave.max_offset, "a tail is left"
            # The log drops what the table holds: the rows before are only in the table now.
            for broker in (master, slave):
                past = time.time() - 60
                for path, _, _ in broker.store.segments():
                    os.utime(path, (past, past))
                broker.store.clean_now()
            assert 0 < slave.min_offset == slave.table_tier.covered.end
            assert master.min_offset > 0
            rocketha.spark.register(spark)

            stream = dict(topics="Flow", table=str(table))
            _available_now(spark, ns.listen_address, ckpt, out, **stream)
            for i in range(400, 500):
                producer.send(Message("Flow", f"m{i}".encode() * 100))
            _available_now(spark, ns.listen_address, ckpt, out, **stream)
            # The table holding everything, the log's part of a batch read is empty.
            slave.table_tier.write_once(now=time.time() + 7200)
            assert slave.table_tier.covered.end == slave.max_offset
            whole = rocketha.spark.read_topic(
                spark, "Flow", table=str(table), namesrvAddr=ns.listen_address
            )
            assert whole.count() == 500
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r["queueId"], r["queueOffset"]) for r in rows]
    assert len(keys) == len(set(keys)) == 500
    assert {bytes(r["body"]).split(b"m")[1] for r in rows} == {str(i).encode() for i in range(500)}
    per_queue: dict[int, list[int]] = {}
    for q, o in keys:
        per_queue.setdefault(q, []).append(o)
    assert all(sorted(v) == list(range(len(v))) for v in per_queue.values())
