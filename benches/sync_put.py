"""SYNC_MASTER put latency and acked puts/s (issue 4): 1 KiB messages, 1 and 8 producers,
beside ASYNC_MASTER, and vs the loopback round trip measured in the same run (target: p50 <= 3x
the round trip; 8 producers >= 100,000 acked puts/s)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from rocketha import Broker, BrokerConfig, Message, PutStatus, _core

from benches.common import Figure, percentile


def _pair(root: Path, role: str) -> tuple[Broker, Broker]:
    common = dict(
        ha_listen_address="127.0.0.1", ha_listen_port=0, mapped_file_size_commit_log=1 << 30
    )
    master = Broker(
        BrokerConfig(broker_role=role, store_path_root_dir=str(root / "m"), **common)
    ).start()
    slave = Broker(
        BrokerConfig(
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(root / "s"),
            ha_master_address=master.ha_address,
            **common,
        )
    ).start()
    assert master.ha is not None
    master.ha.wait_for_state(None, "TRANSFER", 30)
    while not master.ha.master.slave_ack_offsets():  # type: ignore[union-attr]
        time.sleep(0.01)
    return master, slave


def _produce(master: Broker, producers: int, per_producer: int) -> tuple[float, list[float]]:
    msg = Message("BenchTopic", b"s" * 1024)
    latencies: list[list[float]] = [[] for _ in range(producers)]
    bad = []

    def work(i: int) -> None:
        lat = latencies[i]
        for _ in range(per_producer):
            t = time.perf_counter()
            r = master.put(msg)
            lat.append(time.perf_counter() - t)
            if r.status is not PutStatus.PUT_OK:
                bad.append(r.status)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    if bad:
        raise RuntimeError(f"{len(bad)} puts not acked: {set(bad)}")
    return producers * per_producer / took, [x for lat in latencies for x in lat]


def run(quick: bool, runs: int) -> list[Figure]:
    n1 = 2000 if quick else 20_000
    n8 = 1000 if quick else 5000
    out: dict[tuple[str, str], list[float]] = {}
    rtt_runs = []
    for _ in range(runs):
        rtt_runs.append(percentile(_core.baseline_tcp_ping_pong(5000), 0.5) * 1e6)
        for role in ("SYNC_MASTER", "ASYNC_MASTER"):
            with tempfile.TemporaryDirectory() as d:
                master, slave = _pair(Path(d), role)
                try:
                    rate1, lat1 = _produce(master, 1, n1)
                    rate8, _ = _produce(master, 8, n8)
                finally:
                    slave.shutdown()
                    master.shutdown()
            out.setdefault((role, "p50"), []).append(percentile(lat1, 0.5) * 1e6)
            out.setdefault((role, "p99"), []).append(percentile(lat1, 0.99) * 1e6)
            out.setdefault((role, "1p"), []).append(rate1)
            out.setdefault((role, "8p"), []).append(rate8)
    figs = []
    for role in ("SYNC_MASTER", "ASYNC_MASTER"):
        sync = role == "SYNC_MASTER"
        figs += [
            Figure(
                "sync-put",
                f"{role} put p50",
                "us",
                out[(role, "p50")],
                "loopback round trip",
                rtt_runs,
                higher_is_better=False,
                target="<= 3" if sync else None,
            ),
            Figure("sync-put", f"{role} put p99", "us", out[(role, "p99")], higher_is_better=False),
            Figure("sync-put", f"{role} 1 producer", "puts/s", out[(role, "1p")]),
            Figure(
                "sync-put",
                f"{role} 8 producers",
                "puts/s",
                out[(role, "8p")],
                target=">= 100,000" if sync else None,
            ),
        ]
    return figs
