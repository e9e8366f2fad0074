"""Reader options, with Kafka's names and meanings, checked at planning.

Every error names the option, so a typo or a bad offset fails before any task runs.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketha.acl import SessionCredentials
from rocketha.exceptions import ConfigError, RocketHAError
from rocketha.store import MessageStore, existing_file_sizes

log = logging.getLogger("rocketha.spark")

EARLIEST = "earliest"
LATEST = "latest"
# Kafka's JSON offsets use -2 for earliest and -1 for latest.
_JSON_EARLIEST = -2
_JSON_LATEST = -1
_UNBOUNDED = (1 << 63) - 1

_KNOWN = {
    "path",
    "topics",
    "startingoffsets",
    "endingoffsets",
    "startingcommitlogoffset",
    "endingcommitlogoffset",
    "maxoffsetspertrigger",
    "maxbytespertrigger",
    "minpartitions",
    "failondataloss",
    "namesrvaddr",
    "preferslave",
    "groupid",
    "accesskey",
    "secretkey",
    "table",
}
#: Options only a store directory has: commit log offsets and bytes are a store's, not a
#: topic's (the network source counts queue offsets).
_LOCAL_ONLY = ("startingCommitLogOffset", "endingCommitLogOffset", "maxBytesPerTrigger")
#: Options only the network source has.
_NETWORK_ONLY = ("preferSlave", "groupId", "accessKey", "secretKey", "table")


#: A message queue of the network source: ``(topic, brokerName, queueId)``.
QueueKey = tuple[str, str, int]


class DataLossError(RocketHAError):
    """Requested offsets are older than the store's min offset (its segments were deleted)."""


@dataclass(frozen=True)
class ReadOptions:
    """Parsed options. Pickled into Spark tasks, so it holds only paths, names and numbers.

    Exactly one of ``path`` (a store directory) and ``namesrv_addr`` (the network) is set. The
    JSON offsets' queue keys are queue ids for a store and ``(brokerName, queueId)`` for the
    network."""

    path: str | None
    mapped_file_size: int
    topics: tuple[str, ...] | None
    starting: str | dict[str, dict[Any, int]]
    ending: str | dict[str, dict[Any, int]]
    starting_commit_log_offset: int | None
    ending_commit_log_offset: int | None
    max_offsets_per_trigger: int | None
    max_bytes_per_trigger: int | None
    min_partitions: int
    fail_on_data_loss: bool
    namesrv_addr: str | None = None
    prefer_slave: bool = True
    group_id: str | None = None
    credentials: SessionCredentials | None = None
    #: The table tier's Delta table: queue offsets it holds are read from it, not the log.
    table: str | None = None

    @property
    def store_path(self) -> str:
        """The store directory of a local read."""
        assert self.path is not None, "a network read has no store path"
        return self.path


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {name}: {raw!r} is not an integer") from None
    if value < 0 or (value == 0 and name != "startingCommitLogOffset"):
        raise ConfigError(f"option {name}: {value} must be positive")
    return value


def _queue_key(name: str, key: str, network: bool) -> int | tuple[str, int]:
    """A JSON offset's queue key: ``"queueId"`` in a store, ``"brokerName:queueId"`` on the
    network, where queue ids repeat in every broker group."""
    broker, sep, queue_id = key.rpartition(":")
    if network and not (sep and broker):
        raise ConfigError(
            f"option {name}: queue {key!r} is not 'brokerName:queueId' (with namesrvAddr "
            "every broker group has its own queue ids)"
        )
    if not network and sep:
        raise ConfigError(f"option {name}: queue {key!r} is not a queue id (a store has one group)")
    try:
        qid = int(queue_id)
    except ValueError:
        raise ConfigError(f"option {name}: queue id {queue_id!r} is no integer") from None
    return (broker, qid) if network else qid


def _offsets(
    options: Mapping[str, str], name: str, streaming: bool, network: bool
) -> str | dict[str, Any]:
    raw = options.get(name.lower())
    default = LATEST if name == "endingOffsets" else EARLIEST
    if raw is None:
        return default
    text = raw.strip()
    if text in (EARLIEST, LATEST):
        if not streaming and text == (LATEST if name == "startingOffsets" else EARLIEST):
            raise ConfigError(f"option {name}: {text!r} is not allowed for a batch query")
        return text
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"option {name}: {raw!r} is neither 'earliest', 'latest' nor JSON "
            f'{{"topic": {{"queueId": offset}}}}: {e}'
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f'option {name}: expected {{"topic": {{"queueId": offset}}}}')
    out: dict[str, dict[Any, int]] = {}
    for topic, queues in parsed.items():
        if not isinstance(queues, dict):
            raise ConfigError(f"option {name}: topic {topic!r} must map queue ids to offsets")
        per_queue: dict[Any, int] = {}
        for queue_id, offset in queues.items():
            qid = _queue_key(name, queue_id, network)
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < _JSON_EARLIEST:
                raise ConfigError(
                    f"option {name}: offset {offset!r} of {topic}/{queue_id} is not a queue "
                    "offset, -2 (earliest) or -1 (latest)"
                )
            per_queue[qid] = offset
        out[topic] = per_queue
    return out


