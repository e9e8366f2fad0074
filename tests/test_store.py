"""The commit log seen from Python: round trips, reopen, recovery, bad input."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
import rocketha
from helpers import SEGMENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketha import InvalidMessageError, Message, MessageStore, PutStatus, _children
from rocketha.store import existing_file_sizes


def open_store(path: Path, **kw: object) -> MessageStore:
    return MessageStore(path, mapped_file_size_commit_log=SEGMENT, **kw)


def test_put_and_read_back_every_field(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        r = store.put(
            Message(
                "orders",
                b"hello",
                tags="new",
                keys=["k1", "k2"],
                properties={"a": "1"},
                queue_id=3,
                flag=9,
            )
        )
        assert (r.status, r.offset, r.queue_offset) == (PutStatus.PUT_OK, 0, 0)
        assert r.next_offset == r.size == store.max_offset
        [m] = list(store.messages())
        assert (m.topic, m.body, m.tags, m.keys) == ("orders", b"hello", "new", ["k1", "k2"])
        assert m.properties == {"a": "1", "TAGS": "new", "KEYS": "k1 k2"}
        assert (m.queue_id, m.queue_offset, m.flag, m.commitlog_offset) == (3, 0, 9, 0)
        assert m.body_crc == zlib.crc32(b"hello") & 0x7FFFFFFF
        assert m.msg_id == r.msg_id == "7F00000100002A9F0000000000000000"
        assert m.store_host == "127.0.0.1:10911"
        assert m.store_timestamp >= m.born_timestamp > 0
        assert (
            m.store_size
            == r.size
            == 91 + 5 + len("orders") + len("a\x011\x02TAGS\x01new\x02KEYS\x01k1 k2\x02")
        )


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    msgs=st.lists(
        st.tuples(
            st.text("abcXYZ019%|_-", min_size=1, max_size=200),
            st.binary(max_size=3000),
            st.integers(0, 7),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_round_trip_across_segments_and_reopen(
    tmp_path_factory: pytest.TempPathFactory, msgs: list
) -> None:
    path = tmp_path_factory.mktemp("rt")
    with open_store(path) as store:
        results = store.put_batch([Message(t, b, queue_id=q) for t, b, q in msgs])
    with open_store(path) as store:
        got = list(store.messages())
        assert [(m.topic, m.body, m.queue_id) for m in got] == [(t, b, q) for t, b, q in msgs]
        assert [m.commitlog_offset for m in got] == [r.offset for r in results]
        # Queue offsets count per topic and queue.
        seen: dict[tuple[str, int], int] = {}
        for m in got:
            key = (m.topic, m.queue_id)
            assert m.queue_offset == seen.get(key, 0)
            seen[key] = m.queue_offset + 1
            [via_cq] = store.get_messages(m.topic, m.queue_id, m.queue_offset, 1)
            assert via_cq.commitlog_offset == m.commitlog_offset


def test_records_never_span_segments_and_blank_pads(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_batch([Message("T", os.urandom(10_000)) for _ in range(20)])
        segments = store.segments()
        assert len(segments) >= 3
        first_end = segments[1][1]
        tail = bytes(store.read_raw(0, SEGMENT))
        assert len(tail) == SEGMENT
    blank_at = max(
        m.next_offset
        for m in MessageStore(tmp_path, mapped_file_size_commit_log=SEGMENT).messages()
        if m.commitlog_offset < first_end
    )
    # The padding header: remaining size, then the BLANK magic 0xCBD43194.
    assert tail[blank_at + 4 : blank_at + 8] == bytes.fromhex("CBD43194")
    assert int.from_bytes(tail[blank_at : blank_at + 4], "big") == SEGMENT - blank_at


def test_read_raw_is_zero_copy_memoryview(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put(Message("T", b"abc"))
        view = store.read_raw(0, 1 << 20)
        assert isinstance(view, memoryview) and view.readonly
        assert len(view) == store.max_offset
        with pytest.raises(TypeError):
            view[0] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: Message("", b"x"), "topic is empty"),
        (lambda: Message("t" * 32768, b"x"), "32767"),
        (lambda: Message("T", b"x" * (4 * 1024 * 1024 + 1)), "maxMessageSize"),
        (lambda: Message("T", b"x", queue_id=-1), "negative"),
        (lambda: Message("../etc", b"x"), "topics use only"),
    ],
)
def test_bad_messages_are_refused_and_write_nothing(tmp_path: Path, make, text: str) -> None:
    with open_store(tmp_path) as store:
        store.put(Message("T", b"ok"))
        before = store.max_offset
        with pytest.raises(InvalidMessageError, match=text):
            store.put(make())
        with pytest.raises(InvalidMessageError, match=text):
            store.put_batch([Message("T", b"fine"), make()])
        assert store.max_offset == before


#: MessageStore keywords that are no RocketMQ key, so BrokerConfig has no field of the name.
STORE_ONLY = {"store_host", "sync_slaves", "read_only", "truncate_at_corruption"}
#: Left out, these are an existing store's own sizes; a new store gets BrokerConfig's default.
FOUND_IN_THE_STORE = {"mapped_file_size_commit_log", "mapped_file_size_consume_queue"}


def test_keywords_are_broker_config_fields_with_their_defaults(tmp_path: Path) -> None:
    config = {f.name: f.default for f in dataclasses.fields(rocketha.BrokerConfig)}
    params = inspect.signature(MessageStore.__new__).parameters
    keywords = {n: p.default for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords.keys() - config.keys() == STORE_ONLY
    for name in keywords.keys() - STORE_ONLY - FOUND_IN_THE_STORE:
        assert keywords[name] == config[name], name
    assert {keywords[name] for name in FOUND_IN_THE_STORE} == {None}
    with MessageStore(tmp_path) as store:
        store.put(Message("T", b"x"))
    assert existing_file_sizes(tmp_path) == {
        "mappedFileSizeCommitLog": config["mapped_file_size_commit_log"],
        "mappedFileSizeConsumeQueue": config["mapped_file_size_consume_queue"],
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("mapped_file_size", "mapped_file_size_commit_log"),
        ("consume_queue_entries", "mapped_file_size_consume_queue, in bytes"),
        ("flush_interval_ms", "flush_interval_commit_log"),
        ("sync_flush_timeout_ms", "sync_flush_timeout"),
        ("slave_timeout_ms", "slave_timeout"),
        ("accept_zero_body_crc", "ha_accept_zero_body_crc"),
        ("clean_resource_interval_ms", "clean_resource_interval"),
    ],
)
def test_an_old_keyword_names_the_new_one(tmp_path: Path, old: str, new: str) -> None:
    with pytest.raises(TypeError, match=rf"^MessageStore: {old} is now {new}\b"):
        MessageStore(tmp_path, **{old: 64 * 1024})
    assert not any(tmp_path.iterdir()), "refused before the store was created"


def test_an_unknown_keyword_is_a_plain_type_error(tmp_path: Path) -> None:
    with pytest.raises(
        TypeError, match=r"^MessageStore\(\) got an unexpected keyword argument 'segment_size'$"
    ):
        MessageStore(tmp_path, segment_size=SEGMENT)


def test_consume_queue_size_is_whole_entries(tmp_path: Path) -> None:
    with pytest.raises(rocketha.ConfigError, match=r"mappedFileSizeConsumeQueue: 1001 .*of 20"):
        open_store(tmp_path, mapped_file_size_consume_queue=1001)


def test_separator_bytes_in_properties_are_refused() -> None:
    with pytest.raises(InvalidMessageError, match="separator"):
        Message("T", b"x", properties={"k": "a\x02b"})
    with pytest.raises(InvalidMessageError, match="separator"):
        Message("T", b"x", tags="a\x01")


def test_wrong_segment_size_on_reopen(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put(Message("T", b"x"))
    with pytest.raises(rocketha.ConfigError, match="mappedFileSizeCommitLog"):
        MessageStore(tmp_path, mapped_file_size_commit_log=2 * SEGMENT)
    with pytest.raises(rocketha.ConfigError, match="multiple of 4096"):
        MessageStore(tmp_path / "other", mapped_file_size_commit_log=70_000)


def test_store_open_twice_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path):
        with pytest.raises(rocketha.StoreLockedError, match="already open"):
            open_store(tmp_path)
        code = (
            "import rocketha; "
            f"rocketha.MessageStore({str(tmp_path)!r}, mapped_file_size_commit_log={SEGMENT})"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode != 0 and "StoreLockedError" in proc.stderr
    # Released on close.
    open_store(tmp_path).close()


def test_flipped_byte_in_tail_is_truncated_with_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_store(tmp_path) as store:
        results = store.put_batch([Message("T", b"payload-%d" % i) for i in range(50)])
    # The last record: nothing valid follows it, so it is a tail recovery may cut.
    victim = results[-1]
    segment = tmp_path / "commitlog" / f"{0:020d}"
    raw = bytearray(segment.read_bytes())
    raw[victim.offset + 88 + 2] ^= 0xFF  # the body starts at byte 88: its CRC no longer matches
    segment.write_bytes(raw)
    with caplog.at_level(logging.WARNING, logger="rocketha.store"):
        store = open_store(tmp_path)
    assert store.max_offset == victim.offset
    assert f"offset {victim.offset}" in caplog.text and "CRC" in caplog.text
    assert len(list(store.messages())) == 49
    assert [q[3] for q in store.queues()] == [49]
    # Appending continues right after the valid prefix.
    assert store.put(Message("T", b"after")).offset == victim.offset
    store.close()


def test_restart_after_a_crash_says_what_recovery_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_store(tmp_path) as store:
        results = store.put_batch([Message("T", b"payload-%d" % i) for i in range(20)])
    with caplog.at_level(logging.WARNING, logger="rocketha.store"):
        open_store(tmp_path).close()
    assert caplog.text == "", "a clean restart is quiet"

    # What a kill leaves: the abort marker; then a torn last record.
    (tmp_path / "abort").touch()
    with caplog.at_level(logging.WARNING, logger="rocketha.store"):
        open_store(tmp_path).close()
    assert "recovered from an unclean shutdown" in caplog.text
    assert "truncated nothing" in caplog.text
    assert f"max offset {results[-1].next_offset}" in caplog.text
    caplog.clear()
    (tmp_path / "abort").touch()
    segment = tmp_path / "commitlog" / f"{0:020d}"
    raw = bytearray(segment.read_bytes())
    raw[results[-1].offset + 88] ^= 0xFF
    segment.write_bytes(raw)
    with caplog.at_level(logging.WARNING, logger="rocketha.store"):
        open_store(tmp_path).close()
    assert "recovered from an unclean shutdown" in caplog.text
    assert f"at offset {results[-1].offset}" in caplog.text
    assert f"max offset {results[-1].offset}" in caplog.text


def _log_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((path / "commitlog").iterdir())}


def _rocketha(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketha", *map(str, args)], capture_output=True, text=True
    )


def _mid_log_store(path: Path) -> tuple[list[int], int]:
    """400 records over several segments; returns their offsets and the log's end."""
    with open_store(path) as store:
        results = store.put_batch([Message("T", b"%d:" % i + b"x" * 500) for i in range(400)])
        return [r.offset for r in results], store.max_offset


