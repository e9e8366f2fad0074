"""A full disk and a read-only one, on a small tmpfs this test mounts: puts fail with a clear
OSError naming the file, nothing acknowledged is lost, and reads keep working."""

from __future__ import annotations

import errno
import gc
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from common import FaultReport
from helpers import SEGMENT
from rocketha import Message, MessageStore

#: Small consume queue files, so the commit log is what fills the disk.
CQ_FILE_SIZE = 1024 * 20


def mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    done = mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def open_store(path: Path, **kw: object) -> MessageStore:
    return MessageStore(
        path, mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=CQ_FILE_SIZE, **kw
    )


def test_full_then_read_only_disk(small_disk: Path, fault_report: FaultReport) -> None:
    path = small_disk / "store"
    acked: dict[int, bytes] = {}
    with open_store(path) as store:
        with pytest.raises(OSError) as full:
            for i in range(10_000):
                body = b"%d:" % i + os.urandom(1000)
                acked[store.put(Message("T", body)).offset] = body
        # Blocks are reserved before every write, so the disk fills at a reservation.
        assert full.value.errno == errno.ENOSPC
        assert str(small_disk) in str(full.value), f"the error names no file: {full.value}"
        assert len(acked) > 100
        # Still failing cleanly, and still serving every acknowledged message.
        with pytest.raises(OSError):
            store.put(Message("T", b"one more"))
        held = {m.commitlog_offset: m.body for m in store.messages(check_crc=True)}
    lost = sum(held.get(offset) != body for offset, body in acked.items())
    fault_report.trial("e. disk full", acked_lost=lost, converged=not lost, error=True)
    assert lost == 0

    # A writable mapping of the closed store would keep the remount busy: drop the handle.
    del store
    gc.collect()
    remount = mount("-o", "remount,ro", str(small_disk))
    assert remount.returncode == 0, remount.stderr
    with pytest.raises(OSError) as read_only:
        open_store(path)
    assert read_only.value.errno == errno.EROFS
    assert str(path) in str(read_only.value), f"the error names no file: {read_only.value}"
    with open_store(path, read_only=True) as reader:
        held = {m.commitlog_offset: m.body for m in reader.messages(check_crc=True)}
    lost = sum(held.get(offset) != body for offset, body in acked.items())
    fault_report.trial("e. read-only remount", acked_lost=lost, converged=not lost, error=True)
    assert lost == 0


def test_a_segment_larger_than_the_disk_fills_it_with_enospc_never_sigbus(small_disk: Path) -> None:
    """Segments are created sparse and reserved in steps ahead of the writer: a 4 MiB segment on
    a 2 MiB disk takes puts until the disk is full, then fails them with ENOSPC. Writing into an
    unreserved hole of the mapping would kill this process with SIGBUS instead."""
    path = small_disk / "store"
    acked: dict[int, bytes] = {}
    with MessageStore(
        path, mapped_file_size_commit_log=4 << 20, mapped_file_size_consume_queue=CQ_FILE_SIZE
    ) as store:
        with pytest.raises(OSError) as full:
            for i in range(10_000):
                body = b"%d:" % i + os.urandom(1000)
                acked[store.put(Message("T", body)).offset] = body
        assert full.value.errno == errno.ENOSPC
        assert len(acked) > 500, "the first put of a segment bigger than the disk succeeds"
        held = {m.commitlog_offset: m.body for m in store.messages(check_crc=True)}
    assert all(held.get(offset) == body for offset, body in acked.items())
