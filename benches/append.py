"""Append throughput of the commit log (issue 2).

(a) ``put_batch`` of 1 KiB messages vs memcpy of the same record bytes into a preallocated mmap
    (target >= 0.7 of the baseline);
(b) single ``put`` of 100-byte messages from one Python thread (target >= 1,000,000 puts/s) vs
    memcpy of the same records one by one (what a put costs beyond copying its bytes);
(c) SYNC_FLUSH with 8 producer threads vs ASYNC_FLUSH, and puts per msync (group commit).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rocketha import Message, MessageStore, _children

from benches.common import Figure, native_baselines, run_threads

SEGMENT = 1 << 30


def _store(dir: Path, **kw: Any) -> MessageStore:
    return MessageStore(dir, mapped_file_size_commit_log=SEGMENT, **kw)


def run(quick: bool, runs: int) -> list[Figure]:
    baseline = native_baselines()
    figures = []
    n_batch = 50_000 if quick else 200_000
    n_put = 200_000 if quick else 1_000_000

    def batch_throughput(size: int) -> tuple[float, float]:
        with _children.temp_run_dir("bench-append") as d:
            msgs = [Message("BenchTopic", b"x" * size) for _ in range(1000)]
            with _store(Path(d)) as store:
                started = time.perf_counter()
                for _ in range(n_batch // 1000):
                    store.put_batch(msgs)
                took = time.perf_counter() - started
                record = store.read_raw(0, 10**9)[: store.max_offset // n_batch]
                bytes_written = store.max_offset
            base = baseline.mmap_memcpy(d, bytes(record), bytes_written)
            return bytes_written / took / 1e6, bytes_written / base / 1e6

    for size in [1024] if quick else [100, 1024, 16 * 1024]:
        pairs = [batch_throughput(size) for _ in range(runs)]
        figures.append(
            Figure(
                "append",
                f"put_batch {size} B",
                "MB/s",
                [p[0] for p in pairs],
                "memcpy into mmap",
                [p[1] for p in pairs],
                target=">= 0.7" if size == 1024 else None,
            )
        )

    def single_puts() -> tuple[float, float]:
        with _children.temp_run_dir("bench-append") as d:
            with _store(Path(d)) as store:
                msg = Message("BenchTopic", b"x" * 100)
                put = store.put
                started = time.perf_counter()
                for _ in range(n_put):
                    put(msg)
                took = time.perf_counter() - started
                record = store.read_raw(0, store.max_offset // n_put)
            base = baseline.mmap_memcpy(d, bytes(record), len(record) * n_put)
            return n_put / took, n_put / base

    singles = [single_puts() for _ in range(runs)]
    figures.append(
        Figure(
            "append",
            "put 100 B, 1 thread",
            "puts/s",
            [s[0] for s in singles],
            "memcpy per record",
            [s[1] for s in singles],
            target=">= 1,000,000",
        )
    )

    def group_commit(flush_disk_type: str) -> tuple[float, float]:
        per_thread = 500 if quick else 2000
        msg = Message("BenchTopic", b"x" * 1024)
        with (
            _children.temp_run_dir("bench-append") as d,
            _store(Path(d), flush_disk_type=flush_disk_type) as store,
        ):

            def producer(_: int) -> None:
                for _ in range(per_thread):
                    store.put(msg)

            took = run_threads(producer, 8)
            msyncs, _requests, _ = store.flush_stats()
            return 8 * per_thread / took, 8 * per_thread / max(1, msyncs)

    gc = [(group_commit("SYNC_FLUSH"), group_commit("ASYNC_FLUSH")) for _ in range(runs)]
    figures.append(
        Figure(
            "append",
            "SYNC_FLUSH 8 producers",
            "puts/s",
            [g[0][0] for g in gc],
            "ASYNC_FLUSH 8 producers",
            [g[1][0] for g in gc],
        )
    )
    # A count, not a rate: one msync per put (no group commit) is the reference point.
    figures.append(Figure("append", "SYNC_FLUSH puts per msync", "puts", [g[0][1] for g in gc]))
    return figures
