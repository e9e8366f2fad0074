"""The seeds' replication algorithm written plainly in Python, and our speed-up over it.

This is RocketMQ's classic ``HAConnection`` / ``HAClient`` as the seeds describe them, with the
same frames as our Rust core: the slave sends its max offset as 8 bytes big-endian (the first
report is the request, later ones are acks); the master answers with 12-byte ``>qi`` headers
(``physicOffset``, ``bodySize``) each followed by up to 32 KiB read from its mmap'd commit log;
the slave reads into a 4 MiB buffer, appends every complete body into its own mmap and reports.
No zero-copy and no batching beyond the seeds', so it is what a straightforward port costs.

The scenario fills one master store with 1 KiB messages and replicates the same bytes to an
empty slave twice in each run: with rocketha's ``HAService`` and with this code (the slave in
its own process, as the seeds' slave is a separate broker, so the two do not share a GIL).
The figure is rocketha's catch-up MB/s; the baseline the pure-Python one; the ratio the speed-up.
"""

from __future__ import annotations

import hashlib
import mmap
import multiprocessing
import selectors
import socket
import struct
import time
from multiprocessing.connection import Connection
from pathlib import Path

from rocketha import Message, MessageStore, _children
from rocketha.ha import HAService

from benches.common import Figure

HEADER = struct.Struct(">qi")
OFFSET = struct.Struct(">q")
TRANSFER_BATCH = 32 * 1024
READ_BUFFER = 4 << 20
SEGMENT = 1 << 30


