"""The network source: topics read through a name server's routes, pulled from the brokers.

The driver plans by message queue (topic, brokerName, queueId): each queue's ``[start, end)``
of queue offsets comes from the route and the queue's min and max offsets (GET_MIN_OFFSET /
GET_MAX_OFFSET, asked of the master, or of a slave when the master is missing or unreachable).
Executors pull their range without the suspend flag, so the broker answers at once, with a
window of pulls in flight (the offsets are known, so no pull waits for the one before), and
hand the answers' raw records to the Rust decoder a store's read uses: no Python runs per row.

``preferSlave`` (default true) keeps analytics off the master: a range is pulled from a slave
of its group whose max offset covers the range end; the master serves it only when no slave
does (none in the route, unreachable, behind, or not serving pulls: ``slaveReadEnable``).
``suggestWhichBrokerId`` is not followed, because it is the master's advice for a consumer that
keeps up, which Spark reading history is not.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketha import _core
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.client import MessageQueue
from rocketha.consumer import MASTER_ID
from rocketha.exceptions import ConfigError, RemotingConnectError, RocketHAError
from rocketha.rebalance import parse_subscribe_route
from rocketha.spark._arrow import to_record_batch
from rocketha.spark._options import EARLIEST, LATEST, QueueKey, ReadOptions, check_min
from rocketha.spark._table import TablePartition, first_offsets, read_table, split

log = logging.getLogger("rocketha.spark")

#: ``PullSysFlag.FLAG_SUBSCRIPTION``: the pull carries its subscription (``*``), so the broker
#: needs no heartbeat from the reader first.
_FLAG_SUBSCRIPTION = 0x4
#: The consumer group pulls name when ``groupId`` is not set (the broker needs one).
DEFAULT_GROUP = "rocketha-spark-reader"
#: Messages one pull asks for: the most RocketMQ's consumers may (``pullBatchSize``). The broker
#: answers with fewer, up to its ``maxTransferCountOnMessageInMemory`` (32 by default) and
#: ``maxTransferBytesOnMessageInMemory``, and the rest of the slot is asked for again.
_PULL_BATCH = 1024
#: Pulls in flight per read task: enough to cover a loopback or LAN round trip.
_WINDOW = 16
_TIMEOUT = 10.0
#: Queue offsets one read task takes at most, unless ``minPartitions`` asks for more tasks:
#: 40 to 200 MB of 200 B to 1 KiB messages, about what Spark's file sources put in one.
_TASK_OFFSETS = 200_000
#: Queue offsets (rows) per Arrow batch.
BATCH_ROWS = 10_000


@dataclass(frozen=True)
class QueueRange:
    """Queue offsets ``[start, end)`` of one message queue, with its group's brokers by id."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    addrs: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    """One read task: queue ranges read one after the other."""

    ranges: tuple[QueueRange, ...]


# One client per process and account: Spark reuses Python workers across tasks, and a fork gets
# its own.
_apis: dict[tuple[int, SessionCredentials | None], _core.MQClientAPI] = {}
_apis_lock = threading.Lock()


def api(opts: ReadOptions) -> _core.MQClientAPI:
    """This process's client (its connections are reused by every task the worker runs),
    signing with ``accessKey``/``secretKey`` when given."""
    key = (os.getpid(), opts.credentials)
    with _apis_lock:
        client = _apis.get(key)
        if client is None:
            client = _apis[key] = mq_client_api("127.0.0.1", opts.credentials)
        return client


def _group(opts: ReadOptions) -> str:
    return opts.group_id or DEFAULT_GROUP


def _meta_addr(addrs: dict[int, str]) -> str:
    """Where offsets are asked and committed: the master, or a slave without one."""
    return addrs.get(MASTER_ID) or addrs[min(addrs)]


@dataclass(frozen=True)
class QueueState:
    """A queue as the driver sees it at planning."""

    min_offset: int
    max_offset: int
    addrs: tuple[tuple[int, str], ...]


def queues(opts: ReadOptions) -> dict[QueueKey, QueueState]:
    """Every readable queue of the topics with its min and max offset, from the routes."""
    assert opts.namesrv_addr is not None and opts.topics is not None
    client = api(opts)
    out: dict[QueueKey, QueueState] = {}
    for topic in opts.topics:
        raw = _route(client, opts.namesrv_addr, topic)
        if raw is None:
            raise ConfigError(f"option topics: topic {topic!r} has no route at {opts.namesrv_addr}")
        info = parse_subscribe_route(topic, raw)
        for mq in info.queues:
            addrs = info.broker_addrs[mq.broker_name]
            low, high = _queue_offsets(client, addrs, mq)
            out[(topic, mq.broker_name, mq.queue_id)] = QueueState(
                low, high, tuple(sorted(addrs.items()))
            )
    return out


