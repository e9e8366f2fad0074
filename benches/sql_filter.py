"""SQL92 property filters (issue #27): what evaluating a SQL92 expression on the broker costs a
pull, against a TAG filter of the same selectivity, in the same run.

One queue holds ``n`` 100-byte messages (quick: 50,000), tagged ``t0`` .. ``t9`` in turn, each
with the user properties ``k`` (0 .. 9, the same turn) and ``region``. A client reads the queue
from its start to its end over loopback with PULL_MESSAGE (32 messages a pull, one pull at a
time), once subscribed by ``TAGS`` hash (``t0``: one message in ten, decided by the consume
queue) and once by ``k = 0 AND region = 'eu'`` (the same one in ten, decided by reading and
evaluating every record's properties). Figure: messages delivered per second, SQL92 beside TAG.
"""

from __future__ import annotations

import time
from pathlib import Path

from rocketha import Broker, BrokerConfig, Message, NameServer, Producer, _children
from rocketha.acl import mq_client_api

from benches.common import Figure

BODY = b"x" * 100
BATCH = 1000
TOPIC = "Filtered"
SQL = "k = 0 AND region = 'eu'"
#: PullSysFlag: the request carries its subscription.
FLAG_SUBSCRIPTION = 0x4


def _fill(namesrv: str, n: int) -> None:
    with Producer(namesrv, "bench-sql-producer") as producer:
        for start in range(0, n, BATCH):
            batch = [
                Message(TOPIC, BODY, tags=f"t{i % 10}", properties={"k": i % 10, "region": "eu"})
                for i in range(start, start + BATCH)
            ]
            producer.send_batch(batch, queue_id=0)


def _drain(api: object, addr: str, n: int, expression: str, expression_type: str) -> float:
    """Messages delivered per second reading the queue from 0 to ``n``."""
    got, offset = 0, 0
    started = time.perf_counter()
    while offset < n:
        ticket = api.pull_message_async(  # type: ignore[attr-defined]
            addr,
            consumer_group=f"bench-{expression_type}",
            topic=TOPIC,
            queue_id=0,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=expression,
            expression_type=expression_type,
            sub_version=0,
            timeout=30.0,
        )
        answers = []
        while not answers:
            answers = api.next_pulled(30.0)  # type: ignore[attr-defined]
        ((got_ticket, outcome),) = answers
        assert got_ticket == ticket and not isinstance(outcome, BaseException), outcome
        code, remark, _, next_begin, _, _, msgs = outcome
        assert code in (0, 20), f"pull answered {code}: {remark}"
        got += len(msgs)
        offset = next_begin
    rate = got / (time.perf_counter() - started)
    assert got == n // 10, f"{expression_type} delivered {got} of {n // 10}"
    return rate


def run(quick: bool, runs: int) -> list[Figure]:
    n = 50_000 if quick else 1_000_000
    rates: dict[str, list[float]] = {"TAG": [], "SQL92": []}
    with _children.temp_run_dir("bench-sql-filter") as d, NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            store_path_root_dir=str(Path(d) / "store"),
            namesrv_addr=ns.listen_address,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            enable_property_filter=True,
        )
        with Broker(config) as broker:
            _fill(ns.listen_address, n)
            api = mq_client_api("127.0.0.1", None)
            try:
                for _ in range(runs):
                    rates["TAG"].append(_drain(api, broker.listen_address, n, "t0", "TAG"))
                    rates["SQL92"].append(_drain(api, broker.listen_address, n, SQL, "SQL92"))
            finally:
                api.close()
    return [
        Figure(
            "sql-filter",
            f"pull by SQL92 ({SQL}), 1 in 10 of {n:,} msgs",
            "msgs/s",
            rates["SQL92"],
            "pull by TAG (t0), 1 in 10",
            rates["TAG"],
        )
    ]