def serve(server: socket.socket, log_path: Path, max_offset: int) -> float:
    """The master: accepts one slave and pushes ``[its offset, max_offset)`` of the commit log
    until the slave acks ``max_offset``. Returns the seconds from the slave's request to that
    ack."""
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    sel = selectors.DefaultSelector()
    interest = selectors.EVENT_READ
    sel.register(conn, interest)
    with (
        conn,
        sel,
        log_path.open("rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as log,
    ):
        reports = b""
        slave_ack_offset = -1
        next_transfer_from_where: int | None = None
        pending = memoryview(b"")
        started = 0.0
        while slave_ack_offset < max_offset:
            for _key, events in sel.select(5.0):
                if events & selectors.EVENT_READ:
                    data = conn.recv(4096)
                    if not data:
                        raise ConnectionError("the seed slave closed the connection")
                    reports += data
                    # Acks coalesce: only the last complete 8-byte report counts.
                    complete = len(reports) // 8 * 8
                    if complete:
                        (slave_ack_offset,) = OFFSET.unpack_from(reports, complete - 8)
                        reports = reports[complete:]
                    if next_transfer_from_where is None and slave_ack_offset >= 0:
                        next_transfer_from_where = slave_ack_offset
                        started = time.perf_counter()
                if next_transfer_from_where is not None:
                    if not pending and next_transfer_from_where < max_offset:
                        size = min(TRANSFER_BATCH, max_offset - next_transfer_from_where)
                        body = log[next_transfer_from_where : next_transfer_from_where + size]
                        pending = memoryview(HEADER.pack(next_transfer_from_where, size) + body)
                        next_transfer_from_where += size
                    if pending and events & selectors.EVENT_WRITE:
                        pending = pending[conn.send(pending) :]
                    # Ask for writability only while there is something left to write.
                    more = bool(pending) or next_transfer_from_where < max_offset
                    want = selectors.EVENT_READ | (selectors.EVENT_WRITE if more else 0)
                    if want != interest:
                        sel.modify(conn, want)
                        interest = want
        return time.perf_counter() - started


def replicate(address: tuple[str, int], log_path: Path, capacity: int, done: Connection) -> None:
    """The slave (``HAClient``): requests from offset 0, appends every pushed body into its
    mmap'd log, reports after each read, and sends the SHA-256 of its log through ``done`` once
    it holds ``capacity`` bytes."""
    with log_path.open("w+b") as f:
        f.truncate(capacity)
        with mmap.mmap(f.fileno(), capacity) as log, socket.create_connection(address) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            max_phy_offset = 0
            sock.sendall(OFFSET.pack(max_phy_offset))
            read, backup = bytearray(READ_BUFFER), bytearray(READ_BUFFER)
            position = dispatch_position = 0
            while max_phy_offset < capacity:
                n = sock.recv_into(memoryview(read)[position:])
                if not n:
                    raise ConnectionError("the seed master closed the connection")
                position += n
                reported = max_phy_offset
                while position - dispatch_position >= HEADER.size:
                    master_phy_offset, body_size = HEADER.unpack_from(read, dispatch_position)
                    end = dispatch_position + HEADER.size + body_size
                    if position < end:
                        break
                    if max_phy_offset != 0 and max_phy_offset != master_phy_offset:
                        raise ConnectionError(
                            "master pushed offset not equal the max phy offset in slave, "
                            f"SLAVE: {max_phy_offset} MASTER: {master_phy_offset}"
                        )
                    log[master_phy_offset : master_phy_offset + body_size] = read[
                        dispatch_position + HEADER.size : end
                    ]
                    max_phy_offset = master_phy_offset + body_size
                    dispatch_position = end
                if max_phy_offset > reported:
                    sock.sendall(OFFSET.pack(max_phy_offset))
                if position == READ_BUFFER:
                    # The double-buffer swap: the unconsumed tail moves to the front of the other.
                    tail = position - dispatch_position
                    backup[:tail] = read[dispatch_position:position]
                    read, backup = backup, read
                    position, dispatch_position = tail, 0
            done.send(hashlib.sha256(log).hexdigest())


def _sha256(path: Path, size: int) -> str:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as log:
        return hashlib.sha256(log[:size]).hexdigest()


def _seed_catch_up(root: Path, log_path: Path, total: int, check: bool) -> float:
    # Spawned, not forked: the parent has rocketha's Rust threads running.
    ctx = multiprocessing.get_context("spawn")
    with socket.create_server(("127.0.0.1", 0)) as server:
        theirs, ours = ctx.Pipe(duplex=False)
        slave = ctx.Process(
            target=replicate, args=(server.getsockname(), root / "seed-slave", total, ours)
        )
        slave.start()
        try:
            took = serve(server, log_path, total)
            digest = theirs.recv()
        finally:
            slave.join(30)
    if check and digest != _sha256(log_path, total):
        raise RuntimeError("the seed slave's log differs from the master's")
    return took


def run(quick: bool, runs: int) -> list[Figure]:
    total = (64 if quick else 256) << 20
    ours, seed = [], []
    msgs = [Message("BenchTopic", b"p" * (1024 - 101)) for _ in range(1000)]  # 1 KiB records
    with _children.temp_run_dir("bench-seed-python") as d:
        root = Path(d)
        with MessageStore(root / "m", mapped_file_size_commit_log=SEGMENT) as master:
            while master.max_offset < total:
                master.put_batch(msgs)
            total = master.max_offset
            log_path = Path(master.segments()[0][0])
            with HAService(master, master=True) as ha:
                for i in range(runs):
                    with MessageStore(root / f"s{i}", mapped_file_size_commit_log=SEGMENT) as slave:
                        started = time.perf_counter()
                        with HAService(
                            slave, master=False, master_address=f"127.0.0.1:{ha.listen_port}"
                        ):
                            if not ha.wait_for_ack(total, 1, 600):
                                raise RuntimeError("the rocketha slave did not catch up")
                            ours.append(total / (time.perf_counter() - started) / 1e6)
                    seed.append(total / _seed_catch_up(root, log_path, total, i == 0) / 1e6)
    return [
        Figure(
            "seed-python",
            f"empty slave catch-up {total >> 20} MiB",
            "MB/s",
            ours,
            "pure-Python seed algorithm",
            seed,
        )
    ]
