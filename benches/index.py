"""The IndexService (issue #27): what indexing costs a writer, and what a lookup by key costs.

(a) ``put_batch`` of 100-byte messages, each with its own key, until the index has caught up
    (the last key is found), with the index on, beside the same puts with
    ``messageIndexEnable=false`` (the index follows the log on its own thread, so the writer
    pays only for the CPU it takes);
(b) ``MessageStore.find`` of random keys on that store (10,000,000 messages; quick: 500,000),
    p50 and p99, beside reading one message by its queue offset (``get_messages``), the
    cheapest lookup the store has;
(c) QUERY_MESSAGE over loopback to a broker serving that store, p50 and p99, beside
    GET_MAX_OFFSET (a round trip that reads one number) on the same connection;
(d) the Java client's ``DefaultMQAdminExt.queryMessage`` (5.4.0) of random keys against a
    rocketha broker and against Apache RocketMQ 5.4.0's, in the same run, each holding the
    same messages sent by the Java producer (20,000; quick: 2,000: filling a RocketMQ broker
    through its client at the 10M of (b) would take tens of minutes). Skipped without Java.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from rocketha import Broker, BrokerConfig, Message, MessageStore, NameServer, _children
from rocketha.acl import mq_client_api

from benches.common import Figure, percentile
from benches.peers import rocketmq

BODY = b"x" * 100
BATCH = 1000
LOOKUPS = 2000


def _fill(store: MessageStore, n: int) -> None:
    for start in range(0, n, BATCH):
        store.put_batch(
            [Message("Orders", BODY, keys=f"order-{i}") for i in range(start, start + BATCH)]
        )


def _append(root: Path, n: int, index: bool) -> float:
    """Messages per second until the last one is stored and, index on, findable."""
    config = BrokerConfig(store_path_root_dir=str(root), message_index_enable=index)
    # The address recorded in each message's msgId; nothing listens on it.
    store = MessageStore.from_config(root, config.native(), store_host="127.0.0.1:0")
    try:
        started = time.perf_counter()
        _fill(store, n)
        if index:
            assert store.find("Orders", f"order-{n - 1}"), "the last key was not indexed"
        return n / (time.perf_counter() - started)
    finally:
        store.close()


def _latencies_us(call: object, keys: list[int]) -> list[float]:
    out = []
    for k in keys:
        started = time.perf_counter()
        call(k)  # type: ignore[operator]
        out.append((time.perf_counter() - started) * 1e6)
    return out


def run(quick: bool, runs: int) -> list[Figure]:
    n = 500_000 if quick else 10_000_000
    rates: dict[bool, list[float]] = {True: [], False: []}
    figures = []
    with _children.temp_run_dir("bench-index") as d:
        root = Path(d)
        for r in range(runs):
            for index in (False, True):
                rates[index].append(_append(root / f"{r}-{index}", n, index))
        figures.append(
            Figure(
                "index",
                f"put_batch 100 B, a key each, {n:,} msgs, index on",
                "msgs/s",
                rates[True],
                "index off",
                rates[False],
            )
        )
        store_dir = root / f"{runs - 1}-True"
        keys = [random.randrange(n) for _ in range(LOOKUPS)]
        store = MessageStore(store_dir)
        by_key = _latencies_us(lambda k: store.find("Orders", f"order-{k}"), keys)
        by_offset = _latencies_us(lambda k: store.get_messages("Orders", 0, k, 1), keys)
        store.close()
        figures += _pair("find by key, in process", by_key, "get_messages by offset", by_offset)

        config = BrokerConfig(store_path_root_dir=str(store_dir), listen_port=0, ha_listen_port=0)
        with Broker(config) as broker:
            api = mq_client_api("127.0.0.1", None)
            addr = broker.listen_address
            found = api.query_message(
                addr,
                topic="Orders",
                key="order-1",
                max_num=32,
                begin=0,
                end=2**63 - 1,
                unique=False,
                timeout=10.0,
            )
            assert found, "the broker found nothing"
            query = _latencies_us(
                lambda k: api.query_message(
                    addr,
                    topic="Orders",
                    key=f"order-{k}",
                    max_num=32,
                    begin=0,
                    end=2**63 - 1,
                    unique=False,
                    timeout=10.0,
                ),
                keys,
            )
            floor = _latencies_us(lambda k: api.get_max_offset(addr, "Orders", 0, 10.0), keys)
            api.close()
        figures += _pair("QUERY_MESSAGE over loopback", query, "GET_MAX_OFFSET", floor)
        figures += _java_lookups(root / "java", quick)
    return figures


def _java_lookups(root: Path, quick: bool) -> list[Figure]:
    """(d): the same Java lookups against each broker, filled the same way."""
    why = rocketmq.missing_tools()
    if why:
        print(f"bench index: (d) skipped, the peer RocketMQ is Java: {why}")
        return []
    rmq = rocketmq.RocketMQ.resolve(rocketmq.VERSION_5)
    n, lookups = (2_000, 500) if quick else (20_000, LOOKUPS)
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            store_path_root_dir=str(root / "rocketha"),
            namesrv_addr=ns.listen_address,
            listen_port=0,
            ha_listen_port=0,
        )
        with Broker(config) as broker:
            ours = _fill_and_query(
                rmq, root / "ours", ns.listen_address, broker.listen_address, n, lookups
            )
    namesrv = rmq.namesrv(root / "namesrv")
    try:
        theirs_broker = rmq.broker(root / "broker", namesrv)
        try:
            namesrv.wait_registered(theirs_broker.listen_port)
            theirs = _fill_and_query(
                rmq, root / "theirs", namesrv.address, theirs_broker.address, n, lookups
            )
        finally:
            theirs_broker.kill()
    finally:
        namesrv.kill()
    return _pair(f"Java queryMessage, {n:,} msgs, rocketha", ours, "Apache RocketMQ 5.4.0", theirs)


def _fill_and_query(
    rmq: rocketmq.RocketMQ, home: Path, namesrv: str, broker: str, n: int, lookups: int
) -> list[float]:
    home.mkdir(parents=True)
    rmq.produce(namesrv, "Orders", n, [100], home=home, broker=broker, timeout=600)
    return rmq.query(namesrv, "Orders", n, lookups, home=home)


def _pair(name: str, ours: list[float], baseline: str, base: list[float]) -> list[Figure]:
    return [
        Figure(
            "index",
            f"{name} p{q}",
            "us",
            [percentile(ours, q / 100)],
            f"{baseline} p{q}",
            [percentile(base, q / 100)],
            higher_is_better=False,
            series={"latency_us": sorted(ours), "baseline_latency_us": sorted(base)},
        )
        for q in (50, 99)
    ]
