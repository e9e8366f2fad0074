"""The consume side over the network (issue 13), on loopback.

* **Draining the slave**: a master holds N MiB of 1 KiB messages (1 GiB; 64 MiB with
  ``--quick``); an empty slave catches up (the throughput of that catch-up, the same data in
  the same run, is the baseline; target >= 0.8); the master stops, and one ``PullConsumer``
  drains the topic from the slave, with the name server routing it there. Pulled MB/s counts
  the commit log bytes of the records delivered to ``poll``.
* **End to end**: a send to the master (``Producer.send``) until the message comes out of
  ``poll`` of a consumer long-polling on the slave (both brokers count any lag as "slow", so
  the consumer stays on the slave), and the same through the master (RocketMQ's defaults),
  p50 / p99, against the loopback round trip of ``tcp_ping_pong``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rocketha import (
    Broker,
    BrokerConfig,
    BrokerRole,
    ConsumeFromWhere,
    Message,
    NameServer,
    Producer,
    PullConsumer,
    _children,
)
from rocketha._core import MQClientAPI

from benches.common import Figure, native_baselines, percentile

SEGMENT = 1 << 30
TOPIC = "ConsumeBench"
#: A 1 KiB record: body plus the record's header, topic and properties.
BODY = 1024 - 101


def _broker(root: Path, ns: str, **keys: Any) -> Broker:
    keys.setdefault("broker_name", "bench-c")
    return Broker(
        BrokerConfig(
            namesrv_addr=ns,
            listen_port=0,
            ha_listen_address="127.0.0.1",
            ha_listen_port=0,
            mapped_file_size_commit_log=SEGMENT,
            slave_read_enable=True,
            slave_sync_interval=200,
            **keys,
        )
    ).start()


def _slave(root: Path, ns: str, name: str, **keys: Any) -> Broker:
    return _broker(
        root,
        ns,
        broker_id=1,
        broker_role=BrokerRole.SLAVE,
        store_path_root_dir=str(root / name),
        **keys,
    )


def _wait(predicate: Any, what: str, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {seconds:g} s")
        time.sleep(0.005)


def _routed(ns: str, topic: str) -> bool:
    """Whether the name server has a route for ``topic`` (a broker registers after it starts)."""
    return MQClientAPI().get_topic_route_info(ns, topic, 3.0) is not None


def _synced(store: Path, topic: str) -> bool:
    """Whether the slave synced ``topic`` from its master (it saves what it syncs)."""
    path = store / "config" / "topics.json"
    return path.exists() and f'"{topic}"' in path.read_text()


def _drain(root: Path, ns: NameServer, total: int) -> tuple[float, float]:
    """(catch-up MB/s, pulled MB/s) of the same ``total`` bytes of records."""
    master = _broker(
        root,
        ns.listen_address,
        broker_role=BrokerRole.ASYNC_MASTER,
        store_path_root_dir=str(root / "m"),
    )
    # Through the client port, so that the topic exists (created from TBW102) and is routed.
    _wait(lambda: _routed(ns.listen_address, "TBW102"), "the master did not register")
    batch = [Message(TOPIC, b"c" * BODY) for _ in range(256)]
    count = 0
    with Producer(ns.listen_address, "bench-fill") as producer:
        while master.max_offset < total:
            producer.send_batch(batch)
            count += len(batch)
    size = master.max_offset
    started = time.perf_counter()
    slave = _slave(root, ns.listen_address, "s", ha_master_address=master.ha_address)
    _wait(lambda: slave.max_offset >= size, "the slave did not catch up")
    catch_up = size / (time.perf_counter() - started) / 1e6
    _wait(lambda: _synced(root / "s", TOPIC), "the slave did not sync the topic")
    master.shutdown()
    try:
        with PullConsumer(
            ns.listen_address,
            "bench-drain",
            TOPIC,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ) as consumer:
            pulled = received = 0
            started = time.perf_counter()
            # Counted in messages: the log's size also counts the padding at a segment's end.
            while received < count:
                msgs = consumer.poll(1.0, max_messages=4096)
                received += len(msgs)
                pulled += sum(m.store_size for m in msgs)
            elapsed = time.perf_counter() - started
            assert set(consumer.consumed_from()) == {1}, consumer.consumed_from()
    finally:
        slave.shutdown()
    return catch_up, pulled / elapsed / 1e6


def _end_to_end(root: Path, ns: NameServer, rounds: int, *, via_slave: bool) -> list[float]:
    """Seconds from each send until ``poll`` returns it, served by the slave (``via_slave``)
    or by the master."""
    # A ratio of 0 on both: any lag sends the consumer to the slave, and the slave keeps it.
    # RocketMQ's default keeps a consumer that keeps up on the master.
    slow = {"access_message_in_memory_max_ratio": 0} if via_slave else {}
    name = "bench-l" if via_slave else "bench-lm"
    master = _broker(
        root,
        ns.listen_address,
        broker_role=BrokerRole.ASYNC_MASTER,
        store_path_root_dir=str(root / f"{name}-m"),
        broker_name=name,
        **slow,
    )
    slave = _slave(root, ns.listen_address, f"{name}-s", broker_name=name, **slow)
    # Each body's arrival, and whether the slave served it.
    arrived: dict[bytes, tuple[float, bool]] = {}
    latencies = []
    try:
        _wait(lambda: _routed(ns.listen_address, "TBW102"), "the master did not register")
        with Producer(ns.listen_address, "bench-p") as producer:
            producer.send(Message("LatencyBench", b"warm-up"))
            _wait(
                lambda: _synced(root / f"{name}-s", "LatencyBench"),
                "the slave did not sync the topic",
            )
            # A consumer of a new group starts at the queue's end once it sees the topic: one
            # that started before the route would skip the first message the loop waits for.
            _wait(lambda: _routed(ns.listen_address, "LatencyBench"), "the topic was not routed")
            with PullConsumer(ns.listen_address, "bench-latency", "LatencyBench") as consumer:

                def collect() -> None:
                    served = 0
                    for msg in consumer:
                        now = time.perf_counter()
                        before, served = served, consumer.consumed_from().get(1, 0)
                        arrived[msg.body] = (now, served > before)

                reader = threading.Thread(target=collect, daemon=True)
                reader.start()
                for i in range(rounds + 50):
                    body = f"e2e-{i}".encode()
                    sent = time.perf_counter()
                    producer.send(Message("LatencyBench", body))
                    _wait(lambda b=body: b in arrived, "a message was not delivered")  # type: ignore[misc]
                    at, from_slave = arrived[body]
                    # After the consumer settled; a pull that reaches the slave before the
                    # message it follows sends the consumer back to the master for one message
                    # (RocketMQ's PULL_RETRY_IMMEDIATELY): those are not this figure's.
                    if i >= 50 and from_slave == via_slave:
                        latencies.append(at - sent)
            reader.join()
        assert len(latencies) >= rounds // 2, (
            f"only {len(latencies)} of {rounds} came from the {'slave' if via_slave else 'master'}"
        )
    finally:
        slave.shutdown()
        master.shutdown()
    return latencies


def run(quick: bool, runs: int) -> list[Figure]:
    baseline = native_baselines()
    total = (64 if quick else 1024) << 20
    rounds = 200 if quick else 1000
    catch_up, pulled = [], []
    e2e = {via: {0.5: [], 0.99: []} for via in ("slave", "master")}
    ping: dict[float, list[float]] = {0.5: [], 0.99: []}
    for _ in range(runs):
        # A name server per part: the first part's brokers leave nothing in the second's routes.
        with _children.temp_run_dir("bench-consume") as d:
            with NameServer("127.0.0.1:0") as ns:
                c, p = _drain(Path(d), ns, total)
            catch_up.append(c)
            pulled.append(p)
            for via, by_q in e2e.items():
                with NameServer("127.0.0.1:0") as ns:
                    lat = _end_to_end(Path(d), ns, rounds, via_slave=via == "slave")
                for q, values in by_q.items():
                    values.append(percentile(lat, q) * 1e6)
        pp = baseline.tcp_ping_pong(1000)
        for q, values in ping.items():
            values.append(percentile(pp, q) * 1e6)
    mb = total >> 20
    figures = [
        Figure(
            "consume",
            f"one consumer draining {mb} MiB from the slave",
            "MB/s",
            pulled,
            f"empty slave catch-up of the same {mb} MiB",
            catch_up,
            target=">= 0.8",
        )
    ]
    # Issue 30's targets, as multiples of the round trip: through the slave p50 <= 4x and
    # p99 <= 10x, through the master p50 <= 3x.
    targets = {("slave", 0.5): "<= 4", ("slave", 0.99): "<= 10", ("master", 0.5): "<= 3"}
    for via, by_q in e2e.items():
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            figures.append(
                Figure(
                    "consume",
                    f"send on the master -> poll on the {via} {name}",
                    "us",
                    by_q[q],
                    "loopback round trip",
                    ping[q],
                    higher_is_better=False,
                    target=targets.get((via, q)),
                )
            )
    return figures
