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
}


class DataLossError(RocketHAError):
    """Requested offsets are older than the store's min offset (its segments were deleted)."""


@dataclass(frozen=True)
class ReadOptions:
    """Parsed options. Pickled into Spark tasks, so it holds only paths, names and numbers."""

    path: str
    mapped_file_size: int
    topics: tuple[str, ...] | None
    starting: str | dict[str, dict[int, int]]
    ending: str | dict[str, dict[int, int]]
    starting_commit_log_offset: int | None
    ending_commit_log_offset: int | None
    max_offsets_per_trigger: int | None
    max_bytes_per_trigger: int | None
    min_partitions: int
    fail_on_data_loss: bool


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


def _offsets(options: Mapping[str, str], name: str, streaming: bool) -> str | dict[str, Any]:
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
    out: dict[str, dict[int, int]] = {}
    for topic, queues in parsed.items():
        if not isinstance(queues, dict):
            raise ConfigError(f"option {name}: topic {topic!r} must map queue ids to offsets")
        per_queue: dict[int, int] = {}
        for queue_id, offset in queues.items():
            try:
                qid = int(queue_id)
            except ValueError:
                raise ConfigError(f"option {name}: queue id {queue_id!r} is no integer") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < _JSON_EARLIEST:
                raise ConfigError(
                    f"option {name}: offset {offset!r} of {topic}/{queue_id} is not a queue "
                    "offset, -2 (earliest) or -1 (latest)"
                )
            per_queue[qid] = offset
        out[topic] = per_queue
    return out


def store_mapped_file_size(path: str) -> int:
    """``mappedFileSizeCommitLog`` of a store, read from its segments (all have the same size)."""
    commitlog = os.path.join(path, "commitlog")
    if not os.path.isdir(commitlog):
        raise ConfigError(f"option path: {path!r} is not a rocketha store (no commitlog directory)")
    # An empty store: any valid size opens it.
    return existing_file_sizes(path).get("mappedFileSizeCommitLog", 64 * 1024)


def parse(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        raise ConfigError(
            f"unknown option {unknown[0]!r}; known options: path, topics, startingOffsets, "
            "endingOffsets, startingCommitLogOffset, endingCommitLogOffset, "
            "maxOffsetsPerTrigger, maxBytesPerTrigger, minPartitions, failOnDataLoss"
        )
    path = options.get("path")
    if not path:
        raise ConfigError("option path: missing; use load(store_dir) or option('path', ...)")
    path = os.path.abspath(path)
    topics = None
    if options.get("topics") is not None:
        topics = tuple(t.strip() for t in options["topics"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option topics: empty list")
    fail = options.get("failondataloss", "true").strip().lower()
    if fail not in ("true", "false"):
        raise ConfigError(f"option failOnDataLoss: {fail!r} is not true or false")
    parsed = ReadOptions(
        path=path,
        mapped_file_size=store_mapped_file_size(path),
        topics=topics,
        starting=_offsets(options, "startingOffsets", streaming),
        ending=_offsets(options, "endingOffsets", streaming),
        starting_commit_log_offset=_positive_int(options, "startingCommitLogOffset"),
        ending_commit_log_offset=_positive_int(options, "endingCommitLogOffset"),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        max_bytes_per_trigger=_positive_int(options, "maxBytesPerTrigger"),
        min_partitions=_positive_int(options, "minPartitions") or 1,
        fail_on_data_loss=fail == "true",
    )
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
    if isinstance(parsed.starting, dict) and isinstance(parsed.ending, dict):
        for topic, queues in parsed.ending.items():
            for qid, end in queues.items():
                start = parsed.starting.get(topic, {}).get(qid)
                if start is not None and start >= 0 and end >= 0 and end < start:
                    raise ConfigError(
                        f"option endingOffsets: {topic}/{qid} ends at {end}, before its "
                        f"startingOffsets {start}"
                    )
    return parsed


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
    if start >= store.min_offset:
        return start
    message = (
        f"{what} {start} is older than the min offset {store.min_offset} of {opts.path}: "
        "its segments were deleted"
    )
    if opts.fail_on_data_loss:
        raise DataLossError(f"{message}; set failOnDataLoss=false to skip ahead")
    log.warning("%s; skipping ahead (failOnDataLoss=false)", message)
    return store.min_offset


def check_boundary(store: MessageStore, offset: int, name: str) -> None:
    """A start offset must be where a record begins (or the end of the log)."""
    if offset >= store.max_offset:
        return
    try:
        store.read_messages(offset, 1)
    except RocketHAError as e:
        raise ConfigError(f"option {name}: {offset} is not a record boundary: {e}") from None
