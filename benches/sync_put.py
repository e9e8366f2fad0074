"""SYNC_MASTER put latency and acked puts/s (issues 4 and 6), 1 KiB messages: p50/p90/p99/p999
of one producer vs the loopback round trip, and acked puts/s of 1, 8 and 32 producers vs
ASYNC_MASTER, both measured in the same run (targets: p50 <= 3x the round trip; 8 producers
>= 100,000 acked puts/s).

Each acked put blocks its producer thread until another thread completes it, and the thread
must then take the GIL back. The *blocking-call ceiling* measures just that: the same number of
Python threads, each making loopback round trips to its own echo thread (GIL released while
waiting) and nothing else. No SYNC_MASTER built on Python threads can beat it on the machine at
hand, so the 8-producer figure is also given against it. Producers that pipeline with
``put_async`` (a RocketMQ producer's asynchronous send) do not block per put; their acked rate
is given too."""

from __future__ import annotations

import time
from pathlib import Path

from rocketha import Broker, Message, PutStatus, _children

from benches.common import (
    Figure,
    broker_pair,
    cdf_points,
    native_baselines,
    percentile,
    run_threads,
)

PRODUCERS = (1, 8, 32)
#: Puts each producer keeps in flight with ``put_async``, as a RocketMQ producer sending
#: asynchronously does.
IN_FLIGHT = 64
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}


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

    took = run_threads(work, producers)
    if bad:
        raise RuntimeError(f"{len(bad)} puts not acked: {set(bad)}")
    return producers * per_producer / took, [x for lat in latencies for x in lat]


def _produce_async(master: Broker, producers: int, per_producer: int) -> float:
    """Acked puts/s of producers that keep up to ``IN_FLIGHT`` puts each in flight."""
    msg = Message("BenchTopic", b"s" * 1024)
    bad = []

    def work(_: int) -> None:
        for start in range(0, per_producer, IN_FLIGHT):
            futures = [master.put_async(msg) for _ in range(min(IN_FLIGHT, per_producer - start))]
            bad.extend(s for f in futures if (s := f.result().status) is not PutStatus.PUT_OK)

    took = run_threads(work, producers)
    if bad:
        raise RuntimeError(f"{len(bad)} puts not acked: {set(bad)}")
    return producers * per_producer / took


def _blocking_call_ceiling(threads: int, total: int) -> float:
    """Blocking round trips per second that ``threads`` Python threads make together."""
    links = [native_baselines().PingPong() for _ in range(threads)]

    def work(i: int) -> None:
        link = links[i]
        for _ in range(total // threads):
            link.round_trip()

    took = run_threads(work, threads)
    return threads * (total // threads) / took


def run(quick: bool, runs: int) -> list[Figure]:
    baseline = native_baselines()
    # Puts per producer: about the same total work for every producer count.
    total = 4000 if quick else 32_000
    out: dict[tuple[str, str], list[float]] = {}
    rtt_runs = []
    ceiling_runs = []
    last_lat: dict[str, list[float]] = {}
    for _ in range(runs):
        rtt_runs.append(percentile(baseline.tcp_ping_pong(5000), 0.5) * 1e6)
        ceiling_runs.append(_blocking_call_ceiling(8, total))
        for role in ("SYNC_MASTER", "ASYNC_MASTER"):
            with _children.temp_run_dir("bench-sync-put") as d:
                master, slave = broker_pair(Path(d), role)
                try:
                    rate = _produce_async(master, 8, total // 8)
                    out.setdefault((role, "8p async"), []).append(rate)
                    for producers in PRODUCERS:
                        rate, lat = _produce(master, producers, total // producers)
                        out.setdefault((role, f"{producers}p"), []).append(rate)
                        if producers == 1:
                            last_lat[role] = lat
                            for q, v in QUANTILES.items():
                                out.setdefault((role, q), []).append(percentile(lat, v) * 1e6)
                finally:
                    slave.shutdown()
                    master.shutdown()
    figs = []
    for role in ("SYNC_MASTER", "ASYNC_MASTER"):
        for q in QUANTILES:
            figs.append(
                Figure(
                    "sync-put",
                    f"{role} put {q}, 1 producer",
                    "us",
                    out[(role, q)],
                    "loopback round trip",
                    rtt_runs,
                    higher_is_better=False,
                    target="<= 3" if role == "SYNC_MASTER" and q == "p50" else None,
                    series={"latency_us": cdf_points(last_lat[role])} if q == "p50" else {},
                )
            )
    for producers in PRODUCERS:
        figs.append(
            Figure(
                "sync-put",
                f"SYNC_MASTER {producers} producer{'s' if producers > 1 else ''}",
                "puts/s",
                out[("SYNC_MASTER", f"{producers}p")],
                "ASYNC_MASTER",
                out[("ASYNC_MASTER", f"{producers}p")],
                target=">= 100,000" if producers == 8 else None,
            )
        )
    figs.append(
        Figure(
            "sync-put",
            f"SYNC_MASTER 8 producers, put_async ({IN_FLIGHT} in flight each)",
            "puts/s",
            out[("SYNC_MASTER", "8p async")],
            "ASYNC_MASTER",
            out[("ASYNC_MASTER", "8p async")],
        )
    )
    figs.append(
        Figure(
            "sync-put",
            "SYNC_MASTER 8 producers vs blocking-call ceiling",
            "puts/s",
            out[("SYNC_MASTER", "8p")],
            "8 Python threads, blocking round trips",
            ceiling_runs,
        )
    )
    return figs
