"""Replication throughput master -> slave on loopback (issue 3): 1 KiB messages, async master,
vs a raw loopback TCP copy of the same bytes (target >= 0.8); catch-up time of an empty slave;
the ack round trip (append -> ack seen) p50/p99 vs a raw loopback ping-pong's.

The raw copy drops what it receives. A replica must keep it, so both throughputs are also given
against the least a receiver that keeps the bytes can do: the same copy read straight into the
mapping of a new file, with no copy, check, index or flush of its own, only the page cache
filling a new file's pages as it must for any writer."""

from __future__ import annotations

import time
from pathlib import Path

from rocketha import Message, MessageStore, _children
from rocketha.ha import HAService

from benches.common import Figure, native_baselines, percentile

SEGMENT = 1 << 30


def _wait_acked(ha: HAService, offset: int, timeout: float = 600) -> None:
    if not ha.wait_for_ack(offset, 1, timeout):
        raise RuntimeError(f"slave did not ack {offset} within {timeout} s")


def run(quick: bool, runs: int) -> list[Figure]:
    baseline = native_baselines()
    total = (128 if quick else 1024) << 20
    n = total // 1024
    live, catch_up, tcp, tcp_to_file = [], [], [], []
    rtt_p: dict[float, list[float]] = {0.5: [], 0.99: []}
    ping_pong_p: dict[float, list[float]] = {0.5: [], 0.99: []}
    msgs = [Message("BenchTopic", b"r" * (1024 - 101)) for _ in range(1000)]  # 1 KiB records
    for _ in range(runs):
        with _children.temp_run_dir("bench-replicate") as d:
            root = Path(d)
            master = MessageStore(root / "m", mapped_file_size_commit_log=SEGMENT)
            with HAService(master, master=True) as ha:
                addr = f"127.0.0.1:{ha.listen_port}"
                slave = MessageStore(root / "s", mapped_file_size_commit_log=SEGMENT)
                with HAService(slave, master=False, master_address=addr):
                    _wait_acked(ha, 0)
                    started = time.perf_counter()
                    for _ in range(n // 1000):
                        master.put_batch(msgs)
                    _wait_acked(ha, master.max_offset)
                    live.append(master.max_offset / (time.perf_counter() - started) / 1e6)
                    rtts = []
                    for _ in range(200 if quick else 1000):
                        r = master.put(msgs[0])
                        t = time.perf_counter()
                        _wait_acked(ha, r.next_offset)
                        rtts.append(time.perf_counter() - t)
                    for q, values in rtt_p.items():
                        values.append(percentile(rtts, q) * 1e6)
                slave.close()
                empty = MessageStore(root / "e", mapped_file_size_commit_log=SEGMENT)
                started = time.perf_counter()
                with HAService(empty, master=False, master_address=addr):
                    _wait_acked(ha, master.max_offset)
                    catch_up.append(time.perf_counter() - started)
                empty.close()
            tcp.append(master.max_offset / baseline.tcp_copy(master.max_offset, 32 * 1024) / 1e6)
            tcp_to_file.append(
                master.max_offset / baseline.tcp_copy_to_file(d, master.max_offset, 32 * 1024) / 1e6
            )
            ping_pong = baseline.tcp_ping_pong(1000)
            for q, values in ping_pong_p.items():
                values.append(percentile(ping_pong, q) * 1e6)
            master.close()
    mb = total >> 20
    catch_up_mb_s = [total / t / 1e6 for t in catch_up]
    return [
        Figure(
            "replicate",
            f"live replication {mb} MiB",
            "MB/s",
            live,
            "raw TCP copy",
            tcp,
            target=">= 0.8",
        ),
        Figure(
            "replicate",
            f"empty slave catch-up {mb} MiB",
            "MB/s",
            catch_up_mb_s,
            "raw TCP copy",
            tcp,
        ),
        Figure(
            "replicate",
            f"live replication {mb} MiB vs a new file",
            "MB/s",
            live,
            "raw TCP copy into a new file",
            tcp_to_file,
        ),
        Figure(
            "replicate",
            f"empty slave catch-up {mb} MiB vs a new file",
            "MB/s",
            catch_up_mb_s,
            "raw TCP copy into a new file",
            tcp_to_file,
        ),
        Figure(
            "replicate",
            "ack round trip p50",
            "us",
            rtt_p[0.5],
            "loopback round trip",
            ping_pong_p[0.5],
            higher_is_better=False,
        ),
        Figure(
            "replicate",
            "ack round trip p99",
            "us",
            rtt_p[0.99],
            "loopback round trip",
            ping_pong_p[0.99],
            higher_is_better=False,
        ),
    ]
