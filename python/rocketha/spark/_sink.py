"""The sink: ``df.write.format("rocketha")`` and ``writeStream`` send rows to a topic through a
name server's routes, from the executors, with the project's :class:`~rocketha.client.Producer`.

Columns (only ``body`` is required; a column of another name fails the plan):

``body``
    binary or string, the message body.
``topic``
    string; rows without it (or a null) go to the ``topic`` option.
``tags``, ``keys``
    string; ``keys`` may also be an array of strings (RocketMQ's KEYS, space-joined).
``properties``
    map of string to string, the user properties.

Options: ``namesrvAddr`` (required, ``;``-separated), ``topic``, ``producerGroup``
(``rocketha-spark-writer``), ``batchSize`` (messages per ``SEND_BATCH_MESSAGE``, 128),
``batchBytes`` (body bytes per batch, 1 MiB), ``sendTimeoutMs`` (3000), and ``accessKey`` with
``secretKey`` for brokers with ``aclEnable=true`` (every request is then signed).

Every batch must come back ``SEND_OK``: on a SYNC_MASTER that means its slave holds it. Any
other status, or a send whose answer was lost, fails the task, and Spark runs it again. Rows the
failed attempt had sent are then sent twice: delivery is at least once. Deduplicate on
``keys`` (set them from a column that identifies the row) or on the ``UNIQ_KEY`` every message
gets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    MapType,
    StringType,
    StructType,
)

from rocketha._core import Message
from rocketha.acl import SessionCredentials
from rocketha.client import Producer, SendStatus
from rocketha.exceptions import ConfigError, MQClientError

log = logging.getLogger("rocketha.spark")

_COLUMNS: dict[str, tuple[DataType, ...]] = {
    "body": (BinaryType(), StringType()),
    "topic": (StringType(),),
    "tags": (StringType(),),
    "keys": (StringType(), ArrayType(StringType())),
    "properties": (MapType(StringType(), StringType()),),
}
_KNOWN = {
    "namesrvaddr",
    "topic",
    "producergroup",
    "batchsize",
    "batchbytes",
    "sendtimeoutms",
    "accesskey",
    "secretkey",
}


@dataclass(frozen=True)
class WriteOptions:
    """Parsed options. Pickled into Spark tasks, so it holds only names, numbers and the
    credentials (whose repr leaves the secret key out)."""

    namesrv_addr: str
    topic: str | None
    producer_group: str
    batch_size: int
    batch_bytes: int
    send_timeout: float
    credentials: SessionCredentials | None = None


def _positive(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name.lower(), str(default))
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {name}: {raw!r} is not an integer") from None
    if value <= 0:
        raise ConfigError(f"option {name}: must be positive, got {value}")
    return value


def parse_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> WriteOptions:
    """Checks the options and the DataFrame's columns at planning, before any task runs."""
    if overwrite:
        raise ConfigError(
            "mode overwrite: a topic is a log, appended to and never rewritten; use append"
        )
    opts = {k.lower(): v for k, v in options.items()}
    # Spark's own options reach the writer too.
    unknown = sorted(set(opts) - _KNOWN - {"path", "checkpointlocation"})
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)} for the rocketha sink; it takes "
            "namesrvAddr, topic, producerGroup, batchSize, batchBytes, sendTimeoutMs, "
            "accessKey, secretKey"
        )
    namesrv = opts.get("namesrvaddr")
    if not namesrv:
        raise ConfigError("option namesrvAddr: the sink sends through a name server's routes")
    names = {f.name: f for f in schema.fields}
    if "body" not in names:
        raise ConfigError("column body: the sink needs a binary or string column named body")
    for f in schema.fields:
        allowed = _COLUMNS.get(f.name)
        if allowed is None:
            raise ConfigError(
                f"column {f.name}: the sink takes only {', '.join(_COLUMNS)}; select or rename "
                "the columns first"
            )
        if f.dataType not in allowed:
            kinds = " or ".join(t.simpleString() for t in allowed)
            raise ConfigError(f"column {f.name}: {f.dataType.simpleString()}, expected {kinds}")
    topic = opts.get("topic") or None
    if topic is None and "topic" not in names:
        raise ConfigError("option topic: no topic column, so the topic option is needed")
    access_key, secret_key = opts.get("accesskey"), opts.get("secretkey")
    credentials = None
    if access_key and secret_key:
        credentials = SessionCredentials(access_key, secret_key)
    elif access_key or secret_key:
        raise ConfigError(
            "options accessKey and secretKey: set both (aclEnable brokers) or neither"
        )
    return WriteOptions(
        namesrv_addr=namesrv,
        topic=topic,
        producer_group=opts.get("producergroup", "rocketha-spark-writer"),
        batch_size=_positive(opts, "batchSize", 128),
        batch_bytes=_positive(opts, "batchBytes", 1 << 20),
        send_timeout=_positive(opts, "sendTimeoutMs", 3000) / 1000,
        credentials=credentials,
    )