def parse_credentials(options: Mapping[str, str]) -> SessionCredentials | None:
    """``accessKey`` and ``secretKey`` (lower-cased keys): the account requests are signed
    with, for brokers with ``aclEnable=true``."""
    access_key, secret_key = options.get("accesskey"), options.get("secretkey")
    if access_key and secret_key:
        return SessionCredentials(access_key, secret_key)
    if access_key or secret_key:
        raise ConfigError(
            "options accessKey and secretKey: set both (aclEnable brokers) or neither"
        )
    return None


def _bool(options: Mapping[str, str], name: str) -> bool:
    """A true/false option, true by default."""
    raw = options.get(name.lower(), "true").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"option {name}: {raw!r} is not true or false")
    return raw == "true"


def store_mapped_file_size(path: str) -> int:
    """``mappedFileSizeCommitLog`` of a store, read from its segments (all have the same size)."""
    commitlog = os.path.join(path, "commitlog")
    if not os.path.isdir(commitlog):
        raise ConfigError(f"option path: {path!r} is not a rocketha store (no commitlog directory)")
    # An empty store: any valid size opens it.
    return existing_file_sizes(path).get("mappedFileSizeCommitLog", 64 * 1024)


def parse(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The options (lower-cased keys) checked one by one, then against each other."""
    namesrv, path = _source(options)
    topics = _topics(options, namesrv)
    network = namesrv is not None
    parsed = ReadOptions(
        path=path,
        mapped_file_size=0 if path is None else store_mapped_file_size(path),
        topics=topics,
        starting=_offsets(options, "startingOffsets", streaming, network),
        ending=_offsets(options, "endingOffsets", streaming, network),
        starting_commit_log_offset=_positive_int(options, "startingCommitLogOffset"),
        ending_commit_log_offset=_positive_int(options, "endingCommitLogOffset"),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        max_bytes_per_trigger=_positive_int(options, "maxBytesPerTrigger"),
        min_partitions=_positive_int(options, "minPartitions") or 1,
        fail_on_data_loss=_bool(options, "failOnDataLoss"),
        namesrv_addr=namesrv,
        prefer_slave=_bool(options, "preferSlave"),
        group_id=options.get("groupid") or None,
        credentials=parse_credentials(options),
        table=os.path.abspath(options["table"]) if options.get("table") else None,
    )
    _check_commit_log_range(parsed, options, streaming=streaming)
    _check_offsets_range(parsed, streaming=streaming)
    return parsed


def _source(options: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(namesrvAddr, absolute path)``: exactly one is set, and no option of the other
    source is given (nor an unknown one)."""
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        raise ConfigError(
            f"unknown option {unknown[0]!r}; known options: path, topics, startingOffsets, "
            "endingOffsets, startingCommitLogOffset, endingCommitLogOffset, "
            "maxOffsetsPerTrigger, maxBytesPerTrigger, minPartitions, failOnDataLoss, "
            "namesrvAddr, preferSlave, groupId, accessKey, secretKey, table"
        )
    namesrv = options.get("namesrvaddr") or None
    path = options.get("path") or None
    if namesrv is None and path is None:
        raise ConfigError(
            "option path: missing; use load(store_dir), or option('namesrvAddr', ...) to read "
            "over the network"
        )
    if namesrv is not None and path is not None:
        raise ConfigError("option namesrvAddr: give it or a store path (load(path)), not both")
    for name in _LOCAL_ONLY if namesrv else _NETWORK_ONLY:
        if name.lower() in options:
            where = "a store directory" if namesrv else "namesrvAddr (the network source)"
            raise ConfigError(f"option {name}: only with {where}")
    return namesrv, None if path is None else os.path.abspath(path)


def _topics(options: Mapping[str, str], namesrv: str | None) -> tuple[str, ...] | None:
    """``topics``, comma-separated: every topic of a store when not given, required over the
    network."""
    topics = None
    if options.get("topics") is not None:
        topics = tuple(t.strip() for t in options["topics"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option topics: empty list")
    if namesrv and topics is None:
        raise ConfigError("option topics: required with namesrvAddr (a name server has no list)")
    return topics


def _check_commit_log_range(
    parsed: ReadOptions, options: Mapping[str, str], *, streaming: bool
) -> None:
    """Commit log offsets exclude the JSON offsets, streaming has no end, and the end is not
    before the start."""
    if "startingoffsets" in options and parsed.starting_commit_log_offset is not None:
        raise ConfigError("option startingCommitLogOffset: give it or startingOffsets, not both")
    if "endingoffsets" in options and parsed.ending_commit_log_offset is not None:
        raise ConfigError("option endingCommitLogOffset: give it or endingOffsets, not both")
    if streaming and ("endingoffsets" in options or parsed.ending_commit_log_offset is not None):
        raise ConfigError(
            "option endingOffsets / endingCommitLogOffset: not supported by streaming queries"
        )
    if (
        parsed.starting_commit_log_offset is not None
        and parsed.ending_commit_log_offset is not None
        and parsed.ending_commit_log_offset < parsed.starting_commit_log_offset
    ):
        raise ConfigError(
            f"option endingCommitLogOffset: {parsed.ending_commit_log_offset} is before "
            f"startingCommitLogOffset {parsed.starting_commit_log_offset}"
        )


def _check_offsets_range(parsed: ReadOptions, *, streaming: bool) -> None:
    """Per-queue JSON offsets: no -1 (latest) start for a stream, no end before its start."""
    if (
        streaming
        and isinstance(parsed.starting, dict)
        and any(
            offset == _JSON_LATEST
            for queues in parsed.starting.values()
            for offset in queues.values()
        )
    ):
        # It would resolve to another queue offset each time the query restarts.
        raise ConfigError("option startingOffsets: -1 (latest) per queue is batch only")
    if isinstance(parsed.starting, dict) and isinstance(parsed.ending, dict):
        for topic, queues in parsed.ending.items():
            for qid, end in queues.items():
                start = parsed.starting.get(topic, {}).get(qid)
                if start is not None and start >= 0 and end >= 0 and end < start:
                    raise ConfigError(
                        f"option endingOffsets: {topic}/{qid} ends at {end}, before its "
                        f"startingOffsets {start}"
                    )


def queue_bounds(opts: ReadOptions, store: MessageStore) -> list[tuple[str, int, int, int]]:
    """Per-queue ``[from, to)`` queue offsets from the JSON offsets, resolved against ``store``."""
    latest = {(topic, qid): hi for topic, qid, _lo, hi in store.queues()}
    bounds: dict[tuple[str, int], list[int]] = {}
    for which, spec in ((0, opts.starting), (1, opts.ending)):
        if not isinstance(spec, dict):
            continue
        for topic, queues in spec.items():
            for qid, offset in queues.items():
                slot = bounds.setdefault((topic, qid), [0, _UNBOUNDED])
                if offset == _JSON_EARLIEST:
                    slot[which] = 0
                elif offset == _JSON_LATEST:
                    slot[which] = latest.get((topic, qid), 0)
                else:
                    slot[which] = offset
    return [(topic, qid, lo, hi) for (topic, qid), (lo, hi) in bounds.items()]


def check_start(opts: ReadOptions, store: MessageStore, start: int, what: str) -> int:
    """The offset to read from: ``start``, or the store's min offset when segments holding
    ``start`` were deleted and ``failOnDataLoss`` is false."""
    return check_min(opts, start, store.min_offset, f"{what} {start}", f"of {opts.path}")


def check_min(opts: ReadOptions, start: int, min_offset: int, what: str, where: str) -> int:
    """``start``, or ``min_offset`` when ``start`` was deleted and ``failOnDataLoss`` is false:
    Kafka's rule, for a store's commit log offsets and a queue's offsets alike."""
    if start >= min_offset:
        return start
    message = f"{what} is older than the min offset {min_offset} {where}: its data was deleted"
    if opts.fail_on_data_loss:
        raise DataLossError(f"{message}; set failOnDataLoss=false to skip ahead")
    log.warning("%s; skipping ahead (failOnDataLoss=false)", message)
    return min_offset


def check_boundary(store: MessageStore, offset: int, name: str) -> None:
    """A start offset must be where a record begins (or the end of the log)."""
    if offset >= store.max_offset:
        return
    try:
        store.read_messages(offset, 1)
    except RocketHAError as e:
        raise ConfigError(f"option {name}: {offset} is not a record boundary: {e}") from None