def _queue_offsets(
    client: _core.MQClientAPI, addrs: dict[int, str], mq: MessageQueue
) -> tuple[int, int]:
    """A queue's min and max offset from its master, or from a slave while the master is
    unreachable (the route lists a dead master until the name server expires it)."""
    errors = []
    for _id, addr in sorted(addrs.items()):
        try:
            low = client.get_min_offset(addr, mq.topic, mq.queue_id, _TIMEOUT)
            return low, client.get_max_offset(addr, mq.topic, mq.queue_id, _TIMEOUT)
        except RocketHAError as e:
            errors.append(f"{addr}: {e}")
    raise RemotingConnectError(
        f"queue {mq.topic}@{mq.broker_name}:{mq.queue_id}: no broker of the group answered: "
        + "; ".join(errors)
    )


def _route(client: _core.MQClientAPI, namesrv_addr: str, topic: str) -> bytes | None:
    """The topic's route from the first name server that answers (None: no such topic)."""
    try:
        return client.get_topic_route_info(namesrv_addr, topic, _TIMEOUT)
    except RocketHAError as e:
        raise RemotingConnectError(f"option namesrvAddr: {e}") from None


def _named(spec: str | dict[str, dict[Any, int]], key: QueueKey) -> int | None:
    if isinstance(spec, dict):
        return spec.get(key[0], {}).get((key[1], key[2]))
    return None


def resolve(
    opts: ReadOptions,
    spec: str | dict[str, dict[Any, int]],
    state: dict[QueueKey, QueueState],
    default: str,
) -> dict[QueueKey, int]:
    """``startingOffsets`` / ``endingOffsets`` as one queue offset per queue (-2 earliest, -1
    latest; queues the JSON does not name take ``default``)."""
    if isinstance(spec, dict):
        for topic, named in spec.items():
            for broker_name, queue_id in named:
                if (topic, broker_name, queue_id) not in state:
                    raise ConfigError(
                        f"offsets: {topic} has no queue {broker_name}:{queue_id} in its route"
                    )
    out = {}
    for key, q in state.items():
        offset = _named(spec, key)
        which = spec if isinstance(spec, str) else default
        if offset == -2 or (offset is None and which == EARLIEST):
            out[key] = q.min_offset
        elif offset == -1 or (offset is None and which == LATEST):
            out[key] = q.max_offset
        else:
            assert offset is not None
            out[key] = offset
    return out


def check_queue_start(opts: ReadOptions, key: QueueKey, start: int, min_offset: int) -> int:
    topic, broker_name, queue_id = key
    return check_min(
        opts,
        start,
        min_offset,
        f"queue {topic}@{broker_name}:{queue_id} start offset {start}",
        "of the queue",
    )


def partitions(
    opts: ReadOptions,
    state: dict[QueueKey, QueueState],
    starts: dict[QueueKey, int],
    ends: dict[QueueKey, int],
) -> list[QueuePartition]:
    """The queues' ranges dealt into tasks of equal offset counts: ``minPartitions`` of them,
    or more where that would put over ``_TASK_OFFSETS`` in one. A task costs Spark a fixed
    price (a Python worker's round trip, a pickled partition), so one task per queue, as
    Kafka's source plans per partition, costs a topic of many small queues (8 queues on 2
    cores: 0.66 of the store read's rows/s, against 0.76 packed into 4 tasks). A task may span
    several queues, and a big queue several tasks."""
    ranges = []
    for key, end in sorted(ends.items()):
        start = starts.get(key, state[key].min_offset)
        start = check_queue_start(opts, key, start, state[key].min_offset)
        if start < end:
            ranges.append(QueueRange(*key, start, end, state[key].addrs))
    total = sum(r.end - r.start for r in ranges)
    if not total:
        return []
    tasks = min(total, max(opts.min_partitions, math.ceil(total / _TASK_OFFSETS)))
    base, extra = divmod(total, tasks)
    sizes = iter([base + 1] * extra + [base] * (tasks - extra))
    out: list[QueuePartition] = []
    current: list[QueueRange] = []
    room = next(sizes)
    for r in ranges:
        lo = r.start
        while lo < r.end:
            hi = min(r.end, lo + room)
            current.append(replace(r, start=lo, end=hi))
            room -= hi - lo
            lo = hi
            if room == 0:
                out.append(QueuePartition(tuple(current)))
                current, room = [], next(sizes, 0)
    return out


def _pull_order(opts: ReadOptions, part: QueueRange) -> list[tuple[int, str]]:
    """Brokers to try: slaves first (lowest id first) with ``preferSlave``, then the master."""
    slaves = [(i, a) for i, a in part.addrs if i != MASTER_ID]
    master = [(i, a) for i, a in part.addrs if i == MASTER_ID]
    return slaves + master if opts.prefer_slave else master + slaves


