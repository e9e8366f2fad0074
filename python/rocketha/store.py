"""The message store: RocketMQ's commit log and consume queues on local disk.

A store directory has RocketMQ's layout::

    <path>/commitlog/00000000000000000000     segment files named by start offset
    <path>/consumequeue/<topic>/<queueId>/... 20-byte index entries per queue
    <path>/abort                              exists while the store is open
    <path>/checkpoint                         last flushed offset
    <path>/lock                               held by the process that has it open

For example::

    >>> with MessageStore(path) as store:
    ...     result = store.put(Message("orders", b"hello", tags="new"))
    ...     [m.body for m in store.messages()]
    [b'hello']
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Never, Self

from rocketha import _core
from rocketha._core import Message, MessageExt, PutResult
from rocketha._events import EventPump
from rocketha.roles import FlushDiskType

#: The core's defaults (RocketMQ's), by BrokerConfig field.
_D = _core.BrokerConfig().values()
_FLUSH = FlushDiskType(_D["flush_disk_type"])

log = logging.getLogger("rocketha.store")

_READ_CHUNK = 1024
#: RocketMQ names every segment file by its start offset in 20 digits.
_SEGMENT_NAME = "[0-9]" * 20


def existing_file_sizes(
    path: str | os.PathLike[str], store_path_commit_log: str | os.PathLike[str] | None = None
) -> dict[str, int]:
    """The file sizes an existing store was written with, read from its files, by RocketMQ key:
    ``mappedFileSizeCommitLog`` from a commit log segment (in ``store_path_commit_log`` when
    given), ``mappedFileSizeConsumeQueue`` from a consume queue file. Empty for a new store."""
    root = Path(path)
    commit_log = Path(store_path_commit_log) if store_path_commit_log else root / "commitlog"
    found: dict[str, int] = {}
    for key, where, pattern in (
        ("mappedFileSizeCommitLog", commit_log, _SEGMENT_NAME),
        ("mappedFileSizeConsumeQueue", root, "consumequeue/*/*/" + _SEGMENT_NAME),
    ):
        first = next(where.glob(pattern), None)
        if first is not None:
            found[key] = first.stat().st_size
    return found


#: Keywords that took rocketha's own names before they took ``BrokerConfig``'s: old -> new, and
#: what else changed, for the error a caller of the old name gets.
_RENAMED = {
    "mapped_file_size": "mapped_file_size_commit_log",
    "flush_interval_ms": "flush_interval_commit_log",
    "sync_flush_timeout_ms": "sync_flush_timeout",
    "consume_queue_entries": "mapped_file_size_consume_queue, in bytes (20 per entry)",
    "slave_timeout_ms": "slave_timeout",
    "accept_zero_body_crc": "ha_accept_zero_body_crc",
    "clean_resource_interval_ms": "clean_resource_interval",
}


class MessageStore(_core.MessageStore):
    """Opens (creating if needed) and recovers the store at ``path``.

    A keyword that is a RocketMQ key has the name, unit and default of the
    :class:`~rocketha.BrokerConfig` field for it (RocketMQ's key in snake_case):
    ``mapped_file_size_commit_log`` (``mappedFileSizeCommitLog``, bytes: any multiple of 4 KiB,
    as long as a record fits) and ``mapped_file_size_consume_queue``
    (``mappedFileSizeConsumeQueue``, bytes: a multiple of 20, the size of an entry) default to
    an existing store's own sizes, read from its files, else to RocketMQ's (1 GiB, and
    6,000,000 bytes: 300,000 entries); ``flush_disk_type``; ``flush_interval_commit_log`` (ms
    between ASYNC_FLUSH's msyncs); ``sync_flush_timeout`` (ms SYNC_FLUSH's msync is waited
    for); ``slave_timeout`` (ms a put waits for its slaves' acks) and ``ha_max_gap_not_in_sync``
    (bytes a slave may lag and still count); ``ha_accept_zero_body_crc`` takes a BODYCRC of 0
    as "never computed", for logs written by peers that leave it unset.

    :meth:`from_config` opens a broker's store from its whole config instead.

    Keywords that are no RocketMQ key, so ``BrokerConfig`` has no field of the name: a
    broker derives them from its role and addresses, or they are how a tool opens a store.
    ``store_host`` (``brokerIP1:listenPort``) is the address recorded in each message and msgId.
    ``sync_slaves`` is the number of distinct slaves' acks a put waits for: what a SYNC_MASTER
    broker derives from ``inSyncReplicas`` (minus itself), 0 for other roles (and left out).
    ``read_only=True`` opens a store another process is writing, without taking its lock (how
    Spark readers attach to a live replica). ``truncate_at_corruption`` is the repair below.
    An old name (``mapped_file_size``, ``consume_queue_entries``, ...) raises a
    ``TypeError`` naming the new one.

    Recovery cuts a torn tail, the record a crash interrupted with nothing valid after it. An
    invalid record with valid records after it is corruption in the middle of the log: the open
    fails with :class:`CommitLogCorrupted` naming the offset, the reason and what follows, and
    cuts nothing, unless ``truncate_at_corruption=True`` (what ``rocketha repair
    --truncate-at-corruption`` does) says to cut there. A read-only open reports the same
    finding in :meth:`corruption` and in its log.

    Retention takes RocketMQ's keys: ``delete_when`` (``deleteWhen``, local hours such as
    ``"04;10"``) and ``file_reserved_time`` (``fileReservedTime``, hours) say when old commit
    log segments go, never the one being written; ``disk_max_used_space_ratio``,
    ``disk_space_clean_forcibly_ratio`` and ``disk_space_warning_level_ratio`` (percent) say
    when the disk forces it, up to refusing puts with :class:`DiskFullError`; a pass runs every
    ``clean_resource_interval`` ms and deletes at most ``delete_file_batch_max`` segments.
    ``file_reserved_time_unit_ms`` is for tests only: the length of a ``fileReservedTime`` hour.
    ``store_path_commit_log`` (``storePathCommitLog``) puts the commit log somewhere other than
    ``<path>/commitlog``; readers of the store must be told the same.
    Consume queue files follow the commit log; a queue offset below a queue's new floor raises
    :class:`OffsetTooSmallError` naming it.
    """

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        mapped_file_size_commit_log: int | None = None,
        mapped_file_size_consume_queue: int | None = None,
        flush_disk_type: FlushDiskType | str = _FLUSH,
        flush_interval_commit_log: int = _D["flush_interval_commit_log"],
        sync_flush_timeout: int = _D["sync_flush_timeout"],
        slave_timeout: int = _D["slave_timeout"],
        ha_max_gap_not_in_sync: int = _D["ha_max_gap_not_in_sync"],
        ha_accept_zero_body_crc: bool = _D["ha_accept_zero_body_crc"],
        delete_when: str = _D["delete_when"],
        file_reserved_time: int = _D["file_reserved_time"],
        file_reserved_time_unit_ms: int = _D["file_reserved_time_unit_ms"],
        disk_max_used_space_ratio: int = _D["disk_max_used_space_ratio"],
        disk_space_clean_forcibly_ratio: int = _D["disk_space_clean_forcibly_ratio"],
        disk_space_warning_level_ratio: int = _D["disk_space_warning_level_ratio"],
        clean_resource_interval: int = _D["clean_resource_interval"],
        delete_file_batch_max: int = _D["delete_file_batch_max"],
        store_path_commit_log: str | os.PathLike[str] | None = None,
        store_host: str | None = None,
        sync_slaves: int | None = None,
        read_only: bool = False,
        truncate_at_corruption: bool = False,
        # Only so that an old name fails naming the new one; typed Never, so a type checker
        # still refuses every keyword not listed above.
        **unknown: Never,
    ) -> Self:
        for name in unknown:
            if name in _RENAMED:
                raise TypeError(f"MessageStore: {name} is now {_RENAMED[name]}, as in BrokerConfig")
            raise TypeError(f"MessageStore() got an unexpected keyword argument {name!r}")
        found = existing_file_sizes(path, store_path_commit_log)
        if mapped_file_size_commit_log is None:
            mapped_file_size_commit_log = found.get("mappedFileSizeCommitLog")
        if mapped_file_size_consume_queue is None:
            mapped_file_size_consume_queue = found.get("mappedFileSizeConsumeQueue")
        config = _core.BrokerConfig(
            mapped_file_size_commit_log=mapped_file_size_commit_log,
            mapped_file_size_consume_queue=mapped_file_size_consume_queue,
            flush_disk_type=FlushDiskType(flush_disk_type),
            flush_interval_commit_log=flush_interval_commit_log,
            sync_flush_timeout=sync_flush_timeout,
            slave_timeout=slave_timeout,
            ha_max_gap_not_in_sync=ha_max_gap_not_in_sync,
            ha_accept_zero_body_crc=ha_accept_zero_body_crc,
            delete_when=delete_when,
            file_reserved_time=file_reserved_time,
            file_reserved_time_unit_ms=file_reserved_time_unit_ms,
            disk_max_used_space_ratio=disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio=disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio=disk_space_warning_level_ratio,
            clean_resource_interval=clean_resource_interval,
            delete_file_batch_max=delete_file_batch_max,
            store_path_commit_log=None
            if store_path_commit_log is None
            else os.fspath(store_path_commit_log),
        )
        return cls._opened(
            path,
            config,
            store_host=store_host,
            sync_slaves=sync_slaves,
            read_only=read_only,
            truncate_at_corruption=truncate_at_corruption,
        )

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str], config: _core.BrokerConfig, *, store_host: str
    ) -> Self:
        """The store of a broker, exactly as its config (``BrokerConfig.native()``) says;
        ``store_host`` is ``brokerIP1`` with the client port actually bound."""
        return cls._opened(path, config, store_host=store_host)

    @classmethod
    def _opened(
        cls,
        path: str | os.PathLike[str],
        config: _core.BrokerConfig,
        *,
        store_host: str | None,
        sync_slaves: int | None = None,
        read_only: bool = False,
        truncate_at_corruption: bool = False,
    ) -> Self:
        self = super().__new__(
            cls,
            os.fspath(path),
            config,
            store_host=store_host,
            sync_slaves=sync_slaves,
            read_only=read_only,
            truncate_at_corruption=truncate_at_corruption,
        )
        self._log_recovery(read_only)
        events = self.clean_events()
        if events is not None:
            # Retention's deletions and disk-full refusals, logged as they happen. The thread
            # holds only the event queue, so a store nobody closes still closes when dropped,
            # and the thread ends with it.
            with _clean_loggers_lock:
                for ended in [p for p in _clean_loggers if not p.is_alive()]:
                    del _clean_loggers[ended]
                pump = EventPump("rocketha-clean-events", events.next, _log_clean_event)
                _clean_loggers[pump] = events
        return self

    def _log_recovery(self, read_only: bool) -> None:
        report = self.recovery_report()
        crashed, max_offset, scanned_from, checked, cut_at, reason, file, deleted = report
        if crashed:
            # Said at WARNING whatever recovery found: an operator looking at a restart after a
            # kill or power loss wants to know what the store kept, including "everything".
            cut = (
                f"truncated {file} at offset {cut_at}: {reason}"
                if cut_at is not None
                else "truncated nothing"
            )
            log.warning(
                "%s: recovered from an unclean shutdown (the abort marker was left): checked "
                "%d records from offset %d, %s; max offset %d",
                self.path,
                checked,
                scanned_from,
                cut,
                max_offset,
            )
        elif cut_at is not None:
            log.warning(
                "commit log recovery truncated %s at offset %d: %s (valid data ends there)",
                file,
                cut_at,
                reason,
            )
        for path in deleted:
            log.warning("commit log recovery deleted %s, which lay past the valid end", path)
        corruption = self.corruption()
        if corruption is not None:
            at, _next, records, size, message = corruption
            if read_only:
                log.error("%s", message)
            else:
                log.warning(
                    "commit log cut at mid-log corruption at offset %d, as asked: dropped %d "
                    "valid records (%d bytes) that followed it",
                    at,
                    records,
                    size,
                )
        if checked and not crashed and cut_at is None:
            # INFO (``rocketha -v``): after a clean stop an operator still asks what was kept.
            log.info(
                "%s: recovered after a clean shutdown: checked %d records from offset %d, "
                "truncated nothing; max offset %d",
                self.path,
                checked,
                scanned_from,
                max_offset,
            )

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def messages(
        self, start_offset: int | None = None, *, check_crc: bool = False
    ) -> Iterator[MessageExt]:
        """Yields every message from ``start_offset`` (a record boundary; default: the start)."""
        offset = self.min_offset if start_offset is None else start_offset
        while True:
            batch, offset = self.read_messages(offset, _READ_CHUNK, check_crc)
            yield from batch
            if len(batch) < _READ_CHUNK:
                return

    def __repr__(self) -> str:
        return (
            f"MessageStore({str(self.path)!r}, min_offset={self.min_offset}, "
            f"max_offset={self.max_offset})"
        )


#: The pumps logging retention's events, with their queues: ended at interpreter exit. A pump
#: ends by itself once its store closed; the next store's open forgets it.
_clean_loggers: dict[EventPump[tuple[bool, str]], _core.CleanEventQueue] = {}
_clean_loggers_lock = threading.Lock()


def _log_clean_event(event: tuple[bool, str]) -> None:
    problem, text = event
    log.log(logging.WARNING if problem else logging.INFO, "%s", text)


@atexit.register
def _end_clean_loggers() -> None:
    """A daemon thread still waiting in native code when the interpreter finalizes would be
    killed on its way back (a store dropped then wakes it) and abort the process: end them all
    first."""
    with _clean_loggers_lock:
        loggers = list(_clean_loggers.items())
    for pump, events in loggers:
        # Not alive in a forked child (Spark's workers): its queue belongs to the parent.
        if pump.is_alive():
            events.close()
            pump.stop()


def segment_checksums(store_dir: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of the used bytes of every commit log segment, by file name: two replicas hold
    the same log when these agree."""
    with MessageStore(store_dir, read_only=True) as store:
        out = {}
        for path, start, used in store.segments():
            digest = hashlib.sha256()
            offset = start
            while offset < start + used:
                chunk = store.read_raw(offset, 1 << 20)
                if not len(chunk):
                    break
                digest.update(chunk)
                offset += len(chunk)
            out[Path(path).name] = digest.hexdigest()
        return out


__all__ = [
    "Message",
    "MessageExt",
    "MessageStore",
    "PutResult",
    "existing_file_sizes",
    "segment_checksums",
]