def _poke(path: Path, offset: int, data: bytes) -> None:
    start = offset - offset % SEGMENT
    with (path / "commitlog" / f"{start:020d}").open("r+b") as f:
        f.seek(offset - start)
        f.write(data)


def test_mid_log_corruption_is_refused_reported_and_repaired_on_request(tmp_path: Path) -> None:
    offsets, end = _mid_log_store(tmp_path)
    assert end > 3 * SEGMENT
    bad = offsets[300]
    _poke(tmp_path, bad + 88 + 5, b"\xff")  # a body byte: the CRC no longer matches
    before = _log_files(tmp_path)
    with pytest.raises(rocketha.CommitLogCorrupted) as refused:
        open_store(tmp_path)
    text = str(refused.value)
    for part in (
        f"offset {bad}",
        "not a torn tail",
        "body CRC mismatch",
        "99 valid records",
        f"rocketha inspect {tmp_path}",
        f"rocketha repair --truncate-at-corruption {tmp_path}",
        "--accept-zero-body-crc",
    ):
        assert part in text, f"{part!r} missing from: {text}"
    assert _log_files(tmp_path) == before, "a refused open changes nothing"

    # The read-only open reports the same finding instead of hiding it.
    with open_store(tmp_path, read_only=True) as reader:
        found = reader.corruption()
        assert found is not None
        assert found[:3] == (bad, offsets[301], 99)
        assert found[4] == text
    out = _rocketha("inspect", tmp_path)
    assert out.returncode == 1 and f"CORRUPT: {text}" in out.stdout

    out = _rocketha("repair", "--truncate-at-corruption", tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"at offset {bad}: dropped 99 valid records" in out.stdout
    with open_store(tmp_path) as store:
        assert store.max_offset == bad
        assert len(list(store.messages(check_crc=True))) == 300
    assert _rocketha("inspect", tmp_path).returncode == 0


def test_zero_body_crc_records_are_kept_with_the_opt_in(tmp_path: Path) -> None:
    offsets, end = _mid_log_store(tmp_path)
    zeroed = offsets[250::50]
    for offset in zeroed:
        _poke(tmp_path, offset + 8, b"\0\0\0\0")  # BODYCRC, as some peers write it
    before = _log_files(tmp_path)
    with pytest.raises(rocketha.CommitLogCorrupted, match="stored 0x0") as refused:
        open_store(tmp_path)
    assert f"offset {zeroed[0]}" in str(refused.value)
    out = _rocketha("repair", "--accept-zero-body-crc", tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"{len(zeroed)} records keep BODYCRC 0" in out.stdout
    assert "haAcceptZeroBodyCrc=true" in out.stdout
    assert _log_files(tmp_path) == before, "nothing rewritten"
    with open_store(tmp_path, ha_accept_zero_body_crc=True) as store:
        assert store.max_offset == end
        got = list(store.messages(check_crc=True))
        assert len(got) == 400
        assert [m.commitlog_offset for m in got if m.body_crc == 0] == zeroed


def test_4k_segments_open_and_round_trip(tmp_path: Path) -> None:
    msgs = [Message(f"T{i % 3}", os.urandom(i % 900), queue_id=i % 2) for i in range(300)]
    with MessageStore(
        tmp_path, mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=64 * 20
    ) as store:
        store.put_batch(msgs)
        assert len(store.segments()) > 15
        # A record that cannot fit a segment is the one clear error.
        with pytest.raises(InvalidMessageError, match=r"does not fit.*mappedFileSizeCommitLog"):
            store.put(Message("T", b"x" * 4000))
    with MessageStore(
        tmp_path, mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=64 * 20
    ) as store:
        got = list(store.messages(check_crc=True))
        assert [(m.topic, m.body, m.queue_id) for m in got] == [
            (m.topic, m.body, m.queue_id) for m in msgs
        ]
    assert rocketha.BrokerConfig(mapped_file_size_commit_log=4096)
    with pytest.raises(rocketha.ConfigError, match="mappedFileSizeCommitLog"):
        rocketha.BrokerConfig(mapped_file_size_commit_log=4096 + 1)


def test_consume_queue_size_mismatch_names_its_own_key(tmp_path: Path) -> None:
    with open_store(tmp_path, mapped_file_size_consume_queue=64 * 20) as store:
        store.put(Message("T", b"x"))
    with pytest.raises(rocketha.ConfigError) as wrong:
        open_store(tmp_path, mapped_file_size_consume_queue=128 * 20)
    assert "mappedFileSizeConsumeQueue" in str(wrong.value)
    assert "mappedFileSizeCommitLog" not in str(wrong.value)


CHILD = textwrap.dedent(
    """
    import os, sys, rocketha
    store = rocketha.MessageStore(sys.argv[1], mapped_file_size_commit_log={segment})
    print("ready", flush=True)
    i = 0
    while True:
        body = os.urandom(1 + (i * 7919) % 6000)
        store.put(rocketha.Message("T%d" % (i % 3), body, tags="t", queue_id=i % 2))
        i += 1
    """
)


@pytest.mark.parametrize("trial", range(20))
def test_sigkill_mid_append_recovers_a_valid_prefix(tmp_path: Path, trial: int) -> None:
    rng = random.Random(trial)
    for round_ in range(2):
        proc = _children.spawn(
            [sys.executable, "-c", CHILD.format(segment=SEGMENT), str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        import time

        time.sleep(rng.uniform(0.01, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert (tmp_path / "abort").exists(), "the abort marker shows the crash"
        with open_store(tmp_path) as store:
            count = 0
            for m in store.messages(check_crc=True):
                assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF
                count += 1
            assert count > 0 or round_ == 0
            # Consume queues agree with the log after recovery.
            total = sum(hi - lo for _, _, lo, hi in store.queues())
            assert total == count
        assert not (tmp_path / "abort").exists()


def test_sync_flush_group_commit(tmp_path: Path) -> None:
    import threading

    with MessageStore(
        tmp_path, mapped_file_size_commit_log=SEGMENT * 16, flush_disk_type="SYNC_FLUSH"
    ) as store:
        results: list = []

        def producer() -> None:
            for _ in range(200):
                results.append(store.put(Message("T", b"x" * 100)))

        threads = [threading.Thread(target=producer, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 1600 and {r.status for r in results} == {PutStatus.PUT_OK}
        msyncs, requests, flushed = store.flush_stats()
        assert flushed >= max(r.next_offset for r in results)
        assert requests >= 1 and msyncs >= 1


def test_read_only_open_sees_a_live_writer(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_batch([Message("T", b"a" * 500) for _ in range(300)])
        reader = open_store(tmp_path, read_only=True)
        assert reader.max_offset == store.max_offset
        store.put(Message("T", b"later"))
        assert reader.refresh() == store.max_offset
        assert list(reader.messages())[-1].body == b"later"
        with pytest.raises(rocketha.RocketHAError, match="read-only"):
            reader.put(Message("T", b"x"))


WRITER = """
import sys
from rocketha import Message, MessageStore
store = MessageStore(
    sys.argv[1], mapped_file_size_commit_log=int(sys.argv[2]), mapped_file_size_consume_queue=1280
)
for line in sys.stdin:
    topic, n = line.split()
    store.put_batch([Message(topic, b"m%d" % i) for i in range(int(n))])
    print(store.max_offset, flush=True)
store.close()
"""


def test_read_only_store_follows_a_writer_in_another_process(tmp_path: Path) -> None:
    """A reader in another process sees what the writer adds after the open, through the
    consume queues as well as the commit log: new entries, new queue files (64 entries each
    here), new topics."""
    writer = _children.spawn(
        [sys.executable, "-c", WRITER, str(tmp_path), str(SEGMENT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin and writer.stdout

    def write(topic: str, n: int) -> int:
        assert writer.stdin and writer.stdout
        writer.stdin.write(f"{topic} {n}\n")
        writer.stdin.flush()
        return int(writer.stdout.readline())

    try:
        write("T", 100)
        reader = MessageStore(tmp_path, read_only=True)
        assert [(q[0], q[3]) for q in reader.queues()] == [("T", 100)]
        max_offset = write("T", 900)
        max_offset = write("U", 50)
        assert reader.refresh() == max_offset
        assert [(q[0], q[3]) for q in reader.queues()] == [("T", 1000), ("U", 50)]
        bodies = [m.body for m in reader.get_messages("T", 0, 0, 2000)]
        assert bodies == [b"m%d" % i for i in range(100)] + [b"m%d" % i for i in range(900)]
        assert [m.body for m in reader.get_messages("U", 0, 40, 100)] == [
            b"m%d" % i for i in range(40, 50)
        ]
        reader.close()
    finally:
        writer.stdin.close()
        writer.wait()


def test_inspect_cli_verifies_crcs(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_batch([Message("T", b"x" * 100, tags="a") for _ in range(10)])
    out = subprocess.run(
        [sys.executable, "-m", "rocketha", "inspect", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "10 records, every CRC verified" in out.stdout
    segment = tmp_path / "commitlog" / f"{0:020d}"
    raw = bytearray(segment.read_bytes())
    raw[150] ^= 0xFF
    segment.write_bytes(raw)
    out = subprocess.run(
        [sys.executable, "-m", "rocketha", "inspect", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "CORRUPT" in out.stdout and "offset" in out.stdout


def test_handle_refuses_use_after_fork(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    pid = os.fork()
    if pid == 0:
        try:
            _ = store.max_offset
        except rocketha.ForkedProcessError:
            os._exit(0)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    store.close()
    assert os.WEXITSTATUS(status) == 0


def test_store_path_commit_log_puts_the_segments_elsewhere(tmp_path: Path) -> None:
    root, logs = tmp_path / "store", tmp_path / "elsewhere"
    with open_store(root, store_path_commit_log=logs) as store:
        store.put(Message("T", b"x"))
        assert [Path(p).parent for p, _, _ in store.segments()] == [logs]
    assert not (root / "commitlog").exists()
    assert (root / "consumequeue" / "T" / "0").is_dir()
    # Readers are told the same; the segment size is found there too.
    with MessageStore(root, store_path_commit_log=logs, read_only=True) as reader:
        assert [m.body for m in reader.messages()] == [b"x"]
        assert reader.mapped_file_size == SEGMENT
    with pytest.raises(OSError, match="no commitlog directory"):
        MessageStore(root, read_only=True)