def _serving(opts: ReadOptions, part: QueueRange) -> str:
    """The first broker in pull order whose queue reaches the partition's end."""
    client = api(opts)
    why = []
    for broker_id, addr in _pull_order(opts, part):
        try:
            max_offset = client.get_max_offset(addr, part.topic, part.queue_id, _TIMEOUT)
        except RocketHAError as e:
            why.append(f"{addr} (id {broker_id}): {e}")
            continue
        if max_offset >= part.end:
            return addr
        why.append(f"{addr} (id {broker_id}): max offset {max_offset} < {part.end}")
    raise RocketHAError(
        f"queue {part.topic}@{part.broker_name}:{part.queue_id}: no broker holds offsets up to "
        f"{part.end}: {'; '.join(why)}"
    )


def read(opts: ReadOptions, part: QueuePartition) -> Iterator[pa.RecordBatch]:
    """The task's queue ranges, one after the other."""
    for r in part.ranges:
        yield from _read_range(opts, r)


def _read_range(opts: ReadOptions, part: QueueRange) -> Iterator[pa.RecordBatch]:
    """Pulls ``[start, end)`` of one queue, as Arrow batches of about ``BATCH_ROWS`` rows
    (``_WINDOW`` pulls in flight)."""
    client = api(opts)
    key = (part.topic, part.broker_name, part.queue_id)
    order = _pull_order(opts, part)
    addr = _serving(opts, part)
    bounds = _core.RecordFilter(None, [(part.topic, part.queue_id, part.start, part.end)])
    at = part.start
    while at < part.end:
        try:
            rows, at_next, refused = client.pull_range(
                addr,
                consumer_group=_group(opts),
                topic=part.topic,
                queue_id=part.queue_id,
                queue_offset=at,
                end=part.end,
                max_msg_nums=_PULL_BATCH,
                window=_WINDOW,
                max_rows=BATCH_ROWS,
                sys_flag=_FLAG_SUBSCRIPTION,
                subscription="*",
                filter=bounds,
                timeout=_TIMEOUT,
            )
        except RemotingConnectError:
            if addr == order[-1][1]:
                raise
            addr = _fall_back(order, addr, "unreachable")
            continue
        if rows.num_rows:
            yield to_record_batch(rows, part.broker_name)
        at = at_next
        if refused is None:
            continue
        code, remark, min_offset, _max = refused
        if min_offset > at:
            # Retention deleted the start of the range after planning.
            at = check_queue_start(opts, key, at, min_offset)
        elif addr != order[-1][1]:
            # A slave that does not serve pulls (slaveReadEnable off) answers RETRY_IMMEDIATELY.
            addr = _fall_back(order, addr, f"answered {code} ({remark})")
        else:
            raise RocketHAError(
                f"queue {part.topic}@{part.broker_name}:{part.queue_id}: pull at {at} from "
                f"{addr} answered {code}: {remark}"
            )


def _fall_back(order: list[tuple[int, str]], addr: str, why: str) -> str:
    index = [a for _, a in order].index(addr)
    log.info("pull from %s %s; trying %s", addr, why, order[index + 1][1])
    return order[index + 1][1]


def commit(opts: ReadOptions, state: dict[QueueKey, QueueState], ends: dict[QueueKey, int]) -> None:
    """``groupId``'s consumed offsets, so ``consumerProgress`` shows the query's lag. A heartbeat
    first: it creates the group on the master (the pulls went to slaves) and lists the driver as
    the group's client, as a lite pull consumer is listed."""
    if opts.group_id is None:
        return
    assert opts.topics is not None
    client = api(opts)
    by_addr: dict[str, list[tuple[str, int, int]]] = {}
    for key, offset in ends.items():
        if key in state:
            topic, _broker_name, queue_id = key
            by_addr.setdefault(_meta_addr(dict(state[key].addrs)), []).append(
                (topic, queue_id, offset)
            )
    for addr, offsets in by_addr.items():
        client.send_consumer_heartbeat(
            addr,
            f"{socket.gethostname()}@spark-{os.getpid()}",
            group=opts.group_id,
            consume_type="CONSUME_ACTIVELY",
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            subscriptions=[(t, "*", "TAG", 0) for t in opts.topics],
            timeout=_TIMEOUT,
        )
        for topic, queue_id, offset in offsets:
            client.update_consumer_offset(
                addr, opts.group_id, topic, queue_id, offset, oneway=False, timeout=_TIMEOUT
            )


