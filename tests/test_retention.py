"""Retention as RocketMQ does it, on 64 KiB segments with ``fileReservedTime`` hours shrunk to
milliseconds and the disk use faked: old segments go, the current one never, consume queues and
readers see the floor, a full disk cleans forcibly and refuses puts until space returns, and a
master and its slave each clean by their own config."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
from helpers import SEGMENT, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    ConfigError,
    DiskFullError,
    Message,
    MessageStore,
    OffsetTooSmallError,
)

#: Every hour is a deleteWhen hour: no test depends on the time of day.
EVERY_HOUR = ";".join(str(h) for h in range(24))


def open_store(path: Path, reserved_hours: int = 1, **kw: object) -> MessageStore:
    return MessageStore(
        path,
        mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=50 * 20,
        delete_when=EVERY_HOUR,
        file_reserved_time=reserved_hours,
        file_reserved_time_unit_ms=1,
        # Passes run when a test says (clean_now), not on the thread's timer.
        clean_resource_interval=3_600_000,
        **kw,  # type: ignore[arg-type]
    )


def fill(store: MessageStore, segments: int) -> int:
    n = 0
    while len(store.segments()) < segments:
        store.put(Message("T", b"x" * 1000))
        n += 1
    return n


def aged(store: MessageStore) -> None:
    """Makes every segment older than one (millisecond) hour by its modification time."""
    past = time.time() - 60
    for path, _, _ in store.segments():
        os.utime(path, (past, past))


def test_old_segments_go_nothing_else_and_readers_are_told_the_floor(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        count = fill(store, 5)
        current = store.segments()[-1][0]
        aged(store)
        _ratio, deleted, cq_deleted = store.clean_now()
        assert [Path(p).name for p in deleted] == [f"{i * SEGMENT:020d}" for i in range(4)]
        assert cq_deleted > 0
        assert [s[0] for s in store.segments()] == [current]
        assert store.min_offset == 4 * SEGMENT
        (_, _, low, high) = store.queues()[0]
        assert high == count
        # The floor is exactly the first message left, and every message from it is there.
        first = store.get_messages("T", 0, low, 1)[0]
        assert first.commitlog_offset == store.min_offset
        assert len(store.get_messages("T", 0, low, 10_000)) == count - low
        with pytest.raises(OffsetTooSmallError, match=f"below its min offset {low}"):
            store.get_messages("T", 0, 0, 1)
        assert next(store.messages()).commitlog_offset == store.min_offset
        # Nothing more is old enough to go, and the segment being written never is.
        aged(store)
        assert store.clean_now()[1] == []
        store.put(Message("T", b"after"))


def test_unexpired_segments_stay_until_the_disk_forces_them(tmp_path: Path) -> None:
    with open_store(tmp_path, reserved_hours=10**9) as store:
        fill(store, 3)
        assert store.clean_now()[1] == []
        store.set_fake_disk_used_ratio(0.80)  # past diskMaxUsedSpaceRatio: expired ones only
        assert store.clean_now()[1] == []
        assert store.min_offset == 0
        store.set_fake_disk_used_ratio(0.87)  # past diskSpaceCleanForciblyRatio
        assert len(store.clean_now()[1]) == 2
        assert len(store.segments()) == 1
        store.put(Message("T", b"still served"))


def test_warning_level_refuses_puts_with_a_clear_status_until_space_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_store(tmp_path, reserved_hours=10**9) as store:
        store.put(Message("T", b"before"))
        before = store.max_offset
        with caplog.at_level(logging.INFO, logger="rocketha.store"):
            store.set_fake_disk_used_ratio(0.95)
            store.clean_now()
            with pytest.raises(DiskFullError, match=r"95\.0% used.*SERVICE_NOT_AVAILABLE"):
                store.put(Message("T", b"refused"))
            assert store.max_offset == before
            store.set_fake_disk_used_ratio(0.5)
            store.clean_now()
            store.put(Message("T", b"after"))
            wait_for(lambda: "accepted again" in caplog.text, what="the log line")
        assert "puts are refused" in caplog.text


def test_a_reader_of_a_live_store_sees_the_new_floor(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 4)
        reader = MessageStore(tmp_path, mapped_file_size_commit_log=SEGMENT, read_only=True)
        aged(store)
        store.clean_now()
        reader.refresh()
        assert reader.min_offset == store.min_offset == 3 * SEGMENT
        assert reader.queues() == store.queues()
        reader.close()


def test_retention_keys_are_validated_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="deleteWhen"):
        BrokerConfig(delete_when="4am")
    with pytest.raises(ConfigError, match="diskSpaceWarningLevelRatio 120"):
        BrokerConfig(disk_space_warning_level_ratio=120)
    with pytest.raises(ConfigError, match="deleteFileBatchMax"):
        BrokerConfig(delete_file_batch_max=0)
    loaded = BrokerConfig.from_properties({"deleteWhen": "04;10", "fileReservedTime": "48"})
    assert (loaded.delete_when, loaded.file_reserved_time, loaded.ignored_keys) == ("04;10", 48, {})


def test_a_new_store_takes_disk_as_it_fills(tmp_path: Path) -> None:
    with MessageStore(tmp_path) as store:  # 1 GiB segments
        store.put(Message("T", b"one"))
        segment = Path(store.segments()[0][0])
        assert segment.stat().st_size == 1 << 30
        assert segment.stat().st_blocks * 512 <= 128 << 20


def broker_config(tmp: Path, name: str, **kw: object) -> BrokerConfig:
    keys: dict[str, object] = {
        "store_path_root_dir": str(tmp / name),
        "mapped_file_size_commit_log": SEGMENT,
        "mapped_file_size_consume_queue": 50 * 20,
        "ha_listen_address": "127.0.0.1",
        "ha_listen_port": 0,
        "listen_port": 0,
        "delete_when": EVERY_HOUR,
        "file_reserved_time": 1,
        "file_reserved_time_unit_ms": 1,
        "clean_resource_interval": 20,
    }
    return BrokerConfig(**{**keys, **kw})  # type: ignore[arg-type]


def test_a_master_and_its_slave_each_clean_by_their_own_config(tmp_path: Path) -> None:
    # Not a deleteWhen hour (unless the test runs for 12 hours): the master cleans only once
    # its disk passes diskMaxUsedSpaceRatio, after the slave has everything.
    later = str((time.localtime().tm_hour + 12) % 24)
    with Broker(broker_config(tmp_path, "master", delete_when=later)) as master:
        slave_conf = broker_config(
            tmp_path,
            "slave",
            broker_role="SLAVE",
            broker_id=1,
            ha_master_address=master.ha_address,
            file_reserved_time=10**9,
        )
        with Broker(slave_conf) as slave:
            fill(master.store, 4)
            wait_for(lambda: slave.max_offset == master.max_offset, what="replication")
            master.store.set_fake_disk_used_ratio(0.80)
            # The consume queues follow the commit log in the same pass, just after it.
            wait_for(lambda: master.get_messages("T", 0, 0).offset_moved, what="the master's clean")
            assert master.min_offset >= 3 * SEGMENT
            # The slave keeps what its own fileReservedTime says to keep.
            assert slave.min_offset == 0
            result = master.get_messages("T", 0, 0)
            assert result.offset_moved and result.next_begin_offset == result.min_offset > 0
            assert not result.messages
        # Restarted with a short fileReservedTime, the slave cleans its own segments.
        slave_conf.file_reserved_time = 1
        with Broker(slave_conf) as slave:
            wait_for(lambda: slave.min_offset >= 3 * SEGMENT, what="the slave's clean")


def test_a_slave_behind_the_masters_floor_says_why_it_cannot_catch_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = broker_config(tmp_path, "master", file_reserved_time=10**9)
    with Broker(conf) as master:
        fill(master.store, 2)
        slave_conf = broker_config(
            tmp_path,
            "slave",
            broker_role="SLAVE",
            broker_id=1,
            ha_master_address=master.ha_address,
            file_reserved_time=10**9,
        )
        with Broker(slave_conf) as slave:
            wait_for(lambda: slave.max_offset == master.max_offset, what="replication")
    # The slave stays down while the master moves on and retention deletes what it needs.
    with Broker(broker_config(tmp_path, "master", file_reserved_time=10**9)) as master:
        fill(master.store, 5)
        master.store.set_fake_disk_used_ratio(0.87)
        master.store.clean_now()
        floor = master.min_offset
        slave_conf.ha_master_address = master.ha_address
        with caplog.at_level(logging.WARNING), Broker(slave_conf) as slave:
            wait_for(
                lambda: "retention deleted what this slave still needs" in caplog.text,
                what="the slave's reason",
            )
            wait_for(lambda: "below the master's min offset" in caplog.text, what="the master's")
            assert f"starts at {floor}" in caplog.text
            assert slave.max_offset < floor
