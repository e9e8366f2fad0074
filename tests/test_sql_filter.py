"""SQL92 property filters (issue 27, item 4) with rocketha's own consumers and broker:

- a ``PullConsumer`` and a ``PushConsumer`` subscribed with ``MessageSelector.by_sql`` receive
  exactly the messages whose properties match (user properties, ``TAGS``, missing ones);
  non-matching messages were sent to the same queues, so a broker that ignored the
  expression would deliver them (our consumers filter by tag only, never by SQL);
- a broker without ``enablePropertyFilter`` refuses the subscription at the consumer's start
  (``CHECK_CLIENT_CONFIG``), with RocketMQ's reason;
- a malformed expression fails the constructor, naming the problem, before any network.

The Java clients against rocketha and Apache RocketMQ are in ``tests/interop/
test_sql_filter_interop.py``; the SQL92 semantics themselves in ``rust/core/src/filter/``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import routed, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    MessageSelector,
    MQClientError,
    NameServer,
    Producer,
    PullConsumer,
    PushConsumer,
)

SEGMENT = 1 << 20
SQL = "(a BETWEEN 3 AND 8 AND b IS NULL) OR TAGS IN ('vip') OR c = 'yes'"


@dataclass(frozen=True)
class Cluster:
    namesrv: str


@contextmanager
def broker_cluster(tmp_path: Path, enable_property_filter: bool) -> Iterator[Cluster]:
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            broker_name="sql",
            broker_role="ASYNC_MASTER",
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
            enable_property_filter=enable_property_filter,
        )
        with Broker(config):
            yield Cluster(ns.listen_address)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with broker_cluster(tmp_path, True) as c:
        yield c


def send_mixed(namesrv: str, topic: str) -> set[bytes]:
    """Messages that match :data:`SQL` and messages that do not, interleaved over the
    topic's queues; returns the bodies that match."""
    cases: list[tuple[dict[str, str], str | None, bool]] = [
        ({"a": "2"}, None, False),
        ({"a": "3"}, None, True),
        ({"a": "5", "b": "x"}, None, False),  # b is not null
        ({"a": "8"}, None, True),
        ({"a": "9"}, None, False),
        ({"a": "abc"}, None, False),  # not a number: the evaluation fails, no match
        ({}, "vip", True),  # TAGS is a property
        ({}, "plain", False),
        ({"c": "yes"}, None, True),
        ({"c": "no"}, None, False),
        ({"a": "6"}, "plain", True),
        ({}, None, False),  # every property missing
    ]
    matching = set()
    with Producer(namesrv, f"{topic}-producer") as producer:
        for i, (props, tag, match) in enumerate(cases):
            body = f"m{i}".encode()
            producer.send(Message(topic, body, tags=tag, properties=props or None))
            if match:
                matching.add(body)
    assert 0 < len(matching) < len(cases)
    return matching


def test_a_pull_consumer_by_sql_receives_exactly_the_matching_messages(cluster: Cluster) -> None:
    matching = send_mixed(cluster.namesrv, "SqlPull")
    got: list[bytes] = []
    with PullConsumer(
        cluster.namesrv,
        "sql-pull",
        "SqlPull",
        subscription=MessageSelector.by_sql(SQL),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        assert consumer.subscription == SQL

        def all_matching() -> bool:
            got.extend(m.body for m in consumer.poll(timeout=0.2))
            return set(got) >= matching

        wait_for(all_matching, what="the matching messages")
    assert sorted(got) == sorted(matching), "each matching message once, nothing else"


def test_a_push_consumer_by_sql_receives_exactly_the_matching_messages(cluster: Cluster) -> None:
    matching = send_mixed(cluster.namesrv, "SqlPush")
    got: list[bytes] = []
    lock = threading.Lock()

    def handler(msg: MessageExt) -> ConsumeResult:
        with lock:
            got.append(msg.body)
        return ConsumeResult.SUCCESS

    with PushConsumer(
        cluster.namesrv,
        "sql-push",
        "SqlPush",
        handler,
        subscription=MessageSelector.by_sql(SQL),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ):
        wait_for(lambda: set(got) >= matching, what="the matching messages")
    assert sorted(got) == sorted(matching)


def test_a_tag_selector_is_a_tag_subscription(cluster: Cluster) -> None:
    send_mixed(cluster.namesrv, "SqlTag")
    with PullConsumer(
        cluster.namesrv,
        "sql-tag",
        "SqlTag",
        subscription=MessageSelector.by_tag("vip || plain"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        got: list[MessageExt] = []
        wait_for(lambda: got.extend(consumer.poll(timeout=0.2)) or len(got) >= 3, what="3")
    assert sorted(m.tags or "" for m in got) == ["plain", "plain", "vip"]


def test_a_broker_without_enable_property_filter_refuses_sql92_at_start(tmp_path: Path) -> None:
    with broker_cluster(tmp_path, False) as cluster:
        with Producer(cluster.namesrv, "sql-off-producer") as producer:
            producer.send(Message("SqlOff", b"x", properties={"a": "7"}))
        # The check asks the topic's brokers, so the route must be known (as in Java).
        wait_for(lambda: routed(cluster.namesrv, "SqlOff"), what="the route of SqlOff")
        with pytest.raises(MQClientError) as e:
            PullConsumer(
                cluster.namesrv, "sql-off", "SqlOff", subscription=MessageSelector.by_sql("a > 5")
            )
        assert "does not support consumer to filter message by SQL92" in str(e.value)
        # TAG subscriptions are not checked, and still work.
        with PullConsumer(
            cluster.namesrv,
            "sql-off-tag",
            "SqlOff",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ) as consumer:
            assert wait_for(lambda: consumer.poll(timeout=0.2), what="x")[0].body == b"x"


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("a >", 'SQL92 expression "a >" of topic T'),
        ("a > 'x'", "cannot be compared"),
        ("a LIKE 'x%'", "does not support"),
        ("a IN (1)", "string literals only"),
        ("", "empty"),
    ],
)
def test_a_malformed_expression_fails_the_constructor(sql: str, why: str) -> None:
    with pytest.raises(MQClientError) as e:
        PullConsumer("127.0.0.1:1", "g", "T", subscription=MessageSelector.by_sql(sql))
    assert why in str(e.value)
    with pytest.raises(MQClientError, match="unknown"):
        PullConsumer("127.0.0.1:1", "g", "T", subscription=MessageSelector("CLASS", "x"))
