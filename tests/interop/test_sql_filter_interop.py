"""SQL92 property filters (issue 27, item 4) with the real Java clients: a
``DefaultMQPushConsumer`` or ``DefaultLitePullConsumer`` of RocketMQ 4.9.7 and 5.4.0 subscribed
with ``MessageSelector.bySql`` receives exactly the messages whose properties match, from
rocketha's broker and from Apache RocketMQ 5.4.0's (``enablePropertyFilter=true``) alike, and
so does rocketha's own ``PullConsumer``. The Java clients filter on their side only by tag: a
broker that ignored the expression would show up as extra messages, which were sent to the
same queues before the last matching one.

Without ``enablePropertyFilter`` both brokers refuse the Java push consumer's start
(``CHECK_CLIENT_CONFIG``). Run: ``pytest -m interop``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import routed, spawn_rocketha_namesrv, start_master, wait_for
from rocketha import ConsumeFromWhere, MessageSelector, PullConsumer

from benches.peers.rocketmq import VERSION_4, VERSION_5, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

SQL = "(a > 5 AND b IS NULL) OR TAGS IN ('vip') OR c BETWEEN 10 AND 20"
#: User properties of each message (``TAGS``: its tag), and whether :data:`SQL` takes it.
CASES: list[tuple[dict[str, str], bool]] = [
    ({"a": "7"}, True),
    ({"a": "3"}, False),
    ({"a": "9", "b": "x"}, False),
    ({"TAGS": "vip"}, True),
    ({"TAGS": "plain"}, False),
    ({"a": "abc"}, False),
    ({"c": "15"}, True),
    ({"c": "21"}, False),
    ({}, False),
    ({"a": "6", "TAGS": "plain"}, True),
]
MATCHING = sorted(f"p-{i}" for i, (_, match) in enumerate(CASES) if match)
_NAMES = itertools.count()


@dataclass
class Cluster:
    kind: str
    namesrv: str


def rocketmq(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


def one_broker(request: pytest.FixtureRequest, root: Path, **keys: str) -> Iterator[Cluster]:
    """A name server and one master with ``keys``, of the kind ``request.param`` names."""
    name = f"sql-{root.name}"
    if request.param == "rocketmq":
        namesrv = request.getfixturevalue("namesrv")
        broker = rocketmq(VERSION_5).broker(root / "broker", namesrv, brokerName=name, **keys)
        try:
            namesrv.wait_registered(broker.listen_port)
            yield Cluster("rocketmq", namesrv.address)
        finally:
            broker.kill()
        return
    with spawn_rocketha_namesrv(root / "namesrv.log") as ns:
        master = start_master(root, name, ns.address, brokerRole="ASYNC_MASTER", **keys)
        try:
            yield Cluster("rocketha", ns.address)
        finally:
            master.kill()


@pytest.fixture(scope="module", params=["rocketmq", "rocketha"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A master with ``enablePropertyFilter=true``, of either kind."""
    root = tmp_path_factory.mktemp(f"on-{request.param}")
    yield from one_broker(request, root, enablePropertyFilter="true")


@pytest.fixture(scope="module", params=["rocketmq", "rocketha"])
def cluster_off(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A master with RocketMQ's default, ``enablePropertyFilter=false``, of either kind."""
    yield from one_broker(request, tmp_path_factory.mktemp(f"off-{request.param}"))


def sent_topic(cluster: Cluster, workdir: Path) -> str:
    """A topic of this test's own holding :data:`CASES`, sent by the Java producer."""
    topic = f"Sql{cluster.kind}{next(_NAMES)}"
    outcomes = rocketmq(VERSION_5).send_props(
        cluster.namesrv, topic, [props for props, _ in CASES], home=workdir / "producer"
    )
    assert [o.status for o in outcomes] == ["SEND_OK"] * len(CASES), outcomes
    wait_for(lambda: routed(cluster.namesrv, topic), what=f"the route of {topic}")
    return topic


@pytest.mark.parametrize("kind", ["push", "lite"])
@pytest.mark.parametrize("version", [VERSION_4, VERSION_5])
def test_java_consumers_by_sql_receive_exactly_the_matching_messages(
    cluster: Cluster, workdir: Path, version: str, kind: str
) -> None:
    topic = sent_topic(cluster, workdir)
    group = f"sql-{kind}-{version.replace('.', '')}-{next(_NAMES)}"
    got = rocketmq(version).group(
        cluster.namesrv, topic, group, kind, len(MATCHING), home=workdir / "consumer", sql=SQL
    )
    assert sorted(body for _, _, body in got) == MATCHING


def test_our_pull_consumer_by_sql_receives_exactly_the_matching_messages(
    cluster: Cluster, workdir: Path
) -> None:
    topic = sent_topic(cluster, workdir)
    got: list[str] = []
    with PullConsumer(
        cluster.namesrv,
        f"sql-ours-{next(_NAMES)}",
        topic,
        subscription=MessageSelector.by_sql(SQL),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:

        def all_matching() -> bool:
            got.extend(m.body.decode() for m in consumer.poll(timeout=0.2))
            return len(got) >= len(MATCHING)

        wait_for(all_matching, what="the matching messages")
    assert sorted(got) == MATCHING


@pytest.mark.parametrize("version", [VERSION_4, VERSION_5])
def test_a_broker_without_enable_property_filter_refuses_the_java_push_consumer(
    cluster_off: Cluster, workdir: Path, version: str
) -> None:
    topic = sent_topic(cluster_off, workdir)
    with pytest.raises(RuntimeError) as e:
        rocketmq(version).group(
            cluster_off.namesrv, topic, f"sql-off-{next(_NAMES)}", "push", 1,
            home=workdir / "consumer", sql=SQL, timeout_ms=30_000,
        )  # fmt: skip
    assert "The broker does not support consumer to filter message by SQL92" in str(e.value)
