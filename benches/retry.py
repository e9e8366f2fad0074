"""Delay levels and send-back (issue 26), rocketha's broker beside Apache RocketMQ 5.4.0's in
one run, both driven by rocketha's client.

* **Delayed delivery**: ``COUNT`` messages (10,000; 2,000 with ``--quick``) sent at level 1
  (2 s) by 8 threads as fast as they go, so they come due together within about a second; a
  ``PullConsumer`` reads them back. A message's lateness is its delivered copy's store time
  minus its born time minus 2 s (in ms: store times have that resolution, and the send's own
  latency is in it). p50 / p99 against the timer's own jitter: how late a thread waking at a
  deadline (a condition variable wait, as the delivery thread sleeps) gets up, same run.
* **Send-back**: ``COUNT`` messages pulled, then sent back (``CONSUMER_SEND_MSG_BACK``, level 1)
  by 8 threads, per second, against plain sends of the same bodies by 8 threads to the same
  broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from rocketha import (
    Broker,
    BrokerConfig,
    ConsumeFromWhere,
    Message,
    MessageExt,
    NameServer,
    Producer,
    PullConsumer,
    _children,
)
from rocketha._core import MQClientAPI

from benches.common import Figure, native_baselines, peer_rocketmq, percentile
from benches.peers import rocketmq

#: Level 1 is 2 s: long enough for every send to land before the first comes due.
DELAY_S = 2
LEVELS = " ".join([f"{DELAY_S}s"] * 18)
THREADS = 8
BODY = b"x" * 256


def _routed(ns: str, topic: str) -> bool:
    return MQClientAPI().get_topic_route_info(ns, topic, 3.0) is not None


def _wait(predicate: Callable[[], object], what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {seconds:g} s")
        time.sleep(0.01)


def _parallel(count: int, one: Callable[[int], object]) -> float:
    """Seconds for ``THREADS`` threads to call ``one(i)`` for i in range(count)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - started


def _drain(ns: str, group: str, topics: list[str], count: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    with PullConsumer(
        ns, group, topics, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        _wait(lambda: got.extend(consumer.poll(0.2)) or len(got) >= count, f"{count} messages")
    return got


def _measure(ns: str, tag: str, count: int) -> tuple[list[float], float, float]:
    """Lateness of each delayed message (ms), plain sends/s and send-backs/s at ``ns``."""
    delayed, plain = f"Delayed{tag}", f"Plain{tag}"
    with Producer(ns, f"retry-bench-{tag}") as producer:
        producer.send(Message(delayed, BODY))
        producer.send(Message(plain, BODY))
        _wait(lambda: _routed(ns, delayed) and _routed(ns, plain), "the routes")
        _parallel(count, lambda i: producer.send(Message(delayed, BODY), delay_level=1))
        sends = count / _parallel(count, lambda i: producer.send(Message(plain, BODY)))
    got = _drain(ns, f"delayed-{tag}", [delayed], count + 1)
    # The seed is no delayed message; RocketMQ keeps the level in a delivered copy.
    late = [
        m.store_timestamp - m.born_timestamp - DELAY_S * 1000
        for m in got
        if m.properties.get("DELAY") == "1"
    ]
    group = f"back-{tag}"
    with PullConsumer(
        ns, group, [plain], consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        polled: list[MessageExt] = []
        _wait(lambda: polled.extend(consumer.poll(0.2)) or len(polled) > count, "the plain")
        backs = count / _parallel(count, lambda i: consumer.send_back(polled[i], delay_level=1))
    return late, sends, backs


@contextmanager
def _rocketha(root: Path) -> Iterator[str]:
    with NameServer("127.0.0.1:0") as ns:
        broker = Broker(
            BrokerConfig(
                broker_name="retry-bench",
                namesrv_addr=ns.listen_address,
                listen_port=0,
                ha_listen_address="127.0.0.1",
                ha_listen_port=0,
                store_path_root_dir=str(root / "rocketha"),
                message_delay_level=LEVELS,
            )
        ).start()
        try:
            yield ns.listen_address
        finally:
            broker.shutdown()


@contextmanager
def _rocketmq(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[str]:
    namesrv = rmq.namesrv(root / "namesrv")
    try:
        broker = rmq.broker(
            root / "broker", namesrv, brokerName="retry-bench", messageDelayLevel=LEVELS
        )
        try:
            namesrv.wait_registered(broker.listen_port)
            yield namesrv.address
        finally:
            broker.kill()
    finally:
        namesrv.kill()


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq()
    baseline = native_baselines()
    count = 2_000 if quick else 10_000
    late: dict[str, dict[float, list[float]]] = {
        k: {0.5: [], 0.99: []} for k in ("rocketha", "rocketmq", "timer")
    }
    sends: dict[str, list[float]] = {"rocketha": [], "rocketmq": []}
    backs: dict[str, list[float]] = {"rocketha": [], "rocketmq": []}
    for run_no in range(runs):
        with _children.temp_run_dir("bench-retry") as d:
            for kind in ("rocketha", "rocketmq"):
                root = Path(d) / kind
                with _rocketha(root) if kind == "rocketha" else _rocketmq(rmq, root) as ns:
                    lat, s, b = _measure(ns, f"{kind}{run_no}", count)
                for q, values in late[kind].items():
                    values.append(percentile(lat, q))
                sends[kind].append(s)
                backs[kind].append(b)
        jitter = [t * 1e3 for t in baseline.timer_wakeups(count // 10, DELAY_S)]
        for q, values in late["timer"].items():
            values.append(percentile(jitter, q))
    return _figures(rmq.version, count, late, sends, backs)


def _figures(
    version: str,
    count: int,
    late: dict[str, dict[float, list[float]]],
    sends: dict[str, list[float]],
    backs: dict[str, list[float]],
) -> list[Figure]:
    figures = []
    for who, name in (("rocketha", "rocketha"), ("rocketmq", f"RocketMQ {version}")):
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            figures.append(
                Figure(
                    "retry",
                    f"{name}: lateness of {count} level-1 messages due together {label}",
                    "ms",
                    late[who][q],
                    f"timer wake-up lateness {label}",
                    late["timer"][q],
                    higher_is_better=False,
                )
            )
        figures.append(
            Figure(
                "retry",
                f"{name}: send-backs by {THREADS} threads",
                "msg/s",
                backs[who],
                f"plain sends by {THREADS} threads, same broker",
                sends[who],
            )
        )
    figures.append(
        Figure(
            "retry",
            f"rocketha send-backs by {THREADS} threads",
            "msg/s",
            backs["rocketha"],
            f"RocketMQ {version} send-backs, same client",
            backs["rocketmq"],
        )
    )
    return figures
