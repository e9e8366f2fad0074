"""The table tier: a broker writes the messages of chosen topics into a Delta Lake table that
Spark, or any Delta or Parquet reader, reads at columnar speed (``rocketha.spark.read_topic``).

In ``broker.conf``, on a slave by preference (its master's write path is then untouched)::

    tableTierTopics=orders,payments
    tableTierPath=/data/tables/rocketha
    tableTierInterval=60000     # ms between writes
    tableTierTailAge=60000      # ms: the segment being written is taken up to records this old

Every ``tableTierInterval`` the broker decodes what its commit log holds past the last write
(the Rust decoder's Arrow batches, no Python per row): every record of the sealed segments, and
of the segment being written those stored ``tableTierTailAge`` ago or earlier. Rows have the
Spark source's columns (:data:`rocketha.arrow.ARROW_SCHEMA`) plus ``day`` (the store
timestamp's UTC date), partitioned by ``topic`` and ``day``.

Each write is one Delta commit (atomic: a broker killed mid-write leaves files no commit names,
which ``DeltaTable.vacuum`` removes, and the table as of its last commit). The commit carries a
Delta *app transaction* ``rocketha-table-tier:<brokerName>`` whose version is the commit log
offset the table holds this broker group's log up to, and the group's next queue offset per
queue (:data:`META_QUEUES`). A broker resumes from that offset, so no row is written twice,
whether it was killed, restarted, or its slave re-seeded (a slave's commit log offsets are its
master's). Readers take the table for the queue offsets a commit says it holds and the log for
the rest: the seam has no gap and no duplicate.

While the tier is on, retention keeps every commit log segment the table does not hold yet
(``fileReservedTime`` and a full disk included: a slave whose disk fills stops replicating
rather than lose rows). The table has its own retention: ``DeltaTable.delete`` by ``day``,
``optimize.compact`` and ``vacuum``, by the operator.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketha import _core
from rocketha._service import ServiceThread, Woke
from rocketha.arrow import ARROW_SCHEMA, to_record_batch
from rocketha.exceptions import ConfigError

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from rocketha.store import MessageStore

log = logging.getLogger("rocketha.table_tier")

#: The Delta app transaction a broker group's writes carry: its version is the commit log
#: offset the table holds the group's log up to.
APP_ID = "rocketha-table-tier:{broker_name}"
#: Commit metadata: the broker group a commit is from, and its next queue offset per queue,
#: ``{"topic": {"queueId": offset}}``, every queue the table holds so far.
META_BROKER = "rocketha.brokerName"
META_QUEUES = "rocketha.queueOffsets"
#: And the first queue offset it holds of each queue, the same shape.
META_FIRST = "rocketha.firstQueueOffsets"
PARTITION_BY = ["topic", "day"]
#: Rows of one commit at most: bounds the writer's memory (about 64 MiB of 200 B messages).
COMMIT_ROWS = 300_000
_BATCH_ROWS = 10_000
_BATCH_BYTES = 16 << 20


def deltalake() -> Any:
    """The ``deltalake`` package (delta-rs), or a ConfigError saying how to get it."""
    try:
        import deltalake
    except ImportError:
        raise ConfigError(
            "tableTierTopics: the table tier writes Delta tables with the deltalake package, "
            "which is not installed: pip install 'rocketha[table]'"
        ) from None
    return deltalake


@dataclass
class Coverage:
    """What a table holds of one broker group's log."""

    #: Commit log offset: every chosen record before it is in the table.
    end: int
    #: Next queue offset per ``(topic, queueId)``.
    queues: dict[tuple[str, int], int] = field(default_factory=dict)
    #: First queue offset the table holds per ``(topic, queueId)``.
    first: dict[tuple[str, int], int] = field(default_factory=dict)


def open_table(path: str) -> DeltaTable | None:
    """The table at ``path``, or None when there is none yet."""
    dl = deltalake()
    try:
        table: DeltaTable = dl.DeltaTable(path)
    except dl.exceptions.TableNotFoundError:
        return None
    return table


def coverage(table: DeltaTable) -> dict[str, Coverage]:
    """Each broker group's coverage as of the table's loaded version (its newest commit)."""
    out: dict[str, Coverage] = {}
    version = table.version()
    for commit in table.history():
        broker = commit.get(META_BROKER)
        if broker is None or broker in out or commit.get("version", 0) > version:
            continue
        end = table.transaction_version(APP_ID.format(broker_name=broker))
        if end is None:
            continue
        out[broker] = Coverage(
            end, _queues(commit.get(META_QUEUES)), _queues(commit.get(META_FIRST))
        )
    return out


def _queues(text: str | None) -> dict[tuple[str, int], int]:
    nested = json.loads(text or "{}")
    return {(t, int(q)): int(o) for t, by_queue in nested.items() for q, o in by_queue.items()}


