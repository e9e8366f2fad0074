"""The table tier's cost on a slave (issue 31): live replication master -> slave of 1 KiB
messages with the slave writing every record into a Delta table as fast as it can
(``tableTierInterval`` 200 ms, ``tableTierTailAge`` 0), against the same replication with the
tier off, alternating in one run (target: at least 0.9 of it, a cost of at most 10%). Also the
rate one write of the whole log into a new table goes at, against the Rust decoder reading the
same records into Arrow batches (what the tier adds: the Parquet encoding and the commit).

Master, slave and writer share this process and the machine's cores, as a slave host's own
work would share its cores with replication."""

from __future__ import annotations

import time
from pathlib import Path

# Imported here so the harness skips the scenario, naming the package, when it is missing.
import deltalake  # noqa: F401
from rocketha import Message, MessageStore, _children, _core
from rocketha.ha import HAService
from rocketha.table_tier import TableTier, open_table

from benches.common import Figure

SEGMENT = 64 << 20
TOPIC = "TableBench"


def _replicate(root: Path, n: int, tier: bool) -> float:
    """MB/s of live replication of ``n`` 1 KiB messages, the slave's tier writing or not; the
    table holds every message once the writer caught up."""
    msgs = [Message(TOPIC, b"r" * (1024 - 101), queue_id=i % 8) for i in range(1000)]
    master = MessageStore(root / "m", mapped_file_size_commit_log=SEGMENT)
    slave = MessageStore(root / "s", mapped_file_size_commit_log=SEGMENT)
    writer = None
    try:
        with HAService(master, master=True) as ha:
            addr = f"127.0.0.1:{ha.listen_port}"
            with HAService(slave, master=False, master_address=addr):
                if not ha.wait_for_ack(0, 1, 60):
                    raise RuntimeError("the slave did not connect")
                if tier:
                    writer = TableTier(
                        slave, "bench", [TOPIC], str(root / "table"), interval=0.2, tail_age=0
                    ).start()
                started = time.perf_counter()
                for _ in range(n // 1000):
                    master.put_batch(msgs)
                if not ha.wait_for_ack(master.max_offset, 1, 600):
                    raise RuntimeError("the slave did not catch up")
                live = master.max_offset / (time.perf_counter() - started) / 1e6
                while writer is not None and writer.covered.end < slave.max_offset:
                    time.sleep(0.05)
    finally:
        if writer is not None:
            writer.stop()
        slave.close()
        master.close()
    return live


def _build_rate(store_dir: Path, table: Path) -> float:
    """Rows/s of one write of the whole log into a new table."""
    with MessageStore(store_dir, mapped_file_size_commit_log=SEGMENT) as store:
        started = time.perf_counter()
        rows = TableTier(store, "bench", [TOPIC], str(table), tail_age=0).write_once()
        return rows / (time.perf_counter() - started)


def _decode_rate(store_dir: Path) -> float:
    """Rows/s of the Rust decoder alone over the same log."""
    with MessageStore(store_dir, mapped_file_size_commit_log=SEGMENT, read_only=True) as store:
        started = time.perf_counter()
        reader = _core.ArrowReader(
            store,
            store.min_offset,
            store.max_offset,
            _core.RecordFilter([TOPIC], []),
            max_rows=10_000,
            max_bytes=16 << 20,
        )
        rows = 0
        while (batch := reader.next_batch()) is not None:
            rows += batch.num_rows
        return rows / (time.perf_counter() - started)


def run(quick: bool, runs: int) -> list[Figure]:
    n = 100_000 if quick else 400_000
    on, off, written, decoded = [], [], [], []
    for _ in range(runs):
        for tier in (False, True):
            with _children.temp_run_dir("bench-table-tier") as d:
                root = Path(d)
                (on if tier else off).append(_replicate(root, n, tier))
                if tier:
                    table = open_table(str(root / "table"))
                    if table is None or table.to_pyarrow_dataset().count_rows() != n:
                        raise RuntimeError("the table does not hold every message once")
                    written.append(_build_rate(root / "s", root / "rebuilt"))
                    decoded.append(_decode_rate(root / "s"))
    mib = n * 1024 >> 20
    return [
        Figure(
            "table-tier",
            f"live replication {mib} MiB, slave writing the table",
            "MB/s",
            on,
            "the tier off",
            off,
            target=">= 0.9",
        ),
        Figure(
            "table-tier",
            f"rows written into a new table, {n:,} messages of 1 KiB",
            "rows/s",
            written,
            "the Rust decoder alone",
            decoded,
        ),
    ]
