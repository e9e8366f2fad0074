"""The slave's dispatch path as a state machine: a master store appends, its raw bytes reach a
slave store through ``append_raw`` in chunks of any size (cutting records and blank padding at
any byte), with wrong offsets and slave restarts mixed in. The slave must always hold a
byte-identical prefix of the master's log, and consume queues for exactly its complete records.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from rocketha import Message, MessageStore, OffsetMismatch

SEGMENT = 64 * 1024

bodies = st.one_of(
    st.binary(max_size=600),
    # Rarely a large one, so segments fill and end in blank padding within a few steps.
    st.integers(min_value=4_000, max_value=30_000).map(lambda n: bytes([n % 251]) * n),
)
messages = st.builds(
    lambda topic, body, queue_id, tags: Message(topic, body, queue_id=queue_id, tags=tags),
    st.sampled_from(["A", "B", "orders"]),
    bodies,
    st.integers(min_value=0, max_value=3),
    st.one_of(st.none(), st.sampled_from(["t1", "t2"])),
)


def log_bytes(store: MessageStore, start: int, end: int) -> bytes:
    """The log between two offsets, read segment by segment as the HA master does."""
    out = bytearray()
    while start < end:
        chunk = bytes(store.read_raw(start, end - start))
        if not chunk:
            break
        out += chunk
        start += len(chunk)
    return bytes(out)


class SlaveDispatch(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="rocketha-dispatch-"))
        self.master = MessageStore(self.dir / "master", mapped_file_size_commit_log=SEGMENT)
        self.slave = self.open_slave()

    def open_slave(self) -> MessageStore:
        return MessageStore(self.dir / "slave", mapped_file_size_commit_log=SEGMENT)

    def teardown(self) -> None:
        self.slave.close()
        self.master.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(batch=st.lists(messages, min_size=1, max_size=8))
    def append(self, batch: list[Message]) -> None:
        self.master.put_batch(batch)

    @precondition(lambda self: self.slave.max_offset < self.master.max_offset)
    @rule(chunk=st.integers(min_value=1, max_value=2 * SEGMENT))
    def replicate(self, chunk: int) -> None:
        offset = self.slave.max_offset
        data = bytes(self.master.read_raw(offset, chunk))
        assert data, f"the master has bytes at {offset} below its max offset"
        self.slave.append_raw(offset, data)
        assert self.slave.max_offset == offset + len(data)

    @rule(delta=st.integers(min_value=-SEGMENT, max_value=3 * SEGMENT), size=st.integers(1, 500))
    def mismatched_offset(self, delta: int, size: int) -> None:
        offset = max(0, self.slave.max_offset + delta)
        empty = not self.slave.segments()
        # An empty replica may start at any segment boundary; everything else must refuse.
        if offset == self.slave.max_offset or (empty and offset % SEGMENT == 0):
            return
        before = (self.slave.max_offset, self.slave.segments())
        with pytest.raises(OffsetMismatch):
            self.slave.append_raw(offset, b"\x5a" * size)
        assert (self.slave.max_offset, self.slave.segments()) == before, "a refused append wrote"

    @rule()
    def reopen_slave(self) -> None:
        self.slave.close()
        self.slave = self.open_slave()

    @invariant()
    def slave_is_a_byte_identical_prefix(self) -> None:
        end = self.slave.max_offset
        assert end <= self.master.max_offset
        assert log_bytes(self.slave, 0, end) == log_bytes(self.master, 0, end)

    @invariant()
    def consume_queues_hold_exactly_the_complete_records(self) -> None:
        records = list(self.slave.messages(check_crc=True))
        per_queue = Counter((m.topic, m.queue_id) for m in records)
        expected = {(t, q): (0, n) for (t, q), n in per_queue.items()}
        got = {(t, q): (lo, hi) for t, q, lo, hi in self.slave.queues() if hi > lo}
        assert got == expected
        for (topic, queue_id), n in per_queue.items():
            served = self.slave.get_messages(topic, queue_id, 0, n + 1)
            in_log = [m.body for m in records if (m.topic, m.queue_id) == (topic, queue_id)]
            assert [m.body for m in served] == in_log


TestSlaveDispatch = SlaveDispatch.TestCase
TestSlaveDispatch.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