def _nested(queues: dict[tuple[str, int], int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, queue_id), offset in sorted(queues.items()):
        out.setdefault(topic, {})[str(queue_id)] = offset
    return json.dumps(out)


class TableTier:
    """Writes ``topics`` of ``store`` into the Delta table at ``path`` every ``interval``
    seconds, on its own thread (:meth:`start`), or once per :meth:`write_once` call."""

    def __init__(
        self,
        store: MessageStore,
        broker_name: str,
        topics: list[str],
        path: str,
        interval: float = 60.0,
        tail_age: float = 60.0,
    ) -> None:
        deltalake()
        self.store, self.broker_name, self.topics = store, broker_name, topics
        self.path, self.interval, self.tail_age = path, interval, tail_age
        self._check_writable()
        self._app_id = APP_ID.format(broker_name=broker_name)
        self._thread = ServiceThread("rocketha-table-tier", self._run)
        self.covered = self._resume()
        store.set_retention_floor(self.covered.end)

    def _check_writable(self) -> None:
        p = Path(self.path)
        parent = next((d for d in [p, *p.parents] if d.exists()), None)
        if parent is None or not parent.is_dir() or not _writable(parent):
            why = "is not a directory" if parent and not parent.is_dir() else "cannot be written"
            raise ConfigError(
                f"tableTierPath={self.path}: not a writable directory ({parent} {why})"
            )

    def _resume(self) -> Coverage:
        """Where the table holds this group's log up to, from its last commit; the log's start
        for a new table."""
        table = open_table(self.path)
        mine = coverage(table).get(self.broker_name) if table is not None else None
        return mine or Coverage(self.store.min_offset)

    def start(self) -> TableTier:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._thread.shutdown()

    def _run(self, service: ServiceThread) -> None:
        _yield_to_replication()
        while service.wait_for_running(self.interval) is not Woke.STOPPED:
            try:
                self.write_once()
            except Exception as e:
                # The log keeps everything the table lacks: the next interval tries again.
                log.error("table tier: writing %s failed, retried next interval: %s", self.path, e)

    def write_once(self, now: float | None = None) -> int:
        """Writes what is due (see the module's doc) in commits of at most
        :data:`COMMIT_ROWS`; the rows written."""
        start = self.covered.end
        if start < self.store.min_offset:
            log.error(
                "table tier: the commit log no longer holds offsets %d to %d (deleted before the "
                "tier was on): the table goes on from %d",
                start,
                self.store.min_offset,
                self.store.min_offset,
            )
            start = self.store.min_offset
        segments = self.store.segments()
        sealed = segments[-1][1] if segments else 0
        cutoff = int(((time.time() if now is None else now) - self.tail_age) * 1_000_000)
        written, end, pending_rows = 0, start, 0
        pending: list[pa.RecordBatch] = []
        for batch, end in self._due(start, sealed, cutoff):
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= COMMIT_ROWS:
                written += self._commit(pending, end)
                pending, pending_rows = [], 0
        # Also with no row: records of other topics moved the end, and retention waits for it.
        if end > self.covered.end:
            written += self._commit(pending, end)
        return written

    def _due(self, start: int, sealed: int, cutoff: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Batches due, each with the commit log offset the table holds up to once written."""
        reader = _core.ArrowReader(
            self.store,
            start,
            self.store.max_offset,
            _core.RecordFilter(self.topics, []),
            max_rows=min(_BATCH_ROWS, COMMIT_ROWS),
            max_bytes=_BATCH_BYTES,
        )
        while (raw := reader.next_batch()) is not None:
            batch = to_record_batch(raw, self.broker_name)
            offsets = batch.column("commitLogOffset")
            due = pc.or_(
                pc.less(offsets, sealed),
                pc.less_equal(batch.column("storeTimestamp").cast(pa.int64()), cutoff),
            )
            first_not = _first_false(due)
            if first_not is None:
                yield batch, reader.offset
                continue
            if first_not:
                yield batch.slice(0, first_not), offsets[first_not].as_py()
            else:
                yield batch.slice(0, 0), offsets[0].as_py()
            return

    def _commit(self, batches: list[pa.RecordBatch], end: int) -> int:
        dl = deltalake()
        table = pa.Table.from_batches(batches, ARROW_SCHEMA)
        queues, first = dict(self.covered.queues), dict(self.covered.first)
        if table.num_rows:
            grouped = table.group_by(["topic", "queueId"]).aggregate(
                [("queueOffset", "min"), ("queueOffset", "max")]
            )
            g = grouped.to_pydict()
            names = ("topic", "queueId", "queueOffset_min", "queueOffset_max")
            for topic, queue_id, low, high in zip(*(g[n] for n in names), strict=True):
                queues[(topic, queue_id)] = high + 1
                first.setdefault((topic, queue_id), low)
        day = pc.strftime(table.column("storeTimestamp"), format="%Y-%m-%d")
        dl.write_deltalake(
            self.path,
            table.append_column("day", day),
            mode="append",
            partition_by=PARTITION_BY,
            commit_properties=dl.CommitProperties(
                custom_metadata={
                    META_BROKER: self.broker_name,
                    META_QUEUES: _nested(queues),
                    META_FIRST: _nested(first),
                },
                app_transactions=[dl.Transaction(self._app_id, end)],
            ),
        )
        self.covered = Coverage(end, queues, first)
        # Only now may retention take what the table holds.
        self.store.set_retention_floor(end)
        log.info(
            "table tier: %d rows written to %s, which holds the log up to offset %d",
            table.num_rows,
            self.path,
            end,
        )
        rows: int = table.num_rows
        return rows


def _first_false(mask: pa.ChunkedArray | pa.Array) -> int | None:
    index = pc.index(mask, False).as_py()
    return None if index < 0 else index


def _yield_to_replication() -> None:
    """Lowers the calling thread to nice 19: the writer takes the CPU the broker's own threads
    (replication, serving) leave, and catches up when they are idle. Linux nice is per thread,
    and threads this one starts inherit it."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK | os.X_OK)