def to_offset(offsets: dict[QueueKey, int]) -> dict[str, dict[str, int]]:
    """A streaming offset: the JSON offsets' shape, ``{"topic": {"brokerName:queueId": n}}``."""
    out: dict[str, dict[str, int]] = {}
    for (topic, broker_name, queue_id), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[f"{broker_name}:{queue_id}"] = offset
    return out


def from_offset(offset: dict[str, Any], what: str) -> dict[QueueKey, int]:
    out = {}
    try:
        for topic, queues in offset.items():
            for name, value in queues.items():
                broker_name, _, queue_id = name.rpartition(":")
                out[(topic, broker_name, int(queue_id))] = int(value)
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(
            f'{what} {offset!r} is not {{"topic": {{"brokerName:queueId": offset}}}}'
        ) from None
    return out


class NetworkBatchReader(DataSourceReader):
    """Plans queue ranges once, from the routes and offsets at planning."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        state = queues(opts)
        starts = _starts(opts, state)
        ends = resolve(opts, opts.ending, state, LATEST)
        self.parts = _plan(opts, state, starts, ends)

    def partitions(self) -> Sequence[InputPartition]:
        return self.parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_any(self.opts, partition)


def _starts(opts: ReadOptions, state: dict[QueueKey, QueueState]) -> dict[QueueKey, int]:
    """``startingOffsets`` resolved; with ``table``, ``earliest`` is the table's first row of
    a queue when it holds one older than the log's."""
    starts = resolve(opts, opts.starting, state, EARLIEST)
    if opts.table is None or opts.starting != EARLIEST:
        return starts
    first = first_offsets(opts)
    return {k: min(v, first.get(k, v)) for k, v in starts.items()}


def _plan(
    opts: ReadOptions,
    state: dict[QueueKey, QueueState],
    starts: dict[QueueKey, int],
    ends: dict[QueueKey, int],
) -> list[InputPartition]:
    """The ranges as read tasks: with ``table``, what it holds from the table, the rest from
    the brokers."""
    table_parts: list[InputPartition] = []
    if opts.table is not None:
        held, starts = split(opts, starts, ends)
        table_parts.extend(held)
    return table_parts + list(partitions(opts, state, starts, ends))


def _read_any(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, TablePartition):
        return read_table(partition)
    if not isinstance(partition, QueuePartition):
        # Spark's stand-in for an empty plan (``InputPartition(None)``): nothing to read.
        return iter(())
    return read(opts, partition)


def _rate_limit(
    starts: dict[QueueKey, int], ends: dict[QueueKey, int], limit: int
) -> dict[QueueKey, int]:
    """At most ``limit`` rows over all queues, in proportion to what each has (Kafka's
    ``rateLimit``: a share under one row rounds up, so every queue moves)."""
    sizes = {k: end - starts[k] for k, end in ends.items() if end > starts[k]}
    total = sum(sizes.values())
    if total <= limit:
        return ends
    out = dict(ends)
    for key, size in sizes.items():
        share = limit * size / total
        out[key] = starts[key] + min(size, math.ceil(share) if share < 1 else math.floor(share))
    return out


class NetworkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-queue offsets; ``groupId`` commits each finished batch's end."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.state: dict[QueueKey, QueueState] = {}
        # Trigger.AvailableNow: the max offsets when the query started; later data waits.
        self.target: dict[QueueKey, int] | None = None

    def _refresh(self) -> dict[QueueKey, QueueState]:
        self.state = queues(self.opts)
        return self.state

    def initialOffset(self) -> dict[str, dict[str, int]]:
        state = self._refresh()
        if self.opts.starting == LATEST:
            return to_offset({k: q.max_offset for k, q in state.items()})
        return to_offset(_starts(self.opts, state))

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {k: q.max_offset for k, q in self._refresh().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def _latest(self) -> dict[QueueKey, int]:
        latest = {k: q.max_offset for k, q in self._refresh().items()}
        if self.target is not None:
            latest = {k: min(v, self.target.get(k, v)) for k, v in latest.items()}
        return latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = from_offset(start, "start offset")
        latest = self._latest()
        # A queue new since the start begins at its min offset, as Kafka's new partitions do.
        starts = {k: begin.get(k, self.state[k].min_offset) for k in latest}
        ends = {k: max(v, starts[k]) for k, v in latest.items()}
        if isinstance(limit, ReadMaxRows):
            ends = _rate_limit(starts, ends, limit.max_rows)
        return to_offset({**begin, **ends})

    def reportLatestOffset(self) -> dict[str, dict[str, int]]:
        return to_offset(self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        state = self.state or self._refresh()
        begin = from_offset(start, "start offset")
        ends = {k: v for k, v in from_offset(end, "end offset").items() if k in state}
        return _plan(self.opts, state, begin, ends)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_any(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        commit(self.opts, self.state or self._refresh(), from_offset(end, "end offset"))