@dataclass
class SentCounts(WriterCommitMessage):
    """What one task sent: messages and batches, by topic."""

    messages: dict[str, int] = field(default_factory=dict)
    batches: int = 0


def _messages(opts: WriteOptions, batch: pa.RecordBatch) -> Iterator[Message]:
    columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    bodies = columns["body"]
    for i, body in enumerate(bodies):
        topic = columns["topic"][i] if "topic" in columns else None
        topic = topic or opts.topic
        if topic is None:
            raise ConfigError("column topic: a row has no topic and no topic option is set")
        if body is None:
            raise ConfigError(f"column body: a row for topic {topic} has a null body")
        props = columns["properties"][i] if "properties" in columns else None
        yield Message(
            topic,
            body,
            tags=columns["tags"][i] if "tags" in columns else None,
            keys=columns["keys"][i] if "keys" in columns else None,
            # Arrow hands a map over as a list of (key, value) pairs.
            properties=dict(props) if props else None,
        )


def _send(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> SentCounts:
    """One task: batches of one topic each, every one SEND_OK or the task fails."""
    counts = SentCounts()
    pending: dict[str, tuple[list[Message], int]] = {}
    with Producer(
        opts.namesrv_addr,
        opts.producer_group,
        send_timeout=opts.send_timeout,
        credentials=opts.credentials,
    ) as p:

        def flush(topic: str) -> None:
            msgs, _size = pending.pop(topic)
            result = p.send_batch(msgs)
            if result.status is not SendStatus.SEND_OK:
                raise MQClientError(
                    f"topic {topic}: a batch of {len(msgs)} came back {result.status.value} "
                    f"from {result.queue.broker_name}; the sink needs SEND_OK, so the "
                    "task fails and Spark retries it (rows may be sent twice)"
                )
            counts.messages[topic] = counts.messages.get(topic, 0) + len(msgs)
            counts.batches += 1

        for batch in batches:
            for msg in _messages(opts, batch):
                msgs, size = pending.get(msg.topic, ([], 0))
                msgs.append(msg)
                pending[msg.topic] = (msgs, size + len(msg.body))
                if len(msgs) >= opts.batch_size or size + len(msg.body) >= opts.batch_bytes:
                    flush(msg.topic)
        for topic in list(pending):
            flush(topic)
    return counts


def _log_commit(messages: list[Any], what: str) -> None:
    sent: dict[str, int] = {}
    for m in messages:
        if isinstance(m, SentCounts):
            for topic, n in m.messages.items():
                sent[topic] = sent.get(topic, 0) + n
    log.info("rocketha sink %s: sent %s", what, sent or "nothing")


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("rocketha")``: each task sends its partition's rows."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCounts:
        return _send(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(list(messages), "write committed")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(list(messages), "write aborted after some tasks")


class StreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rocketha")``: each micro-batch's tasks send their rows."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCounts:
        return _send(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(list(messages), f"micro-batch {batchId} committed")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(list(messages), f"micro-batch {batchId} aborted after some tasks")
